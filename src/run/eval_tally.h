/* SPDX-License-Identifier: BSD-3-Clause */
/* eval_tally.h - what one evaluation counts beyond the loss: top-1 and top-5 hits, and per true
 * class its images, its top-1 hits and the classes predicted for it (the confusion matrix),
 * from each image's logits on the host, summed exactly over the ranks (int64).
 *
 * Order of the classes for an image: by logit, highest first, equal logits in class order (a
 * stable descending sort: torch.sort(z, descending=True, stable=True)). The prediction is the
 * first class in that order, the first maximum, which is what the loss kernels' hit count (and
 * so test_acc) takes; an image is a top-5 hit when its label is among the first 5. torch.topk
 * leaves the order of equal values unspecified, so on an exact tie at the fifth place it may
 * count otherwise; exact ties of float32 logits are rare once a network has trained. A NaN
 * logit compares false either way: the prediction is then whatever the first maximum's scan
 * keeps, as for test_acc, and a top-1 hit always counts for top-5 too.
 *
 * The matrix takes K x K counters, so it is kept up to EVAL_TALLY_MATRIX_MAX classes (8 MiB per
 * rank at the limit; ImageNet-1k's 1,000 classes fit); above it only the per-class figures are
 * (a 21,841-class dataset would need 3.8 GB). */
#ifndef DDP_EVAL_TALLY_H
#define DDP_EVAL_TALLY_H

#include <stdint.h>

#include "dist/comm.h"
#include "model/model.h"

#define EVAL_TALLY_TOPK 5
#define EVAL_TALLY_MATRIX_MAX 1024

/* The counters, one flat int64 array so that one all-reduce sums them all. */
enum { TALLY_IMAGES = 0, TALLY_TOP1 = 1, TALLY_TOP5 = 2, TALLY_FIXED = 3 };

typedef struct {
    int K;             /* classes */
    int has_top5;      /* K > EVAL_TALLY_TOPK: top-5 is counted and reported */
    int has_matrix;    /* K <= EVAL_TALLY_MATRIX_MAX */
    size_t n;          /* counters */
    int64_t *c;        /* [TALLY_FIXED], images per class [K], top-1 hits per class [K], matrix [K][K]
                        * (row: the true class, column: the predicted one) when has_matrix */
    int cap;           /* images of the host copies below */
    float *logits;     /* host copies of a forward's logits and labels on a device backend */
    int *labels;
} EvalTally;

/* max_batch: the most images one eval_tally_add_model is expected to take (the model's
 * max_batch; more makes its host copies grow). */
void eval_tally_init(EvalTally *t, int num_classes, int max_batch);
void eval_tally_reset(EvalTally *t);

/* N images' logits [N, K] and labels (host memory). A label outside [0, K) is an internal
 * error (the loader checked every label). */
void eval_tally_add(EvalTally *t, const float *logits, const int *labels, int N);

/* The last forward of m (N images, its logits where the backend holds them) with their labels
 * (where the model read them: device memory on a device backend). */
void eval_tally_add_model(EvalTally *t, const Model *m, const int *labels, int N);

/* The label's place (0-based) in the image's order of classes (above). */
int eval_tally_place(const float *z, int K, int label);
/* The first maximum of z[0..K). */
int eval_tally_argmax(const float *z, int K);

/* Collective: every rank's counters summed (exact). */
void eval_tally_allreduce(EvalTally *t, Comm *comm);

/* Views of the counters. */
static inline const int64_t *eval_tally_class_images(const EvalTally *t) { return t->c + TALLY_FIXED; }
static inline const int64_t *eval_tally_class_hits(const EvalTally *t) { return t->c + TALLY_FIXED + t->K; }
/* Row `true_class` of the matrix, NULL without one. */
static inline const int64_t *eval_tally_row(const EvalTally *t, int true_class) {
    return t->has_matrix ? t->c + TALLY_FIXED + 2 * (size_t)t->K + (size_t)true_class * t->K : NULL;
}

void eval_tally_free(EvalTally *t);

#endif
