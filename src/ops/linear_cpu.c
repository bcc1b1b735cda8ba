/* SPDX-License-Identifier: BSD-3-Clause */
/* linear_cpu.c - see linear_cpu.h.
 *
 * With oneDNN the three products go through dnnl_sgemm, each on fixed tiles of its output
 * (below), the tiles shared out by an OpenMP loop. Called on a thread inside a parallel region,
 * oneDNN's sgemm runs on that thread alone (winograd.c relies on the same), so every output element is summed by one sgemm call whose
 * shape depends only on (N, I, O): the results are the same bits on any thread count. Left to
 * itself, oneDNN splits the reduction across threads for some shapes (its inner product and
 * matmul through gemm:jit did, on 2 to 16 threads, for [32,1280]x[1280,1000] among others), and
 * the sums then depend on the thread count. sgemm needs no primitive, so nothing is cached. */
#include "build_config.h"

#include "linear_cpu.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "base/util.h"

static int g_bf16;   /* linear_use_bf16 */

void linear_use_bf16(int enable) {
    g_bf16 = enable != 0;
}

/* n values of x rounded to bfloat16 (nearest even) and back to float32, in a new buffer. */
static float *bf16_rounded(const float *x, size_t n) {
    float *r = mallocCheck(n * sizeof *r);
    #pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) r[i] = half_to_float(HALF_BF16, half_from_float(HALF_BF16, x[i]));
    return r;
}

static void linear_forward_f32(const float *x, const float *w, const float *b, float *y, int N, int I, int O);
static void linear_backward_f32(const float *x, const float *w, const float *dy, float *dx, float *dw,
                                float *db, int N, int I, int O);

void linear_forward(const float *x, const float *w, const float *b, float *y, int N, int I, int O) {
    if (!g_bf16) {
        linear_forward_f32(x, w, b, y, N, I, O);
        return;
    }
    float *xr = bf16_rounded(x, (size_t)N * I), *wr = bf16_rounded(w, (size_t)O * I);
    linear_forward_f32(xr, wr, b, y, N, I, O);   /* the bias in float32, as autocast's addmm adds it */
    free(xr);
    free(wr);
}

void linear_backward(const float *x, const float *w, const float *dy, float *dx, float *dw,
                     float *db, int N, int I, int O) {
    if (!g_bf16) {
        linear_backward_f32(x, w, dy, dx, dw, db, N, I, O);
        return;
    }
    float *xr = bf16_rounded(x, (size_t)N * I), *wr = bf16_rounded(w, (size_t)O * I);
    float *dyr = bf16_rounded(dy, (size_t)N * O);
    linear_backward_f32(xr, wr, dyr, dx, dw, db, N, I, O);
    free(xr);
    free(wr);
    free(dyr);
}

#ifdef HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

void linear_reference_forward(const float *x, const float *w, const float *b, float *y, int N,
                              int I, int O) {
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++) {
            const float *xn = x + (size_t)n * I, *wo = w + (size_t)o * I;
            double acc = 0.0;
            for (int i = 0; i < I; i++) acc += (double)xn[i] * wo[i];
            y[(size_t)n * O + o] = (float)(b ? acc + b[o] : acc);
        }
}

/* db[o] += sum over n of dy[n,o], in double: cheap (N*O), and the same on any thread count. */
static void bias_grad(const float *dy, float *db, int N, int O) {
    if (!db) return;   /* a layer without bias */
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

/* The tiles of the three products, fixed by (N, I, O) alone. y and dx: LIN_ROWS rows (pixels,
 * images) by at most LIN_COLS columns, so that an sgemm packs its rows of x or dy once for up to
 * LIN_COLS outputs, and a classifier's few rows (N = 32, O = 1000) still make two tiles. dw:
 * LIN_WROWS of its rows by LIN_COLS columns, each summed over all N rows of dy and x in one call.
 * The tiles go to the threads as they come free (schedule(dynamic)): which thread computes a
 * tile changes nothing in it. ConvNeXt-T's per-pixel linear layers at batch 32, 128x128 (N =
 * 32768 rows of 96 -> 384 to 512 rows of 3072 -> 768), 2 threads: the forward and dx products
 * 1.3-1.5x faster than 64-column blocks over all N rows, which packed all of x or dy again for
 * every block. */
#define LIN_ROWS 256
#define LIN_COLS 512
#define LIN_WROWS 64

static int ntiles(int n, int t) { return (n + t - 1) / t; }

/* Row-major C[M,Nc] = op(A) op(B) + beta C on the calling thread. */
static void gemm(char ta, char tb, int M, int Nc, int K, const float *A, int lda, const float *B,
                 int ldb, float beta, float *C, int ldc) {
    const dnnl_status_t st = dnnl_sgemm(ta, tb, M, Nc, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
    if (st != dnnl_success) fail_at(__FILE__, __LINE__, "dnnl_sgemm", "failed");
}

/* db[o] += the sum over n of dy[n,o]: per block of LIN_ROWS rows in double, the blocks added in
 * block order, so the same on any thread count; rows read in order (dy is [N, O]). */
static void bias_grad_blocks(const float *dy, float *db, int N, int O) {
    if (!db) return;   /* a layer without bias */
    const int nb = ntiles(N, LIN_ROWS);
    double *part = callocCheck((size_t)nb * O, sizeof(double));
    #pragma omp parallel for schedule(static) if (nb > 1)
    for (int b = 0; b < nb; b++) {
        double *restrict s = part + (size_t)b * O;
        const int n1 = (b + 1) * LIN_ROWS < N ? (b + 1) * LIN_ROWS : N;
        for (int n = b * LIN_ROWS; n < n1; n++) {
            const float *restrict d = dy + (size_t)n * O;
            #pragma omp simd
            for (int o = 0; o < O; o++) s[o] += d[o];
        }
    }
    for (int o = 0; o < O; o++) {
        double acc = 0.0;
        for (int b = 0; b < nb; b++) acc += part[(size_t)b * O + o];
        db[o] += (float)acc;
    }
    free(part);
}

static void linear_forward_f32(const float *x, const float *w, const float *b, float *y, int N, int I, int O) {
    /* y[n0.., o0..] = x[n0.., :] w[o0.., :]^T, then + b: the bias after the whole sum, as the
     * reference adds it, while the tile is in cache. */
    const int nc = ntiles(O, LIN_COLS), nt = ntiles(N, LIN_ROWS) * nc;
    #pragma omp parallel for schedule(dynamic, 1)
    for (int t = 0; t < nt; t++) {
        const int n0 = t / nc * LIN_ROWS, o0 = t % nc * LIN_COLS;
        const int nb = N - n0 < LIN_ROWS ? N - n0 : LIN_ROWS, ob = O - o0 < LIN_COLS ? O - o0 : LIN_COLS;
        float *yt = y + (size_t)n0 * O + o0;
        gemm('N', 'T', nb, ob, I, x + (size_t)n0 * I, I, w + (size_t)o0 * I, I, 0.0f, yt, O);
        for (int n = 0; b && n < nb; n++) {
            float *restrict yr = yt + (size_t)n * O;
            #pragma omp simd
            for (int o = 0; o < ob; o++) yr[o] += b[o0 + o];
        }
    }
}

static void linear_backward_f32(const float *x, const float *w, const float *dy, float *dx, float *dw,
                                float *db, int N, int I, int O) {
    bias_grad_blocks(dy, db, N, O);
    /* dw[o0.., i0..] += dy[:, o0..]^T x[:, i0..]: beta 1 adds to the gradient buffer in place. */
    const int wc = ntiles(I, LIN_COLS), wt = ntiles(O, LIN_WROWS) * wc;
    #pragma omp parallel for schedule(dynamic, 1)
    for (int t = 0; t < wt; t++) {
        const int o0 = t / wc * LIN_WROWS, i0 = t % wc * LIN_COLS;
        const int ob = O - o0 < LIN_WROWS ? O - o0 : LIN_WROWS, ib = I - i0 < LIN_COLS ? I - i0 : LIN_COLS;
        gemm('T', 'N', ob, ib, N, dy + o0, O, x + i0, I, 1.0f, dw + (size_t)o0 * I + i0, I);
    }
    if (!dx) return;
    /* dx[n0.., i0..] = dy[n0.., :] w[:, i0..] */
    const int xc = ntiles(I, LIN_COLS), xt = ntiles(N, LIN_ROWS) * xc;
    #pragma omp parallel for schedule(dynamic, 1)
    for (int t = 0; t < xt; t++) {
        const int n0 = t / xc * LIN_ROWS, i0 = t % xc * LIN_COLS;
        const int nb = N - n0 < LIN_ROWS ? N - n0 : LIN_ROWS, ib = I - i0 < LIN_COLS ? I - i0 : LIN_COLS;
        gemm('N', 'N', nb, ib, O, dy + (size_t)n0 * O, O, w + i0, I, 0.0f, dx + (size_t)n0 * I + i0, I);
    }
}

#else

static void linear_forward_f32(const float *x, const float *w, const float *b, float *y, int N, int I, int O) {
    linear_reference_forward(x, w, b, y, N, I, O);
}

static void linear_backward_f32(const float *x, const float *w, const float *dy, float *dx, float *dw,
                                float *db, int N, int I, int O) {
    linear_reference_backward(x, w, dy, dx, dw, db, N, I, O);
}

#endif
