/* SPDX-License-Identifier: BSD-3-Clause */
/* world.h - the process group: who the ranks are, how they talk, and how the job ends.
 *
 * One World per process owns, in the order it brings them up:
 *   1. the bootstrap (bootstrap.h): rank, sizes, host; PMIx when a launcher offers it;
 *   2. MPI's lifetime: MPI_Init_thread the first time a communicator or an id exchange needs
 *      MPI, and MPI_Finalize in world_free, before PMIx_Finalize (Open MPI uses the same PMIx
 *      client, so the other order crashes);
 *   3. the communicator (comm.h) the backend needs: self for one rank; MPI for host memory
 *      (comm_mpi.h); a device communicator for device memory (NCCL, built by the CUDA module,
 *      comm_nccl.h), whose unique id travels from rank 0 to every rank through the first
 *      channel the launch offers: the PMIx key-value store, else an MPI broadcast, else a
 *      rendezvous file in a shared directory (rendezvous.h; torchrun-style launches);
 *   4. the job-wide abort. A rank that gives up after start-up must end every rank, not only
 *      itself, or the others wait out their own timeouts: world_abort_job is MPI_Abort when MPI
 *      is up (mpirun and srun both end every rank), else PMIx_Abort when a PMIx server is
 *      there, else the process's own exit (torchrun ends the others when one exits). Every
 *      communicator's fatal errors and timeouts end here (Comm.on_abort).
 * world_free tears down in the reverse order: communicator, MPI, bootstrap.
 *
 * Start-up rule. Before training, ranks fail for local reasons (a missing shard on one node, a
 * bad flag, a job directory it cannot create). No collective may run before every rank has
 * passed its local start-up, or a failed rank leaves the others waiting in it. So:
 *   - after world_connect (the communicator's creation is the one exchange before the check),
 *     each rank does its local start-up and then calls world_startup_check(w, NULL);
 *   - a rank that fails calls world_startup_fail(w, code, reason), which joins the same check
 *     carrying its reason, then finalizes and exits(code);
 *   - the lowest healthy rank prints each failed rank's reason, one line per rank (at most 8):
 *       ddptrain: error: rank 1 failed at start-up on host node7: --data_dir d: no shard ...
 *     and every rank exits through world_startup_fail too, each with a clean finalize.
 * The check waits max(timeout, COMM_STARTUP_TIMEOUT_S), because ranks finish start-up at
 * different times. After a successful check, world_startup_fail is world_abort_job: the others
 * are then in collectives this rank will never join. */
#ifndef DDP_WORLD_H
#define DDP_WORLD_H

#include <stddef.h>

#include "bootstrap.h"
#include "comm.h"

/* Longest unique id a device communicator may need (NCCL's is 128 bytes). */
#define WORLD_ID_MAX 256
/* Longest start-up failure reason carried to the other ranks, with its NUL. */
#define WORLD_REASON_MAX 256

/* How to build a device communicator (the CUDA module's NCCL): the world exchanges the id. */
typedef struct DeviceCommFactory {
    const char *name;                 /* "nccl", for messages */
    size_t id_bytes;                  /* <= WORLD_ID_MAX */
    int (*make_id)(void *id, char *err, size_t errlen);   /* on rank 0 only; 0 or -1 with err */
    Comm *(*create)(int rank, int world_size, int device, const void *id, double timeout_s, char *err,
                    size_t errlen);
} DeviceCommFactory;

typedef struct World {
    Bootstrap boot;
    Comm *comm;
    /* private */
    int mpi_ours;                     /* MPI_Init_thread was called here: MPI_Finalize is owed */
    int started;                      /* 0 before the start-up check, 1 passed, -1 some rank failed */
    char via[64];                     /* how the device communicator's id travelled */
} World;

/* The bootstrap alone; never a collective. 0, or -1 with one line in err. */
int world_init(World *w, char *err, size_t errlen);

/* The communicator: self for one rank; with dev == NULL, MPI (an error without MPI or for a
 * launch MPI cannot connect); with dev, a device communicator on `device` whose id goes by
 * PMIx, MPI or a file in rendezvous_dir (NULL: no file fallback). Every exchange waits at most
 * max(timeout_s, COMM_STARTUP_TIMEOUT_S) (0: forever). 0, or -1 with one line in err; the
 * world stays valid for world_free. */
int world_connect(World *w, const DeviceCommFactory *dev, int device, double timeout_s, const char *rendezvous_dir,
                  char *err, size_t errlen);

/* MPI up and seeing the ranks the bootstrap described, its lifetime the world's; for a device
 * communicator built over MPI (the factory's create runs after the id exchange). 0, or -1
 * with err (also without MPI, or for a launch MPI cannot connect). */
int world_mpi_init(World *w, char *err, size_t errlen);

/* The start-up rule (top of file). world_startup_check returns 0 when every rank passed; else
 * the number of ranks that failed, after the lowest healthy rank printed their reasons; the
 * caller then calls world_startup_fail(w, 1, NULL). */
int world_startup_check(World *w);
void world_startup_fail(World *w, int code, const char *reason) __attribute__((noreturn));

/* End every rank of the job now with `code` (see the top); writes this rank's flight record
 * (flight.h) and flushes stdio first. */
void world_abort_job(World *w, int code) __attribute__((noreturn));

/* Communicator, then MPI, then the bootstrap. Idempotent. */
void world_free(World *w);

#endif
