/* SPDX-License-Identifier: BSD-3-Clause */
/* rows.c - each image's top classes, and the ranks' rows brought together (rows.h). */
#include "rows.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

/* status, label + 1, hit1, hit5, then the k classes and the k probabilities */
enum { ROW_HEAD = 4 };
#define ROW_WORDS(k) ((size_t)ROW_HEAD + 2 * (size_t)(k))

/* Doubles per all-reduce: a few MB at a time, whatever the number of images. */
#define GATHER_WORDS ((size_t)1 << 19)

void rows_init(Rows *r, size_t n, int k) {
    r->k = k;
    r->n = n;
    r->v = callocCheck(n ? n * ROW_WORDS(k) : 1, sizeof(double));
}

/* Class a ranks above class b. */
static int above(const float *z, int a, int b) { return z[a] > z[b] || (z[a] == z[b] && a < b); }

void rows_set(Rows *r, size_t i, const float *z, int K, int label) {
    double *w = r->v + i * ROW_WORDS(r->k);
    double *index = w + ROW_HEAD, *prob = index + r->k;
    /* the k first by insertion: k is small, K may be 21,841 */
    CHECK(K >= r->k && r->k >= 1);
    int top[r->k];
    top[0] = 0;
    int have = 0;
    for (int c = 0; c < K; c++) {
        if (have == r->k && !above(z, c, top[have - 1])) continue;
        int j = have < r->k ? have++ : have - 1;
        while (j > 0 && above(z, c, top[j - 1])) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = c;
    }
    CHECK(have == r->k);
    const double zmax = z[top[0]];
    double se = 0.0;
    for (int c = 0; c < K; c++) se += exp((double)z[c] - zmax);
    for (int j = 0; j < r->k; j++) {
        index[j] = top[j];
        prob[j] = exp((double)z[top[j]] - zmax) / se;
    }
    w[0] = ROW_OK;
    w[1] = label + 1;
    if (label >= 0) {
        int ahead = 0;
        for (int c = 0; c < K && ahead < 5; c++) ahead += c != label && above(z, c, label);
        w[2] = top[0] == label;
        w[3] = ahead < 5;
    }
}

void rows_set_bad(Rows *r, size_t i, int label) {
    double *w = r->v + i * ROW_WORDS(r->k);
    w[0] = ROW_BAD;
    w[1] = label + 1;
}

Row rows_get(const Rows *r, size_t i) {
    const double *w = r->v + i * ROW_WORDS(r->k);
    return (Row){(int)w[0], (int)w[1] - 1, (int)w[2], (int)w[3], w + ROW_HEAD, w + ROW_HEAD + r->k};
}

void rows_gather(Rows *r, Comm *c) {
    if (c->world_size == 1) return;
    const size_t total = r->n * ROW_WORDS(r->k);
    comm_set_context(c, "gathering the rows");
    for (size_t off = 0; off < total; off += GATHER_WORDS) {
        const size_t cnt = total - off < GATHER_WORDS ? total - off : GATHER_WORDS;
        comm_allreduce(c, r->v + off, cnt, COMM_FLOAT64, COMM_SUM);
    }
}

void rows_free(Rows *r) {
    free(r->v);
    memset(r, 0, sizeof *r);
}
