/* SPDX-License-Identifier: BSD-3-Clause */
/* linear_cpu.c - see linear_cpu.h.
 *
 * With oneDNN the three products go through dnnl_sgemm, each on fixed blocks of its output
 * (LIN_BLOCK columns of y and dx, LIN_BLOCK rows of dw), the blocks shared out by an OpenMP
 * loop. Called on a thread inside a parallel region, oneDNN's sgemm runs on that thread alone
 * (winograd.c relies on the same), so every output element is summed by one sgemm call whose
 * shape depends only on (N, I, O): the results are the same bits on any thread count. Left to
 * itself, oneDNN splits the reduction across threads for some shapes (its inner product and
 * matmul through gemm:jit did, on 2 to 16 threads, for [32,1280]x[1280,1000] among others), and
 * the sums then depend on the thread count. sgemm needs no primitive, so nothing is cached. */
#include "build_config.h"

#include "linear_cpu.h"

#ifdef HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>

#include "base/util.h"
#endif

void linear_reference_forward(const float *x, const float *w, const float *b, float *y, int N,
                              int I, int O) {
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++) {
            const float *xn = x + (size_t)n * I, *wo = w + (size_t)o * I;
            double acc = 0.0;
            for (int i = 0; i < I; i++) acc += (double)xn[i] * wo[i];
            y[(size_t)n * O + o] = (float)(acc + b[o]);
        }
}

/* db[o] += sum over n of dy[n,o], in double: cheap (N*O), and the same on any thread count. */
static void bias_grad(const float *dy, float *db, int N, int O) {
    #pragma omp parallel for schedule(static)
    for (int o = 0; o < O; o++) {
        double sb = 0.0;
        for (int n = 0; n < N; n++) sb += dy[(size_t)n * O + o];
        db[o] += (float)sb;
    }
}

void linear_reference_backward(const float *x, const float *w, const float *dy, float *dx,
                               float *dw, float *db, int N, int I, int O) {
    bias_grad(dy, db, N, O);
    #pragma omp parallel for schedule(static)
    for (int o = 0; o < O; o++)
        for (int i = 0; i < I; i++) {
            double acc = 0.0;
            for (int n = 0; n < N; n++) acc += (double)dy[(size_t)n * O + o] * x[(size_t)n * I + i];
            dw[(size_t)o * I + i] += (float)acc;
        }
    if (!dx) return;
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int i = 0; i < I; i++) {
            double acc = 0.0;
            for (int o = 0; o < O; o++) acc += (double)dy[(size_t)n * O + o] * w[(size_t)o * I + i];
            dx[(size_t)n * I + i] = (float)acc;
        }
}

#ifdef HAVE_DNNL

/* Columns (rows for dw) per block: wide enough for sgemm's vector kernels, narrow enough that
 * a classifier (O of 1000, I of 960 to 2048) gives every thread of a node several blocks. */
#define LIN_BLOCK 64

static int nblocks(int n) { return (n + LIN_BLOCK - 1) / LIN_BLOCK; }

/* Row-major C[M,Nc] = op(A) op(B) + beta C on the calling thread. */
static void gemm(char ta, char tb, int M, int Nc, int K, const float *A, int lda, const float *B,
                 int ldb, float beta, float *C, int ldc) {
    const dnnl_status_t st = dnnl_sgemm(ta, tb, M, Nc, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
    if (st != dnnl_success) fail_at(__FILE__, __LINE__, "dnnl_sgemm", "failed");
}

void linear_forward(const float *x, const float *w, const float *b, float *y, int N, int I, int O) {
    /* y[:, o0:o0+ob] = x w[o0:o0+ob, :]^T, then + b: the bias after the whole sum, as the
     * reference adds it. */
    #pragma omp parallel for schedule(static)
    for (int k = 0; k < nblocks(O); k++) {
        const int o0 = k * LIN_BLOCK, ob = O - o0 < LIN_BLOCK ? O - o0 : LIN_BLOCK;
        gemm('N', 'T', N, ob, I, x, I, w + (size_t)o0 * I, I, 0.0f, y + o0, O);
        for (int n = 0; n < N; n++)
            for (int o = o0; o < o0 + ob; o++) y[(size_t)n * O + o] += b[o];
    }
}

void linear_backward(const float *x, const float *w, const float *dy, float *dx, float *dw,
                     float *db, int N, int I, int O) {
    bias_grad(dy, db, N, O);
    /* dw[o0:o0+ob, :] += dy[:, o0:o0+ob]^T x: beta 1 adds to the gradient buffer in place. */
    #pragma omp parallel for schedule(static)
    for (int k = 0; k < nblocks(O); k++) {
        const int o0 = k * LIN_BLOCK, ob = O - o0 < LIN_BLOCK ? O - o0 : LIN_BLOCK;
        gemm('T', 'N', ob, I, N, dy + o0, O, x, I, 1.0f, dw + (size_t)o0 * I, I);
    }
    if (!dx) return;
    /* dx[:, i0:i0+ib] = dy w[:, i0:i0+ib] */
    #pragma omp parallel for schedule(static)
    for (int k = 0; k < nblocks(I); k++) {
        const int i0 = k * LIN_BLOCK, ib = I - i0 < LIN_BLOCK ? I - i0 : LIN_BLOCK;
        gemm('N', 'N', N, ib, O, dy, O, w + i0, I, 0.0f, dx + i0, I);
    }
}

#else

void linear_forward(const float *x, const float *w, const float *b, float *y, int N, int I, int O) {
    linear_reference_forward(x, w, b, y, N, I, O);
}

void linear_backward(const float *x, const float *w, const float *dy, float *dx, float *dw,
                     float *db, int N, int I, int O) {
    linear_reference_backward(x, w, dy, dx, dw, db, N, I, O);
}

#endif
