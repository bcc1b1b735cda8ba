/* SPDX-License-Identifier: BSD-3-Clause */
/* eval.h - evaluation: accuracy and loss over the whole test split, every rank evaluating its
 * share (with --tta's views), the totals summed exactly; its log line and metrics record; and
 * --target_accuracy's bookkeeping and report (MLPerf's rule: the time to train ends with the
 * evaluation that reaches the target).
 *
 * The weights evaluated are the EMA's when it holds an average, else the trained ones with the
 * running statistics averaged over the ranks (replica.h); either way the same on every rank. */
#ifndef DDP_EVAL_H
#define DDP_EVAL_H

#include "batches.h"
#include "comm.h"
#include "config.h"
#include "learner.h"
#include "logger.h"
#include "replica.h"

/* Exit status of a run with --target_accuracy that ended without reaching it. */
#define EVAL_EXIT_TARGET_MISSED 5

typedef struct {
    const Config *cfg;
    Comm *comm;
    Logger *log;
    Batches *batches;
    float *tta_x, *tta_logits;   /* --tta's views of a chunk and their averaged logits (host) */
    double last_acc, best_acc;   /* last_acc -1 before any evaluation */
    long eval_step;              /* the global step of the last evaluation, -1 before any */
    int target_reached;          /* --target_accuracy: an evaluation reached it */
    double target_time;          /* seconds from the start of training to the end of that evaluation */
    long target_step, target_epoch;
} Evaluator;

void eval_init(Evaluator *e, const Config *c, Comm *comm, Logger *log, Batches *b);

/* Collective: evaluates at (epoch, step), logs, and notes whether the target was reached.
 * lr is the learning rate of the last step, for the record; t_train0 the start of training.
 * The reductions must be drained. */
void eval_run_and_log(Evaluator *e, Learner *l, Replica *rep, long epoch, long step, double lr, double t_train0);

/* --target_accuracy's outcome: the run's last line and a metrics.jsonl event record. */
void eval_report_target(const Evaluator *e, long step, double train_sec, double startup_sec);

void eval_free(Evaluator *e);

#endif
