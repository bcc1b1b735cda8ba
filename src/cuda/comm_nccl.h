/* SPDX-License-Identifier: BSD-3-Clause */
/* comm_nccl.h - the NCCL backend of comm.h, for the CUDA backend's device memory. Built into
 * the CUDA module (cuda_plugin.h); the world (world.h) exchanges the unique id and creates the
 * communicator through the module's table. */
#ifndef DDP_COMM_NCCL_H
#define DDP_COMM_NCCL_H

#include <stddef.h>

#include "dist/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* sizeof(ncclUniqueId), checked in comm_nccl.c; the header needs no nccl.h. */
#define COMM_NCCL_ID_BYTES 128

/* Rank 0's unique id for a new communicator. 0, or -1 with err. */
int comm_nccl_make_id(void *id, char *err, size_t errlen);

/* This rank's part of a communicator of world_size ranks over `device` (the CUDA backend must
 * be active on it), from rank 0's id. Waits for the other ranks at most
 * max(timeout_s, COMM_STARTUP_TIMEOUT_S) (0: forever). Registers itself as the host-sync
 * guard (comm.h). NULL with one line in err. */
Comm *comm_nccl_create(int rank, int world_size, int device, const void *id, double timeout_s, char *err,
                       size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
