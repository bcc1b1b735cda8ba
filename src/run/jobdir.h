/* SPDX-License-Identifier: BSD-3-Clause */
/* jobdir.h - the job directory: its name, its creation, its lock and the check of its
 * entries, the check that every rank sees it, config.json, and the preemption marker.
 *
 * Rank 0 decides the name (--job_dir, else Slurm's runs/<job id> so that a requeued job finds
 * its checkpoints again, else runs/<time>-<pid>) and checks at start-up that it could create
 * it, that no other run holds it (jobdir_lock.h) and that nothing ddptrain writes there is a
 * symbolic link, but creates it only once every rank has passed start-up, so that a failure
 * anywhere leaves nothing behind. Every rank then reads back a file rank 0 wrote there: a node
 * that does not share it (a node-local /scratch, a missing mount) would otherwise log into a
 * directory of its own and fail hours later, when a resume reads a checkpoint only rank 0's
 * node has. */
#ifndef DDP_JOBDIR_H
#define DDP_JOBDIR_H

#include <stddef.h>

#include "dist/comm.h"
#include "base/config.h"

typedef struct {
    char path[4096];
    char ckpt_dir[4200];   /* <path>/checkpoints */
    char lock_note[800];   /* rank 0: a stale lock taken over (jobdir_lock.h), for the log; "" */
} JobDir;

/* Rank 0's choice of the name (it may contain a pid); "" on the other ranks until
 * jobdir_create shares it. */
void jobdir_propose(JobDir *j, const Config *c, int rank);

/* Whether mkdir -p of `dir` would succeed: 0, or -1 with one line in err. */
int jobdir_creatable(const char *dir, char *err, size_t n);

/* Rank 0 at start-up, when `dir` exists: refused (-1, one line in err) when another live run
 * holds its lock (jobdir_lock.h), or when one of the names ddptrain opens there (checkpoints/,
 * latest, logs/, metrics.jsonl...) is a symbolic link or not what ddptrain makes (a FIFO for a
 * log). Writes nothing. */
int jobdir_check_existing(const char *dir, char *err, size_t n);

/* Collective, after the start-up check: every rank learns the name, rank 0 creates the
 * directory, takes its lock and checks its entries again (a run that started since the
 * start-up check is refused on every rank, before anything is written), and every rank reads
 * back a file of this start's own from it (the job is refused naming the first rank and host
 * that cannot). hosts[q] names rank q's host. */
void jobdir_create(JobDir *j, Comm *c, const char *const *hosts);

/* Rank 0: config.json (the run's options) and the checkpoints' directory. Dies on failure. */
void jobdir_write_config(const JobDir *j, const char *config_json);

/* <job_dir>/preempted, written by rank 0 once the preemption checkpoint is on disk: "restart R
 * step S". The sbatch scripts in slurm/ requeue on exit status 3, or when this file names the
 * current restart: with srun --kill-on-bad-exit, the first rank to exit 3 gets the others
 * killed, and srun may then report 137 instead. Removed at every start, so it never outlives
 * its run. jobdir_mark_preempted returns 0, or -1 with errno; jobdir_clear_preempted dies. */
int jobdir_mark_preempted(const JobDir *j, long step);
void jobdir_clear_preempted(const JobDir *j);

#endif
