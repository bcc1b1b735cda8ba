/* SPDX-License-Identifier: BSD-3-Clause */
/* rows.h - what the output says of each image: its k most probable classes and their
 * probabilities, from its (averaged) logits, and the ranks' rows brought together.
 *
 * The classes are ranked by their logits, largest first, a tie going to the lower index (so the
 * first is the evaluation's prediction, softmax_xent's first maximum); the probabilities are
 * the softmax of the float32 logits computed in double. An image with a label is a top-1 hit
 * when the first class is its label, a top-5 hit when fewer than 5 classes rank above the
 * label (the same order). Every rank fills the rows of its own items; rows_gather sums the
 * ranks' tables (every other row is zeros, and x + 0 = x), so every rank ends with all rows,
 * exactly as they were computed. */
#ifndef DDP_PREDICT_ROWS_H
#define DDP_PREDICT_ROWS_H

#include <stddef.h>

#include "dist/comm.h"

enum { ROW_EMPTY = 0, ROW_OK = 1, ROW_BAD = 2 };

typedef struct {
    int k;               /* classes per row */
    size_t n;            /* rows */
    double *v;           /* [n][ROW_WORDS(k)] */
} Rows;

/* One row, read back. */
typedef struct {
    int status;          /* ROW_* */
    int label;           /* -1: none */
    int hit1, hit5;
    const double *index, *prob;   /* [k] each (classes as exact doubles) */
} Row;

void rows_init(Rows *r, size_t n, int k);
/* Row i from the logits [num_classes] of its image; label -1 for none. */
void rows_set(Rows *r, size_t i, const float *logits, int num_classes, int label);
/* Row i: an image that could not be read (left out of the output). */
void rows_set_bad(Rows *r, size_t i, int label);
Row rows_get(const Rows *r, size_t i);
/* Collective: every rank's rows in every rank's table. */
void rows_gather(Rows *r, Comm *c);
void rows_free(Rows *r);

#endif
