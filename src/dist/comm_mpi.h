/* SPDX-License-Identifier: BSD-3-Clause */
/* comm_mpi.h - the MPI backend of comm.h, for host memory.
 *
 * MPI itself (MPI_Init_thread, MPI_Finalize) belongs to the world (world.h), which checks
 * that MPI sees the ranks the bootstrap described before it asks for this communicator. */
#ifndef DDP_COMM_MPI_H
#define DDP_COMM_MPI_H

#include "build_config.h"
#include "comm.h"

#ifdef HAVE_MPI
/* A communicator over a duplicate of MPI_COMM_WORLD; MPI must be initialised with at least
 * MPI_THREAD_FUNNELED (`thread_level` is what MPI_Init_thread provided). NULL with one line in
 * err on failure. */
Comm *comm_mpi_create(double timeout_s, int thread_level, char *err, size_t errlen);
#endif

#endif
