/* SPDX-License-Identifier: BSD-3-Clause */
/* gpu_choice.c - see gpu_choice.h. */
#include "gpu_choice.h"

#include "base/util.h"

int gpu_choose(int local_rank, int local_size, int visible, const char *cvd, char *err, size_t errlen) {
    char shown[160];
    snprintf(shown, sizeof shown, cvd ? "CUDA_VISIBLE_DEVICES=%s" : "CUDA_VISIBLE_DEVICES unset", cvd ? cvd : "");
    if (visible <= 0) return errf(err, errlen, "no CUDA device visible (%s)", shown);
    if (local_rank < 0 || local_size < 1 || local_rank >= local_size)
        return errf(err, errlen, "local rank %d of %d is not a valid position on the node", local_rank, local_size);
    if (visible == 1) return 0;   /* one GPU per task, or one rank on a one-GPU node */
    if (local_rank < visible && visible >= local_size) return local_rank;
    return errf(err, errlen, "local rank %d of %d ranks on this node, but only %d GPUs are visible (%s): start at most "
                "%d ranks per node, or give each task its own GPU (srun --gpus-per-task=1)", local_rank, local_size,
                visible, shown, visible);
}
