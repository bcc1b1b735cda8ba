/* SPDX-License-Identifier: BSD-3-Clause */
/* preempt.h - the preemption signal: caught from the first thing main does, for every signal
 * --preempt_signal may name, so that one arriving during start-up is not lost; narrowed to
 * the configured one (and SIGTERM) once the flags are read; read by the loop at step
 * boundaries, where the ranks agree to stop and checkpoint. */
#ifndef DDP_PREEMPT_H
#define DDP_PREEMPT_H

/* Exit status of a run that stopped on the preemption signal after checkpointing; the sbatch
 * scripts in slurm/ requeue the job when they see it. */
#define PREEMPT_EXIT 3

void preempt_install(void);
/* SIGTERM and `name` (SIGTERM, SIGUSR1, SIGUSR2, SIGHUP, SIGALRM) stay caught; the others get
 * their default action back. */
void preempt_narrow(const char *name);
/* The signal caught, or 0. */
int preempt_received(void);

#endif
