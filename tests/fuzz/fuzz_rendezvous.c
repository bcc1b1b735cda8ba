/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_rendezvous.c - the rendezvous file as a rank other than 0 reads it: size, owner and
 * mode, header (magic, key, world size, length), then the blob. The file is written as rank 0
 * writes it (mode 0600), so the content is what varies. */
#include "fuzz.h"

#include <string.h>
#include <sys/stat.h>

#include "dist/rendezvous.h"
#include "base/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_scratch_file(data, size, ".rdv");
    CHECK(chmod(path, 0600) == 0);
    unsigned char blob[128];
    char err[1024];
    /* The seed corpus holds files of key "fuzz.0", 4 ranks, 128 bytes (an NCCL id). */
    rendezvous_read_once(path, "fuzz.0", 4, blob, sizeof blob, err, sizeof err);
    return 0;
}
