/* SPDX-License-Identifier: BSD-3-Clause */
/* confusion.h - <job_dir>/confusion.json: an evaluation's per-class accuracy and confusion matrix
 * (eval_tally.h's counters after the sum over the ranks), written by rank 0 after every
 * evaluation, so that at the end of a run it holds the final one (also the evaluation of a
 * resumed run that had already finished). One JSON object:
 *
 *   format       "ddptrain-confusion"
 *   epoch, step  of the evaluation; ema (the --ema_decay average evaluated), tta (--tta)
 *   num_classes, images, correct, test_acc; correct5 and test_acc5 (null with 5 classes or fewer)
 *   classes      per class, in label order: index, name (the dataset's class names; null
 *                without), images, correct, accuracy (null for a class without test images)
 *   matrix       rows the true class, columns the predicted one (the first maximum), each row
 *                summing to that class's images; null above EVAL_TALLY_MATRIX_MAX classes, and
 *                matrix_note then says so
 *   matrix_max_classes  that limit
 *
 * The file is replaced whole (a temporary name, fsync, rename: write_file_atomic), never
 * written through a symbolic link (jobdir.h refuses a planted one at start-up). A class name
 * that is not valid UTF-8 has its stray bytes written \udcXX, as config.json does. */
#ifndef DDP_CONFUSION_H
#define DDP_CONFUSION_H

#include "data/dataloader.h"
#include "eval_tally.h"

#define CONFUSION_FILE "confusion.json"

typedef struct {
    long epoch, step;              /* epoch 1-based, as the log line */
    int ema;                       /* the --ema_decay average was evaluated */
    const char *tta;               /* --tta's value */
    const DataLoader *test;        /* the test split's class names (may have none; NULL: none) */
} ConfusionInfo;

/* The JSON text, malloc'd and NUL-terminated, ending in a newline. */
char *confusion_json(const EvalTally *t, const ConfusionInfo *info);

/* <job_dir>/confusion.json replaced atomically. Returns 0, or -1 with errno. */
int confusion_write(const char *job_dir, const EvalTally *t, const ConfusionInfo *info);

#endif
