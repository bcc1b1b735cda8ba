/* SPDX-License-Identifier: BSD-3-Clause */
/* layernorm_cpu.c - see layernorm_cpu.h. */
#include "layernorm_cpu.h"

#include <math.h>
#include <stdlib.h>

#include "base/util.h"

void layernorm_forward(const float *x, float *y, float *mean, float *rstd, const float *gamma, const float *beta,
                       size_t M, int C, float eps) {
    #pragma omp parallel for schedule(static)
    for (long m = 0; m < (long)M; m++) {
        const float *xm = x + (size_t)m * C;
        float *ym = y + (size_t)m * C;
        float s = 0.0f;
        #pragma omp simd reduction(+ : s)
        for (int c = 0; c < C; c++) s += xm[c];
        const float mu = s / (float)C;
        float v = 0.0f;
        #pragma omp simd reduction(+ : v)
        for (int c = 0; c < C; c++) v += (xm[c] - mu) * (xm[c] - mu);
        const float r = 1.0f / sqrtf(v / (float)C + eps);
        mean[m] = mu;
        rstd[m] = r;
        #pragma omp simd
        for (int c = 0; c < C; c++) ym[c] = (xm[c] - mu) * r * gamma[c] + beta[c];
    }
}

enum { LN_BLOCK = 256 };

void layernorm_backward(const float *x, const float *dy, const float *mean, const float *rstd, const float *gamma,
                        float *dx, float *dgamma, float *dbeta, size_t M, int C) {
    const long nb = (long)((M + LN_BLOCK - 1) / LN_BLOCK);
    double *part = callocCheck((size_t)(nb ? nb : 1) * 2 * C, sizeof(double));
    #pragma omp parallel for schedule(static)
    for (long b = 0; b < nb; b++) {
        double *pg = part + (size_t)b * 2 * C, *pb = pg + C;
        const size_t m1 = (size_t)(b + 1) * LN_BLOCK < M ? (size_t)(b + 1) * LN_BLOCK : M;
        for (size_t m = (size_t)b * LN_BLOCK; m < m1; m++) {
            const float *xm = x + m * C, *dym = dy + m * C;
            float *dxm = dx + m * C;
            const float mu = mean[m], r = rstd[m];
            float sg = 0.0f, sgx = 0.0f;
            #pragma omp simd reduction(+ : sg, sgx)
            for (int c = 0; c < C; c++) {
                const float xh = (xm[c] - mu) * r, g = dym[c] * gamma[c];
                sg += g;
                sgx += g * xh;
            }
            #pragma omp simd
            for (int c = 0; c < C; c++) {
                const float xh = (xm[c] - mu) * r;
                pg[c] += (double)(dym[c] * xh);
                pb[c] += (double)dym[c];
            }
            const float mg = sg / (float)C, mgx = sgx / (float)C;
            #pragma omp simd
            for (int c = 0; c < C; c++) {
                const float xh = (xm[c] - mu) * r;
                dxm[c] = r * (dym[c] * gamma[c] - mg - xh * mgx);
            }
        }
    }
    for (int c = 0; c < C; c++) {
        double sg = 0.0, sb = 0.0;
        for (long b = 0; b < nb; b++) {
            sg += part[(size_t)b * 2 * C + c];
            sb += part[(size_t)b * 2 * C + C + c];
        }
        dgamma[c] += (float)sg;
        dbeta[c] += (float)sb;
    }
    free(part);
}
