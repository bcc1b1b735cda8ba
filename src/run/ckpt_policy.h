/* SPDX-License-Identifier: BSD-3-Clause */
/* ckpt_policy.h - the checkpoint policy: what a checkpoint of the run holds and who writes it,
 * and which checkpoint a start resumes from, with the checks that it may.
 *
 * Saving is collective (every rank's own batch-norm statistics travel to rank 0, and /model
 * gets their average: replica.h); rank 0 alone writes, through the background writer
 * (checkpoint.h), atomically. Resuming: rank 0 picks the file (--resume none, auto: the newest
 * usable one in the job's checkpoints/ directory, falling back past a damaged one, or a path),
 * every rank reads it itself, the ranks agree on its position and weights (a stale copy on one
 * node shows), and resume.h decides whether this run's settings put the data at the same
 * place. */
#ifndef DDP_CKPT_POLICY_H
#define DDP_CKPT_POLICY_H

#include "ckpt/checkpoint.h"
#include "dist/comm.h"
#include "base/config.h"
#include "learner.h"
#include "base/logger.h"
#include "replica.h"
#include "splits.h"

typedef struct {
    const Config *cfg;
    Comm *comm;
    Logger *log;
    const char *const *hosts;  /* hosts[q]: rank q's host, for the agreement's line */
    const char *ckpt_dir;      /* the job directory's checkpoints/ */
    const char *config_json;   /* stored in every checkpoint */
    CheckpointWriter writer;   /* rank 0's */
} CkptPolicy;

void ckpt_policy_init(CkptPolicy *p, const Config *c, Comm *comm, Logger *log, const char *const *hosts,
                      const char *ckpt_dir, const char *config_json);

/* What every checkpoint records of the dataset (checkpoint.h's /dataset): the normalisation
 * and class names of the test split, which the evaluation used. Before the first save. */
void ckpt_policy_set_dataset(CkptPolicy *p, const DataLoader *test);

/* Collective: a checkpoint at (epoch, step_in_epoch, global_step): the position the run goes
 * on from. wait: rank 0 waits until it is on disk. The reductions must be drained. */
void ckpt_policy_save(CkptPolicy *p, Learner *l, Replica *rep, const DataLoader *train, long epoch, long step_in_epoch,
                      long global_step, int wait);

/* Collective: loads the checkpoint --resume names into l (and the EMA, the loss scale) and
 * returns 1 with its position in ts, or 0 for a fresh start. May hold the training split
 * otherwise (splits_hold: --data_in_memory auto follows the checkpoint). Dies with one line on
 * a checkpoint that cannot be resumed. */
int ckpt_policy_resume(CkptPolicy *p, Learner *l, Replica *rep, Splits *s, TrainState *ts);

/* Rank 0: waits for the last write; 0, or -1 with err. */
int ckpt_policy_wait(CkptPolicy *p, char *err, size_t errlen);

void ckpt_policy_free(CkptPolicy *p);

#endif
