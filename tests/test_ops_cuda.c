/* SPDX-License-Identifier: BSD-3-Clause */
/* test_ops_cuda.c - the CUDA ops (ops_cuda.h) against the CPU ops (conv_cpu.h, ops_cpu.h) on
 * the same data, and a one-rank NCCL communicator. Exits 77 (skipped) when there is no CUDA device.
 *
 * Every op runs on random data on both backends, with TF32 off. Comparisons report
 * max|got - want| / max|want| like test_ops.c, and also check that scaling the largest element
 * of `got` by 1.01 would fail, so a tolerance can never be vacuous. Tolerances:
 *  - convolutions against the double-accumulating reference: 2e-4 (float32 sums of up to
 *    4096 products in whatever order the cuDNN algorithm uses; the FFT and Winograd variants
 *    that the heuristics may pick lose up to ~1e-4, which training does not notice);
 *  - cuBLAS products of the head: 1e-5;
 *  - per-channel double sums: 1e-12 (only the summation order differs);
 *  - elementwise ops given identical inputs (BN apply and backward-apply, pooling, ReLU mask,
 *    add, SGD): bit-identical, because the kernels use the CPU's rounding (no contraction);
 *    reported as 0 ulp or as a failure.
 * Also checked: that results are bitwise reproducible between two calls, and the convolutions
 * with each weight layout (OIHW from the flat buffer, misaligned by one float as parameters in
 * a flat buffer are; and the OHWI copy).
 * Mixed precision: bf16 and fp16 convolutions against the reference on inputs rounded to the
 * 16-bit type (so what remains is the rounding of the 16-bit outputs, 2^-9 resp. 2^-12 of an
 * element, and the summation order): tol 6e-3 (bf16) and 1.5e-3 (fp16). The loss-scaler
 * kernels (unscale and overflow check, scale update, skipped SGD step) against the CPU
 * backend: bit-identical. 16-bit activation storage (cuda_set_act_storage): every op that
 * reads or writes activations against the CPU op on the same values rounded to the 16-bit
 * type; what remains is the rounding of 16-bit outputs (tol 6e-3 bf16, 1.5e-3 fp16, and
 * exact where an op only moves or masks values), the sums exact to 1e-12.
 *
 *   test_ops_cuda            correctness (exit 0 when everything passes)
 *   test_ops_cuda --bench    also time forward+backward of MiniResNet's conv shapes */
#include "build_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/conv_cpu.h"
#include "ops/linear_cpu.h"
#include "ops/ops_cpu.h"
#include "cuda/ops_cuda.h"
#include "model/optim.h"
#include "model/scaler.h"
#include "ops/backend.h"
#define OPS_TEST_SEED 0x243F6A8885A308D3ull
#include "helpers/ops_testutil.h"
#include "base/util.h"
#ifdef HAVE_NCCL
#include "cuda/comm_nccl.h"
#endif

static int g_failed, g_checks;

/* ---- helpers ---- */


/* Device copies and back. */
static void *up(const void *h, size_t bytes) {
    void *d = cuda_malloc(bytes);
    cuda_upload(d, h, bytes);
    return d;
}
static float *down_f(const float *d, size_t n) {
    float *h = falloc(n);
    cuda_download(h, d, n * sizeof(float));
    return h;
}
static double *down_d(const double *d, size_t n) {
    double *h = dalloc(n);
    cuda_download(h, d, n * sizeof(double));
    return h;
}

static void check_d(const char *name, const double *got, const double *want, size_t n, double tol) {
    const double err = rel_err(got, want, n);
    size_t j = 0;
    for (size_t i = 1; i < n; i++) if (fabs(want[i]) > fabs(want[j])) j = i;
    double *mut = dalloc(n);
    memcpy(mut, got, n * sizeof(double));
    mut[j] = mut[j] * 1.01 + (mut[j] == 0.0 ? 1e-3 : 0.0);
    const double err_mut = rel_err(mut, want, n);
    free(mut);
    const int ok = err <= tol && !isnan(err), sensitive = err_mut > tol;
    g_checks++;
    if (!ok || !sensitive) g_failed++;
    printf("%-4s %-64s max rel err %.2e (tol %.0e)%s\n", ok && sensitive ? "ok" : "FAIL", name, err, tol,
           sensitive ? "" : "  [a 1% error would pass: tolerance too loose]");
}
static void check_f(const char *name, const float *got, const float *want, size_t n, double tol) {
    double *g = dalloc(n), *w = dalloc(n);
    for (size_t i = 0; i < n; i++) { g[i] = got[i]; w[i] = want[i]; }
    check_d(name, g, w, n, tol);
    free(g);
    free(w);
}
/* Bit-for-bit equality of float arrays. A NaN matches any NaN: the GPU returns its canonical
 * NaN where the CPU keeps the operand's payload and sign, and either one is "not a number". */
static void check_bits(const char *name, const float *got, const float *want, size_t n) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0 && !(isnan(got[i]) && isnan(want[i]))) {
            if (!bad) first = i;
            bad++;
        }
    g_checks++;
    if (bad) g_failed++;
    if (bad)
        printf("FAIL %-64s %zu of %zu differ (first at %zu: %.9g vs %.9g)\n", name, bad, n, first,
               (double)got[first], (double)want[first]);
    else
        printf("ok   %-64s bit-identical (%zu values)\n", name, n);
}
static void check_true(const char *name, int cond) {
    g_checks++;
    if (!cond) g_failed++;
    printf("%-4s %s\n", cond ? "ok" : "FAIL", name);
}

/* ---- convolution ---- */

#define CONV_TOL 2e-4

static const char *layout_name(int layout) { return layout < 0 ? "auto" : layout ? "OHWI" : "OIHW"; }

/* Forward, dx and dw (accumulated onto a random starting gradient) against the reference
 * convolution, for one shape and one weight layout. Weights and gradient sit `off` floats
 * into their buffers: 1 is only 4-byte aligned, as a layer's can be in the flat buffer. */
static void test_conv(int layout, int off, int Ci, int Co, int k, int s, int p, int N, int H, int W) {
    cuda_set_conv_filter_layout(layout);
    const ConvShape cs = { .C_in = Ci, .C_out = Co, .k = k, .stride = s, .pad = p };
    CudaConv2d g;
    cuda_conv2d_init(&g, &cs);
    Conv2d c;
    conv2d_init(&c, &cs);
    const int Ho = conv_out_size(&cs, H), Wo = conv_out_size(&cs, W);
    const size_t nx = (size_t)N * H * W * Ci, nw = (size_t)Co * Ci * k * k, ny = (size_t)N * Ho * Wo * Co;
    float *x = frand(nx, 1.0), *w = frand(nw + off, 0.5), *dy = frand(ny, 1.0), *dw0 = frand(nw + off, 0.1);
    float *y_ref = falloc(ny), *dx_ref = falloc(nx), *dw_ref = falloc(nw + off);
    memcpy(dw_ref, dw0, (nw + off) * sizeof(float));
    conv2d_reference_forward(&c, N, H, W, x, w + off, y_ref);
    conv2d_reference_backward(&c, N, H, W, x, w + off, dy, dx_ref, dw_ref + off);

    float *dx_ = up(x, nx * sizeof(float)), *dw_ = up(w, (nw + off) * sizeof(float));
    float *ddy = up(dy, ny * sizeof(float)), *ddw = up(dw0, (nw + off) * sizeof(float));
    float *dyo = cuda_malloc(ny * sizeof(float)), *ddx = cuda_malloc(nx * sizeof(float));
    cuda_conv2d_forward(&g, N, H, W, dx_, dw_ + off, dyo);
    cuda_conv2d_backward(&g, N, H, W, dx_, dw_ + off, ddy, ddx, ddw + off);
    float *y = down_f(dyo, ny), *dxg = down_f(ddx, nx), *dwg = down_f(ddw, nw + off);

    char name[160], shape[96];
    snprintf(shape, sizeof shape, "%dx%d s%d p%d %d->%d N%d %dx%d %s%s", k, k, s, p, Ci, Co, N, H, W,
             layout_name(layout), off % 4 ? " unaligned" : "");
    const char *impl = cuda_conv2d_impl_name(&g, N, H, W);
    printf("     conv %s: %s\n", shape, impl);
    if (layout == 0 && strstr(impl, "filter OHWI"))
        printf("SKIP conv %s: this cuDNN has no algorithm for OIHW weights with NHWC activations; "
               "checked with the OHWI copy it fell back to\n", shape);
    snprintf(name, sizeof name, "conv %s: y", shape);
    check_f(name, y, y_ref, ny, CONV_TOL);
    snprintf(name, sizeof name, "conv %s: dx", shape);
    check_f(name, dxg, dx_ref, nx, CONV_TOL);
    snprintf(name, sizeof name, "conv %s: dw (+=)", shape);
    check_f(name, dwg + off, dw_ref + off, nw, CONV_TOL);
    if (off) {
        snprintf(name, sizeof name, "conv %s: float before dw untouched", shape);
        check_true(name, memcmp(&dwg[0], &dw0[0], sizeof(float)) == 0);
    }

    /* Reproducible: a second forward and a second backward from the same gradient give the
     * same bits. The weights "change" in between so an OHWI copy is rebuilt too. */
    cuda_conv2d_weights_changed(&g);
    cuda_upload(ddw, dw0, (nw + off) * sizeof(float));
    cuda_conv2d_forward(&g, N, H, W, dx_, dw_ + off, dyo);
    cuda_conv2d_backward(&g, N, H, W, dx_, dw_ + off, ddy, ddx, ddw + off);
    float *y2 = down_f(dyo, ny), *dx2 = down_f(ddx, nx), *dw2 = down_f(ddw, nw + off);
    snprintf(name, sizeof name, "conv %s: y, dx, dw reproducible", shape);
    check_true(name, !memcmp(y, y2, ny * sizeof(float)) && !memcmp(dxg, dx2, nx * sizeof(float)) &&
                     !memcmp(dwg, dw2, (nw + off) * sizeof(float)));

    /* dx == NULL: only the weight gradient. */
    cuda_upload(ddw, dw0, (nw + off) * sizeof(float));
    cuda_conv2d_backward(&g, N, H, W, dx_, dw_ + off, ddy, NULL, ddw + off);
    float *dw3 = down_f(ddw, nw + off);
    snprintf(name, sizeof name, "conv %s: dw without dx", shape);
    check_true(name, !memcmp(dwg, dw3, (nw + off) * sizeof(float)));

    cuda_sync("conv test");
    cuda_free(dx_); cuda_free(dw_); cuda_free(ddy); cuda_free(ddw); cuda_free(dyo); cuda_free(ddx);
    free(x); free(w); free(dy); free(dw0); free(y_ref); free(dx_ref); free(dw_ref);
    free(y); free(dxg); free(dwg); free(y2); free(dx2); free(dw2); free(dw3);
    cuda_conv2d_free(&g);
    conv2d_free(&c);
    cuda_set_conv_filter_layout(-1);
}

/* ---- mixed precision ---- */

/* Round to nearest even into bf16 / fp16 and back, on the host. */
static float round_bf16(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u) return v;
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&v, &u, sizeof v);
    return v;
}
static float round_fp16(float v) { return (float)(_Float16)v; }

static void test_amp_conv(int amp, int Ci, int Co, int k, int s, int p, int N, int H, int W) {
    float (*rnd)(float) = amp == CUDA_AMP_BF16 ? round_bf16 : round_fp16;
    const char *tname = amp == CUDA_AMP_BF16 ? "bf16" : "fp16";
    const double tol = amp == CUDA_AMP_BF16 ? 6e-3 : 1.5e-3;
    cuda_set_amp(amp);
    const ConvShape cs = { .C_in = Ci, .C_out = Co, .k = k, .stride = s, .pad = p };
    CudaConv2d g;
    cuda_conv2d_init(&g, &cs);
    cuda_set_amp(CUDA_AMP_OFF);
    Conv2d c;
    conv2d_init(&c, &cs);
    const int Ho = conv_out_size(&cs, H), Wo = conv_out_size(&cs, W);
    const size_t nx = (size_t)N * H * W * Ci, nw = (size_t)Co * Ci * k * k, ny = (size_t)N * Ho * Wo * Co;
    float *x = frand(nx, 1.0), *w = frand(nw + 1, 0.5), *dy = frand(ny, 1.0), *dw0 = frand(nw + 1, 0.1);
    float *xr = falloc(nx), *wr = falloc(nw), *dyr = falloc(ny);
    for (size_t i = 0; i < nx; i++) xr[i] = rnd(x[i]);
    for (size_t i = 0; i < nw; i++) wr[i] = rnd(w[1 + i]);
    for (size_t i = 0; i < ny; i++) dyr[i] = rnd(dy[i]);
    float *y_ref = falloc(ny), *dx_ref = falloc(nx), *dw_ref = falloc(nw);
    memcpy(dw_ref, dw0 + 1, nw * sizeof(float));
    conv2d_reference_forward(&c, N, H, W, xr, wr, y_ref);
    conv2d_reference_backward(&c, N, H, W, xr, wr, dyr, dx_ref, dw_ref);

    /* weights one float into their buffer, as in the flat parameter buffer */
    float *d_x = up(x, nx * sizeof(float)), *d_w = up(w, (nw + 1) * sizeof(float));
    float *d_dy = up(dy, ny * sizeof(float)), *d_dw = up(dw0, (nw + 1) * sizeof(float));
    float *d_y = cuda_malloc(ny * sizeof(float)), *d_dx = cuda_malloc(nx * sizeof(float));
    cuda_conv2d_forward(&g, N, H, W, d_x, d_w + 1, d_y);
    cuda_conv2d_backward(&g, N, H, W, d_x, d_w + 1, d_dy, d_dx, d_dw + 1);
    float *y = down_f(d_y, ny), *dxg = down_f(d_dx, nx), *dwg = down_f(d_dw, nw + 1);
    char name[256], shape[96];
    snprintf(shape, sizeof shape, "%s %dx%d s%d %d->%d N%d %dx%d", tname, k, k, s, Ci, Co, N, H, W);
    const char *impl = cuda_conv2d_impl_name(&g, N, H, W);
    printf("     conv %s: %s\n", shape, impl);
    if (strncmp(impl, tname, 4) != 0) {
        /* cuDNN had no 16-bit algorithm: the layer runs in float32 (allowed, and visible). */
        snprintf(name, sizeof name, "conv %s: fell back to float32, still matches the float32 reference", shape);
        float *y32 = falloc(ny);
        conv2d_reference_forward(&c, N, H, W, x, w + 1, y32);
        check_f(name, y, y32, ny, CONV_TOL);
        free(y32);
    } else {
        snprintf(name, sizeof name, "conv %s: y", shape);
        check_f(name, y, y_ref, ny, tol);
        snprintf(name, sizeof name, "conv %s: dx", shape);
        check_f(name, dxg, dx_ref, nx, tol);
        snprintf(name, sizeof name, "conv %s: dw (+= in float32)", shape);
        check_f(name, dwg + 1, dw_ref, nw, tol);
    }
    snprintf(name, sizeof name, "conv %s: float before dw untouched", shape);
    check_true(name, memcmp(&dwg[0], &dw0[0], sizeof(float)) == 0);
    /* the 16-bit weight copy follows the master: new weights, new output */
    for (size_t i = 0; i < nw; i++) w[1 + i] = -w[1 + i];
    cuda_upload(d_w, w, (nw + 1) * sizeof(float));
    cuda_conv2d_weights_changed(&g);
    cuda_conv2d_forward(&g, N, H, W, d_x, d_w + 1, d_y);
    float *y2 = down_f(d_y, ny);
    size_t neg = 0;
    for (size_t i = 0; i < ny; i++) neg += y2[i] == -y[i];
    snprintf(name, sizeof name, "conv %s: negated weights after weights_changed negate y (%zu of %zu)", shape, neg, ny);
    check_true(name, neg == ny);
    cuda_sync("amp conv test");
    cuda_free(d_x); cuda_free(d_w); cuda_free(d_dy); cuda_free(d_dw); cuda_free(d_y); cuda_free(d_dx);
    free(x); free(w); free(dy); free(dw0); free(xr); free(wr); free(dyr); free(y_ref); free(dx_ref); free(dw_ref);
    free(y); free(dxg); free(dwg); free(y2);
    cuda_conv2d_free(&g);
    conv2d_free(&c);
}

static void test_amp_convs(void) {
    static const int shapes[][8] = {
        { 3, 64, 3, 1, 1, 8, 32, 32 },     /* the first convolution: 3 channels may have no 16-bit algorithm */
        { 64, 64, 3, 1, 1, 8, 32, 32 },
        { 64, 128, 3, 2, 1, 8, 32, 32 },
        { 64, 128, 1, 2, 0, 8, 32, 32 },
        { 256, 256, 3, 1, 1, 8, 8, 8 },
    };
    for (int amp = CUDA_AMP_BF16; amp <= CUDA_AMP_FP16; amp++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            const int *s = shapes[i];
            test_amp_conv(amp, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]);
        }
}

/* ---- 16-bit activation storage ---- */

static uint16_t bits16(float v, int t) {
    if (t == CUDA_AMP_FP16) {
        _Float16 h = (_Float16)v;
        uint16_t b;
        memcpy(&b, &h, sizeof b);
        return b;
    }
    const float r = round_bf16(v);
    uint32_t u;
    memcpy(&u, &r, sizeof u);
    return (uint16_t)(u >> 16);
}
static float from16(uint16_t b, int t) {
    if (t == CUDA_AMP_FP16) {
        _Float16 h;
        memcpy(&h, &b, sizeof h);
        return (float)h;
    }
    const uint32_t u = (uint32_t)b << 16;
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}
/* x rounded to the 16-bit type, in place; and device copies in that type and back. */
static void round16(float *x, size_t n, int t) { for (size_t i = 0; i < n; i++) x[i] = from16(bits16(x[i], t), t); }
static void *up16(const float *x, size_t n, int t) {
    uint16_t *b = malloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++) b[i] = bits16(x[i], t);
    void *d = up(b, n * sizeof *b);
    free(b);
    return d;
}
static float *down16(const void *d, size_t n, int t) {
    uint16_t *b = malloc(n * sizeof *b);
    cuda_download(b, d, n * sizeof *b);
    float *x = falloc(n);
    for (size_t i = 0; i < n; i++) x[i] = from16(b[i], t);
    free(b);
    return x;
}

static void test_act16(int t) {
    const char *tn = t == CUDA_AMP_BF16 ? "bf16" : "fp16";
    const double tol = t == CUDA_AMP_BF16 ? 6e-3 : 1.5e-3;
    char name[200];
    cuda_set_act_storage(t);
    check_true(t == CUDA_AMP_BF16 ? "act16 bf16: 2-byte elements" : "act16 fp16: 2-byte elements", cuda_act_bytes() == 2);
    const size_t M = 4096;
    const int C = 48;
    const size_t n = M * (size_t)C;
    float *x = frand(n, 2.0), *res = frand(n, 1.0), *dy = frand(n, 1.0), *s2 = frand(n, 1.0);
    round16(x, n, t); round16(res, n, t); round16(dy, n, t); round16(s2, n, t);
    float *gamma = frand((size_t)C, 1.0), *beta = frand((size_t)C, 1.0);
    void *d_x = up16(x, n, t), *d_res = up16(res, n, t), *d_dy = up16(dy, n, t), *d_s2 = up16(s2, n, t);
    void *d_y = cuda_malloc(n * 2);

    /* act_input: float32 in, the rounded values out */
    float *xf = frand(n, 2.0), *xr = falloc(n);
    memcpy(xr, xf, n * sizeof(float));
    round16(xr, n, t);
    float *d_xf = up(xf, n * sizeof(float));
    const float *d_in = cuda_act_input(d_xf, n, d_y);
    float *gin = down16(d_in, n, t);
    snprintf(name, sizeof name, "act16 %s: act_input rounds the float32 batch", tn);
    check_bits(name, gin, xr, n);

    /* batch-norm statistics: sums of the same values */
    double *sum = dalloc((size_t)C), *sq = dalloc((size_t)C);
    bn_stats(x, M, C, sum, sq);
    double *d_st = cuda_malloc((1 + 2 * (size_t)C) * sizeof(double));
    cuda_bn_stats(d_x, M, C, d_st + 1, d_st + 1 + C, d_st);
    double *st = down_d(d_st, 1 + 2 * (size_t)C);
    snprintf(name, sizeof name, "act16 %s: bn sum, sum of squares", tn);
    check_d(name, st + 1, sum, (size_t)C, 1e-12);
    check_d(name, st + 1 + C, sq, (size_t)C, 1e-12);
    float *mean = falloc((size_t)C), *invstd = falloc((size_t)C);
    bn_finalize_stats(sum, sq, (double)M, C, 1e-5f, 0.1f, mean, invstd, NULL, NULL);
    float *d_mean = up(mean, (size_t)C * sizeof(float)), *d_inv = up(invstd, (size_t)C * sizeof(float));
    float *d_g = up(gamma, (size_t)C * sizeof(float)), *d_b = up(beta, (size_t)C * sizeof(float));

    /* apply with residual and ReLU */
    float *y = falloc(n);
    bn_apply(x, y, M, C, mean, invstd, gamma, beta, res, 1);
    cuda_bn_apply(d_x, d_y, M, C, d_mean, d_inv, d_g, d_b, d_res, 1);
    float *gy = down16(d_y, n, t);
    snprintf(name, sizeof name, "act16 %s: bn apply +residual +relu", tn);
    check_f(name, gy, y, n, tol);
    /* backward from the GPU's (rounded) y, so both sides mask the same elements */
    float *g_cpu = falloc(n);
    double *sg = dalloc((size_t)C), *sgx = dalloc((size_t)C);
    bn_backward_reduce(x, gy, dy, g_cpu, M, C, mean, invstd, 1, sg, sgx);
    double *d_red = cuda_malloc(2 * (size_t)C * sizeof(double));
    cuda_bn_backward_reduce(d_x, d_y, d_dy, d_dy, M, C, d_mean, d_inv, 1, d_red, d_red + C);
    float *gg = down16(d_dy, n, t);
    double *red = down_d(d_red, 2 * (size_t)C);
    snprintf(name, sizeof name, "act16 %s: bn backward g (a mask: exact)", tn);
    check_bits(name, gg, g_cpu, n);
    snprintf(name, sizeof name, "act16 %s: bn backward sum_g, sum_gx", tn);
    check_d(name, red, sg, (size_t)C, 1e-12);
    check_d(name, red + C, sgx, (size_t)C, 1e-12);
    double cnt = (double)M;
    double *d_sg = up(sg, (size_t)C * sizeof(double)), *d_sgx = up(sgx, (size_t)C * sizeof(double));
    double *d_cnt = up(&cnt, sizeof cnt);
    float *dx = falloc(n);
    bn_backward_apply(x, g_cpu, dx, M, C, mean, invstd, gamma, sg, sgx, sg, sgx, cnt, NULL, NULL);
    cuda_bn_backward_apply(d_x, d_dy, d_dy, M, C, d_mean, d_inv, d_g, d_sg, d_sgx, d_sg, d_sgx, d_cnt, NULL, NULL);
    float *gdx = down16(d_dy, n, t);
    snprintf(name, sizeof name, "act16 %s: bn backward dx", tn);
    check_f(name, gdx, dx, n, tol);

    /* relu mask (exact) and the residual-gradient add */
    float *mg = falloc(n), *mo = falloc(n);
    for (size_t i = 0; i < n; i++) mg[i] = mo[i] = gy[i] > 0.0f ? s2[i] : 0.0f;
    void *d_o = cuda_malloc(n * 2);
    cuda_relu_mask_copy(d_s2, d_y, d_o, n);
    float *gm = down16(d_s2, n, t), *go = down16(d_o, n, t);
    snprintf(name, sizeof name, "act16 %s: relu_mask_copy g and out (exact)", tn);
    check_bits(name, gm, mg, n);
    check_bits(name, go, mo, n);
    float *sum_ref = falloc(n);
    for (size_t i = 0; i < n; i++) sum_ref[i] = mo[i] + res[i];
    cuda_add_act_inplace(d_o, d_res, n);
    float *gsum = down16(d_o, n, t);
    snprintf(name, sizeof name, "act16 %s: add_act_inplace", tn);
    check_f(name, gsum, sum_ref, n, tol);

    /* average pool: 16-bit in, float32 out; and back */
    const int N = 64, HW = 64;
    float *pool = falloc((size_t)N * C), *d_pool = cuda_malloc((size_t)N * C * sizeof(float));
    avgpool_forward(x, pool, N, HW, C);
    cuda_avgpool_forward(d_x, d_pool, N, HW, C);
    float *gpool = down_f(d_pool, (size_t)N * C);
    snprintf(name, sizeof name, "act16 %s: avgpool forward (float32 out)", tn);
    check_f(name, gpool, pool, (size_t)N * C, 1e-6);
    avgpool_backward(pool, dx, N, HW, C);
    cuda_avgpool_backward(d_pool, d_o, N, HW, C);
    float *gpb = down16(d_o, n, t);
    snprintf(name, sizeof name, "act16 %s: avgpool backward (16-bit out)", tn);
    check_f(name, gpb, dx, n, tol);

    /* a convolution computing in the 16-bit type and one computing in float32, both on
     * 16-bit activations */
    for (int compute = 0; compute < 2; compute++) {
        const int Ci = 64, Co = 64, Hc = 16, Nc = 8;
        cuda_set_amp(compute ? t : CUDA_AMP_OFF);
        const ConvShape cs = { .C_in = Ci, .C_out = Co, .k = 3, .stride = 1, .pad = 1 };
        CudaConv2d g;
        cuda_conv2d_init(&g, &cs);
        cuda_set_amp(CUDA_AMP_OFF);
        Conv2d c;
        conv2d_init(&c, &cs);
        const size_t nx = (size_t)Nc * Hc * Hc * Ci, nw = (size_t)Co * Ci * 9;
        float *cx = frand(nx, 1.0), *w = frand(nw, 0.2), *cdy = frand(nx, 1.0), *wr = falloc(nw);
        round16(cx, nx, t); round16(cdy, nx, t);
        memcpy(wr, w, nw * sizeof(float));
        if (compute) round16(wr, nw, t);
        float *cy = falloc(nx), *cdx = falloc(nx), *cdw = calloc(nw, sizeof(float));
        conv2d_reference_forward(&c, Nc, Hc, Hc, cx, wr, cy);
        conv2d_reference_backward(&c, Nc, Hc, Hc, cx, wr, cdy, cdx, cdw);
        void *dcx = up16(cx, nx, t), *dcdy = up16(cdy, nx, t), *dcy = cuda_malloc(nx * 2), *dcdx = cuda_malloc(nx * 2);
        float *dw_ = up(w, nw * sizeof(float)), *ddw = cuda_malloc(nw * sizeof(float));
        cuda_memset_zero(ddw, nw * sizeof(float));
        cuda_conv2d_forward(&g, Nc, Hc, Hc, dcx, dw_, dcy);
        cuda_conv2d_backward(&g, Nc, Hc, Hc, dcx, dw_, dcdy, dcdx, ddw);
        float *gcy = down16(dcy, nx, t), *gcdx = down16(dcdx, nx, t), *gcdw = down_f(ddw, nw);
        const char *impl = cuda_conv2d_impl_name(&g, Nc, Hc, Hc);
        printf("     conv act16 %s, compute %s: %s\n", tn, compute ? tn : "fp32", impl);
        snprintf(name, sizeof name, "act16 %s conv (%.4s compute): y, dx, dw", tn, impl);
        check_f(name, gcy, cy, nx, tol);
        check_f(name, gcdx, cdx, nx, tol);
        check_f(name, gcdw, cdw, nw, tol);
        cuda_sync("act16 conv test");
        cuda_free(dcx); cuda_free(dcdy); cuda_free(dcy); cuda_free(dcdx); cuda_free(dw_); cuda_free(ddw);
        free(cx); free(w); free(cdy); free(wr); free(cy); free(cdx); free(cdw); free(gcy); free(gcdx); free(gcdw);
        cuda_conv2d_free(&g);
        conv2d_free(&c);
    }

    cuda_sync("act16 test");
    cuda_set_act_storage(CUDA_AMP_OFF);
    void *dev[] = { d_x, d_res, d_dy, d_s2, d_y, d_xf, d_st, d_mean, d_inv, d_g, d_b, d_red, d_sg, d_sgx, d_cnt,
                    d_o, d_pool };
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) cuda_free(dev[i]);
    void *host[] = { x, res, dy, s2, gamma, beta, xf, xr, gin, sum, sq, st, mean, invstd, y, gy, g_cpu, sg, sgx, gg,
                     red, dx, gdx, mg, mo, gm, go, sum_ref, gsum, pool, gpool, gpb };
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
}

/* The loss scaler's kernels against the CPU backend, which shares scaler_update_rule. */
static void test_scaler_kernels(size_t n) {
    const Backend *cpu = &backend_cpu;
    char name[160];
    float *g = frand(n, 1000.0);
    float scale = 1024.0f;
    int st[SCALER_NSTATE] = {0, 0, 0};
    float *d_g = up(g, n * sizeof(float)), *d_scale = up(&scale, sizeof scale);
    int *d_st = up(st, sizeof st);
    /* scale_inplace */
    float *gs = falloc(n);
    memcpy(gs, g, n * sizeof(float));
    cpu->scale_inplace(gs, n, &scale);
    cuda_scale_inplace(d_g, n, d_scale);
    float *got = down_f(d_g, n);
    snprintf(name, sizeof name, "scale_inplace n=%zu", n);
    check_bits(name, got, gs, n);
    free(got);
    /* unscale without and with an overflow, the update after each, a skipped SGD step */
    for (int round = 0; round < 3; round++) {
        if (round == 1) gs[n / 2] = INFINITY;
        if (round == 2) gs[n - 1] = NAN;
        cuda_upload(d_g, gs, n * sizeof(float));
        cpu->unscale_check(gs, n, &scale, &st[SCALER_FOUND_INF]);
        cuda_unscale_check(d_g, n, d_scale, d_st + SCALER_FOUND_INF);
        got = down_f(d_g, n);
        int gst[SCALER_NSTATE];
        cuda_download(gst, d_st, sizeof gst);
        snprintf(name, sizeof name, "unscale_check n=%zu round %d: gradients", n, round);
        check_bits(name, got, gs, n);
        snprintf(name, sizeof name, "unscale_check round %d: found_inf %d (want %d)", round, gst[SCALER_FOUND_INF],
                 round > 0);
        check_true(name, gst[SCALER_FOUND_INF] == st[SCALER_FOUND_INF] && st[SCALER_FOUND_INF] == (round > 0));
        free(got);
        /* SGD honours the flag */
        float p0[4] = {1, 2, 3, 4}, b0[4] = {0, 0, 0, 0}, p1[4];
        float *d_p = up(p0, sizeof p0), *d_b = up(b0, sizeof b0);
        cuda_sgd_step(d_p, d_g, d_b, 4, 0.1f, 0.9f, 0.0f, 0, d_st + SCALER_FOUND_INF);
        cuda_download(p1, d_p, sizeof p1);
        snprintf(name, sizeof name, "sgd with skip flag %d: parameters %s", st[SCALER_FOUND_INF],
                 st[SCALER_FOUND_INF] ? "unchanged" : "updated");
        check_true(name, (memcmp(p0, p1, sizeof p0) == 0) == (st[SCALER_FOUND_INF] != 0));
        cuda_free(d_p); cuda_free(d_b);
        cpu->scaler_update(&scale, st, 2.0f, 0.5f, 2);
        cuda_scaler_update(d_scale, d_st, 2.0f, 0.5f, 2);
        float gscale;
        cuda_download(&gscale, d_scale, sizeof gscale);
        cuda_download(gst, d_st, sizeof gst);
        snprintf(name, sizeof name, "scaler_update round %d: scale %g tracker %d skipped %d", round, (double)gscale,
                 gst[SCALER_TRACKER], gst[SCALER_SKIPPED]);
        check_true(name, gscale == scale && !memcmp(gst, st, sizeof st));
        memcpy(gs, g, n * sizeof(float));
    }
    check_true("scaler: 1 clean + 2 overflowing steps: scale 1024 -> 256, 2 skipped", scale == 256.0f && st[SCALER_SKIPPED] == 2);
    cuda_sync("scaler test");
    cuda_free(d_g); cuda_free(d_scale); cuda_free(d_st);
    free(g); free(gs);
}

static void test_convs(void) {
    /* MiniResNet's kinds of conv (the first from 3 channels, 3x3 stride 1 and 2, 1x1 stride-2
     * shortcut) at width 16, plus an odd shape (odd sizes, channels not a multiple of 4). */
    static const int shapes[][8] = {
        /* Ci, Co, k, s, p, N, H, W */
        { 3, 16, 3, 1, 1, 4, 32, 32 },
        { 16, 16, 3, 1, 1, 4, 32, 32 },
        { 16, 32, 3, 2, 1, 4, 32, 32 },
        { 16, 32, 1, 2, 0, 4, 32, 32 },
        { 32, 64, 3, 2, 1, 4, 16, 16 },
        { 64, 64, 3, 1, 1, 4, 8, 8 },
        { 5, 7, 3, 2, 1, 3, 9, 11 },
    };
    /* The OHWI copy first (cuDNN's native NHWC pairing), then OIHW weights read from the flat
     * buffer, aligned and then only 4-byte aligned: a failure in a later group then says
     * exactly which assumption does not hold. */
    static const int groups[][2] = { { 1, 1 }, { 0, 0 }, { 0, 1 } };   /* layout, offset */
    for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            const int *s = shapes[i];
            test_conv(groups[gi][0], groups[gi][1], s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]);
        }
    /* The default (auto) layout, on one shape, to see what it picks. */
    test_conv(-1, 1, 16, 32, 3, 2, 1, 4, 32, 32);
}

/* ---- batch norm ---- */

static void test_bn(size_t M, int C) {
    char name[160], tag[64];
    snprintf(tag, sizeof tag, "bn M=%zu C=%d", M, C);
    const size_t n = M * (size_t)C;
    /* Offset and scale per channel so that mean and variance are not trivial. */
    float *x = falloc(n), *res = frand(n, 1.0), *dy = frand(n, 1.0);
    for (size_t r = 0; r < M; r++)
        for (int c = 0; c < C; c++) x[r * C + c] = (float)(urand() * (1.0 + c % 5) + 0.3 * (c % 7) - 1.0);
    float *gamma = frand((size_t)C, 1.0), *beta = frand((size_t)C, 1.0);
    float *rm = frand((size_t)C, 0.5), *rv = falloc((size_t)C);
    for (int c = 0; c < C; c++) rv[c] = (float)(1.0 + 0.5 * urand());

    /* stats */
    double *sum = dalloc((size_t)C), *sq = dalloc((size_t)C);
    bn_stats(x, M, C, sum, sq);
    float *d_x = up(x, n * sizeof(float));
    double *d_stats = cuda_malloc((1 + 2 * (size_t)C) * sizeof(double));   /* [count, sum, sumsq] */
    cuda_bn_stats(d_x, M, C, d_stats + 1, d_stats + 1 + C, d_stats);
    double *st = down_d(d_stats, 1 + 2 * (size_t)C);
    snprintf(name, sizeof name, "%s: count", tag);
    check_true(name, st[0] == (double)M);
    snprintf(name, sizeof name, "%s: sum", tag);
    check_d(name, st + 1, sum, (size_t)C, 1e-12);
    snprintf(name, sizeof name, "%s: sum of squares", tag);
    check_d(name, st + 1 + C, sq, (size_t)C, 1e-12);
    cuda_bn_stats(d_x, M, C, d_stats + 1, d_stats + 1 + C, NULL);
    double *st2 = down_d(d_stats, 1 + 2 * (size_t)C);
    snprintf(name, sizeof name, "%s: stats reproducible", tag);
    check_true(name, !memcmp(st, st2, (1 + 2 * (size_t)C) * sizeof(double)));

    /* finalize, from the same (CPU) sums on both sides: same double arithmetic */
    float *mean = falloc((size_t)C), *invstd = falloc((size_t)C), *rm_c = falloc((size_t)C), *rv_c = falloc((size_t)C);
    memcpy(rm_c, rm, (size_t)C * sizeof(float));
    memcpy(rv_c, rv, (size_t)C * sizeof(float));
    bn_finalize_stats(sum, sq, (double)M, C, 1e-5f, 0.1f, mean, invstd, rm_c, rv_c);
    double cnt = (double)M;
    double *d_sum = up(sum, (size_t)C * sizeof(double)), *d_sq = up(sq, (size_t)C * sizeof(double));
    double *d_cnt = up(&cnt, sizeof cnt);
    float *d_mean = cuda_malloc((size_t)C * sizeof(float)), *d_inv = cuda_malloc((size_t)C * sizeof(float));
    float *d_rm = up(rm, (size_t)C * sizeof(float)), *d_rv = up(rv, (size_t)C * sizeof(float));
    cuda_bn_finalize_stats(d_sum, d_sq, d_cnt, C, 1e-5f, 0.1f, d_mean, d_inv, d_rm, d_rv);
    float *g_mean = down_f(d_mean, (size_t)C), *g_inv = down_f(d_inv, (size_t)C);
    float *g_rm = down_f(d_rm, (size_t)C), *g_rv = down_f(d_rv, (size_t)C);
    snprintf(name, sizeof name, "%s: finalize mean", tag);
    check_bits(name, g_mean, mean, (size_t)C);
    snprintf(name, sizeof name, "%s: finalize invstd", tag);
    check_f(name, g_inv, invstd, (size_t)C, 1e-6);
    snprintf(name, sizeof name, "%s: running mean", tag);
    check_bits(name, g_rm, rm_c, (size_t)C);
    snprintf(name, sizeof name, "%s: running var", tag);
    check_f(name, g_rv, rv_c, (size_t)C, 1e-6);

    /* eval statistics, as the CPU backend computes them (rules.h) */
    float *e_inv = falloc((size_t)C);
    for (int c = 0; c < C; c++) e_inv[c] = 1.0f / sqrtf(rv[c] + 1e-5f);
    float *d_rv0 = up(rv, (size_t)C * sizeof(float)), *d_rm0 = up(rm, (size_t)C * sizeof(float));
    float *d_em = cuda_malloc((size_t)C * sizeof(float)), *d_ei = cuda_malloc((size_t)C * sizeof(float));
    cuda_bn_eval_stats(d_rm0, d_rv0, C, 1e-5f, d_em, d_ei);
    float *g_em = down_f(d_em, (size_t)C), *g_ei = down_f(d_ei, (size_t)C);
    snprintf(name, sizeof name, "%s: eval mean, invstd", tag);
    check_bits(name, g_ei, e_inv, (size_t)C);
    check_true(name, !memcmp(g_em, rm, (size_t)C * sizeof(float)));

    /* apply, given the CPU's mean and invstd: every variant is bit-identical */
    cuda_upload(d_mean, mean, (size_t)C * sizeof(float));
    cuda_upload(d_inv, invstd, (size_t)C * sizeof(float));
    float *d_g = up(gamma, (size_t)C * sizeof(float)), *d_b = up(beta, (size_t)C * sizeof(float));
    float *d_res = up(res, n * sizeof(float)), *d_y = cuda_malloc(n * sizeof(float));
    float *y = falloc(n);
    for (int variant = 0; variant < 4; variant++) {
        const int relu = variant & 1, use_res = variant >> 1;
        bn_apply(x, y, M, C, mean, invstd, gamma, beta, use_res ? res : NULL, relu);
        cuda_bn_apply(d_x, d_y, M, C, d_mean, d_inv, d_g, d_b, use_res ? d_res : NULL, relu);
        float *gy = down_f(d_y, n);
        snprintf(name, sizeof name, "%s: apply%s%s", tag, use_res ? " +residual" : "", relu ? " +relu" : "");
        check_bits(name, gy, y, n);
        free(gy);
    }
    /* y now holds the residual+relu output on both sides; backward with relu. */
    float *g_cpu = falloc(n);
    double *sg = dalloc((size_t)C), *sgx = dalloc((size_t)C);
    bn_backward_reduce(x, y, dy, g_cpu, M, C, mean, invstd, 1, sg, sgx);
    float *d_dy = up(dy, n * sizeof(float));
    double *d_red = cuda_malloc(2 * (size_t)C * sizeof(double));
    cuda_bn_backward_reduce(d_x, d_y, d_dy, d_dy, M, C, d_mean, d_inv, 1, d_red, d_red + C);   /* g aliases dy */
    float *gg = down_f(d_dy, n);
    double *red = down_d(d_red, 2 * (size_t)C);
    snprintf(name, sizeof name, "%s: backward g (relu mask, in place)", tag);
    check_bits(name, gg, g_cpu, n);
    snprintf(name, sizeof name, "%s: backward sum_g", tag);
    check_d(name, red, sg, (size_t)C, 1e-12);
    snprintf(name, sizeof name, "%s: backward sum_gx", tag);
    check_d(name, red + C, sgx, (size_t)C, 1e-12);

    /* backward apply: "global" sums different from the local ones, as after an all-reduce
     * over two ranks; the CPU's sums on both sides, so dx is bit-identical. */
    double *gsg = dalloc((size_t)C), *gsgx = dalloc((size_t)C);
    for (int c = 0; c < C; c++) { gsg[c] = 2.0 * sg[c] + 0.25; gsgx[c] = 2.0 * sgx[c] - 0.5; }
    const double gcount = 2.0 * (double)M;
    float *dgam0 = frand((size_t)C, 0.1), *dbet0 = frand((size_t)C, 0.1);
    float *dgam = falloc((size_t)C), *dbet = falloc((size_t)C), *dx = falloc(n);
    memcpy(dgam, dgam0, (size_t)C * sizeof(float));
    memcpy(dbet, dbet0, (size_t)C * sizeof(float));
    bn_backward_apply(x, g_cpu, dx, M, C, mean, invstd, gamma, sg, sgx, gsg, gsgx, gcount, dgam, dbet);
    double *d_l = up(sg, (size_t)C * sizeof(double)), *d_lx = up(sgx, (size_t)C * sizeof(double));
    double *d_gl = up(gsg, (size_t)C * sizeof(double)), *d_glx = up(gsgx, (size_t)C * sizeof(double));
    double *d_gc = up(&gcount, sizeof gcount);
    float *d_dgam = up(dgam0, (size_t)C * sizeof(float)), *d_dbet = up(dbet0, (size_t)C * sizeof(float));
    float *d_gin = up(g_cpu, n * sizeof(float));
    cuda_bn_backward_apply(d_x, d_gin, d_gin, M, C, d_mean, d_inv, d_g, d_l, d_lx, d_gl, d_glx, d_gc, d_dgam,
                           d_dbet);   /* dx aliases g */
    float *gdx = down_f(d_gin, n), *gdgam = down_f(d_dgam, (size_t)C), *gdbet = down_f(d_dbet, (size_t)C);
    snprintf(name, sizeof name, "%s: backward dx (in place)", tag);
    check_bits(name, gdx, dx, n);
    snprintf(name, sizeof name, "%s: dgamma, dbeta (+=)", tag);
    check_bits(name, gdgam, dgam, (size_t)C);
    check_bits(name, gdbet, dbet, (size_t)C);

    cuda_sync("bn test");
    void *dev[] = { d_x, d_stats, d_sum, d_sq, d_cnt, d_mean, d_inv, d_rm, d_rv, d_rv0, d_rm0, d_em, d_ei, d_g,
                    d_b, d_res, d_y, d_dy, d_red, d_l, d_lx, d_gl, d_glx, d_gc, d_dgam, d_dbet, d_gin };
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) cuda_free(dev[i]);
    void *host[] = { x, res, dy, gamma, beta, rm, rv, sum, sq, st, st2, mean, invstd, rm_c, rv_c, g_mean, g_inv,
                     g_rm, g_rv, e_inv, g_em, g_ei, y, g_cpu, sg, sgx, gg, red, gsg, gsgx, dgam0, dbet0, dgam,
                     dbet, dx, gdx, gdgam, gdbet };
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
}

/* ---- head ---- */

static void test_head(int N, int HW, int C, int K) {
    char name[160];
    const size_t nx = (size_t)N * HW * C;
    float *x = frand(nx, 1.0), *pooled = falloc((size_t)N * C);
    avgpool_forward(x, pooled, N, HW, C);
    float *d_x = up(x, nx * sizeof(float)), *d_p = cuda_malloc((size_t)N * C * sizeof(float));
    cuda_avgpool_forward(d_x, d_p, N, HW, C);
    float *gp = down_f(d_p, (size_t)N * C);
    snprintf(name, sizeof name, "avgpool N%d HW%d C%d: forward", N, HW, C);
    check_bits(name, gp, pooled, (size_t)N * C);

    /* linear */
    float *w = frand((size_t)K * C, 0.2), *b = frand((size_t)K, 0.2), *logits = falloc((size_t)N * K);
    linear_forward(pooled, w, b, logits, N, C, K);
    float *d_w = up(w, (size_t)K * C * sizeof(float)), *d_b = up(b, (size_t)K * sizeof(float));
    float *d_lg = cuda_malloc((size_t)N * K * sizeof(float));
    cuda_linear_forward(d_p, d_w, d_b, d_lg, N, C, K);
    float *glg = down_f(d_lg, (size_t)N * K);
    snprintf(name, sizeof name, "linear %d->%d N%d: forward", C, K, N);
    check_f(name, glg, logits, (size_t)N * K, 1e-5);

    /* softmax cross-entropy on the CPU logits, labels in [0, K) */
    int *lab = mallocCheck((size_t)N * sizeof(int));
    for (int i = 0; i < N; i++) lab[i] = (int)((urand() + 1.0) * 0.5 * K) % K;
    const float scale = 0.75f;
    float *dl = falloc((size_t)N * K);
    int correct = -1;
    const float loss = softmax_xent(logits, lab, N, K, scale, 0.0f, 1.0f, dl, &correct);
    cuda_upload(d_lg, logits, (size_t)N * K * sizeof(float));
    int *d_lab = up(lab, (size_t)N * sizeof(int));
    float *d_dl = cuda_malloc((size_t)N * K * sizeof(float)), *d_loss = cuda_malloc(sizeof(float));
    int *d_cor = cuda_malloc(sizeof(int));
    cuda_softmax_xent(d_lg, d_lab, N, K, scale, 0.0f, 1.0f, d_dl, d_loss, d_cor);
    float gloss = 0.0f;
    int gcor = -1;
    cuda_download(&gloss, d_loss, sizeof gloss);
    cuda_download(&gcor, d_cor, sizeof gcor);
    float *gdl = down_f(d_dl, (size_t)N * K);
    snprintf(name, sizeof name, "softmax xent N%d K%d: loss", N, K);
    check_f(name, &gloss, &loss, 1, 1e-6);
    snprintf(name, sizeof name, "softmax xent N%d K%d: correct (%d)", N, K, correct);
    check_true(name, gcor == correct);
    snprintf(name, sizeof name, "softmax xent N%d K%d: dlogits", N, K);
    check_f(name, gdl, dl, (size_t)N * K, 1e-6);
    cuda_softmax_xent(d_lg, d_lab, N, K, scale, 0.0f, 1.0f, NULL, d_loss, NULL);   /* evaluation form */
    float gloss2 = 0.0f;
    cuda_download(&gloss2, d_loss, sizeof gloss2);
    snprintf(name, sizeof name, "softmax xent N%d K%d: loss without gradient, reproducible", N, K);
    check_true(name, gloss2 == gloss);

    /* linear backward from the CPU's dlogits */
    float *dw0 = frand((size_t)K * C, 0.1), *db0 = frand((size_t)K, 0.1);
    float *dw = falloc((size_t)K * C), *db = falloc((size_t)K), *dp = falloc((size_t)N * C);
    memcpy(dw, dw0, (size_t)K * C * sizeof(float));
    memcpy(db, db0, (size_t)K * sizeof(float));
    linear_backward(pooled, w, dl, dp, dw, db, N, C, K);
    cuda_upload(d_dl, dl, (size_t)N * K * sizeof(float));
    float *d_dw = up(dw0, (size_t)K * C * sizeof(float)), *d_db = up(db0, (size_t)K * sizeof(float));
    float *d_dp = cuda_malloc((size_t)N * C * sizeof(float));
    cuda_linear_backward(d_p, d_w, d_dl, d_dp, d_dw, d_db, N, C, K);
    float *gdw = down_f(d_dw, (size_t)K * C), *gdb = down_f(d_db, (size_t)K), *gdp = down_f(d_dp, (size_t)N * C);
    snprintf(name, sizeof name, "linear %d->%d N%d: dw (+=)", C, K, N);
    check_f(name, gdw, dw, (size_t)K * C, 1e-5);
    snprintf(name, sizeof name, "linear %d->%d N%d: db (+=)", C, K, N);
    check_bits(name, gdb, db, (size_t)K);
    snprintf(name, sizeof name, "linear %d->%d N%d: dx", C, K, N);
    check_f(name, gdp, dp, (size_t)N * C, 1e-5);

    /* avgpool backward from the CPU's dpooled */
    float *dxp = falloc(nx);
    avgpool_backward(dp, dxp, N, HW, C);
    cuda_upload(d_dp, dp, (size_t)N * C * sizeof(float));
    cuda_avgpool_backward(d_dp, d_x, N, HW, C);
    float *gdxp = down_f(d_x, nx);
    snprintf(name, sizeof name, "avgpool N%d HW%d C%d: backward", N, HW, C);
    check_bits(name, gdxp, dxp, nx);

    cuda_sync("head test");
    void *dev[] = { d_x, d_p, d_w, d_b, d_lg, d_lab, d_dl, d_loss, d_cor, d_dw, d_db, d_dp };
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) cuda_free(dev[i]);
    void *host[] = { x, pooled, gp, w, b, logits, glg, lab, dl, gdl, dw0, db0, dw, db, dp, gdw, gdb, gdp, dxp, gdxp };
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
}

/* ---- elementwise helpers and SGD ---- */

static void test_elementwise(size_t n) {
    char name[160];
    float *g = frand(n, 1.0), *y = frand(n, 1.0), *s = frand(n, 1.0);
    float *g_ref = falloc(n), *out_ref = falloc(n), *d_ref = falloc(n);
    for (size_t i = 0; i < n; i++) {
        const float v = y[i] > 0.0f ? g[i] : 0.0f;
        g_ref[i] = v;
        out_ref[i] = v;
        d_ref[i] = g[i] + s[i];
    }
    float *d_g = up(g, n * sizeof(float)), *d_y = up(y, n * sizeof(float)), *d_o = cuda_malloc(n * sizeof(float));
    cuda_relu_mask_copy(d_g, d_y, d_o, n);
    float *gg = down_f(d_g, n), *go = down_f(d_o, n);
    snprintf(name, sizeof name, "relu_mask_copy n=%zu: g, out", n);
    check_bits(name, gg, g_ref, n);
    check_bits(name, go, out_ref, n);
    float *d_s = up(s, n * sizeof(float));
    cuda_upload(d_g, g, n * sizeof(float));
    cuda_add_inplace(d_g, d_s, n);
    float *ga = down_f(d_g, n);
    snprintf(name, sizeof name, "add_inplace n=%zu", n);
    check_bits(name, ga, d_ref, n);
    /* COMM_AVG's division (comm.h): the host's correctly rounded x / 3, float32 and float64. */
    for (size_t i = 0; i < n; i++) d_ref[i] = ga[i] / 3.0f;
    cuda_div_inplace(d_g, n, 0, 3, cuda_compute_stream());
    float *gd = down_f(d_g, n);
    snprintf(name, sizeof name, "div_inplace float32 by 3, n=%zu", n);
    check_bits(name, gd, d_ref, n);
    const size_t nd = n < 4099 ? n : 4099;
    double *h64 = mallocCheck(nd * sizeof *h64), *w64 = mallocCheck(nd * sizeof *w64), *g64 = mallocCheck(nd * sizeof *g64);
    for (size_t i = 0; i < nd; i++) { h64[i] = (double)ga[i] * 1.000000119; w64[i] = h64[i] / 3.0; }
    double *d64 = up(h64, nd * sizeof *h64);
    cuda_div_inplace(d64, nd, 1, 3, cuda_compute_stream());
    cuda_download(g64, d64, nd * sizeof *g64);
    check_true("div_inplace float64 by 3: bit-identical to the host", !memcmp(g64, w64, nd * sizeof *g64));
    cuda_sync("elementwise test");
    cuda_free(d_g); cuda_free(d_y); cuda_free(d_o); cuda_free(d_s); cuda_free(d64);
    free(g); free(y); free(s); free(g_ref); free(out_ref); free(d_ref); free(gg); free(go); free(ga); free(gd);
    free(h64); free(w64); free(g64);
}

static void test_sgd(size_t n, float momentum, float wd, int nesterov) {
    char name[160];
    float *p = frand(n, 1.0);
    float *d_p = up(p, n * sizeof(float)), *d_g = cuda_malloc(n * sizeof(float)), *d_buf = cuda_malloc(n * sizeof(float));
    cuda_memset_zero(d_buf, n * sizeof(float));
    Optimizer o;
    sgd_init(&o, n, momentum, wd);
    o.nesterov = nesterov;
    for (int step = 0; step < 3; step++) {
        float *g = frand(n, 1.0);
        const float lr = 0.1f / (float)(step + 1);
        optim_step(&o, p, g, lr);
        cuda_upload(d_g, g, n * sizeof(float));
        cuda_sgd_step(d_p, d_g, d_buf, n, lr, momentum, wd, nesterov, NULL);
        free(g);
    }
    float *gp = down_f(d_p, n), *gb = down_f(d_buf, n);
    snprintf(name, sizeof name, "sgd n=%zu momentum %g wd %g%s, 3 steps: params", n, (double)momentum, (double)wd,
             nesterov ? " nesterov" : "");
    check_bits(name, gp, p, n);
    snprintf(name, sizeof name, "sgd n=%zu momentum %g wd %g%s, 3 steps: momentum buffer", n, (double)momentum,
             (double)wd, nesterov ? " nesterov" : "");
    check_bits(name, gb, o.state[0], n);
    cuda_sync("sgd test");
    cuda_free(d_p); cuda_free(d_g); cuda_free(d_buf);
    optim_free(&o);
    free(p); free(gp); free(gb);
}

/* ---- NCCL, one rank ---- */

#ifdef HAVE_NCCL
static void test_nccl(void) {
    char err[512];
    unsigned char id[COMM_NCCL_ID_BYTES];
    Comm *c = comm_nccl_make_id(id, err, sizeof err) == 0
                  ? comm_nccl_create(0, 1, cuda_device(), id, 60.0, err, sizeof err) : NULL;
    if (!c) {
        printf("FAIL nccl: %s\n", err);
        g_checks++;
        g_failed++;
        return;
    }
    printf("     %s\n", comm_describe(c));
    int64_t flags[3] = {0, 1, 5};   /* what the world's start-up check sends: int64 on the host */
    comm_allreduce(c, flags, 3, COMM_INT64, COMM_SUM);
    check_true("nccl: int64 allreduce of a host buffer (staged)", flags[0] == 0 && flags[1] == 1 && flags[2] == 5);

    /* iallreduce ordered after the compute stream: the buffer is written by a kernel queued
     * just before the post. */
    const size_t n = 1 << 20;
    float *h = frand(n, 1.0), *one = falloc(n), *want = falloc(n);
    for (size_t i = 0; i < n; i++) { one[i] = 1.0f; want[i] = h[i] + 1.0f; }
    float *d = up(h, n * sizeof(float)), *d1 = up(one, n * sizeof(float));
    cuda_add_inplace(d, d1, n);
    CommRequest req;
    comm_set_context(c, "test iallreduce");
    comm_iallreduce(c, d, n, COMM_FLOAT32, COMM_SUM, &req);
    comm_wait(c, &req);
    check_true("nccl: request complete after wait", req.active == 0);
    float *got = down_f(d, n);
    check_bits("nccl: iallreduce sum (1 rank) after a compute kernel", got, want, n);
    comm_iallreduce(c, d, n, COMM_FLOAT32, COMM_AVG, &req);
    /* Handed to the compute stream: the host goes on; the guard (comm.h) drains it before a
     * host wait, and the request is still the caller's to complete. */
    check_true("nccl: wait_stream returns before completion is seen", comm_wait_stream(c, &req) == 0);
    comm_guard_host_sync();
    check_true("nccl: request still the caller's after the guard drained it", req.active == 1);
    while (!comm_test(c, &req)) {}
    free(got);
    got = down_f(d, n);
    check_bits("nccl: iallreduce avg (1 rank), completed by test", got, want, n);

    /* More requests in flight than the communicator starts with slots for (the reducer holds 2
     * per bucket): the pool grows instead of failing mid-run. */
    enum { NREQ = 300, M = 1000 };
    CommRequest many[NREQ];
    for (int k = 0; k < NREQ; k++) comm_iallreduce(c, d + (size_t)k * M, M, COMM_FLOAT32, COMM_SUM, &many[k]);
    int still = 0;
    for (int k = NREQ - 1; k >= 0; k--) comm_wait(c, &many[k]);
    for (int k = 0; k < NREQ; k++) still += many[k].active;
    free(got);
    got = down_f(d, n);
    check_true("nccl: 300 iallreduce in flight at once, all completed", still == 0);
    check_bits("nccl: 300 iallreduce in flight (1 rank): data unchanged", got, want, n);

    double hd[5] = { 1.5, -2.25, 3.0, 1e300, 0.5 }, hd0[5];
    memcpy(hd0, hd, sizeof hd);
    double *dd = up(hd, sizeof hd);
    comm_allreduce(c, dd, 5, COMM_FLOAT64, COMM_SUM);
    double got_d[5];
    cuda_download(got_d, dd, sizeof got_d);
    check_true("nccl: allreduce float64 (device buffer)", !memcmp(got_d, hd0, sizeof hd0));
    comm_allreduce(c, hd, 5, COMM_FLOAT64, COMM_AVG);
    check_true("nccl: allreduce float64 avg (host buffer)", !memcmp(hd, hd0, sizeof hd0));

    unsigned char hb[777], hb0[777];
    for (size_t i = 0; i < sizeof hb; i++) hb[i] = hb0[i] = (unsigned char)(i * 7);
    comm_broadcast(c, hb, sizeof hb, 0);
    check_true("nccl: broadcast (host buffer)", !memcmp(hb, hb0, sizeof hb));
    unsigned char *db = up(hb, sizeof hb);
    comm_broadcast(c, db, sizeof hb, 0);
    memset(hb, 0, sizeof hb);
    cuda_download(hb, db, sizeof hb);
    check_true("nccl: broadcast (device buffer)", !memcmp(hb, hb0, sizeof hb));
    /* A barrier that fails or hangs ends the program through the comm's own abort/timeout. */
    comm_barrier(c);

    cuda_sync("nccl test");
    cuda_free(d); cuda_free(d1); cuda_free(dd); cuda_free(db);
    free(h); free(one); free(want); free(got);
    comm_free(c);
}
#endif

/* ---- timing ---- */

static void bench_convs(int N) {
    /* MiniResNet width 64 on 32x32 images: the distinct conv shapes and how often each occurs
     * with 2 blocks per stage. */
    static const int shapes[][6] = {
        /* Ci, Co, k, s, H, count */
        { 3, 64, 3, 1, 32, 1 }, { 64, 64, 3, 1, 32, 4 }, { 64, 128, 3, 2, 32, 1 }, { 64, 128, 1, 2, 32, 1 },
        { 128, 128, 3, 1, 16, 3 }, { 128, 256, 3, 2, 16, 1 }, { 128, 256, 1, 2, 16, 1 }, { 256, 256, 3, 1, 8, 3 },
    };
    for (int bench = 0; bench <= 1; bench++)
        for (int layout = 0; layout <= 1; layout++) {
            cuda_set_conv_benchmark(bench);
            cuda_set_conv_filter_layout(layout);
            double total = 0.0;
            for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
                const int *s = shapes[i];
                CudaConv2d g;
                const ConvShape cs = { .C_in = s[0], .C_out = s[1], .k = s[2], .stride = s[3], .pad = s[2] / 2 };
                cuda_conv2d_init(&g, &cs);
                const int H = s[4], Ho = conv_out_size(&cs, H);
                const size_t nx = (size_t)N * H * H * s[0], ny = (size_t)N * Ho * Ho * s[1];
                const size_t nw = (size_t)s[1] * s[0] * s[2] * s[2];
                float *x = cuda_malloc(nx * 4), *dx = cuda_malloc(nx * 4), *y = cuda_malloc(ny * 4);
                float *w = cuda_malloc(nw * 4), *dw = cuda_malloc(nw * 4);
                cuda_memset_zero(x, nx * 4); cuda_memset_zero(w, nw * 4); cuda_memset_zero(dw, nw * 4);
                const char *impl = cuda_conv2d_impl_name(&g, N, H, H);
                for (int it = 0; it < 3; it++) {   /* warm-up */
                    cuda_conv2d_forward(&g, N, H, H, x, w, y);
                    cuda_conv2d_backward(&g, N, H, H, x, w, y, dx, dw);
                }
                cuda_sync("bench warm-up");
                const int iters = 20;
                const double t0 = now_sec();
                for (int it = 0; it < iters; it++) {
                    cuda_conv2d_forward(&g, N, H, H, x, w, y);
                    cuda_conv2d_backward(&g, N, H, H, x, w, y, dx, dw);
                }
                cuda_sync("bench");
                const double ms = (now_sec() - t0) / iters * 1e3;
                total += ms * s[5];
                printf("bench N%d %-4s %-9s %dx%d s%d %3d->%3d %2dx%2d: %7.3f ms fwd+bwd  [%s]\n", N,
                       layout ? "OHWI" : "OIHW", bench ? "find" : "heuristic", s[2], s[2], s[3], s[0], s[1], H, H,
                       ms, impl);
                cuda_free(x); cuda_free(dx); cuda_free(y); cuda_free(w); cuda_free(dw);
                cuda_conv2d_free(&g);
            }
            printf("bench N%d %-4s %-9s all convs of MiniResNet-64 (2 blocks/stage): %.2f ms fwd+bwd\n", N,
                   layout ? "OHWI" : "OIHW", bench ? "find" : "heuristic", total);
        }
    cuda_set_conv_benchmark(0);
    cuda_set_conv_filter_layout(-1);
}

int main(int argc, char **argv) {
    g_progname = "test_ops_cuda";
    int bench = argc > 1 && !strcmp(argv[1], "--bench");
    char err[512];
    if (cuda_backend_init(0, err, sizeof err) != 0) {
        printf("SKIP: no CUDA device (%s)\n", err);
        return 77;
    }
    cuda_set_tf32(0);
    printf("%s\n", cuda_describe());
    printf("CPU convolutions: %s (the comparisons use the reference convolution)\n", ops_cpu_describe());

    /* Cheapest first, convolutions last: a fatal error in cuDNN ends the program. */
    test_elementwise(1000003);
    test_sgd(1000003, 0.9f, 5e-4f, 0);
    test_sgd(4099, 0.0f, 0.0f, 0);
    test_scaler_kernels(1000003);
    test_bn(8 * 16 * 16, 32);
    test_bn(100003, 16);     /* many row blocks, a partial last one, channels < one warp */
    test_bn(777, 3);
    test_bn(64 * 8 * 8, 256);
    test_head(64, 64, 256, 10);
    test_head(7, 9, 33, 10);
#ifdef HAVE_NCCL
    test_nccl();
#else
    printf("     (built without NCCL: no communicator test)\n");
#endif
    test_convs();
    test_amp_convs();
    test_act16(CUDA_AMP_BF16);
    test_act16(CUDA_AMP_FP16);
    if (bench) {
        bench_convs(128);
        bench_convs(256);
    }
    cuda_sync("end of tests");
    cuda_backend_free();
    printf("%d of %d checks failed\n", g_failed, g_checks);
    return g_failed ? 1 : 0;
}
