/* SPDX-License-Identifier: BSD-3-Clause */
/* eval.h - evaluation: accuracy and loss over the whole test split, every rank evaluating its
 * share (with --tta's views), the totals summed exactly; top-5 (more than 5 classes) and the
 * per-class figures and confusion matrix (eval_tally.h), written by rank 0 to confusion.json
 * (confusion.h); its log line and metrics record; and --target_accuracy's bookkeeping and
 * report (MLPerf's rule: the time to train ends with the evaluation that reaches the target).
 *
 * Each test image is counted once, whatever the ranks and the batch: the test split's samples
 * are partitioned among the ranks (whole shards round robin, or contiguous slices: shards.h),
 * the loader keeps the short last batch and pads nothing, and the counts are summed exactly.
 *
 * The weights evaluated are the EMA's when it holds an average, else the trained ones with the
 * running statistics averaged over the ranks (replica.h); either way the same on every rank.
 *
 * At a --val_crop_size other than the training crop (torchvision's --val-crop-size 224 after
 * --train-crop-size 176, FixRes' "train small, test large"), the evaluator holds a second model
 * of the same network built for that size: the weights and buffers are copied into it before
 * each evaluation, and its activations (sized for the training batch) are its only cost. */
#ifndef DDP_EVAL_H
#define DDP_EVAL_H

#include "batches.h"
#include "dist/comm.h"
#include "base/config.h"
#include "eval_tally.h"
#include "learner.h"
#include "base/logger.h"
#include "replica.h"

/* Exit status of a run with --target_accuracy that ended without reaching it. */
#define EVAL_EXIT_TARGET_MISSED 5

typedef struct {
    const Config *cfg;
    Comm *comm;
    Logger *log;
    Batches *batches;
    Model sized;                 /* the network at config_eval_size; sized.be NULL: the trained model's size */
    float *tta_x, *tta_logits;   /* --tta's views of a chunk and their averaged logits (host) */
    const char *job_dir;         /* where rank 0 writes confusion.json */
    EvalTally tally;             /* the last evaluation's counts, summed over the ranks */
    double last_acc, best_acc;   /* last_acc -1 before any evaluation */
    double last_acc5;            /* top-5 of the last evaluation; -1 with 5 classes or fewer */
    long eval_step;              /* the global step of the last evaluation, -1 before any */
    int target_reached;          /* --target_accuracy: an evaluation reached it */
    double target_time;          /* seconds from the start of training to the end of that evaluation */
    long target_step, target_epoch;
} Evaluator;

/* net and be: the trained model's network and backend, for the model at another size; job_dir
 * (borrowed) the job directory. */
void eval_init(Evaluator *e, const Config *c, Comm *comm, Logger *log, Batches *b, const NetSpec *net,
               const Backend *be, const char *job_dir);

/* Collective: evaluates at (epoch, step), logs, and notes whether the target was reached.
 * lr is the learning rate of the last step, for the record; t_train0 the start of training.
 * The reductions must be drained. */
void eval_run_and_log(Evaluator *e, Learner *l, Replica *rep, long epoch, long step, double lr, double t_train0);

/* --target_accuracy's outcome: the run's last line and a metrics.jsonl event record. */
void eval_report_target(const Evaluator *e, long step, double train_sec, double startup_sec);

void eval_free(Evaluator *e);

#endif
