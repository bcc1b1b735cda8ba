/* SPDX-License-Identifier: BSD-3-Clause */
/* roster.h - who every rank is: host, local rank, device; gathered once at start-up.
 *
 * Each rank fills its own RosterEntry and roster_gather exchanges them in one allreduce (every
 * entry is a fixed number of int64 words; each rank writes only its own row, so the sum is the
 * rows). Rank 0 logs the table; the straggler check and the agreement check name ranks with
 * their host from it.
 *
 * Two ranks on one GPU (roster_find_shared_gpu): the same host and the same physical device.
 * A rank's device index is what its CUDA runtime numbers, renumbered from 0 by
 * CUDA_VISIBLE_DEVICES, so two ranks that each see "device 0" under --gpus-per-task=1 hold
 * different GPUs. The identity compared is therefore the CUDA_VISIBLE_DEVICES entry the index
 * maps to (a physical index, a UUID or a MIG name, as the launcher wrote it), or the index
 * itself when the variable is unset. */
#ifndef DDP_ROSTER_H
#define DDP_ROSTER_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"

#define ROSTER_HOST_MAX 64     /* longer host names are cut (the table and messages only) */
#define ROSTER_GPU_ID_MAX 64

typedef struct {
    char host[ROSTER_HOST_MAX];
    char gpu_id[ROSTER_GPU_ID_MAX];   /* physical identity (top of file); "" on the CPU */
    int64_t local_rank, local_size;
    int64_t threads, cores;           /* CPU threads of the rank, CPUs it may run on */
    int64_t gpu;                      /* CUDA device index, -1 on the CPU */
} RosterEntry;

/* The identity of device `index` under CUDA_VISIBLE_DEVICES `cvd` (NULL: unset) into id. */
void roster_gpu_id(int index, const char *cvd, char *id, size_t n);

/* Collective: every rank's entry into all[world_size]. */
void roster_gather(Comm *c, const RosterEntry *mine, RosterEntry *all);

/* Two ranks on one GPU: returns 1 with *a < *b the first such pair, else 0. */
int roster_find_shared_gpu(const RosterEntry *all, int world_size, int *a, int *b);

/* One table line for rank q ("rank 1  host node7  local 1/2  cpu: 1 thread, 2 cores"). */
void roster_line(const RosterEntry *all, int q, char *buf, size_t n);

#endif
