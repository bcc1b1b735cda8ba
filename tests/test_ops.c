/* SPDX-License-Identifier: BSD-3-Clause */
/* test_ops.c - correctness of the CPU kernels (conv_cpu.h, linear_cpu.h, ops_cpu.h, act_cpu.h, scale_cpu.h); `--bench` times the conv shapes of
 * MiniResNet instead, `--bench-bn-act` batch norm and hardswish fused and not in a MobileNet-like chain.
 *
 * Gradients are checked against finite differences of the loss L = sum(y * R) for a random R:
 *  - for the ops that are linear in the perturbed input (conv, avgpool, linear) the difference
 *    is taken through the float kernels themselves with a large step: L is exactly linear, so
 *    the only error is the rounding of the few outputs the step touches;
 *  - for batch norm and softmax cross-entropy through double-precision reference versions
 *    written here, with a small step (small enough that no ReLU input crosses zero).
 * Every comparison reports max|got - want| / max|want| and, to show that the tolerance can
 * fail, also checks that scaling the largest expected element of `got` by 1.01 exceeds it.
 * Exit status 0 when everything passes. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "ops/act_cpu.h"
#include "ops/conv_cpu.h"
#include "ops/linear_cpu.h"
#include "ops/ops_cpu.h"
#include "ops/scale_cpu.h"
#include "helpers/ops_testutil.h"
#include "base/util.h"

static int g_failed, g_checks;

/* ---- helpers ---- */

static double *to_d(const float *f, size_t n) {
    double *d = dalloc(n);
    for (size_t i = 0; i < n; i++) d[i] = f[i];
    return d;
}

static void check(const char *name, const double *got, const double *want, size_t n, double tol) {
    const double err = rel_err(got, want, n);
    size_t j = 0;
    for (size_t i = 1; i < n; i++) if (fabs(want[i]) > fabs(want[j])) j = i;
    double *mut = dalloc(n);
    memcpy(mut, got, n * sizeof(double));
    mut[j] *= 1.01;
    const double err_mut = rel_err(mut, want, n);
    free(mut);
    const int ok = err <= tol && !isnan(err), sensitive = err_mut > tol;
    g_checks++;
    if (!ok || !sensitive) g_failed++;
    printf("%-4s %-48s max rel err %.2e (tol %.0e)%s\n", ok && sensitive ? "ok" : "FAIL", name, err,
           tol, sensitive ? "" : "  [a 1% error would pass: tolerance too loose]");
}
static void check_f(const char *name, const float *got, const double *want, size_t n, double tol) {
    double *g = to_d(got, n);
    check(name, g, want, n, tol);
    free(g);
}
static void check_ff(const char *name, const float *got, const float *want, size_t n, double tol) {
    double *w = to_d(want, n);
    check_f(name, got, w, n, tol);
    free(w);
}
static void check_true(const char *name, int cond) {
    g_checks++;
    if (!cond) g_failed++;
    printf("%-4s %s\n", cond ? "ok" : "FAIL", name);
}

static double dot_fd(const float *y, const float *R, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)y[i] * R[i];
    return s;
}

/* ---- convolution ---- */

typedef struct { Conv2d *c; int N, H, W, ref; const float *x, *w; float *y; const float *R; size_t ny; } ConvLoss;
static double conv_loss(ConvLoss *L) {
    if (L->ref) conv2d_reference_forward(L->c, L->N, L->H, L->W, L->x, L->w, L->y);
    else conv2d_forward(L->c, L->N, L->H, L->W, L->x, L->w, L->y);
    return dot_fd(L->y, L->R, L->ny);
}

/* Central difference of L wrt v[i] with step h, in the float values actually stored. */
static double fd_at(float *v, size_t i, double h, double (*loss)(void *), void *ctx) {
    const float v0 = v[i], vp = (float)(v0 + h), vm = (float)(v0 - h);
    v[i] = vp; const double lp = loss(ctx);
    v[i] = vm; const double lm = loss(ctx);
    v[i] = v0;
    return (lp - lm) / ((double)vp - (double)vm);
}
static double conv_loss_v(void *p) { return conv_loss(p); }

#define NSAMPLE 24

/* dx and dw of one conv (oneDNN or reference) against finite differences at sampled points. */
static void test_conv_fd(int ref, int Ci, int Co, int k, int s, int p, int N, int H) {
    Conv2d c;
    conv2d_init(&c, &(ConvShape){ .C_in = Ci, .C_out = Co, .k = k, .stride = s, .pad = p });
    const int Ho = conv_out_size(&c.shape, H);
    const size_t nx = (size_t)N * H * H * Ci, nw = (size_t)Co * Ci * k * k, ny = (size_t)N * Ho * Ho * Co;
    float *x = frand(nx, 1.0), *w = frand(nw, 1.0), *R = frand(ny, 1.0), *y = falloc(ny);
    float *dx = falloc(nx), *dw = falloc(nw);
    if (ref) conv2d_reference_backward(&c, N, H, H, x, w, R, dx, dw);
    else conv2d_backward(&c, N, H, H, x, w, R, dx, dw);
    ConvLoss L = { &c, N, H, H, ref, x, w, y, R, ny };
    double got[NSAMPLE], want[NSAMPLE];
    char name[128];
    for (int t = 0; t < NSAMPLE; t++) {
        const size_t i = (size_t)((urand() + 1.0) * 0.5 * nx) % nx;
        want[t] = fd_at(x, i, 0.5, conv_loss_v, &L);
        got[t] = dx[i];
    }
    snprintf(name, sizeof name, "%s conv %dx%d s%d %d->%d N%d %dx%d: dx vs fd", ref ? "ref" : "dnnl",
             k, k, s, Ci, Co, N, H, H);
    check(name, got, want, NSAMPLE, 1e-4);
    for (int t = 0; t < NSAMPLE; t++) {
        const size_t i = (size_t)((urand() + 1.0) * 0.5 * nw) % nw;
        /* the weights are cached by the backend: tell it they changed around each step */
        const float w0 = w[i], wp = (float)(w0 + 0.5), wm = (float)(w0 - 0.5);
        w[i] = wp; conv2d_weights_changed(&c); const double lp = conv_loss(&L);
        w[i] = wm; conv2d_weights_changed(&c); const double lm = conv_loss(&L);
        w[i] = w0; conv2d_weights_changed(&c);
        want[t] = (lp - lm) / ((double)wp - (double)wm);
        got[t] = dw[i];
    }
    snprintf(name, sizeof name, "%s conv %dx%d s%d %d->%d N%d %dx%d: dw vs fd", ref ? "ref" : "dnnl",
             k, k, s, Ci, Co, N, H, H);
    check(name, got, want, NSAMPLE, 1e-4);
    conv2d_free(&c);
    free(x); free(w); free(R); free(y); free(dx); free(dw);
}

/* Whole tensors: backend vs reference for forward, dx, dw; then += semantics, determinism and
 * the weight cache. */
static void test_conv_vs_ref(int Ci, int Co, int k, int s, int p, int N, int H, int W) {
    Conv2d c;
    conv2d_init(&c, &(ConvShape){ .C_in = Ci, .C_out = Co, .k = k, .stride = s, .pad = p });
    const int Ho = conv_out_size(&c.shape, H), Wo = conv_out_size(&c.shape, W);
    const size_t nx = (size_t)N * H * W * Ci, nw = (size_t)Co * Ci * k * k, ny = (size_t)N * Ho * Wo * Co;
    float *x = frand(nx, 1.0), *w = frand(nw, 0.1), *dy = frand(ny, 1.0);
    float *y = falloc(ny), *y_ref = falloc(ny), *dx = falloc(nx), *dx_ref = falloc(nx);
    float *dw = falloc(nw), *dw_ref = falloc(nw), *dw2 = falloc(nw);
    char name[160], tag[96];
    snprintf(tag, sizeof tag, "%dx%d s%d %d->%d N%d %dx%d [%s]", k, k, s, Ci, Co, N, H, W,
             conv2d_impl_name(&c, N, H, W));

    conv2d_forward(&c, N, H, W, x, w, y);
    conv2d_reference_forward(&c, N, H, W, x, w, y_ref);
    snprintf(name, sizeof name, "conv fwd %s", tag);
    check_ff(name, y, y_ref, ny, 1e-4);

    conv2d_backward(&c, N, H, W, x, w, dy, dx, dw);
    conv2d_reference_backward(&c, N, H, W, x, w, dy, dx_ref, dw_ref);
    snprintf(name, sizeof name, "conv dx  %s", tag);
    check_ff(name, dx, dx_ref, nx, 1e-4);
    snprintf(name, sizeof name, "conv dw  %s", tag);
    check_ff(name, dw, dw_ref, nw, 1e-4);

    /* Accumulation: start from D0, two backward passes (one without dx) give D0 + 2 dw. */
    double *want = dalloc(nw);
    for (size_t i = 0; i < nw; i++) { dw2[i] = (float)urand(); want[i] = dw2[i] + 2.0 * dw_ref[i]; }
    conv2d_backward(&c, N, H, W, x, w, dy, dx, dw2);
    conv2d_backward(&c, N, H, W, x, w, dy, NULL, dw2);
    snprintf(name, sizeof name, "conv dw += twice %s", tag);
    check_f(name, dw2, want, nw, 1e-4);

    /* Determinism: the same call twice gives the same bits. */
    memset(dw2, 0, nw * sizeof(float));
    float *dx2 = falloc(nx), *y2 = falloc(ny);
    conv2d_backward(&c, N, H, W, x, w, dy, dx2, dw2);
    conv2d_forward(&c, N, H, W, x, w, y2);
    snprintf(name, sizeof name, "conv bitwise repeatable %s", tag);
    check_true(name, !memcmp(dw, dw2, nw * sizeof(float)) && !memcmp(dx, dx2, nx * sizeof(float)) &&
                     !memcmp(y, y2, ny * sizeof(float)));

    /* Weight cache: change the master in place, announce it, expect the new result. */
    for (size_t i = 0; i < nw; i++) w[i] = -0.5f * w[i] + 0.01f;
    conv2d_weights_changed(&c);
    conv2d_forward(&c, N, H, W, x, w, y);
    conv2d_backward(&c, N, H, W, x, w, dy, dx, dw2);
    conv2d_reference_forward(&c, N, H, W, x, w, y_ref);
    conv2d_reference_backward(&c, N, H, W, x, w, dy, dx_ref, dw_ref);
    snprintf(name, sizeof name, "conv fwd after weights_changed %s", tag);
    check_ff(name, y, y_ref, ny, 1e-4);
    snprintf(name, sizeof name, "conv dx after weights_changed %s", tag);
    check_ff(name, dx, dx_ref, nx, 1e-4);

    conv2d_free(&c);
    free(want); free(x); free(w); free(dy); free(y); free(y_ref); free(dx); free(dx_ref);
    free(dw); free(dw_ref); free(dw2); free(dx2); free(y2);
}

/* A rectangular kernel (Inception's 1x7 and 7x1, with their own paddings), through oneDNN against
 * the reference, which reads kh x kw taps with padding pad x padw. */
static void test_conv_rect(int Ci, int Co, int kh, int kw, int ph, int pw, int s, int N, int H, int W) {
    Conv2d c;
    conv2d_init(&c, &(ConvShape){ .C_in = Ci, .C_out = Co, .k = kh, .kw = kw, .stride = s, .pad = ph, .padw = pw });
    const int Ho = conv_out_size(&c.shape, H), Wo = conv_out_w(&c.shape, W);
    const size_t nx = (size_t)N * H * W * Ci, nw = (size_t)Co * Ci * kh * kw, ny = (size_t)N * Ho * Wo * Co;
    float *x = frand(nx, 1.0), *w = frand(nw, 0.1), *dy = frand(ny, 1.0);
    float *y = falloc(ny), *y_ref = falloc(ny), *dx = falloc(nx), *dx_ref = falloc(nx);
    float *dw = falloc(nw), *dw_ref = falloc(nw);
    char name[160];
    conv2d_forward(&c, N, H, W, x, w, y);
    conv2d_reference_forward(&c, N, H, W, x, w, y_ref);
    conv2d_backward(&c, N, H, W, x, w, dy, dx, dw);
    conv2d_reference_backward(&c, N, H, W, x, w, dy, dx_ref, dw_ref);
    snprintf(name, sizeof name, "conv %dx%d pad %dx%d s%d %d->%d on %dx%d: fwd", kh, kw, ph, pw, s, Ci, Co, H, W);
    check_ff(name, y, y_ref, ny, 1e-4);
    snprintf(name, sizeof name, "conv %dx%d pad %dx%d s%d %d->%d on %dx%d: dx", kh, kw, ph, pw, s, Ci, Co, H, W);
    check_ff(name, dx, dx_ref, nx, 1e-4);
    snprintf(name, sizeof name, "conv %dx%d pad %dx%d s%d %d->%d on %dx%d: dw", kh, kw, ph, pw, s, Ci, Co, H, W);
    check_ff(name, dw, dw_ref, nw, 1e-4);
    /* independent of both: a 1xk kernel (padding 0 x k/2) is the kxk kernel whose rows but the
     * middle one are zero, padded k/2 on both axes, and the same for kx1; the square path is
     * the long-tested one */
    if (s == 1 && (kh == 1 || kw == 1) && ph == kh / 2 && pw == kw / 2) {
        const int k = kh > kw ? kh : kw;
        Conv2d sq;
        conv2d_init(&sq, &(ConvShape){ .C_in = Ci, .C_out = Co, .k = k, .stride = 1, .pad = k / 2 });
        float *ws = falloc((size_t)Co * Ci * k * k), *ys = falloc(ny);
        for (int o = 0; o < Co; o++)
            for (int i = 0; i < Ci; i++)
                for (int t = 0; t < k; t++) {
                    const int r = kh == 1 ? k / 2 : t, q = kh == 1 ? t : k / 2;
                    ws[(((size_t)o * Ci + i) * k + r) * k + q] = w[((size_t)o * Ci + i) * k + t];
                }
        conv2d_forward(&sq, N, H, W, x, ws, ys);
        snprintf(name, sizeof name, "conv %dx%d as the %dx%d of zero rows: fwd", kh, kw, k, k);
        check_ff(name, y, ys, ny, 1e-5);
        conv2d_free(&sq);
        free(ws); free(ys);
    }
    conv2d_free(&c);
    free(x); free(w); free(dy); free(y); free(y_ref); free(dx); free(dx_ref); free(dw); free(dw_ref);
}

/* Every kind of layer of the model at channel counts below, at and just above the vector
 * widths (8 floats for AVX2, 16 for AVX-512), where oneDNN pads channels inside its blocked
 * layouts. oneDNN 2.6's jit_1x1:avx2 backward-weights kernel wrote past its scratchpad for a
 * strided 1x1 conv with fewer than 8 input channels, and that corrupted the heap of a width-4
 * training on AVX2 machines; run under valgrind (tests/test_valgrind.sh) and on every ISA path
 * (tests/test_isa.sh), this sweep catches such a fault wherever it hides. */
static void test_conv_small_channels(int full) {
    static const int all[] = { 1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17 }, few[] = { 1, 3, 4, 7, 8, 9, 17 };
    static const int kinds[][3] = { { 3, 1, 1 }, { 3, 2, 1 }, { 1, 2, 0 }, { 1, 1, 0 } };  /* k, stride, pad */
    const int *cs = full ? all : few;
    const int nc = full ? (int)(sizeof all / sizeof *all) : (int)(sizeof few / sizeof *few);
    /* Whether a fault shows depends on the spatial size too (the 1x1 one above wrote past its
     * buffer at 8x8 and 32x32, not at 7x7 or 16x16), so the full sweep runs two. */
    static const int sizes[][2] = { { 8, 8 }, { 7, 6 } };
    for (int sz = 0; sz < (full ? 2 : 1); sz++)
        for (int kd = 0; kd < 4; kd++)
            for (int i = 0; i < nc; i++)
                for (int o = 0; o < nc; o++)
                    test_conv_vs_ref(cs[i], cs[o], kinds[kd][0], kinds[kd][1], kinds[kd][2], 2,
                                     sizes[sz][0], sizes[sz][1]);
}

/* One layer used at many batch sizes (training, evaluation, short last batches), twice round,
 * so that cached primitives and weight copies are reused and recycled. */
static void test_conv_many_batches(void) {
    const int Ci = 32, Co = 32, H = 8, maxN = 7;
    Conv2d c;
    conv2d_init(&c, &(ConvShape){ .C_in = Ci, .C_out = Co, .k = 3, .stride = 1, .pad = 1 });
    const size_t nx = (size_t)maxN * H * H * Ci, nw = (size_t)Co * Ci * 9;
    float *x = frand(nx, 1.0), *w = frand(nw, 0.1), *dy = frand(nx, 1.0);
    float *y = falloc(nx), *y_ref = falloc(nx), *dx = falloc(nx), *dx_ref = falloc(nx);
    float *dw = falloc(nw), *dw_ref = falloc(nw);
    double worst = 0.0;
    for (int round = 0; round < 2; round++)
        for (int N = 1; N <= maxN; N++) {
            const size_t n = (size_t)N * H * H * Ci;
            for (size_t i = 0; i < nw; i++) w[i] += 0.001f;   /* an optimizer step */
            conv2d_weights_changed(&c);
            memset(dw, 0, nw * sizeof(float));
            memset(dw_ref, 0, nw * sizeof(float));
            conv2d_forward(&c, N, H, H, x, w, y);
            conv2d_backward(&c, N, H, H, x, w, dy, dx, dw);
            conv2d_reference_forward(&c, N, H, H, x, w, y_ref);
            conv2d_reference_backward(&c, N, H, H, x, w, dy, dx_ref, dw_ref);
            double *a = to_d(y_ref, n), *b = to_d(dx_ref, n), *d = to_d(dw_ref, nw);
            double *ga = to_d(y, n), *gb = to_d(dx, n), *gd = to_d(dw, nw);
            worst = fmax(worst, fmax(rel_err(ga, a, n), fmax(rel_err(gb, b, n), rel_err(gd, d, nw))));
            free(a); free(b); free(d); free(ga); free(gb); free(gd);
        }
    char name[128];
    snprintf(name, sizeof name, "conv N=1..%d twice, weights changing: worst rel err %.1e", maxN, worst);
    check_true(name, worst <= 1e-4);
    conv2d_free(&c);
    free(x); free(w); free(dy); free(y); free(y_ref); free(dx); free(dx_ref); free(dw); free(dw_ref);
}

/* ---- batch norm: double reference of the whole training forward ---- */

typedef struct {
    size_t M; int C, relu;
    float *x, *gamma, *beta, *res;   /* perturbed by the finite differences */
    const float *R;
} BnCase;

static double bn_ref_loss(void *p) {
    BnCase *b = p;
    const size_t M = b->M;
    const int C = b->C;
    double L = 0.0;
    for (int c = 0; c < C; c++) {
        double s = 0.0, q = 0.0;
        for (size_t r = 0; r < M; r++) s += b->x[r * C + c];
        const double mean = s / M;
        for (size_t r = 0; r < M; r++) { const double d = b->x[r * C + c] - mean; q += d * d; }
        const double invstd = 1.0 / sqrt(q / M + 1e-5);
        for (size_t r = 0; r < M; r++) {
            double y = b->gamma[c] * (b->x[r * C + c] - mean) * invstd + b->beta[c];
            if (b->res) y += b->res[r * C + c];
            if (b->relu && y < 0.0) y = 0.0;
            L += y * b->R[r * C + c];
        }
    }
    return L;
}

/* Forward + backward through the four phases, `ranks` slices of rows standing for the ranks
 * of a synchronised batch norm (sums added between phases as the all-reduce would). */
static void bn_run(BnCase *b, int ranks, float *y, float *dx, float *g, float *dgamma, float *dbeta) {
    const size_t M = b->M;
    const int C = b->C;
    double *sum = dalloc(C), *sq = dalloc(C), *ls = dalloc(C), *lq = dalloc(C);
    double *sg = dalloc((size_t)ranks * C), *sx = dalloc((size_t)ranks * C), *gsg = dalloc(C), *gsx = dalloc(C);
    float *mean = falloc(C), *invstd = falloc(C);
    for (int k = 0; k < ranks; k++) {
        const size_t r0 = M * k / ranks, r1 = M * (k + 1) / ranks;
        bn_stats(b->x + r0 * C, r1 - r0, C, ls, lq);
        for (int c = 0; c < C; c++) { sum[c] += ls[c]; sq[c] += lq[c]; }
    }
    bn_finalize_stats(sum, sq, (double)M, C, 1e-5f, 0.1f, mean, invstd, NULL, NULL);
    for (int k = 0; k < ranks; k++) {
        const size_t r0 = M * k / ranks, r1 = M * (k + 1) / ranks;
        bn_apply(b->x + r0 * C, y + r0 * C, r1 - r0, C, mean, invstd, b->gamma, b->beta,
                 b->res ? b->res + r0 * C : NULL, b->relu);
        bn_backward_reduce(b->x + r0 * C, y + r0 * C, b->R + r0 * C, g + r0 * C, r1 - r0, C, mean,
                           invstd, b->relu, sg + (size_t)k * C, sx + (size_t)k * C);
        for (int c = 0; c < C; c++) { gsg[c] += sg[(size_t)k * C + c]; gsx[c] += sx[(size_t)k * C + c]; }
    }
    for (int k = 0; k < ranks; k++) {
        const size_t r0 = M * k / ranks, r1 = M * (k + 1) / ranks;
        bn_backward_apply(b->x + r0 * C, g + r0 * C, dx + r0 * C, r1 - r0, C, mean, invstd, b->gamma,
                          sg + (size_t)k * C, sx + (size_t)k * C, gsg, gsx, (double)M, dgamma, dbeta);
    }
    free(sum); free(sq); free(ls); free(lq); free(sg); free(sx); free(gsg); free(gsx);
    free(mean); free(invstd);
}

static void test_bn(int residual, int relu) {
    const size_t M = 3 * 5 * 7;
    const int C = 24;
    BnCase b = { M, C, relu, frand(M * C, 2.0), frand(C, 1.0), frand(C, 0.5),
                 residual ? frand(M * C, 1.0) : NULL, frand(M * C, 1.0) };
    for (size_t i = 0; i < M * C; i++) b.x[i] += 0.3f;   /* non-zero means */
    float *y = falloc(M * C), *dx = falloc(M * C), *g = falloc(M * C);
    float *dgamma = falloc(C), *dbeta = falloc(C);
    bn_run(&b, 1, y, dx, g, dgamma, dbeta);
    char name[128], tag[48];
    snprintf(tag, sizeof tag, "M%zu C%d%s%s", M, C, residual ? " +res" : "", relu ? " relu" : "");

    /* forward vs the double reference, recomputed element by element */
    double *yref = dalloc(M * C);
    for (int c = 0; c < C; c++) {
        double s = 0.0, q = 0.0;
        for (size_t r = 0; r < M; r++) s += b.x[r * C + c];
        const double mean = s / M;
        for (size_t r = 0; r < M; r++) { const double d = b.x[r * C + c] - mean; q += d * d; }
        for (size_t r = 0; r < M; r++) {
            double v = b.gamma[c] * (b.x[r * C + c] - mean) / sqrt(q / M + 1e-5) + b.beta[c];
            if (b.res) v += b.res[r * C + c];
            yref[r * C + c] = relu && v < 0.0 ? 0.0 : v;
        }
    }
    snprintf(name, sizeof name, "bn forward %s", tag);
    check_f(name, y, yref, M * C, 1e-5);

    double got[NSAMPLE], want[NSAMPLE];
    for (int t = 0; t < NSAMPLE; t++) {
        const size_t i = (size_t)((urand() + 1.0) * 0.5 * M * C) % (M * C);
        want[t] = fd_at(b.x, i, 1e-5, bn_ref_loss, &b);
        got[t] = dx[i];
    }
    snprintf(name, sizeof name, "bn dx vs fd %s", tag);
    check(name, got, want, NSAMPLE, 1e-4);
    if (residual) {
        /* the shortcut's gradient is g, the ReLU-masked dy */
        for (int t = 0; t < NSAMPLE; t++) {
            const size_t i = (size_t)((urand() + 1.0) * 0.5 * M * C) % (M * C);
            want[t] = fd_at(b.res, i, 1e-5, bn_ref_loss, &b);
            got[t] = g[i];
        }
        snprintf(name, sizeof name, "bn d(residual)=g vs fd %s", tag);
        check(name, got, want, NSAMPLE, 1e-4);
    }
    double *wg = dalloc(C), *wb = dalloc(C);
    for (int c = 0; c < C; c++) {
        wg[c] = fd_at(b.gamma, c, 1e-5, bn_ref_loss, &b);
        wb[c] = fd_at(b.beta, c, 1e-5, bn_ref_loss, &b);
    }
    snprintf(name, sizeof name, "bn dgamma vs fd %s", tag);
    check_f(name, dgamma, wg, C, 1e-4);
    snprintf(name, sizeof name, "bn dbeta vs fd %s", tag);
    check_f(name, dbeta, wb, C, 1e-4);

    /* synchronised over 3 "ranks" == one process over all rows; dgamma/dbeta accumulate */
    float *y3 = falloc(M * C), *dx3 = falloc(M * C), *g3 = falloc(M * C);
    float *dgamma3 = falloc(C), *dbeta3 = falloc(C);
    double *wg2 = dalloc(C), *wb2 = dalloc(C);
    for (int c = 0; c < C; c++) {
        dgamma3[c] = 1.0f; dbeta3[c] = -2.0f;
        wg2[c] = 1.0 + dgamma[c]; wb2[c] = -2.0 + dbeta[c];
    }
    bn_run(&b, 3, y3, dx3, g3, dgamma3, dbeta3);
    snprintf(name, sizeof name, "bn 3-rank sync dx == 1-rank %s", tag);
    check_ff(name, dx3, dx, M * C, 1e-5);
    snprintf(name, sizeof name, "bn 3-rank dgamma += %s", tag);
    check_f(name, dgamma3, wg2, C, 1e-5);
    snprintf(name, sizeof name, "bn 3-rank dbeta += %s", tag);
    check_f(name, dbeta3, wb2, C, 1e-5);

    free(b.x); free(b.gamma); free(b.beta); free(b.res); free((void *)b.R);
    free(y); free(dx); free(g); free(dgamma); free(dbeta); free(yref); free(wg); free(wb);
    free(y3); free(dx3); free(g3); free(dgamma3); free(dbeta3); free(wg2); free(wb2);
}

static void test_bn_running_stats(void) {
    /* channel 0: 1,2,3,4 -> mean 2.5, biased var 1.25, unbiased 5/3; channel 1: constant 2 */
    const float x[8] = { 1, 2, 2, 2, 3, 2, 4, 2 };
    double sum[2], sq[2];
    float mean[2], invstd[2], rm[2] = { 0.0f, 1.0f }, rv[2] = { 1.0f, 0.5f };
    bn_stats(x, 4, 2, sum, sq);
    bn_finalize_stats(sum, sq, 4.0, 2, 1e-5f, 0.1f, mean, invstd, rm, rv);
    const double want[8] = { 2.5, 2.0, 1.0 / sqrt(1.25 + 1e-5), 1.0 / sqrt(1e-5),
                             0.9 * 0.0 + 0.1 * 2.5, 0.9 * 1.0 + 0.1 * 2.0,
                             0.9 * 1.0 + 0.1 * (5.0 / 3.0), 0.9 * 0.5 + 0.1 * 0.0 };
    const float got[8] = { mean[0], mean[1], invstd[0], invstd[1], rm[0], rm[1], rv[0], rv[1] };
    check_f("bn running stats vs hand computation", got, want, 8, 1e-6);
}

/* Thread count must not change any bit of the reductions. */
static void test_bn_threads(void) {
    const size_t M = 64 * 16 * 16;
    const int C = 128;
    float *x = frand(M * C, 1.0), *dy = frand(M * C, 1.0), *g = falloc(M * C);
    float mean[128], invstd[128];
    double s1[128], q1[128], s2[128], q2[128], a1[128], b1[128], a2[128], b2[128];
    for (int c = 0; c < C; c++) { mean[c] = 0.01f * c; invstd[c] = 1.0f + 0.01f * c; }
    omp_set_num_threads(1);
    bn_stats(x, M, C, s1, q1);
    bn_backward_reduce(x, x, dy, g, M, C, mean, invstd, 1, a1, b1);
    omp_set_num_threads(2);
    bn_stats(x, M, C, s2, q2);
    bn_backward_reduce(x, x, dy, g, M, C, mean, invstd, 1, a2, b2);
    check_true("bn reductions bitwise equal on 1 and 2 threads",
               !memcmp(s1, s2, sizeof s1) && !memcmp(q1, q2, sizeof q1) && !memcmp(a1, a2, sizeof a1) &&
               !memcmp(b1, b2, sizeof b1));
    free(x); free(dy); free(g);
}

/* ---- head ---- */

typedef struct { int N, HW, C; float *x, *y; const float *R; } PoolCase;
static double pool_loss(void *p) {
    PoolCase *q = p;
    avgpool_forward(q->x, q->y, q->N, q->HW, q->C);
    return dot_fd(q->y, q->R, (size_t)q->N * q->C);
}

static void test_avgpool(void) {
    const int N = 3, HW = 16, C = 20;
    PoolCase q = { N, HW, C, frand((size_t)N * HW * C, 1.0), falloc((size_t)N * C), frand((size_t)N * C, 1.0) };
    double *want = dalloc((size_t)N * C);
    avgpool_forward(q.x, q.y, N, HW, C);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            for (int p = 0; p < HW; p++) want[n * C + c] += q.x[((size_t)n * HW + p) * C + c];
            want[n * C + c] /= HW;
        }
    check_f("avgpool forward", q.y, want, (size_t)N * C, 1e-6);
    float *dx = falloc((size_t)N * HW * C);
    avgpool_backward(q.R, dx, N, HW, C);
    double got[NSAMPLE], fd[NSAMPLE];
    for (int t = 0; t < NSAMPLE; t++) {
        const size_t i = (size_t)((urand() + 1.0) * 0.5 * N * HW * C) % ((size_t)N * HW * C);
        fd[t] = fd_at(q.x, i, 0.5, pool_loss, &q);
        got[t] = dx[i];
    }
    check("avgpool dx vs fd", got, fd, NSAMPLE, 1e-4);
    free(q.x); free(q.y); free((void *)q.R); free(want); free(dx);
}

/* Max pooling against a scan written as PyTorch's CPU kernel is (max from -inf, a later pixel
 * taken when strictly larger or NaN), on values drawn from {0, 1, 2} so that most windows hold
 * ties, with a few NaNs; then PyTorch's own answer on two 3x3 images at 3x3/2/1, taken from
 * torch.nn.functional.max_pool2d(..., return_indices=True): all ones -> indices {0, 1, 3, 4};
 * NaNs at 1 and 3 -> {3, 1, 3, 4}. */
static void maxpool_ref(const float *x, float *y, int32_t *arg, int N, int H, int W, int C, int k, int s, int p) {
    const int Ho = window_out_size(H, k, s, p), Wo = window_out_size(W, k, s, p);
    for (int n = 0; n < N; n++)
        for (int oh = 0; oh < Ho; oh++)
            for (int ow = 0; ow < Wo; ow++)
                for (int c = 0; c < C; c++) {
                    int hs = oh * s - p, ws = ow * s - p;
                    const int he = hs + k < H ? hs + k : H, we = ws + k < W ? ws + k : W;
                    hs = hs < 0 ? 0 : hs;
                    ws = ws < 0 ? 0 : ws;
                    float best = -INFINITY;
                    int32_t at = hs * W + ws;
                    for (int h = hs; h < he; h++)
                        for (int w = ws; w < we; w++) {
                            const float v = x[(((size_t)n * H + h) * W + w) * C + c];
                            if (v > best || isnan(v)) { best = v; at = h * W + w; }
                        }
                    const size_t o = (((size_t)n * Ho + oh) * Wo + ow) * C + c;
                    y[o] = best;
                    arg[o] = at;
                }
}

static void test_maxpool_case(int N, int H, int W, int C, int k, int s, int p) {
    const int Ho = window_out_size(H, k, s, p), Wo = window_out_size(W, k, s, p);
    const size_t nx = (size_t)N * H * W * C, ny = (size_t)N * Ho * Wo * C;
    float *x = falloc(nx), *y = falloc(ny), *yr = falloc(ny), *dy = frand(ny, 1.0), *dx = falloc(nx);
    int32_t *a = calloc(ny, sizeof *a), *ar = calloc(ny, sizeof *ar);
    for (size_t i = 0; i < nx; i++) x[i] = (float)((int)((urand() + 1.0) * 1.5) % 3);
    for (size_t i = 0; i < nx; i += 37) x[i] = NAN;
    maxpool_forward(x, y, a, N, H, W, C, k, s, p, 0);
    maxpool_ref(x, yr, ar, N, H, W, C, k, s, p);
    int bad = 0;
    for (size_t i = 0; i < ny; i++)
        bad += a[i] != ar[i] || (memcmp(&y[i], &yr[i], sizeof(float)) != 0 && !(isnan(y[i]) && isnan(yr[i])));
    g_checks++;
    if (bad) { g_failed++; printf("FAIL maxpool %dx%d/%d pad %d on %dx%d: %d outputs or indices differ\n", k, k, s, p, H, W, bad); }
    else printf("ok   maxpool %dx%d/%d pad %d on %dx%d: %zu outputs and indices equal\n", k, k, s, p, H, W, ny);
    maxpool_backward(dy, a, dx, N, H, W, C, k, s, p, 0);
    double *want = dalloc(nx);
    for (int n = 0; n < N; n++)
        for (size_t o = 0; o < (size_t)Ho * Wo; o++)
            for (int c = 0; c < C; c++) {
                const size_t i = ((size_t)n * Ho * Wo + o) * C + c;
                want[((size_t)n * H * W + (size_t)ar[i]) * C + c] += dy[i];
            }
    check_f("maxpool dx", dx, want, nx, 1e-6);
    free(x); free(y); free(yr); free(dy); free(dx); free(a); free(ar); free(want);
}

static void test_maxpool(void) {
    test_maxpool_case(3, 16, 16, 8, 3, 2, 1);    /* torchvision's ResNet's pool */
    test_maxpool_case(2, 7, 9, 5, 3, 2, 1);      /* odd sizes: a window past the border */
    test_maxpool_case(2, 8, 8, 4, 2, 2, 0);
    const float ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, nans[9] = {1, NAN, 1, NAN, 1, 1, 1, 1, 1};
    const int32_t want_ones[4] = {0, 1, 3, 4}, want_nans[4] = {3, 1, 3, 4};
    float y[4];
    int32_t a[4], b[4];
    maxpool_forward(ones, y, a, 1, 3, 3, 1, 3, 2, 1, 0);
    maxpool_forward(nans, y, b, 1, 3, 3, 1, 3, 2, 1, 0);
    g_checks++;
    if (memcmp(a, want_ones, sizeof a) || memcmp(b, want_nans, sizeof b)) {
        g_failed++;
        printf("FAIL maxpool ties: indices %d %d %d %d and %d %d %d %d, PyTorch's 0 1 3 4 and 3 1 3 4\n", a[0], a[1], a[2],
               a[3], b[0], b[1], b[2], b[3]);
    } else {
        printf("ok   maxpool ties and NaNs: PyTorch's indices\n");
    }
}

typedef struct { int N, I, O; float *x, *w, *b, *y; const float *R; } LinCase;
static double lin_loss(void *p) {
    LinCase *l = p;
    linear_forward(l->x, l->w, l->b, l->y, l->N, l->I, l->O);
    return dot_fd(l->y, l->R, (size_t)l->N * l->O);
}

static void test_linear(void) {
    const int N = 5, I = 37, O = 10;
    LinCase l = { N, I, O, frand((size_t)N * I, 1.0), frand((size_t)O * I, 1.0), frand(O, 1.0),
                  falloc((size_t)N * O), frand((size_t)N * O, 1.0) };
    double *want = dalloc((size_t)N * O);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++) {
            want[n * O + o] = l.b[o];
            for (int i = 0; i < I; i++) want[n * O + o] += (double)l.x[n * I + i] * l.w[o * I + i];
        }
    linear_forward(l.x, l.w, l.b, l.y, N, I, O);
    check_f("linear forward", l.y, want, (size_t)N * O, 1e-6);

    float *dx = falloc((size_t)N * I), *dw = falloc((size_t)O * I), *db = falloc(O);
    float *dw0 = frand((size_t)O * I, 1.0), *db0 = frand(O, 1.0);
    memcpy(dw, dw0, (size_t)O * I * sizeof(float));
    memcpy(db, db0, (size_t)O * sizeof(float));
    linear_backward(l.x, l.w, l.R, dx, dw, db, N, I, O);
    double *fdx = dalloc((size_t)N * I), *fdw = dalloc((size_t)O * I), *fdb = dalloc(O);
    for (int i = 0; i < N * I; i++) fdx[i] = fd_at(l.x, i, 0.5, lin_loss, &l);
    for (int i = 0; i < O * I; i++) fdw[i] = dw0[i] + fd_at(l.w, i, 0.5, lin_loss, &l);
    for (int i = 0; i < O; i++) fdb[i] = db0[i] + fd_at(l.b, i, 0.5, lin_loss, &l);
    check_f("linear dx vs fd", dx, fdx, (size_t)N * I, 1e-5);
    check_f("linear dw += (vs D0 + fd)", dw, fdw, (size_t)O * I, 1e-5);
    check_f("linear db += (vs D0 + fd)", db, fdb, O, 1e-5);
    free(l.x); free(l.w); free(l.b); free(l.y); free((void *)l.R); free(want);
    free(dx); free(dw); free(db); free(dw0); free(db0); free(fdx); free(fdw); free(fdb);
}

/* The fast path (oneDNN's sgemm on tiles when built with it) against the reference loops at
 * shapes of the networks' classifiers and per-pixel layers, tiles with tails among them, and its bits on 1, 2 and 3
 * threads: forward, dx, dw += and db +=. */
static void test_linear_fast(int N, int I, int O) {
    const size_t nx = (size_t)N * I, nw = (size_t)O * I, ny = (size_t)N * O;
    float *x = frand(nx, 1.0), *w = frand(nw, 0.1), *b = frand(O, 1.0), *dy = frand(ny, 1.0);
    float *dw0 = frand(nw, 1.0), *db0 = frand(O, 1.0);
    float *y[4], *dx[4], *dw[4], *db[4];
    for (int v = 0; v < 4; v++) {   /* v 0: reference; 1, 2, 3: the fast path on v threads */
        y[v] = falloc(ny); dx[v] = falloc(nx); dw[v] = falloc(nw); db[v] = falloc(O);
        memcpy(dw[v], dw0, nw * sizeof(float));
        memcpy(db[v], db0, (size_t)O * sizeof(float));
    }
    const int threads = omp_get_max_threads();
    linear_reference_forward(x, w, b, y[0], N, I, O);
    linear_reference_backward(x, w, dy, dx[0], dw[0], db[0], N, I, O);
    for (int t = 1; t <= 3; t++) {
        omp_set_num_threads(t);
        linear_forward(x, w, b, y[t], N, I, O);
        linear_backward(x, w, dy, dx[t], dw[t], db[t], N, I, O);
    }
    omp_set_num_threads(threads);
    char name[160];
    double *want = to_d(y[0], ny);
    snprintf(name, sizeof name, "linear %d->%d N%d: forward vs reference", I, O, N);
    check_f(name, y[1], want, ny, 1e-5);
    free(want);
    want = to_d(dx[0], nx);
    snprintf(name, sizeof name, "linear %d->%d N%d: dx vs reference", I, O, N);
    check_f(name, dx[1], want, nx, 1e-5);
    free(want);
    /* dw0 is of the size of the sums: a wrong += (= or twice) shows */
    want = to_d(dw[0], nw);
    snprintf(name, sizeof name, "linear %d->%d N%d: dw += vs reference", I, O, N);
    check_f(name, dw[1], want, nw, 1e-5);
    free(want);
    want = to_d(db[0], O);
    snprintf(name, sizeof name, "linear %d->%d N%d: db += vs reference", I, O, N);
    check_f(name, db[1], want, O, 1e-5);
    free(want);
    int same = 1;
    for (int t = 2; t <= 3; t++)
        same &= !memcmp(y[1], y[t], ny * sizeof(float)) && !memcmp(dx[1], dx[t], nx * sizeof(float)) &&
                !memcmp(dw[1], dw[t], nw * sizeof(float)) && !memcmp(db[1], db[t], (size_t)O * sizeof(float));
    snprintf(name, sizeof name, "linear %d->%d N%d: y, dx, dw, db bit for bit on 1, 2 and 3 threads", I, O, N);
    check_true(name, same);
    for (int v = 0; v < 4; v++) { free(y[v]); free(dx[v]); free(dw[v]); free(db[v]); }
    free(x); free(w); free(b); free(dy); free(dw0); free(db0);
}

typedef struct { int N, K; float *z; const int *lab; double eps; } XentCase;
/* nn.CrossEntropyLoss(label_smoothing=eps) as its documentation writes it: the target
 * distribution (1-eps) * onehot + eps/K against log-softmax. */
static double xent_ref(void *p) {
    XentCase *q = p;
    double L = 0.0;
    for (int n = 0; n < q->N; n++) {
        const float *z = q->z + (size_t)n * q->K;
        double m = z[0], s = 0.0;
        for (int k = 1; k < q->K; k++) m = fmax(m, z[k]);
        for (int k = 0; k < q->K; k++) s += exp(z[k] - m);
        for (int k = 0; k < q->K; k++) {
            const double t = (1.0 - q->eps) * (k == q->lab[n]) + q->eps / q->K;
            L -= t * (z[k] - m - log(s));
        }
    }
    return L / q->N;
}

static void test_softmax_xent(void) {
    const int N = 7, K = 10;
    int lab[7] = { 3, 0, 9, 5, 5, 1, 7 };
    XentCase q = { N, K, frand((size_t)N * K, 3.0), lab, 0.0 };
    q.z[2 * K + 9] = 10.0f;   /* row 2 predicts its label */
    float *dz = falloc((size_t)N * K);
    int correct = -1;
    const float scale = 2.5f;
    const float loss = softmax_xent(q.z, lab, N, K, scale, 0.0f, 1.0f, dz, &correct);
    const double want_loss = xent_ref(&q);
    check_f("softmax_xent loss", &loss, &want_loss, 1, 1e-6);
    int want_correct = 0;
    for (int n = 0; n < N; n++) {
        int a = 0;
        for (int k = 1; k < K; k++) if (q.z[n * K + k] > q.z[n * K + a]) a = k;
        want_correct += a == lab[n];
    }
    check_true("softmax_xent correct count", correct == want_correct && correct >= 1);
    double *fd = dalloc((size_t)N * K);
    for (int i = 0; i < N * K; i++) fd[i] = scale * fd_at(q.z, i, 1e-3, xent_ref, &q);
    check_f("softmax_xent dlogits (scaled) vs fd", dz, fd, (size_t)N * K, 1e-4);

    /* label smoothing 0.1: loss and gradient of the smoothed target */
    q.eps = 0.1;
    const float sloss = softmax_xent(q.z, lab, N, K, scale, 0.1f, 1.0f, dz, NULL);
    const double want_sloss = xent_ref(&q);
    check_f("softmax_xent label smoothing 0.1: loss", &sloss, &want_sloss, 1, 1e-6);
    check_true("softmax_xent label smoothing 0.1: loss differs from the plain one", fabs(want_sloss - want_loss) > 1e-3);
    for (int i = 0; i < N * K; i++) fd[i] = scale * fd_at(q.z, i, 1e-3, xent_ref, &q);
    check_f("softmax_xent label smoothing 0.1: dlogits (scaled) vs fd", dz, fd, (size_t)N * K, 1e-4);
    q.eps = 0.0;

    /* huge logits: no overflow, still the exact loss */
    for (int i = 0; i < N * K; i++) q.z[i] = q.z[i] * 0.01f + 1000.0f;
    const float big = softmax_xent(q.z, lab, N, K, 1.0f, 0.0f, 1.0f, dz, NULL);
    const double want_big = xent_ref(&q);
    check_f("softmax_xent with logits ~1000 (stable)", &big, &want_big, 1, 1e-6);
    free(q.z); free(dz); free(fd);
}

/* ---- activation functions (act_cpu.h) ---- */

/* f(x) in double, as the functions are defined (not as the kernels round them). */
static double act_ref(int fn, double slope, double x) {
    switch (fn) {
    case ACT_RELU6: return fmin(fmax(x, 0.0), 6.0);
    case ACT_HARDSWISH: return x * fmin(fmax(x + 3.0, 0.0), 6.0) / 6.0;
    case ACT_HARDSIGMOID: return fmin(fmax(x + 3.0, 0.0), 6.0) / 6.0;
    case ACT_SILU: return x / (1.0 + exp(-x));
    case ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case ACT_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case ACT_GELU_TANH: return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case ACT_TANH: return tanh(x);
    case ACT_LEAKY_RELU: return x > 0.0 ? x : x * slope;
    }
    return NAN;
}

/* f'(x) in double, with PyTorch's choices at the kinks: relu6 0 at 0 and 6, hardswish 0 at -3
 * and 1 at 3, hardsigmoid 0 at -3 and 3, leaky_relu the slope at 0. */
static double act_ref_grad(int fn, double slope, double x) {
    const double s = 1.0 / (1.0 + exp(-x)), t = sqrt(2.0 / M_PI), u = tanh(t * (x + 0.044715 * x * x * x));
    switch (fn) {
    case ACT_RELU6: return x > 0.0 && x < 6.0;
    case ACT_HARDSWISH: return x < -3.0 ? 0.0 : x >= 3.0 ? 1.0 : (2.0 * x + 3.0) / 6.0;
    case ACT_HARDSIGMOID: return x > -3.0 && x < 3.0 ? 1.0 / 6.0 : 0.0;
    case ACT_SILU: return s * (1.0 + x * (1.0 - s));
    case ACT_SIGMOID: return s * (1.0 - s);
    case ACT_GELU: return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
    case ACT_GELU_TANH:
        return 0.5 * (1.0 + u) + 0.5 * x * (1.0 - u * u) * t * (1.0 + 3.0 * 0.044715 * x * x);
    case ACT_TANH: return 1.0 - tanh(x) * tanh(x);
    case ACT_LEAKY_RELU: return x > 0.0 ? 1.0 : slope;
    }
    return NAN;
}

static const char *const act_names[] = {
#define ACT_NAME(e, name) name,
    ACT_FNS(ACT_NAME)
#undef ACT_NAME
};

typedef struct { int fn; double slope, x; } ActPoint;
static double act_point_ref(void *p) {
    const ActPoint *a = p;
    return act_ref(a->fn, a->slope, a->x);
}

/* One function: forward and backward against the double definitions on random values in
 * [-8, 8] with the kinks (-3, 0, 3, 6) among them, on large |x| apart (so that their size does
 * not hide the small values' errors), against finite differences of the definition away from
 * the kinks, the values PyTorch gives at the kinks, and in place. */
static void test_act_fn(int fn, float slope) {
    static const float kinks[] = { -3.0f, 0.0f, 3.0f, 6.0f, -6.0f, -0.0f };
    static const float large[] = { 10.0f, -10.0f, 20.0f, -20.0f, 50.0f, -50.0f, 100.0f, -100.0f, 1e4f, -1e4f };
    const size_t nr = 4099, nk = sizeof kinks / sizeof *kinks, nl = sizeof large / sizeof *large;
    const size_t n = nr + nk;
    float *x = frand(n, 8.0), *dy = frand(n, 1.0), *y = falloc(n), *dx = falloc(n);
    memcpy(x + nr, kinks, sizeof kinks);
    double *want = dalloc(n), *wgrad = dalloc(n);
    char name[128], tag[48];
    snprintf(tag, sizeof tag, "%s%s", act_names[fn], fn == ACT_LEAKY_RELU ? (slope < 0 ? "(-1.5)" : "(0.01)") : "");

    act_forward(fn, slope, x, y, n);
    act_backward(fn, slope, x, dy, dx, n);
    for (size_t i = 0; i < n; i++) {
        want[i] = act_ref(fn, slope, x[i]);
        wgrad[i] = dy[i] * act_ref_grad(fn, slope, x[i]);
    }
    snprintf(name, sizeof name, "act %s forward, [-8, 8] and kinks", tag);
    check_f(name, y, want, n, 1e-6);
    snprintf(name, sizeof name, "act %s backward vs f', [-8, 8] and kinks", tag);
    check_f(name, dx, wgrad, n, 1e-6);

    /* at the kinks themselves each value by itself, so that a derivative from the wrong side
     * (hardswish's 1.5 dy at 3, relu6's dy at 0) cannot hide behind the others' size: within
     * 1e-6 relative, and for the value an ulp or two of |x| (the GELUs' 1 + erf(x) cancels at
     * -6, in PyTorch's formula as in ours) */
    int kink_ok = 1;
    for (size_t k = 0; k < nk; k++) {
        const size_t i = nr + k;
        kink_ok &= fabs(y[i] - want[i]) <= 1e-6 * fabs(want[i]) + 2.0 * FLT_EPSILON * fabs(x[i]) &&
                   fabs(dx[i] - wgrad[i]) <= 1e-6 * fabs(dy[i]);
    }
    snprintf(name, sizeof name, "act %s at -3, 0, 3, 6, -6, -0: each value and derivative (PyTorch's at kinks)", tag);
    check_true(name, kink_ok);

    /* the derivative against central differences of the definition, away from the kinks */
    double got[NSAMPLE], fd[NSAMPLE];
    int m = 0;
    for (size_t i = 0; i < nr && m < NSAMPLE; i += 97) {
        if (fabs(x[i] + 3.0f) < 1e-3f || fabs(x[i]) < 1e-3f || fabs(x[i] - 3.0f) < 1e-3f || fabs(x[i] - 6.0f) < 1e-3f)
            continue;
        ActPoint a = { fn, slope, x[i] };
        const double h = 1e-5;
        a.x = x[i] + h; const double fp = act_point_ref(&a);
        a.x = x[i] - h; const double fm = act_point_ref(&a);
        fd[m] = dy[i] * (fp - fm) / (2.0 * h);
        got[m] = dx[i];
        m++;
    }
    snprintf(name, sizeof name, "act %s backward vs fd", tag);
    check(name, got, fd, (size_t)m, 1e-5);

    /* large |x|: finite, and each value within 1e-6 of (its size + 1), each derivative within
     * 1e-6 |dy|: where a function saturates its derivative is a difference that cancels
     * (sigmoid's 1 - y), as in PyTorch, and only its size next to dy's is meaningful */
    float lx[10], ly[10], ldy[10], ldx[10];
    for (size_t i = 0; i < nl; i++) { lx[i] = large[i]; ldy[i] = 1.0f - 0.125f * (float)i; }
    act_forward(fn, slope, lx, ly, nl);
    act_backward(fn, slope, lx, ldy, ldx, nl);
    int large_ok = 1;
    for (size_t i = 0; i < nl; i++) {
        const double w = act_ref(fn, slope, lx[i]), g = ldy[i] * act_ref_grad(fn, slope, lx[i]);
        large_ok &= isfinite(ly[i]) && isfinite(ldx[i]) && fabs(ly[i] - w) <= 1e-6 * (fabs(w) + 1.0) &&
                    fabs(ldx[i] - g) <= 1e-6 * fabs(ldy[i]);
    }
    snprintf(name, sizeof name, "act %s at |x| 10 to 1e4: finite, each value and derivative", tag);
    check_true(name, large_ok);

    /* in place (y = x, dx = dy): the same bits */
    float *x2 = falloc(n), *d2 = falloc(n);
    memcpy(x2, x, n * sizeof(float));
    memcpy(d2, dy, n * sizeof(float));
    act_forward(fn, slope, x2, x2, n);
    act_backward(fn, slope, x, d2, d2, n);
    snprintf(name, sizeof name, "act %s in place: the same bits", tag);
    check_true(name, !memcmp(x2, y, n * sizeof(float)) && !memcmp(d2, dx, n * sizeof(float)));
    free(x); free(dy); free(y); free(dx); free(want); free(wgrad); free(x2); free(d2);
}

static void test_act(void) {
    for (int fn = 0; fn < ACT_FN_COUNT; fn++) test_act_fn(fn, 0.01f);
    test_act_fn(ACT_LEAKY_RELU, -1.5f);
    /* one map of many blocks of values (threads), against the same values one block at a time */
    const size_t n = 100003;
    float *x = frand(n, 6.0), *dy = frand(n, 1.0), *y = falloc(n), *y1 = falloc(n), *dx = falloc(n), *dx1 = falloc(n);
    act_forward(ACT_SILU, 0.0f, x, y, n);
    act_backward(ACT_SILU, 0.0f, x, dy, dx, n);
    act_forward_span(ACT_SILU, 0.0f, x, y1, n);
    act_backward_span(ACT_SILU, 0.0f, x, dy, dx1, n);
    check_true("act silu over 100003 values: threads and one span give the same bits",
               !memcmp(y, y1, n * sizeof(float)) && !memcmp(dx, dx1, n * sizeof(float)));
    free(x); free(dy); free(y); free(y1); free(dx); free(dx1);
}

/* ---- batch norm with an activation function (bn_apply_act, bn_backward_reduce_act) ---- */

typedef struct { size_t M; int C, fn; float slope; float *x, *gamma, *beta; const float *R; } BnActCase;

/* L = sum R * f(batch norm of x) in double: the fused step's definition */
static double bn_act_ref_loss(void *p) {
    BnActCase *b = p;
    double L = 0.0;
    for (int c = 0; c < b->C; c++) {
        double s = 0.0, q = 0.0;
        for (size_t r = 0; r < b->M; r++) s += b->x[r * b->C + c];
        const double mean = s / b->M;
        for (size_t r = 0; r < b->M; r++) { const double d = b->x[r * b->C + c] - mean; q += d * d; }
        const double invstd = 1.0 / sqrt(q / b->M + 1e-5);
        for (size_t r = 0; r < b->M; r++) {
            const double z = b->gamma[c] * (b->x[r * b->C + c] - mean) * invstd + b->beta[c];
            L += act_ref(b->fn, b->slope, z) * b->R[r * b->C + c];
        }
    }
    return L;
}

/* The fused step against the two steps it replaces (bn_apply without ReLU, then act_forward;
 * act_backward, then bn_backward_reduce without ReLU), bit for bit, on 1 and 2 threads; and dx,
 * dgamma through bn_backward_apply against finite differences of the definition. */
static void test_bn_act(int fn, size_t M, int C) {
    const int threads = omp_get_max_threads();
    BnActCase b = { M, C, fn, 0.01f, frand(M * C, 2.0), frand(C, 1.0), frand(C, 1.0), frand(M * C, 1.0) };
    for (size_t i = 0; i < M * C; i++) b.x[i] += 0.3f;
    double *sum = dalloc(C), *sq = dalloc(C), *sg = dalloc(C), *sx = dalloc(C), *sg2 = dalloc(C), *sx2 = dalloc(C);
    float *mean = falloc(C), *invstd = falloc(C), *z = falloc(M * C), *y = falloc(M * C), *yf = falloc(M * C);
    float *g = falloc(M * C), *gf = falloc(M * C), *dx = falloc(M * C), *dgamma = falloc(C), *dbeta = falloc(C);
    bn_stats(b.x, M, C, sum, sq);
    bn_finalize_stats(sum, sq, (double)M, C, 1e-5f, 0.1f, mean, invstd, NULL, NULL);
    /* two steps */
    bn_apply(b.x, z, M, C, mean, invstd, b.gamma, b.beta, NULL, 0);
    act_forward(fn, b.slope, z, y, M * C);
    act_backward(fn, b.slope, z, b.R, g, M * C);
    bn_backward_reduce(b.x, z, g, g, M, C, mean, invstd, 0, sg, sx);
    char name[160];
    int same = 1;
    for (int t = 1; t <= 2; t++) {
        omp_set_num_threads(t);
        memset(yf, 0, M * C * sizeof(float));
        bn_apply_act(b.x, yf, M, C, mean, invstd, b.gamma, b.beta, fn, b.slope);
        memcpy(gf, b.R, M * C * sizeof(float));
        bn_backward_reduce_act(b.x, gf, gf, M, C, mean, invstd, b.gamma, b.beta, fn, b.slope, sg2, sx2);
        same &= !memcmp(y, yf, M * C * sizeof(float)) && !memcmp(g, gf, M * C * sizeof(float)) &&
                !memcmp(sg, sg2, C * sizeof(double)) && !memcmp(sx, sx2, C * sizeof(double));
    }
    omp_set_num_threads(threads);
    snprintf(name, sizeof name, "bn+%s M%zu C%d fused: the two steps' y, g and sums bit for bit, 1 and 2 threads",
             act_names[fn], M, C);
    check_true(name, same);

    bn_backward_apply(b.x, gf, dx, M, C, mean, invstd, b.gamma, sg2, sx2, sg2, sx2, (double)M, dgamma, dbeta);
    double got[NSAMPLE], want[NSAMPLE];
    for (int t = 0; t < NSAMPLE; t++) {
        const size_t i = (size_t)((urand() + 1.0) * 0.5 * M * C) % (M * C);
        want[t] = fd_at(b.x, i, 1e-5, bn_act_ref_loss, &b);
        got[t] = dx[i];
    }
    snprintf(name, sizeof name, "bn+%s M%zu C%d fused: dx vs fd", act_names[fn], M, C);
    check(name, got, want, NSAMPLE, 1e-4);
    double *wg = dalloc(C);
    for (int c = 0; c < C; c++) wg[c] = fd_at(b.gamma, c, 1e-5, bn_act_ref_loss, &b);
    snprintf(name, sizeof name, "bn+%s M%zu C%d fused: dgamma vs fd", act_names[fn], M, C);
    check_f(name, dgamma, wg, C, 1e-4);
    free(b.x); free(b.gamma); free(b.beta); free((void *)b.R); free(sum); free(sq); free(sg); free(sx); free(sg2);
    free(sx2); free(mean); free(invstd); free(z); free(y); free(yf); free(g); free(gf); free(dx); free(dgamma);
    free(dbeta); free(wg);
}

/* ---- broadcast products (scale_cpu.h) ---- */

typedef struct { int N, HW, C; float *x, *s, *y; const float *R; } MulCase;
static double mul_loss(void *p) {
    MulCase *q = p;
    mul_forward(q->x, q->s, q->y, q->N, q->HW, q->C);
    return dot_fd(q->y, q->R, (size_t)q->N * q->HW * q->C);
}

static void test_mul(void) {
    const int N = 3, HW = 5 * 7, C = 70;   /* C: a block of 64 channels and a partial one */
    const size_t n = (size_t)N * HW * C;
    MulCase q = { N, HW, C, frand(n, 1.0), frand((size_t)N * C, 1.0), falloc(n), frand(n, 1.0) };
    double *want = dalloc(n), *wds = dalloc((size_t)N * C);
    mul_forward(q.x, q.s, q.y, N, HW, C);
    for (int i = 0; i < N; i++)
        for (int p = 0; p < HW; p++)
            for (int c = 0; c < C; c++) {
                const size_t o = ((size_t)i * HW + p) * C + c;
                want[o] = (double)q.x[o] * q.s[i * C + c];
                wds[i * C + c] += (double)q.R[o] * q.x[o];
            }
    check_f("mul forward", q.y, want, n, 1e-7);
    float *dx = falloc(n), *ds = falloc((size_t)N * C);
    mul_backward(q.x, q.s, q.R, dx, ds, N, HW, C);
    for (int i = 0; i < N; i++)
        for (size_t o = (size_t)i * HW * C; o < (size_t)(i + 1) * HW * C; o++) want[o] = (double)q.R[o] * q.s[i * C + o % C];
    check_f("mul dx = dy * s", dx, want, n, 1e-7);
    check_f("mul ds = sum over pixels of dy * x", ds, wds, (size_t)N * C, 1e-6);
    /* both gradients against finite differences through the kernel (L is linear in each) */
    double got[NSAMPLE], fd[NSAMPLE];
    for (int t = 0; t < NSAMPLE; t++) {
        const size_t i = (size_t)((urand() + 1.0) * 0.5 * N * C) % ((size_t)N * C);
        fd[t] = fd_at(q.s, i, 0.5, mul_loss, &q);
        got[t] = ds[i];
    }
    check("mul ds vs fd", got, fd, NSAMPLE, 1e-5);
    for (int t = 0; t < NSAMPLE; t++) {
        const size_t i = (size_t)((urand() + 1.0) * 0.5 * n) % n;
        fd[t] = fd_at(q.x, i, 0.5, mul_loss, &q);
        got[t] = dx[i];
    }
    check("mul dx vs fd", got, fd, NSAMPLE, 1e-5);

    /* the sums on 1 and 2 threads, and dx written over dy: the same bits */
    const int threads = omp_get_max_threads();
    float *dx1 = falloc(n), *ds1 = falloc((size_t)N * C), *ds2 = falloc((size_t)N * C), *d2 = falloc(n);
    omp_set_num_threads(1);
    mul_backward(q.x, q.s, q.R, dx1, ds1, N, HW, C);
    omp_set_num_threads(2);
    memcpy(d2, q.R, n * sizeof(float));
    mul_backward(q.x, q.s, d2, d2, ds2, N, HW, C);
    omp_set_num_threads(threads);
    check_true("mul backward bitwise equal on 1 and 2 threads, and with dx over dy",
               !memcmp(dx1, dx, n * sizeof(float)) && !memcmp(d2, dx, n * sizeof(float)) &&
               !memcmp(ds1, ds, (size_t)N * C * sizeof(float)) && !memcmp(ds2, ds, (size_t)N * C * sizeof(float)));
    free(q.x); free(q.s); free(q.y); free((void *)q.R); free(want); free(wds); free(dx); free(ds);
    free(dx1); free(ds1); free(ds2); free(d2);
}

static void test_dropout(void) {
    const size_t n = 1000000;
    const int threads = omp_get_max_threads();
    uint8_t *k1 = mallocCheck(n), *k2 = mallocCheck(n);
    char name[160];
    static const float ps[] = { 0.1f, 0.3f, 0.5f, 0.9f };
    for (size_t t = 0; t < sizeof ps / sizeof *ps; t++) {
        const float p = ps[t];
        const uint64_t key = 0x1234567ull + t;
        omp_set_num_threads(1);
        dropout_mask(k1, n, p, key);
        omp_set_num_threads(2);
        dropout_mask(k2, n, p, key);
        size_t kept = 0;
        for (size_t i = 0; i < n; i++) kept += k1[i];
        const double mean = n * (1.0 - p), sigma = sqrt(n * p * (1.0 - p)), z = (kept - mean) / sigma;
        snprintf(name, sizeof name, "dropout p=%.1f: %zu of %zu kept, %.2f sigma from %.0f (within 5)", p, kept, n, z, mean);
        check_true(name, fabs(z) < 5.0);
        snprintf(name, sizeof name, "dropout p=%.1f: the mask bitwise equal on 1 and 2 threads", p);
        check_true(name, !memcmp(k1, k2, n));
    }
    omp_set_num_threads(threads);
    /* another key, another mask; the next value of a stream is not the next index's */
    dropout_mask(k2, n, 0.5f, 0x1234567ull + 99);
    size_t same = 0;
    for (size_t i = 0; i < n; i++) same += k1[i] == k2[i];
    dropout_mask(k1, n, 0.5f, 0x1234567ull + 2);
    snprintf(name, sizeof name, "dropout: two keys' masks at p=0.5 agree on %.3f of the values (about half)", (double)same / n);
    check_true(name, fabs((double)same / n - 0.5) < 0.01);

    /* the values: kept ones scaled by 1 / (1 - p), dropped ones zero */
    const size_t m = 10007;
    float *x = frand(m, 3.0), *y = falloc(m);
    double *want = dalloc(m);
    dropout_mask(k1, m, 0.3f, 42);
    dropout_apply(x, k1, y, m, 0.3f);
    int zeros = 1;
    for (size_t i = 0; i < m; i++) {
        want[i] = k1[i] ? x[i] / (1.0 - 0.3) : 0.0;
        zeros &= k1[i] || y[i] == 0.0f;
    }
    check_f("dropout p=0.3: kept values times 1/(1-p)", y, want, m, 1e-6);
    check_true("dropout p=0.3: dropped values zero", zeros);
    float *y2 = falloc(m);
    memcpy(y2, x, m * sizeof(float));
    dropout_apply(y2, k1, y2, m, 0.3f);
    check_true("dropout in place: the same bits", !memcmp(y, y2, m * sizeof(float)));

    /* p = 0: everything kept, unchanged; p = 1: nothing kept, zeros even where keep says 1 */
    dropout_mask(k1, m, 0.0f, 7);
    dropout_apply(x, k1, y, m, 0.0f);
    size_t kept0 = 0;
    for (size_t i = 0; i < m; i++) kept0 += k1[i];
    check_true("dropout p=0: every value kept and unchanged", kept0 == m && !memcmp(x, y, m * sizeof(float)));
    dropout_mask(k1, m, 1.0f, 7);
    size_t kept1 = 0;
    for (size_t i = 0; i < m; i++) kept1 += k1[i];
    memset(k2, 1, m);
    dropout_apply(x, k2, y, m, 1.0f);
    int all0 = 1;
    for (size_t i = 0; i < m; i++) all0 &= y[i] == 0.0f;
    check_true("dropout p=1: no value kept, and zeros out", kept1 == 0 && all0);
    free(k1); free(k2); free(x); free(y); free(y2); free(want);
}

static void test_sample_scale(void) {
    const int N = 4;
    const size_t per = 20000;   /* a block of 16384 values and a partial one per image */
    const float s[4] = { 0.0f, 1.25f, 2.0f, -1.0f / 0.7f };
    float *x = frand(N * per, 1.0), *y = falloc(N * per);
    double *want = dalloc(N * per);
    sample_scale(x, s, y, N, per);
    int exact = 1;
    for (int i = 0; i < N; i++)
        for (size_t j = 0; j < per; j++) {
            const size_t o = (size_t)i * per + j;
            want[o] = (double)x[o] * s[i];
            exact &= y[o] == x[o] * s[i];
        }
    check_f("sample_scale: y[n,:] = x[n,:] * s[n]", y, want, N * per, 1e-7);
    check_true("sample_scale: each value the float product, a dropped image zeros", exact);
    sample_scale(x, s, x, N, per);
    check_true("sample_scale in place: the same bits", !memcmp(x, y, N * per * sizeof(float)));
    free(x); free(y); free(want);
}

/* ---- benchmark ---- */

static double best_ms(void (*f)(void *), void *ctx, int reps) {
    f(ctx);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        const double t = now_sec();
        f(ctx);
        best = fmin(best, now_sec() - t);
    }
    return best * 1e3;
}

typedef struct { Conv2d *c; int N, H; float *x, *w, *y, *dy, *dx, *dw; } BenchConv;
static void b_fwd(void *p) { BenchConv *b = p; conv2d_forward(b->c, b->N, b->H, b->H, b->x, b->w, b->y); }
static void b_bwd(void *p) { BenchConv *b = p; conv2d_backward(b->c, b->N, b->H, b->H, b->x, b->w, b->dy, b->dx, b->dw); }
static void b_bww(void *p) { BenchConv *b = p; conv2d_backward(b->c, b->N, b->H, b->H, b->x, b->w, b->dy, NULL, b->dw); }

typedef struct { size_t M; int C; float *x, *y, *g, *dx, *gamma, *beta, *mean, *invstd, *dgm, *dbt; double *s, *q; } BenchBn;
static void b_bn_fwd(void *p) {
    BenchBn *b = p;
    bn_stats(b->x, b->M, b->C, b->s, b->q);
    bn_finalize_stats(b->s, b->q, (double)b->M, b->C, 1e-5f, 0.1f, b->mean, b->invstd, NULL, NULL);
    bn_apply(b->x, b->y, b->M, b->C, b->mean, b->invstd, b->gamma, b->beta, NULL, 1);
}
static void b_bn_bwd(void *p) {
    BenchBn *b = p;
    bn_backward_reduce(b->x, b->y, b->g, b->g, b->M, b->C, b->mean, b->invstd, 1, b->s, b->q);
    bn_backward_apply(b->x, b->g, b->dx, b->M, b->C, b->mean, b->invstd, b->gamma, b->s, b->q, b->s,
                      b->q, (double)b->M, b->dgm, b->dbt);
}

static void bench(int N, int threads) {
    omp_set_num_threads(threads);
    printf("%s, %d threads, N=%d (best of 7, ms)\n", ops_cpu_describe(), omp_get_max_threads(), N);
    /* C_in, C_out, k, stride, pad, H, how many per training step */
    static const int shapes[][7] = { { 3, 64, 3, 1, 1, 32, 1 }, { 64, 64, 3, 1, 1, 32, 4 },
                                     { 64, 128, 3, 2, 1, 32, 1 }, { 128, 128, 3, 1, 1, 16, 3 },
                                     { 64, 128, 1, 2, 0, 32, 1 }, { 128, 256, 3, 2, 1, 16, 1 },
                                     { 256, 256, 3, 1, 1, 8, 3 }, { 128, 256, 1, 2, 0, 16, 1 } };
    double tot[3] = { 0, 0, 0 };
    printf("%-22s %8s %8s %8s  %s\n", "conv", "fwd", "bwd_data", "bwd_w", "impl");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int *s = shapes[i];
        Conv2d c;
        conv2d_init(&c, &(ConvShape){ .C_in = s[0], .C_out = s[1], .k = s[2], .stride = s[3], .pad = s[4] });
        const int H = s[5], Ho = conv_out_size(&c.shape, H);
        const size_t nx = (size_t)N * H * H * s[0], ny = (size_t)N * Ho * Ho * s[1], nw = (size_t)s[1] * s[0] * s[2] * s[2];
        BenchConv b = { &c, N, H, frand(nx, 1.0), frand(nw, 0.1), falloc(ny), frand(ny, 1.0), falloc(nx), falloc(nw) };
        const double f = best_ms(b_fwd, &b, 7), bw = best_ms(b_bww, &b, 7);
        /* the first convolution's dx is never needed (its input is the image) */
        const double bd = s[0] == 3 ? 0.0 : fmax(best_ms(b_bwd, &b, 7) - bw, 0.0);
        printf("%3d->%3d k%d s%d %2dx%-2d x%d %8.2f %8.2f %8.2f  %s\n", s[0], s[1], s[2], s[3], H, H, s[6],
               f, bd, bw, conv2d_impl_name(&c, N, H, H));
        tot[0] += f * s[6]; tot[1] += bd * s[6]; tot[2] += bw * s[6];
        conv2d_free(&c);
        free(b.x); free(b.w); free(b.y); free(b.dy); free(b.dx); free(b.dw);
    }
    printf("%-22s %8.1f %8.1f %8.1f  sum %.1f ms per step\n", "weighted per step", tot[0], tot[1],
           tot[2], tot[0] + tot[1] + tot[2]);

    /* batch norm + ReLU at the model's activation shapes: C, H, how many per step */
    static const int bns[][3] = { { 64, 32, 5 }, { 128, 16, 5 }, { 256, 8, 5 } };
    double bt = 0.0;
    printf("%-22s %8s %8s\n", "batchnorm+relu", "fwd", "bwd");
    for (size_t i = 0; i < sizeof bns / sizeof bns[0]; i++) {
        const int C = bns[i][0];
        const size_t M = (size_t)N * bns[i][1] * bns[i][1];
        BenchBn b = { M, C, frand(M * C, 1.0), falloc(M * C), frand(M * C, 1.0), falloc(M * C),
                      frand(C, 1.0), frand(C, 1.0), falloc(C), falloc(C), falloc(C), falloc(C),
                      dalloc(C), dalloc(C) };
        const double f = best_ms(b_bn_fwd, &b, 5), bw = best_ms(b_bn_bwd, &b, 5);
        printf("C%-3d %2dx%-2d x%d %12.2f %8.2f\n", C, bns[i][1], bns[i][1], bns[i][2], f, bw);
        bt += (f + bw) * bns[i][2];
        free(b.x); free(b.y); free(b.g); free(b.dx); free(b.gamma); free(b.beta); free(b.mean);
        free(b.invstd); free(b.dgm); free(b.dbt); free(b.s); free(b.q);
    }
    printf("%-22s %8.1f ms per step\n", "batchnorm weighted", bt);
}

/* A MobileNet-like chain, conv 1x1 -> batch norm -> hardswish, at N images: the batch norm and
 * the function as two steps (bn_apply, act_forward; act_backward, bn_backward_reduce) and as the
 * fused one (bn_apply_act; bn_backward_reduce_act), next to the convolution they follow. */
typedef struct { size_t M; int C; float *x, *z, *y, *dy, *g, *dx, *gamma, *beta, *mean, *invstd, *dgm, *dbt; double *s, *q; } BenchBnAct;
static void bn_act_stats(BenchBnAct *b) {
    bn_stats(b->x, b->M, b->C, b->s, b->q);
    bn_finalize_stats(b->s, b->q, (double)b->M, b->C, 1e-3f, 0.01f, b->mean, b->invstd, NULL, NULL);
}
static void b_two_fwd(void *p) {
    BenchBnAct *b = p;
    bn_act_stats(b);
    bn_apply(b->x, b->z, b->M, b->C, b->mean, b->invstd, b->gamma, b->beta, NULL, 0);
    act_forward(ACT_HARDSWISH, 0.0f, b->z, b->y, b->M * b->C);
}
static void b_fused_fwd(void *p) {
    BenchBnAct *b = p;
    bn_act_stats(b);
    bn_apply_act(b->x, b->y, b->M, b->C, b->mean, b->invstd, b->gamma, b->beta, ACT_HARDSWISH, 0.0f);
}
static void b_two_bwd(void *p) {
    BenchBnAct *b = p;
    act_backward(ACT_HARDSWISH, 0.0f, b->z, b->dy, b->g, b->M * b->C);
    bn_backward_reduce(b->x, b->z, b->g, b->g, b->M, b->C, b->mean, b->invstd, 0, b->s, b->q);
    bn_backward_apply(b->x, b->g, b->dx, b->M, b->C, b->mean, b->invstd, b->gamma, b->s, b->q, b->s, b->q,
                      (double)b->M, b->dgm, b->dbt);
}
static void b_fused_bwd(void *p) {
    BenchBnAct *b = p;
    bn_backward_reduce_act(b->x, b->dy, b->g, b->M, b->C, b->mean, b->invstd, b->gamma, b->beta, ACT_HARDSWISH, 0.0f,
                           b->s, b->q);
    bn_backward_apply(b->x, b->g, b->dx, b->M, b->C, b->mean, b->invstd, b->gamma, b->s, b->q, b->s, b->q,
                      (double)b->M, b->dgm, b->dbt);
}

static void bench_bn_act(int N, int threads, int reps) {
    omp_set_num_threads(threads);
    printf("%s, %d threads, N=%d (best of %d, ms)\n", ops_cpu_describe(), omp_get_max_threads(), N, reps);
    /* C_in, C, H: MobileNetV3's expansions from 64x64 down to 8x8 */
    static const int shapes[][3] = { { 16, 96, 64 }, { 40, 240, 32 }, { 80, 480, 16 }, { 160, 960, 8 } };
    printf("%-20s %8s %8s | %8s %8s %8s | %8s %8s %8s | %s\n", "conv1x1 -> bn -> hswish", "conv f", "conv b",
           "two f", "two b", "two", "fused f", "fused b", "fused", "chain saved");
    double tot[3] = { 0, 0, 0 };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const int Ci = shapes[i][0], C = shapes[i][1], H = shapes[i][2];
        const size_t M = (size_t)N * H * H;
        Conv2d c;
        conv2d_init(&c, &(ConvShape){ .C_in = Ci, .C_out = C, .k = 1, .stride = 1, .pad = 0 });
        BenchConv bc = { &c, N, H, frand(M * Ci, 1.0), frand((size_t)C * Ci, 0.1), falloc(M * C), frand(M * C, 1.0),
                         falloc(M * Ci), falloc((size_t)C * Ci) };
        const double cf = best_ms(b_fwd, &bc, reps), cb = best_ms(b_bwd, &bc, reps);
        BenchBnAct b = { M, C, bc.y, falloc(M * C), falloc(M * C), frand(M * C, 1.0), falloc(M * C), falloc(M * C),
                         frand(C, 1.0), frand(C, 1.0), falloc(C), falloc(C), falloc(C), falloc(C), dalloc(C), dalloc(C) };
        /* the two ways in turn, so that a spell of load elsewhere on the machine falls on both */
        double tf = 1e30, tb = 1e30, ff = 1e30, fb = 1e30;
        for (int r = 0; r < reps; r++) {
            tf = fmin(tf, best_ms(b_two_fwd, &b, 1));
            ff = fmin(ff, best_ms(b_fused_fwd, &b, 1));
            tb = fmin(tb, best_ms(b_two_bwd, &b, 1));
            fb = fmin(fb, best_ms(b_fused_bwd, &b, 1));
        }
        const double chain_two = cf + cb + tf + tb, chain_fused = cf + cb + ff + fb;
        char tag[40];
        snprintf(tag, sizeof tag, "%d->%d %dx%d", Ci, C, H, H);
        printf("%-20s %8.2f %8.2f | %8.2f %8.2f %8.2f | %8.2f %8.2f %8.2f | %4.1f%%\n", tag, cf, cb, tf, tb, tf + tb, ff,
               fb, ff + fb, 100.0 * (chain_two - chain_fused) / chain_two);
        tot[0] += cf + cb; tot[1] += tf + tb; tot[2] += ff + fb;
        conv2d_free(&c);
        free(bc.x); free(bc.w); free(bc.y); free(bc.dy); free(bc.dx); free(bc.dw);
        free(b.z); free(b.y); free(b.dy); free(b.g); free(b.dx); free(b.gamma); free(b.beta); free(b.mean);
        free(b.invstd); free(b.dgm); free(b.dbt); free(b.s); free(b.q);
    }
    printf("%-20s %17.1f | %26.1f | %26.1f | %4.1f%%\n", "sum", tot[0], tot[1], tot[2],
           100.0 * (tot[1] - tot[2]) / (tot[0] + tot[1]));
}

int main(int argc, char **argv) {
    int N = 64, threads = 2, reps = 5, do_bench = 0, small_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--bench")) do_bench = 1;
        else if (!strcmp(argv[i], "--bench-bn-act")) do_bench = 2;
        else if (!strcmp(argv[i], "--no-winograd")) conv2d_use_winograd(0);
        else if (!strcmp(argv[i], "--small-channels")) small_only = 1;
        else if (!strcmp(argv[i], "-N") && i + 1 < argc) N = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: test_ops [--bench | --bench-bn-act [-N batch] [-t threads] [-r reps]] [--no-winograd] "
                            "[--small-channels]\n");
            return 2;
        }
    }
    if (do_bench == 1) { bench(N > 0 ? N : 64, threads > 0 ? threads : 2); return 0; }
    if (do_bench == 2) { bench_bn_act(N > 0 ? N : 32, threads > 0 ? threads : 2, reps > 0 ? reps : 5); return 0; }
    printf("%s\n", ops_cpu_describe());
    if (small_only) {   /* the sweep alone, at fewer sizes: what the valgrind run needs */
        test_conv_small_channels(0);
        printf("%d of %d checks failed\n", g_failed, g_checks);
        return g_failed ? 1 : 0;
    }

    /* finite differences: the reference conv, then the backend */
    for (int ref = 1; ref >= 0; ref--) {
        test_conv_fd(ref, 16, 16, 3, 1, 1, 2, 8);
        test_conv_fd(ref, 8, 16, 3, 2, 1, 2, 9);
        test_conv_fd(ref, 16, 32, 1, 2, 0, 3, 8);
        test_conv_fd(ref, 3, 16, 3, 1, 1, 2, 6);
    }
    /* backend vs reference at the model's kinds of layer, odd batch sizes, both algorithms */
    for (int wino = 1; wino >= 0; wino--) {
        conv2d_use_winograd(wino);
        test_conv_vs_ref(3, 64, 3, 1, 1, 5, 32, 32);
        test_conv_vs_ref(64, 64, 3, 1, 1, 3, 16, 16);
        test_conv_vs_ref(64, 128, 3, 2, 1, 2, 16, 16);
        test_conv_vs_ref(128, 128, 3, 1, 1, 3, 8, 8);
        test_conv_vs_ref(64, 128, 1, 2, 0, 7, 16, 16);
        test_conv_vs_ref(128, 256, 3, 2, 1, 2, 8, 8);
        test_conv_vs_ref(256, 256, 3, 1, 1, 1, 8, 8);
        test_conv_vs_ref(128, 256, 1, 2, 0, 3, 8, 8);
        test_conv_vs_ref(16, 32, 3, 1, 1, 2, 7, 5);   /* odd, non-square */
    }
    conv2d_use_winograd(1);
    test_conv_rect(16, 24, 1, 7, 0, 3, 1, 2, 9, 11);
    test_conv_rect(16, 24, 7, 1, 3, 0, 1, 2, 9, 11);
    test_conv_rect(8, 16, 3, 1, 0, 0, 2, 3, 9, 8);
    test_conv_small_channels(1);
    test_conv_many_batches();

    test_bn(0, 0);
    test_bn(0, 1);
    test_bn(1, 1);
    test_bn_running_stats();
    test_bn_threads();
    test_avgpool();
    test_maxpool();
    test_linear();
    test_linear_fast(32, 960, 1280);    /* MobileNetV3-Large's classifier */
    test_linear_fast(32, 1280, 1000);
    test_linear_fast(32, 256, 10);      /* MiniResNet's */
    test_linear_fast(7, 2048, 1000);    /* ResNet-50's, a short batch */
    test_linear_fast(3, 100, 65);       /* one column past a block */
    test_linear_fast(600, 96, 384);     /* ConvNeXt's per-pixel layers: rows past two tiles */
    test_linear_fast(300, 1030, 70);    /* columns of dx and dw past two tiles */
    test_softmax_xent();
    test_act();
    for (int fn = 0; fn < ACT_FN_COUNT; fn++) test_bn_act(fn, 3 * 5 * 7, 24);
    test_bn_act(ACT_HARDSWISH, 2 * 16 * 16, 70);   /* several blocks of rows */
    test_mul();
    test_dropout();
    test_sample_scale();

    printf("%d of %d checks failed\n", g_failed, g_checks);
    return g_failed ? 1 : 0;
}
