/* SPDX-License-Identifier: BSD-3-Clause */
/* jobdir_lock.h - one run at a time in a job directory: <job_dir>/.lock.
 *
 * Two runs given one --job_dir would prune each other's checkpoints and interleave the logs
 * and metrics.jsonl, and a later --resume auto would take the mix. So rank 0 takes the lock
 * before anything is written into the directory, and a second run is refused naming the holder.
 *
 * The lock is a file created whole: written under a temporary name and hard-linked to .lock,
 * which fails with EEXIST when the name is taken, also over NFS (where O_EXCL was long
 * unreliable), and never shows a half-written file. It holds the holder's pid, host, Slurm job
 * id and restart count, and start time. The holder also keeps an flock on it while it lives:
 * the kernel drops that when the process ends, however it ends (SIGKILL, the OOM killer), so
 * on the holder's host a lock nobody holds is known stale. flock over NFS or Lustre may be
 * emulated, local to a node or missing, so across hosts only its "held" answer is believed.
 *
 * A lock is stale, and taken over, when
 *   - it names this Slurm job with another restart count: a requeued or preempted job finds its
 *     own lock, and Slurm runs one incarnation of a job at a time;
 *   - it names this host and its flock is free, or (flock unavailable) its pid is gone.
 * Else it is held: a run on another host cannot be told from one killed there, and the
 * refusal says to remove the file when no run uses the directory. The lock is removed at exit
 * (die() included); the kernel's release of the flock covers a fatal signal. */
#ifndef DDP_JOBDIR_LOCK_H
#define DDP_JOBDIR_LOCK_H

#include <stddef.h>

#define JOBDIR_LOCK_NAME ".lock"

/* Whether another live run holds dir's lock: 0 (free, stale, or no directory), or -1 with one
 * line in err. Creates nothing: for the start-up check, so that a refused run leaves nothing. */
int jobdir_lock_probe(const char *dir, char *err, size_t n);

/* Takes dir's lock (an existing directory), held until exit: 0, or -1 with one line in err (held
 * by another run, or it cannot be created). A stale lock taken over is described in note (""
 * otherwise), for the log. */
int jobdir_lock_take(const char *dir, char *note, size_t note_len, char *err, size_t n);

/* Removes the lock if this process holds it (also called at exit). */
void jobdir_lock_release(void);

#endif
