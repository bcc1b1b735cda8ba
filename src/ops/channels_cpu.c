/* SPDX-License-Identifier: BSD-3-Clause */
/* channels_cpu.c - see channels_cpu.h. */
#include "channels_cpu.h"

#include <stdlib.h>
#include <string.h>

#include "base/util.h"

void channel_copy(const float *x, int Cx, int x_off, float *y, int Cy, int y_off, int C, size_t M) {
    #pragma omp parallel for schedule(static)
    for (long m = 0; m < (long)M; m++)
        memcpy(y + (size_t)m * Cy + y_off, x + (size_t)m * Cx + x_off, (size_t)C * sizeof(float));
}

void channel_shuffle(const float *x, float *y, size_t M, int C, int groups) {
    const int per = C / groups;
    #pragma omp parallel for schedule(static)
    for (long m = 0; m < (long)M; m++) {
        const float *xm = x + (size_t)m * C;
        float *ym = y + (size_t)m * C;
        for (int i = 0; i < groups; i++)
            for (int j = 0; j < per; j++) ym[j * groups + i] = xm[i * per + j];
    }
}

/* Tiles of 32 x 32 keep both sides' lines in cache. */
void transpose(const float *x, float *y, int N, int P, int C) {
    enum { T = 32 };
    const long tp = (P + T - 1) / T, tc = (C + T - 1) / T;
    #pragma omp parallel for schedule(static)
    for (long t = 0; t < (long)N * tp * tc; t++) {
        const int n = (int)(t / (tp * tc)), p0 = (int)(t / tc % tp) * T, c0 = (int)(t % tc) * T;
        const float *xn = x + (size_t)n * P * C;
        float *yn = y + (size_t)n * P * C;
        const int p1 = p0 + T < P ? p0 + T : P, c1 = c0 + T < C ? c0 + T : C;
        for (int c = c0; c < c1; c++)
            for (int p = p0; p < p1; p++) yn[(size_t)c * P + p] = xn[(size_t)p * C + c];
    }
}

void channel_scale_forward(const float *x, const float *g, float *y, size_t M, int C) {
    #pragma omp parallel for schedule(static)
    for (long m = 0; m < (long)M; m++) {
        const float *xm = x + (size_t)m * C;
        float *ym = y + (size_t)m * C;
        #pragma omp simd
        for (int c = 0; c < C; c++) ym[c] = xm[c] * g[c];
    }
}

enum { SCALE_BLOCK = 256 };

void channel_scale_backward(const float *x, const float *g, const float *dy, float *dx, float *dg, size_t M, int C) {
    const long nb = (long)((M + SCALE_BLOCK - 1) / SCALE_BLOCK);
    double *part = callocCheck((size_t)(nb ? nb : 1) * C, sizeof(double));
    #pragma omp parallel for schedule(static)
    for (long b = 0; b < nb; b++) {
        double *pb = part + (size_t)b * C;
        const size_t m1 = (size_t)(b + 1) * SCALE_BLOCK < M ? (size_t)(b + 1) * SCALE_BLOCK : M;
        for (size_t m = (size_t)b * SCALE_BLOCK; m < m1; m++) {
            const float *xm = x + m * C, *dym = dy + m * C;
            float *dxm = dx + m * C;
            #pragma omp simd
            for (int c = 0; c < C; c++) {
                const float d = dym[c];
                pb[c] += (double)(d * xm[c]);
                dxm[c] = d * g[c];
            }
        }
    }
    for (int c = 0; c < C; c++) {
        double s = 0.0;
        for (long b = 0; b < nb; b++) s += part[(size_t)b * C + c];
        dg[c] += (float)s;
    }
    free(part);
}

void channel_affine(const float *x, float *y, size_t M, int C, const float *a, const float *b) {
    #pragma omp parallel for schedule(static)
    for (long m = 0; m < (long)M; m++) {
        const float *xm = x + (size_t)m * C;
        float *ym = y + (size_t)m * C;
        for (int c = 0; c < C; c++) {
            const float p = xm[c] * a[c];
            ym[c] = p + b[c];
        }
    }
}
