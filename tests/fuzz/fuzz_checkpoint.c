/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_checkpoint.c - the checkpoint loader on arbitrary file bytes: every dataset and
 * attribute, /train_state included, against the small model the seed corpus was written for
 * (width 4, 1 block, 10 classes, 16x16 images), as rank 1 of 2 so the per-rank rows are read;
 * then the stored configuration and /dataset. */
#include "fuzz.h"

#include <stdlib.h>

#include "ckpt/checkpoint.h"
#include "model/model.h"
#include "model/optim.h"
#include "base/util.h"

static Model g_model;
static Optimizer g_opt;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_model.num_params) {
        model_init(&g_model, 4, 1, 10, 16, 2);
        sgd_init(&g_opt, g_model.num_params, 0.9f, 1e-4f);
    }
    const char *path = fuzz_scratch_file(data, size, ".h5");
    TrainState ts;
    int own = 0;
    char err[1024];
    checkpoint_load_rank(path, &g_model, &g_opt, &ts, 1, 2, &own, err, sizeof err);
    free(checkpoint_read_config(path, err, sizeof err));
    CkptDataset d;
    if (checkpoint_read_dataset(path, &d, err, sizeof err) == 0) ckpt_dataset_free(&d);
    return 0;
}
