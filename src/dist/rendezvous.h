/* SPDX-License-Identifier: BSD-3-Clause */
/* rendezvous.h - hand a few bytes from rank 0 to every rank through a shared directory.
 *
 * The last resort for exchanging a value before any communicator exists (the NCCL unique id),
 * when the launcher offers no key-value store and MPI cannot connect the ranks, e.g. ranks
 * started by torchrun or by `srun --mpi=none`. It needs nothing but a directory that every
 * node sees (the job directory on a shared file system), so it works whatever the launcher.
 *
 * Protocol:
 *   all:    rendezvous_key(world_size, key, sizeof key, err, errlen);
 *   all:    rendezvous_share(dir, key, rank, world_size, blob, len, timeout_s, err, errlen);
 *           rank 0 writes <dir>/.rendezvous-<key> atomically (temp file + rename), creating
 *           <dir> when missing; the other ranks poll for it and read `len` bytes into blob.
 *   later:  rendezvous_cleanup(dir, key, rank);
 *           rank 0 removes the file. Rank 0 cannot know when the others have read it, so the
 *           caller calls this only once something proves that they have, e.g. once a
 *           communicator built from the blob is up (every rank needed the blob to join it).
 *
 * The key names this launch (Slurm job, step and requeue count; torchrun's run id or master
 * address and port, and restart count), so a file left behind by an earlier run that crashed
 * can never be read as this run's. The file also carries a header (magic, key, world size)
 * that a reader checks. */
#ifndef DDP_RENDEZVOUS_H
#define DDP_RENDEZVOUS_H

#include <stddef.h>

/* Longest key, without the terminating NUL. */
#define RENDEZVOUS_KEY_MAX 199

/* The key of this launch from the launcher's environment (SLURM_JOB_ID, SLURM_STEP_ID,
 * SLURM_RESTART_COUNT; TORCHELASTIC_RUN_ID, else MASTER_ADDR and MASTER_PORT, with
 * TORCHELASTIC_RESTART_COUNT), as file-name-safe characters. Every rank of a launch computes
 * the same key. With one rank any key will do ("single"). Returns 0, or -1 with one line in
 * err when there are several ranks and no launcher identity, or the key would be longer than
 * RENDEZVOUS_KEY_MAX (n should be at least RENDEZVOUS_KEY_MAX + 1). */
int rendezvous_key(int world_size, char *key, size_t n, char *err, size_t errlen);

/* Rank 0's `len` bytes at blob end up in every rank's blob. Collective: every rank calls it
 * with the same dir, key, world_size and len. A rank other than 0 waits up to timeout_s
 * (<= 0: forever) for rank 0's file. With one rank it does nothing. Returns 0, or -1 with one
 * line in err that names the file (not written in time, unwritable, a header of another
 * launch or another world size). */
int rendezvous_share(const char *dir, const char *key, int rank, int world_size, void *blob, size_t len,
                     double timeout_s, char *err, size_t errlen);

/* One look at the file as a rank other than 0 takes it: 1 with the blob when it is complete
 * and valid; 0 when absent or of another size (not written yet); -1 with one line in err. */
int rendezvous_read_once(const char *path, const char *key, int world_size, void *blob, size_t len, char *err,
                         size_t errlen);

/* Rank 0 removes the file (a warning on stderr if that fails for any reason but absence); on
 * other ranks it does nothing. See the top of the file for when to call it. */
void rendezvous_cleanup(const char *dir, const char *key, int rank);

#endif
