/* SPDX-License-Identifier: BSD-3-Clause */
/* whiten.c - the whitening convolution's weight from the training patches (whiten.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "whiten.h"
#include "base/util.h"
#include "model_step.h"

int whiten_kernel(const Model *m, int *kh, int *kw) {
    for (int i = 0; i < m->net.n; i++) {
        const NetNode *n = &m->net.node[i];
        if (n->kind == NODE_CONV && n->whiten) {
            *kh = n->k;
            *kw = n->kw;
            return 1;
        }
    }
    return 0;
}

void whiten_patch_moments(const uint8_t *img, size_t n, int S, const float *lut, int kh, int kw, double *sums,
                          double *count) {
    const int d = 3 * kh * kw;
    double *p = mallocCheck((size_t)d * sizeof *p);   /* one patch */
    for (size_t im = 0; im < n; im++) {
        const uint8_t *a = img + im * (size_t)S * S * 3;
        for (int y = 0; y + kh <= S; y++)
            for (int xx = 0; xx + kw <= S; xx++) {
                for (int c = 0; c < 3; c++)
                    for (int i = 0; i < kh; i++)
                        for (int j = 0; j < kw; j++)
                            p[(c * kh + i) * kw + j] = lut[c * 256 + a[((size_t)(y + i) * S + xx + j) * 3 + c]];
                for (int r = 0; r < d; r++)
                    for (int q = 0; q < d; q++) sums[r * d + q] += p[r] * p[q];
                *count += 1.0;
            }
    }
    free(p);
}

/* Cyclic Jacobi on the symmetric a[d][d] (destroyed): eigenvalues into lam, eigenvectors into
 * the columns of v. 0, or -1 without convergence. */
static int jacobi(double *a, int d, double *lam, double *v) {
    for (int i = 0; i < d * d; i++) v[i] = 0.0;
    for (int i = 0; i < d; i++) v[i * d + i] = 1.0;
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0.0, diag = 0.0;
        for (int p = 0; p < d; p++)
            for (int q = 0; q < d; q++) {
                if (p == q) diag += a[p * d + q] * a[p * d + q];
                else off += a[p * d + q] * a[p * d + q];
            }
        if (!isfinite(off) || !isfinite(diag)) return -1;
        if (off <= 1e-30 * diag || off == 0.0) {
            for (int i = 0; i < d; i++) lam[i] = a[i * d + i];
            return 0;
        }
        for (int p = 0; p < d - 1; p++)
            for (int q = p + 1; q < d; q++) {
                const double apq = a[p * d + q];
                if (apq == 0.0) continue;
                const double theta = (a[q * d + q] - a[p * d + p]) / (2.0 * apq);
                const double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1.0));
                const double c = 1.0 / sqrt(t * t + 1.0), s = t * c;
                for (int k = 0; k < d; k++) {   /* columns p and q */
                    const double akp = a[k * d + p], akq = a[k * d + q];
                    a[k * d + p] = c * akp - s * akq;
                    a[k * d + q] = s * akp + c * akq;
                }
                for (int k = 0; k < d; k++) {   /* rows p and q */
                    const double apk = a[p * d + k], aqk = a[q * d + k];
                    a[p * d + k] = c * apk - s * aqk;
                    a[q * d + k] = s * apk + c * aqk;
                }
                for (int k = 0; k < d; k++) {
                    const double vkp = v[k * d + p], vkq = v[k * d + q];
                    v[k * d + p] = c * vkp - s * vkq;
                    v[k * d + q] = s * vkp + c * vkq;
                }
            }
    }
    return -1;
}

int whiten_weights(const double *sums, double count, int d, double eps, float *w) {
    double *a = mallocCheck((size_t)d * d * sizeof *a), *v = mallocCheck((size_t)d * d * sizeof *v);
    double *lam = mallocCheck((size_t)d * sizeof *lam);
    int *order = mallocCheck((size_t)d * sizeof *order);
    for (int i = 0; i < d * d; i++) a[i] = sums[i] / count;
    const int rc = jacobi(a, d, lam, v);
    if (rc == 0) {
        /* decreasing eigenvalue (a stable insertion sort: ties keep the column order) */
        for (int i = 0; i < d; i++) order[i] = i;
        for (int i = 1; i < d; i++)
            for (int j = i; j > 0 && lam[order[j]] > lam[order[j - 1]]; j--) {
                const int t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
            }
        for (int r = 0; r < d; r++) {
            const int col = order[r];
            int big = 0;
            for (int k = 1; k < d; k++)
                if (fabs(v[k * d + col]) > fabs(v[big * d + col])) big = k;
            const double sign = v[big * d + col] < 0 ? -1.0 : 1.0;
            const double scale = sign / sqrt(lam[col] + eps);
            for (int k = 0; k < d; k++) {
                w[(size_t)r * d + k] = (float)(v[k * d + col] * scale);
                w[(size_t)(r + d) * d + k] = -w[(size_t)r * d + k];
            }
        }
    }
    free(a); free(v); free(lam); free(order);
    return rc;
}

int model_whiten(Model *m, const double *sums, double count, double eps) {
    for (int s = 0; s < m->n_step; s++) {
        const ModelStep *st = &m->step[s];
        const NetNode *n = step_node(m, st);
        if (n->kind != NODE_CONV || !n->whiten) continue;
        const int d = st->C_in * n->k * n->kw;
        float *w = mallocCheck((size_t)2 * d * d * sizeof *w);
        const int rc = whiten_weights(sums, count, d, eps, w);
        if (rc == 0) m->be->upload(m->params + st->w_off, w, (size_t)2 * d * d * sizeof *w);
        free(w);
        if (rc != 0) return -1;
        model_params_changed(m);
    }
    return 0;
}
