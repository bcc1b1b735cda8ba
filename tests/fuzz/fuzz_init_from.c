/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_init_from.c - the --init_from reader on arbitrary file bytes: the file checks, /model's
 * links and datasets, their storage, shapes and values, against the small model the seed
 * corpus was written for (width 4, 1 block, 10 classes, 16x16 images), as learner.c checks
 * a run's --init_from before training. */
#include "fuzz.h"

#include "ckpt/init_from.h"
#include "model/model.h"

static Model g_model;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_model.num_params) model_init(&g_model, 4, 1, 10, 16, 1);
    const char *path = fuzz_scratch_file(data, size, ".h5");
    char note[1400], err[1024];
    init_from_file(&g_model, path, note, sizeof note, err, sizeof err);
    return 0;
}
