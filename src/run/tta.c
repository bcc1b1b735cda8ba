/* SPDX-License-Identifier: BSD-3-Clause */
/* tta.c - test-time augmentation of the evaluation (tta.h). */
#include "tta.h"

#include <math.h>
#include <string.h>

#include "base/util.h"

int tta_parse(const char *name) {
    if (!strcmp(name, "none")) return TTA_NONE;
    if (!strcmp(name, "flip")) return TTA_FLIP;
    if (!strcmp(name, "flip_shift")) return TTA_FLIP_SHIFT;
    return -1;
}

int tta_views(int mode) { return mode == TTA_FLIP_SHIFT ? 6 : mode == TTA_FLIP ? 2 : 1; }

/* F.pad(mode="reflect") by one pixel: index -1 reads 1, index S reads S - 2. */
static int reflect(int i, int S) { return i < 0 ? -i : i >= S ? 2 * S - 2 - i : i; }

void tta_view(const float *x, float *out, int N, int S, int C, int v) {
    CHECK(v >= 0 && v < 6 && S >= 2);
    const int shift = v >= 4 ? 1 : v >= 2 ? -1 : 0, flip = v % 2;
    const size_t img = (size_t)S * S * C;
    for (int n = 0; n < N; n++)
        for (int h = 0; h < S; h++)
            for (int w = 0; w < S; w++) {
                const int ws = flip ? S - 1 - w : w;   /* the flip comes after the shift */
                const int hi = reflect(h + shift, S), wi = reflect(ws + shift, S);
                memcpy(out + n * img + ((size_t)h * S + w) * C, x + n * img + ((size_t)hi * S + wi) * C,
                       (size_t)C * sizeof(float));
            }
}

void tta_logits(Model *m, int mode, const float *x, const int *labels, int N, float *scratch, float *logits) {
    CHECK(!m->be->on_device);
    const int K = m->num_classes, S = m->input_size, views = tta_views(mode);
    const size_t img = (size_t)S * S * 3;
    float *l[6] = {0};
    for (int v = 0; v < views; v++) l[v] = mallocCheck((size_t)m->max_batch * K * sizeof(float));
    for (int off = 0; off < N; off += m->max_batch) {
        const int n = N - off < m->max_batch ? N - off : m->max_batch;
        for (int v = 0; v < views; v++) {
            const float *in = x + (size_t)off * img;
            if (v > 0) {
                tta_view(in, scratch, n, S, 3, v);
                in = scratch;
            }
            model_forward(m, in, labels + off, n, 0, 1.0f, NULL);
            memcpy(l[v], m->logits, (size_t)n * K * sizeof(float));
        }
        float *out = logits + (size_t)off * K;
        for (size_t j = 0; j < (size_t)n * K; j++) {
            /* in the order of airbench's expressions, each operation rounded to float32 */
            const float m01 = 0.5f * l[0][j] + 0.5f * l[1][j];
            if (mode == TTA_FLIP) {
                out[j] = m01;
                continue;
            }
            const float m23 = 0.5f * l[2][j] + 0.5f * l[3][j], m45 = 0.5f * l[4][j] + 0.5f * l[5][j];
            const float shifted = (m23 + m45) / 2.0f;
            out[j] = 0.5f * m01 + 0.5f * shifted;
        }
    }
    for (int v = 0; v < views; v++) free(l[v]);
}

void tta_evaluate(Model *m, int mode, const float *x, const int *labels, int N, float *scratch, float *logits,
                  long *correct, double *loss_sum, EvalTally *tally) {
    const int K = m->num_classes;
    long hits = 0;
    double sum = 0.0;
    for (int off = 0; off < N; off += m->max_batch) {
        const int n = N - off < m->max_batch ? N - off : m->max_batch;
        tta_logits(m, mode, x + (size_t)off * m->input_size * m->input_size * 3, labels + off, n, scratch, logits);
        if (tally) eval_tally_add(tally, logits, labels + off, n);
        for (int i = 0; i < n; i++) {
            const float *z = logits + (size_t)i * K;
            int best = 0;
            for (int k = 1; k < K; k++)
                if (z[k] > z[best]) best = k;
            hits += best == labels[off + i];
            double lse = 0.0;
            for (int k = 0; k < K; k++) lse += exp((double)z[k] - (double)z[best]);
            sum += (double)z[best] + log(lse) - (double)z[labels[off + i]];
        }
    }
    *correct = hits;
    *loss_sum = sum;
}
