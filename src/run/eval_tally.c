/* SPDX-License-Identifier: BSD-3-Clause */
/* eval_tally.c - see eval_tally.h. */
#include "eval_tally.h"

#include <stdlib.h>
#include <string.h>

#include "base/util.h"

void eval_tally_init(EvalTally *t, int num_classes, int max_batch) {
    CHECK(num_classes >= 1 && max_batch >= 1);
    memset(t, 0, sizeof *t);
    t->K = num_classes;
    t->has_top5 = num_classes > EVAL_TALLY_TOPK;
    t->has_matrix = num_classes <= EVAL_TALLY_MATRIX_MAX;
    t->n = TALLY_FIXED + 2 * (size_t)num_classes + (t->has_matrix ? (size_t)num_classes * num_classes : 0);
    t->c = callocCheck(t->n, sizeof *t->c);
    t->cap = max_batch;
}

void eval_tally_reset(EvalTally *t) { memset(t->c, 0, t->n * sizeof *t->c); }

int eval_tally_argmax(const float *z, int K) {
    int best = 0;
    float m = z[0];   /* z[best], kept out of memory */
    for (int k = 1; k < K; k++)
        if (z[k] > m) {   /* strictly greater: the first maximum, as softmax_xent */
            m = z[k];
            best = k;
        }
    return best;
}

/* Counting, not sorting: the classes before the label in a stable descending sort are those
 * of a lower index with a logit at least the label's and those of a higher index with a greater
 * one. The count stops once it reaches `stop` (checked every block, so that the comparisons
 * vectorise): an image whose label is far down is settled after a few blocks, which matters
 * at 21,841 classes. */
#define PLACE_BLOCK 256
static int count_before(const float *z, int K, int label, int stop) {
    const float v = z[label];
    int n = 0;
    for (int k0 = 0; k0 < label && n < stop; k0 += PLACE_BLOCK) {
        const int k1 = k0 + PLACE_BLOCK < label ? k0 + PLACE_BLOCK : label;
        for (int k = k0; k < k1; k++) n += z[k] >= v;
    }
    for (int k0 = label + 1; k0 < K && n < stop; k0 += PLACE_BLOCK) {
        const int k1 = k0 + PLACE_BLOCK < K ? k0 + PLACE_BLOCK : K;
        for (int k = k0; k < k1; k++) n += z[k] > v;
    }
    return n;
}

int eval_tally_place(const float *z, int K, int label) { return count_before(z, K, label, K); }

void eval_tally_add(EvalTally *t, const float *logits, const int *labels, int N) {
    const int K = t->K;
    int64_t *images = t->c + TALLY_FIXED, *hits = images + K;
    for (int i = 0; i < N; i++) {
        const float *z = logits + (size_t)i * K;
        const int y = labels[i];
        CHECK(y >= 0 && y < K);
        const int pred = eval_tally_argmax(z, K);
        const int hit = pred == y;
        t->c[TALLY_IMAGES]++;
        t->c[TALLY_TOP1] += hit;
        if (t->has_top5) t->c[TALLY_TOP5] += hit || count_before(z, K, y, EVAL_TALLY_TOPK) < EVAL_TALLY_TOPK;
        images[y]++;
        hits[y] += hit;
        if (t->has_matrix) t->c[TALLY_FIXED + 2 * (size_t)K + (size_t)y * K + pred]++;
    }
}

void eval_tally_add_model(EvalTally *t, const Model *m, const int *labels, int N) {
    CHECK(m->num_classes == t->K && N >= 0);
    if (!m->be->on_device) {
        eval_tally_add(t, m->logits, labels, N);
        return;
    }
    if (!t->logits || N > t->cap) {   /* the first evaluation on a device backend */
        if (N > t->cap) t->cap = N;
        free(t->logits);
        free(t->labels);
        t->logits = mallocCheck((size_t)t->cap * t->K * sizeof(float));
        t->labels = mallocCheck((size_t)t->cap * sizeof(int));
    }
    /* The backend's copies wait for the forward; the loss was already read back (model_forward). */
    m->be->download(t->logits, m->logits, (size_t)N * t->K * sizeof(float));
    m->be->download(t->labels, labels, (size_t)N * sizeof(int));
    eval_tally_add(t, t->logits, t->labels, N);
}

void eval_tally_allreduce(EvalTally *t, Comm *comm) {
    comm_set_context(comm, "evaluation tallies (top-5, per class)");
    comm_allreduce(comm, t->c, t->n, COMM_INT64, COMM_SUM);
}

void eval_tally_free(EvalTally *t) {
    free(t->c);
    free(t->logits);
    free(t->labels);
    memset(t, 0, sizeof *t);
}
