/* SPDX-License-Identifier: BSD-3-Clause */
/* test_ops_joins.c - correctness of the CPU kernels of torchvision's other families' nodes
 * (channels_cpu.h, pool_cpu.h, layernorm_cpu.h), against references written here in double
 * from PyTorch's definitions, and the same bits on 1 and 2 threads. Every comparison reports
 * max|got - want| / max|want| and checks that a 1% error in the largest element would fail it.
 * The whole networks are compared with PyTorch in tests/test_zoo_*.sh; this finds a wrong kernel
 * where a family's comparison can only say that something differs. Exit status 0 when every
 * check passes. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "helpers/ops_testutil.h"
#include "ops/backend.h"
#include "ops/channels_cpu.h"
#include "ops/layernorm_cpu.h"
#include "ops/pool_cpu.h"

static int g_failed, g_checks;

static void check(const char *name, const float *got, const double *want, size_t n, double tol) {
    double *g = dalloc(n), *mut = dalloc(n);
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        g[i] = got[i];
        if (fabs(want[i]) > fabs(want[j])) j = i;
    }
    const double err = rel_err(g, want, n);
    memcpy(mut, g, n * sizeof(double));
    mut[j] = want[j] * 1.01 + (want[j] == 0.0 ? 1.0 : 0.0);
    const int ok = err <= tol && !isnan(err), sensitive = rel_err(mut, want, n) > tol;
    g_checks++;
    if (!ok || !sensitive) g_failed++;
    printf("%-4s %-58s max rel err %.2e (tol %.0e)%s\n", ok && sensitive ? "ok" : "FAIL", name, err, tol,
           sensitive ? "" : "  [a 1% error would pass]");
    free(g);
    free(mut);
}

static void check_true(const char *name, int cond) {
    g_checks++;
    if (!cond) g_failed++;
    printf("%-4s %s\n", cond ? "ok" : "FAIL", name);
}

/* ---- concat, split, shuffle, flatten: moves, compared exactly ---- */

static void test_moves(void) {
    const size_t M = 2 * 5 * 7;
    const int Ca = 5, Cb = 12, C = Ca + Cb;
    float *a = frand(M * Ca, 1.0), *b = frand(M * Cb, 1.0), *y = falloc(M * C), *back = falloc(M * Cb);
    channel_copy(a, Ca, 0, y, C, 0, Ca, M);
    channel_copy(b, Cb, 0, y, C, Ca, Cb, M);
    int same = 1;
    for (size_t m = 0; m < M; m++)
        for (int c = 0; c < C; c++)
            same &= y[m * C + c] == (c < Ca ? a[m * Ca + c] : b[m * Cb + c - Ca]);
    check_true("concat: torch.cat((a, b), 1) of channels-last maps, value for value", same);
    channel_copy(y, C, Ca, back, Cb, 0, Cb, M);
    check_true("split: the second part back, value for value", !memcmp(back, b, M * Cb * sizeof(float)));

    /* channel_shuffle(x, g): view(N, g, C/g, H, W).transpose(1, 2) */
    const int G = 3, Cs = 12;
    float *x = frand(M * Cs, 1.0), *s = falloc(M * Cs), *u = falloc(M * Cs);
    channel_shuffle(x, s, M, Cs, G);
    same = 1;
    for (size_t m = 0; m < M; m++)
        for (int i = 0; i < G; i++)
            for (int j = 0; j < Cs / G; j++) same &= s[m * Cs + j * G + i] == x[m * Cs + i * (Cs / G) + j];
    check_true("channel_shuffle of 3 groups: channel j*3+i is channel i*4+j", same);
    channel_shuffle(s, u, M, Cs, Cs / G);
    check_true("channel_shuffle of C/3 groups undoes it", !memcmp(u, x, M * Cs * sizeof(float)));

    /* flatten: per image, NHWC [P, C] to PyTorch's [C, P]; 40 x 37 crosses the 32-tiles */
    const int N = 2, P = 40, Cf = 37;
    float *f = frand((size_t)N * P * Cf, 1.0), *t = falloc((size_t)N * P * Cf), *tb = falloc((size_t)N * P * Cf);
    transpose(f, t, N, P, Cf);
    same = 1;
    for (int n = 0; n < N; n++)
        for (int p = 0; p < P; p++)
            for (int c = 0; c < Cf; c++)
                same &= t[(size_t)n * P * Cf + (size_t)c * P + p] == f[(size_t)n * P * Cf + (size_t)p * Cf + c];
    check_true("flatten: (C, H, W) order of each image", same);
    transpose(t, tb, N, Cf, P);
    check_true("flatten's backward undoes it", !memcmp(tb, f, (size_t)N * P * Cf * sizeof(float)));
    free(a); free(b); free(y); free(back); free(x); free(s); free(u); free(f); free(t); free(tb);
}

/* ---- pools ---- */

/* PyTorch's avg_pool2d (and its divisor rule) in double, and its adjoint. */
static void avgpool_ref(const float *x, double *y, const float *dy, double *dx, int N, int H, int W, int C, int Ho,
                        int Wo, int k, int s, int p, int count_pad) {
    memset(dx, 0, (size_t)N * H * W * C * sizeof(double));
    for (int n = 0; n < N; n++)
        for (int oh = 0; oh < Ho; oh++)
            for (int ow = 0; ow < Wo; ow++) {
                int h0 = oh * s - p, w0 = ow * s - p;
                int h1 = h0 + k < H + p ? h0 + k : H + p, w1 = w0 + k < W + p ? w0 + k : W + p;
                const int pool = (h1 - h0) * (w1 - w0);
                h0 = h0 > 0 ? h0 : 0; w0 = w0 > 0 ? w0 : 0;
                h1 = h1 < H ? h1 : H; w1 = w1 < W ? w1 : W;
                const int div = count_pad ? pool : (h1 - h0) * (w1 - w0);
                for (int c = 0; c < C; c++) {
                    double acc = 0.0;
                    const size_t o = (((size_t)n * Ho + oh) * Wo + ow) * C + c;
                    for (int i = h0; i < h1; i++)
                        for (int j = w0; j < w1; j++) {
                            acc += x[(((size_t)n * H + i) * W + j) * C + c];
                            dx[(((size_t)n * H + i) * W + j) * C + c] += (double)dy[o] / div;
                        }
                    y[o] = acc / div;
                }
            }
}

static void test_avgpool2d(int H, int k, int s, int p, int ceil_mode, int count_pad) {
    const int N = 2, W = H + 1, C = 19;
    const int Ho = pool_out_size(H, k, s, p, ceil_mode), Wo = pool_out_size(W, k, s, p, ceil_mode);
    const size_t nx = (size_t)N * H * W * C, ny = (size_t)N * Ho * Wo * C;
    float *x = frand(nx, 1.0), *dy = frand(ny, 1.0), *y = falloc(ny), *dx = falloc(nx), *dx1 = falloc(nx);
    double *wy = dalloc(ny), *wdx = dalloc(nx);
    avgpool2d_forward(x, y, N, H, W, C, Ho, Wo, k, s, p, count_pad);
    avgpool2d_backward(dy, dx, N, H, W, C, Ho, Wo, k, s, p, count_pad);
    avgpool_ref(x, wy, dy, wdx, N, H, W, C, Ho, Wo, k, s, p, count_pad);
    char name[128];
    snprintf(name, sizeof name, "avgpool %dx%d/%d pad %d%s%s on %dx%d: forward", k, k, s, p,
             ceil_mode ? " ceil" : "", count_pad ? "" : " excl. pad", H, W);
    check(name, y, wy, ny, 1e-6);
    snprintf(name, sizeof name, "avgpool %dx%d/%d pad %d%s%s on %dx%d: backward", k, k, s, p,
             ceil_mode ? " ceil" : "", count_pad ? "" : " excl. pad", H, W);
    check(name, dx, wdx, nx, 1e-6);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    avgpool2d_backward(dy, dx1, N, H, W, C, Ho, Wo, k, s, p, count_pad);
    omp_set_num_threads(threads);
    check_true("  the same backward on 1 thread, bit for bit", !memcmp(dx, dx1, nx * sizeof(float)));
    free(x); free(dy); free(y); free(dx); free(dx1); free(wy); free(wdx);
}

static void test_adaptive(int H, int W, int Ho, int Wo) {
    const int N = 2, C = 9;
    const size_t nx = (size_t)N * H * W * C, ny = (size_t)N * Ho * Wo * C;
    float *x = frand(nx, 1.0), *dy = frand(ny, 1.0), *y = falloc(ny), *dx = falloc(nx);
    double *wy = dalloc(ny), *wdx = dalloc(nx);
    for (int n = 0; n < N; n++)
        for (int oh = 0; oh < Ho; oh++)
            for (int ow = 0; ow < Wo; ow++) {
                /* PyTorch's start_index and end_index */
                const int h0 = (int)floor((double)oh * H / Ho), h1 = (int)ceil((double)(oh + 1) * H / Ho);
                const int w0 = (int)floor((double)ow * W / Wo), w1 = (int)ceil((double)(ow + 1) * W / Wo);
                const int div = (h1 - h0) * (w1 - w0);
                for (int c = 0; c < C; c++) {
                    const size_t o = (((size_t)n * Ho + oh) * Wo + ow) * C + c;
                    double acc = 0.0;
                    for (int i = h0; i < h1; i++)
                        for (int j = w0; j < w1; j++) {
                            acc += x[(((size_t)n * H + i) * W + j) * C + c];
                            wdx[(((size_t)n * H + i) * W + j) * C + c] += (double)dy[o] / div;
                        }
                    wy[o] = acc / div;
                }
            }
    adaptive_avgpool_forward(x, y, N, H, W, C, Ho, Wo);
    adaptive_avgpool_backward(dy, dx, N, H, W, C, Ho, Wo);
    char name[128];
    snprintf(name, sizeof name, "adaptive avgpool %dx%d -> %dx%d: forward", H, W, Ho, Wo);
    check(name, y, wy, ny, 1e-6);
    snprintf(name, sizeof name, "adaptive avgpool %dx%d -> %dx%d: backward", H, W, Ho, Wo);
    check(name, dx, wdx, nx, 1e-6);
    free(x); free(dy); free(y); free(dx); free(wy); free(wdx);
}

/* ---- layer norm and layer scale ---- */

static void test_layernorm(size_t M, int C) {
    const float eps = 1e-6f;
    float *x = frand(M * C, 2.0), *g = frand((size_t)C, 1.0), *b = frand((size_t)C, 1.0), *dy = frand(M * C, 1.0);
    for (size_t i = 0; i < M * C; i++) x[i] += 0.5f;   /* a mean away from 0 */
    float *y = falloc(M * C), *mean = falloc(M), *rstd = falloc(M), *dx = falloc(M * C);
    float *dg = falloc((size_t)C), *db = falloc((size_t)C);
    double *wy = dalloc(M * C), *wdx = dalloc(M * C), *wdg = dalloc((size_t)C), *wdb = dalloc((size_t)C);
    for (size_t m = 0; m < M; m++) {
        double mu = 0.0, var = 0.0;
        for (int c = 0; c < C; c++) mu += x[m * C + c];
        mu /= C;
        for (int c = 0; c < C; c++) var += (x[m * C + c] - mu) * (x[m * C + c] - mu);
        var /= C;
        const double r = 1.0 / sqrt(var + eps);
        double sg = 0.0, sgx = 0.0;
        for (int c = 0; c < C; c++) {
            const double xh = (x[m * C + c] - mu) * r, gg = (double)dy[m * C + c] * g[c];
            wy[m * C + c] = xh * g[c] + b[c];
            sg += gg;
            sgx += gg * xh;
            wdg[c] += (double)dy[m * C + c] * xh;
            wdb[c] += dy[m * C + c];
        }
        for (int c = 0; c < C; c++) {
            const double xh = (x[m * C + c] - mu) * r;
            wdx[m * C + c] = r * ((double)dy[m * C + c] * g[c] - sg / C - xh * sgx / C);
        }
    }
    layernorm_forward(x, y, mean, rstd, g, b, M, C, eps);
    layernorm_backward(x, dy, mean, rstd, g, dx, dg, db, M, C);
    char name[128];
    snprintf(name, sizeof name, "layernorm over %d channels, %zu pixels: forward", C, M);
    check(name, y, wy, M * C, 1e-5);
    snprintf(name, sizeof name, "layernorm over %d channels, %zu pixels: dx", C, M);
    check(name, dx, wdx, M * C, 1e-4);
    snprintf(name, sizeof name, "layernorm over %d channels, %zu pixels: dweight", C, M);
    check(name, dg, wdg, (size_t)C, 1e-5);
    snprintf(name, sizeof name, "layernorm over %d channels, %zu pixels: dbias", C, M);
    check(name, db, wdb, (size_t)C, 1e-5);
    /* accumulation, 1 thread against 2, dx over dy */
    float *dg1 = falloc((size_t)C), *db1 = falloc((size_t)C), *d1 = falloc(M * C);
    memcpy(d1, dy, M * C * sizeof(float));
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    layernorm_backward(x, d1, mean, rstd, g, d1, dg1, db1, M, C);
    omp_set_num_threads(threads);
    check_true("  the same backward on 1 thread with dx over dy, bit for bit",
               !memcmp(d1, dx, M * C * sizeof(float)) && !memcmp(dg1, dg, C * sizeof(float)) &&
               !memcmp(db1, db, C * sizeof(float)));
    layernorm_backward(x, dy, mean, rstd, g, dx, dg, db, M, C);
    for (int c = 0; c < C; c++) { wdg[c] *= 2; wdb[c] *= 2; }
    check("  two backwards add into dweight", dg, wdg, (size_t)C, 1e-5);
    free(x); free(g); free(b); free(dy); free(y); free(mean); free(rstd); free(dx); free(dg); free(db);
    free(wy); free(wdx); free(wdg); free(wdb); free(dg1); free(db1); free(d1);
}

static void test_channel_scale(size_t M, int C) {
    float *x = frand(M * C, 1.0), *g = frand((size_t)C, 1.0), *dy = frand(M * C, 1.0);
    float *y = falloc(M * C), *dx = falloc(M * C), *dg = falloc((size_t)C), *dg1 = falloc((size_t)C);
    double *wy = dalloc(M * C), *wdx = dalloc(M * C), *wdg = dalloc((size_t)C);
    for (size_t m = 0; m < M; m++)
        for (int c = 0; c < C; c++) {
            wy[m * C + c] = (double)x[m * C + c] * g[c];
            wdx[m * C + c] = (double)dy[m * C + c] * g[c];
            wdg[c] += (double)dy[m * C + c] * x[m * C + c];
        }
    channel_scale_forward(x, g, y, M, C);
    channel_scale_backward(x, g, dy, dx, dg, M, C);
    check("layer scale: forward", y, wy, M * C, 1e-7);
    check("layer scale: dx", dx, wdx, M * C, 1e-7);
    check("layer scale: dscale (summed over every pixel)", dg, wdg, (size_t)C, 1e-6);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    float *dx1 = falloc(M * C);
    channel_scale_backward(x, g, dy, dx1, dg1, M, C);
    omp_set_num_threads(threads);
    check_true("  the same backward on 1 thread, bit for bit", !memcmp(dg, dg1, C * sizeof(float)) &&
                                                               !memcmp(dx, dx1, M * C * sizeof(float)));
    free(x); free(g); free(dy); free(y); free(dx); free(dg); free(dg1); free(dx1); free(wy); free(wdx); free(wdg);
}

int main(void) {
    omp_set_num_threads(2);
    test_moves();
    test_avgpool2d(8, 2, 2, 0, 0, 1);    /* DenseNet's transition */
    test_avgpool2d(9, 3, 1, 1, 0, 1);    /* Inception's F.avg_pool2d(x, 3, 1, 1) */
    test_avgpool2d(9, 3, 1, 1, 0, 0);    /* count_include_pad=False */
    test_avgpool2d(17, 5, 3, 0, 0, 1);   /* Inception's auxiliary head */
    test_avgpool2d(10, 3, 2, 1, 1, 1);   /* ceil_mode: a last window past the end */
    test_avgpool2d(10, 3, 2, 1, 1, 0);
    test_adaptive(7, 7, 7, 7);           /* VGG at 224: the identity */
    test_adaptive(4, 4, 7, 7);           /* smaller images: pixels repeated */
    test_adaptive(13, 11, 6, 6);         /* AlexNet: overlapping windows */
    test_adaptive(14, 14, 4, 4);         /* GoogLeNet's auxiliary heads */
    test_layernorm(2 * 5 * 7, 96);
    test_layernorm(600, 40);             /* more than two blocks of 256 pixels */
    test_channel_scale(600, 24);
    printf("%d of %d checks failed\n", g_failed, g_checks);
    return g_failed ? 1 : 0;
}
