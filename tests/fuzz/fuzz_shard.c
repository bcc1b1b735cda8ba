/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_shard.c - the shard reader on arbitrary file bytes: open, validate, labels, and a read
 * of the first and last samples' images, as the loader does. */
#include "fuzz.h"

#include <stdlib.h>

#include "shards.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_scratch_file(data, size, ".h5");
    ShardInfo info;
    int32_t *labels = NULL;
    char err[1024];
    if (shard_read_info(&info, path, 0, 0, &labels, err, sizeof err) == 0) {
        const size_t per = (size_t)info.image_size * (size_t)info.image_size * 3;
        const size_t count = info.n < 2 ? info.n : 2;
        uint8_t *img = per <= (64u << 20) ? malloc(count * per) : NULL;
        int32_t lab[2];
        if (img) {
            shard_read_range(path, 0, count, info.image_size, img, lab, err, sizeof err);
            shard_read_range(path, info.n - count, count, info.image_size, img, lab, err, sizeof err);
        }
        free(img);
        free(labels);
        shard_info_free(&info);
    }
    return 0;
}
