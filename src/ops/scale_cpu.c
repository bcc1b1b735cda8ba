/* SPDX-License-Identifier: BSD-3-Clause */
/* scale_cpu.c - see scale_cpu.h. */
#include "scale_cpu.h"

#include "base/rng.h"

/* Channels per task of mul_backward: its double sums stay in registers and L1, and a map of
 * few images still splits into enough tasks for the threads. */
#define MUL_CBLOCK 64
/* Values per task of the flat loops over one image's values (sample_scale). */
#define SCALE_BLOCK 16384

void mul_forward(const float *x, const float *s, float *y, int N, int HW, int C) {
    #pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < N; n++)
        for (int p = 0; p < HW; p++) {
            const size_t o = ((size_t)n * HW + p) * C;
            const float *sn = s + (size_t)n * C;
            #pragma omp simd
            for (int c = 0; c < C; c++) y[o + c] = x[o + c] * sn[c];
        }
}

void mul_backward(const float *x, const float *s, const float *dy, float *dx, float *ds, int N, int HW, int C) {
    const int nbc = (C + MUL_CBLOCK - 1) / MUL_CBLOCK;
    /* One task per image and block of channels: each sum belongs to one task, which adds its
     * pixels in order, so the split never changes a bit. */
    #pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < N; n++)
        for (int cb = 0; cb < nbc; cb++) {
            const int c0 = cb * MUL_CBLOCK, nc = C - c0 < MUL_CBLOCK ? C - c0 : MUL_CBLOCK;
            const float *sn = s + (size_t)n * C + c0;
            double acc[MUL_CBLOCK] = {0};
            for (int p = 0; p < HW; p++) {
                const size_t o = ((size_t)n * HW + p) * C + c0;
                /* dy read before dx is written: dx may be dy */
                #pragma omp simd
                for (int c = 0; c < nc; c++) {
                    const float d = dy[o + c];
                    acc[c] += (double)(d * x[o + c]);
                    dx[o + c] = d * sn[c];
                }
            }
            for (int c = 0; c < nc; c++) ds[(size_t)n * C + c0 + c] = (float)acc[c];
        }
}

void dropout_mask(uint8_t *keep, size_t n, float p, uint64_t key) {
    const float survival = 1.0f - p;   /* as stochastic depth compares (kind_drop.c) */
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) keep[i] = rng_hash_uniform(key, i) < survival;
}

void dropout_apply(const float *x, const uint8_t *keep, float *y, size_t n, float p) {
    if (p >= 1.0f) {
        #pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < n; i++) y[i] = 0.0f;
        return;
    }
    const float scale = 1.0f / (float)(1.0 - (double)p);
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) y[i] = keep[i] ? x[i] * scale : 0.0f;
}

void sample_scale(const float *x, const float *s, float *y, int N, size_t per) {
    const size_t nb = (per + SCALE_BLOCK - 1) / SCALE_BLOCK;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < N; n++)
        for (size_t b = 0; b < nb; b++) {
            const size_t j0 = b * SCALE_BLOCK, m = per - j0 < SCALE_BLOCK ? per - j0 : SCALE_BLOCK;
            const float f = s[n];
            const float *xn = x + (size_t)n * per + j0;
            float *yn = y + (size_t)n * per + j0;
            #pragma omp simd
            for (size_t j = 0; j < m; j++) yn[j] = xn[j] * f;
        }
}
