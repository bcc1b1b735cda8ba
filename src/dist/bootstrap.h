/* SPDX-License-Identifier: BSD-3-Clause */
/* bootstrap.h - who am I in the job: rank discovery and a small key-value exchange.
 *
 * bootstrap_init tries, in order:
 *   1. PMIx (built with PMIx): PMIx_Init succeeds only when a launcher's PMIx server answers,
 *      i.e. under `srun --mpi=pmix` or `mpirun`. Rank, sizes and node count come from it.
 *   2. Open MPI's launcher environment (OMPI_COMM_WORLD_*), for builds without PMIx under mpirun.
 *   3. Slurm's environment (SLURM_PROCID, SLURM_STEP_NUM_TASKS/SLURM_NTASKS, SLURM_LOCALID,
 *      SLURM_STEP_TASKS_PER_NODE/SLURM_TASKS_PER_NODE, SLURM_STEP_NUM_NODES/SLURM_NNODES).
 *   4. torchrun-style environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, and
 *      optionally GROUP_RANK, NNODES or GROUP_WORLD_SIZE).
 *   5. otherwise one process: rank 0 of 1.
 *
 * The one mistake it refuses: a Slurm step (or batch script) of several tasks without a PMIx
 * server, e.g. `srun --mpi=none -n 4`. Each task would otherwise start as rank 0 of 1 and the
 * job would silently train four unrelated models, so this is an error that says
 * "did you mean srun --mpi=pmix?". Likewise several tasks in a build without MPI.
 * Environment values are validated: a non-number or a rank outside the size names the variable.
 *
 * Order of teardown: MPI must be finalized before PMIx (Open MPI uses the same PMIx client);
 * the world (world.h) owns both and tears them down in that order. */
#ifndef DDP_BOOTSTRAP_H
#define DDP_BOOTSTRAP_H

#include <stddef.h>

typedef struct Bootstrap {
    int rank, world_size;
    int local_rank, local_size;   /* among the ranks on this node */
    int num_nodes;
    const char *method;           /* "pmix", "ompi-env", "slurm", "torchrun", "single" */
    char hostname[256];
    /* private */
    int pmix_active;              /* PMIx_Init succeeded; PMIx_Finalize is owed */
    char pmix_nspace[256];        /* PMIX_MAX_NSLEN + 1: kept here so the header needs no pmix.h */
    unsigned pmix_rank;
    char desc[384];
} Bootstrap;

/* Fills *b. Returns 0, or -1 with one line in err (nothing left initialised). */
int bootstrap_init(Bootstrap *b, char *err, size_t errlen);

/* Where bootstrap_from_env reads a variable: NULL when unset. */
typedef const char *(*BootstrapEnvFn)(void *ctx, const char *name);

/* Methods 2 to 5 above (no PMIx) with the variables read through get: what bootstrap_init
 * does after PMIx, for tests and the fuzzer. Returns 0, or -1 with one line in err. */
int bootstrap_from_env(Bootstrap *b, BootstrapEnvFn get, void *ctx, char *err, size_t errlen);

/* The default job directory of a Slurm job, "<SLURM_SUBMIT_DIR or .>/runs/<SLURM_JOB_ID>",
 * into dir: 1; 0 when SLURM_JOB_ID is unset; -1 with one line in err when SLURM_JOB_ID is
 * not a number or SLURM_SUBMIT_DIR not a plain absolute path. get NULL: the process's
 * environment. */
int bootstrap_default_job_dir(BootstrapEnvFn get, void *ctx, char *dir, size_t n, char *err, size_t errlen);

/* "bootstrap: pmix, rank 1/4, local 1/2, 2 nodes, host vm" (valid until bootstrap_free). */
const char *bootstrap_describe(Bootstrap *b);

/* Key-value exchange through the launcher's PMIx server, e.g. to hand an NCCL unique id from
 * rank 0 to everyone before any communicator exists:
 *     rank 0: bootstrap_put(b, "nccl-id", id, sizeof id);
 *     all:    bootstrap_commit_fence(b);                       (collective)
 *     all:    bootstrap_get(b, 0, "nccl-id", id, sizeof id);
 * Each returns 0, or -1 when the method has no key-value store (every method but "pmix"):
 * the caller (world.c) then falls back to an MPI broadcast or a rendezvous file. Failures of PMIx
 * itself (a peer died during the fence, a key never put) are fatal and name the call.
 * bootstrap_get requires the stored value to be exactly len bytes. */
int bootstrap_has_kv(const Bootstrap *b);
int bootstrap_put(Bootstrap *b, const char *key, const void *data, size_t len);
int bootstrap_commit_fence(Bootstrap *b);
int bootstrap_get(Bootstrap *b, int peer_rank, const char *key, void *data, size_t len);

/* Ask the launcher's PMIx server to end every process of the job step (PMIx_Abort); returns
 * only when there is no PMIx server or it could not. */
void bootstrap_abort(Bootstrap *b, int code, const char *msg);

/* PMIx_Finalize when PMIx was used, after MPI_Finalize (world_free). Idempotent. */
void bootstrap_free(Bootstrap *b);

#endif
