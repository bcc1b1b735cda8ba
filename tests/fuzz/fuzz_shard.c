/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_shard.c - the shard reader on arbitrary file bytes: open, validate, labels, and a read
 * of the first and last samples' images, as the loader does; of a JPEG shard, their bytes,
 * offsets and sizes, each JPEG decoded at 1/1 and 1/2 as inspect and the loader do. */
#include "fuzz.h"

#include <stdlib.h>

#include "data/jpegs.h"
#include "data/shards.h"
#include "base/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_scratch_file(data, size, ".h5");
    ShardInfo info;
    int32_t *labels = NULL;
    char err[1024];
    const int valid = shard_read_info(&info, path, 0, 0, &labels, err, sizeof err) == 0;
    if (valid && info.encoding == SHARD_ENC_JPEG) {
        const size_t count = info.n < 2 ? info.n : 2;
        for (int k = 0; k < 2; k++) {
            uint64_t off[3];
            uint16_t sizes[4];
            int32_t lab[2];
            uint8_t *bytes = NULL;
            if (shard_read_jpeg_range(path, k ? info.n - count : 0, count, off, sizes, &bytes, lab, err, sizeof err) == 0)
                for (size_t i = 0; i < count; i++)
                    for (int denom = 1; denom <= 2; denom++) {
                        ImageRGB im;
                        if (jpeg_decode_scaled(bytes + off[i], (size_t)(off[i + 1] - off[i]), denom, sizes[2 * i + 1],
                                               sizes[2 * i], &im, err, sizeof err) == 0)
                            free(im.rgb);
                    }
            free(bytes);
        }
        free(labels);
        shard_info_free(&info);
    } else if (valid) {
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
