/* SPDX-License-Identifier: BSD-3-Clause */
/* device.h - where a rank trains: the CPU or one GPU, its threads, and the communicator that
 * backend needs.
 *
 * --device cpu|cuda|auto: one GPU per rank (gpu_choice.h says which) with cuda, and with auto
 * when the rank sees a GPU; the CPU with cpu, and with auto when it does not (the note says
 * why, for the log). The CUDA backend is a module (plugin.h) loaded here only, so a CPU node
 * need not have its libraries. Options the GPU backend does not have yet are refused here,
 * before anything is built. */
#ifndef DDP_DEVICE_H
#define DDP_DEVICE_H

#include <stddef.h>

#include "ops/backend.h"
#include "dist/bootstrap.h"
#include "base/config.h"
#include "dist/world.h"

struct CudaPlugin;

typedef struct {
    const Backend *be;               /* backend_cpu or the CUDA backend */
    int gpu;                         /* the CUDA device of this rank, -1 on the CPU */
    const struct CudaPlugin *cuda;   /* the CUDA module when this rank trains on a GPU, else NULL */
    char note[1300];                 /* why auto chose the CPU, for the log; "" otherwise */
} Device;

/* Chooses the backend of this rank (dies with one line on a choice that cannot work). */
void device_choose(Device *d, const Config *c, const Bootstrap *b);

/* Threads per rank: --threads, else OMP_NUM_THREADS, else Slurm's CPUs per task, else this
 * process's CPUs shared among the ranks on this node. */
int device_threads(const Config *c, const Bootstrap *b);

/* The world's communicator for this backend: NCCL between GPUs (through the CUDA module), else
 * MPI or self. 0, or -1 with one line in err. */
int device_connect(const Device *d, World *w, const Config *c, char *err, size_t errlen);

/* The log's "device: ..." line, without the prefix. */
void device_describe(const Device *d, const Config *c, int threads, char *out, size_t n);

#endif
