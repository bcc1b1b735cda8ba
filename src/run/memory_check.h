/* SPDX-License-Identifier: BSD-3-Clause */
/* memory_check.h - the run's peak memory, estimated before the model is allocated, and the
 * refusal of a run that cannot fit.
 *
 * A network file of a few kilobytes can ask for tens of gigabytes (a convolution followed by
 * a thousand ReLUs keeps a thousand maps for backward). Allocated blindly, such a run fails
 * in an allocator after the job directory exists, or grows until the kernel's OOM killer ends
 * it and perhaps other users' jobs on the node. So each rank adds up, before the job directory
 * is made: what the process holds now (libraries, MPI, oneDNN, HDF5 and the data read into
 * memory: measured, not guessed), the model at --batch_size (model_memory.h), a second one at
 * --val_crop_size when it differs, the optimizer's momentum, --ema_decay's copies, the
 * batch arrays of training and evaluation, and the checkpoint writer's copy of the state; and
 * refuses, in one line, a run whose estimate
 * exceeds what the node lets it have (memavail_rank_share, plus what it holds already). On a
 * GPU the model lives in device memory: the estimate is the host's part only. */
#ifndef DDP_MEMORY_CHECK_H
#define DDP_MEMORY_CHECK_H

#include <stddef.h>

#include "base/config.h"
#include "model/model_memory.h"

typedef struct {
    ModelMemory model;      /* at --batch_size (not counted on a GPU backend) */
    size_t eval_model;      /* the model at --val_crop_size, when it differs from the input size */
    size_t optimizer;       /* the momentum buffer */
    size_t ema;             /* --ema_decay: the average, its saved copies, the host copy */
    size_t batches;         /* the batch arrays, the loaders' prefetch buffers, --tta's */
    size_t checkpoint;      /* the checkpoint writer's snapshot and HDF5's copy of a tensor */
    size_t resident;        /* the process now (libraries, MPI, the data held in memory) */
    size_t total;           /* the estimated peak: the sum */
} RunMemory;

/* The estimate of a run of c at `batch` images per step: 0, or -1 with one line in err (the
 * network does not build: learner_network has refused it before). */
int memory_estimate(RunMemory *rm, const Config *c, const NetSpec *net, const Backend *be, int batch, char *err,
                    size_t errlen);

/* memory_estimate at --batch_size into *rm, then the check against this rank's share of the
 * node (rank, local_size: the bootstrap's): 0 when it fits, when the node's memory cannot be
 * read, or under --no-memory_check; -1 with one line in err naming the network, the
 * figures and the largest --batch_size that fits. */
int memory_check(RunMemory *rm, const Config *c, const NetSpec *net, const Backend *be, int rank, int local_size,
                 char *err, size_t errlen);

/* "412 MiB" below a GiB, "18.25 GiB" above. */
void memory_format(size_t bytes, char *buf, size_t n);

/* The estimate's parts, for the log. */
void memory_describe(const RunMemory *rm, char *buf, size_t n);

#endif
