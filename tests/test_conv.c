/* SPDX-License-Identifier: BSD-3-Clause */
/* test_conv.c - the CPU backend's grouped, depthwise and dilated convolutions and the bias ops
 * (conv_cpu.h, depthwise.h, ops_cpu.h) against the reference convolution; `--bench` times
 * oneDNN's depthwise convolution against depthwise.c's instead.
 *
 * Each shape runs through oneDNN (conv2d_* with depthwise.c turned off), through depthwise.c
 * directly where it applies, and through conv2d_* as the backend selects; each is compared
 * with conv2d_reference_* (double accumulation) on the forward, the data gradient and the
 * weight gradient accumulated onto a random start twice. Every comparison reports
 * max|got - want| / max|want| and checks that scaling the largest expected element of `got` by
 * 1.01 exceeds the tolerance, so that the tolerance can fail. Results must be the same bits on
 * 1, 2 and 3 threads. Exit status 0 when everything passes. `--dump FILE` writes the same
 * shapes' data and the backend's results (bias included) for tests/helpers/conv_torch.py to
 * compare with PyTorch's conv2d. `--dump-bf16 FILE` does the same with conv2d_use_bf16 on, for
 * tests/helpers/conv_bf16_torch.py, on those shapes and on dense ones. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <omp.h>

#include "ops/conv_cpu.h"
#include "ops/depthwise.h"
#include "ops/ops_cpu.h"
#include "helpers/ops_testutil.h"
#include "base/util.h"

static int g_failed, g_checks;

static void check(const char *name, const float *gotf, const double *want, size_t n, double tol) {
    double *got = dalloc(n);
    for (size_t i = 0; i < n; i++) got[i] = gotf[i];
    const double err = rel_err(got, want, n);
    size_t j = 0;
    for (size_t i = 1; i < n; i++) if (fabs(want[i]) > fabs(want[j])) j = i;
    got[j] *= 1.01;
    const double err_mut = rel_err(got, want, n);
    free(got);
    const int ok = err <= tol && !isnan(err), sensitive = err_mut > tol;
    g_checks++;
    if (!ok || !sensitive) g_failed++;
    printf("%-4s %-64s max rel err %.2e (tol %.0e)%s\n", ok && sensitive ? "ok" : "FAIL", name, err, tol,
           sensitive ? "" : "  [a 1% error would pass: tolerance too loose]");
}
static void check_ff(const char *name, const float *got, const float *want, size_t n, double tol) {
    double *w = dalloc(n);
    for (size_t i = 0; i < n; i++) w[i] = want[i];
    check(name, got, w, n, tol);
    free(w);
}
static void check_true(const char *name, int cond) {
    g_checks++;
    if (!cond) g_failed++;
    printf("%-4s %s\n", cond ? "ok" : "FAIL", name);
}

enum { VIA_ONEDNN, VIA_OWN_DW, VIA_SELECTED };
static const char *const via_name[] = { "onednn", "own_dw", "selected" };

/* One implementation's forward and backward. */
static void run_fwd(int via, Conv2d *c, int N, int H, int W, const float *x, const float *w, float *y, void *ws) {
    if (via == VIA_OWN_DW) depthwise_forward(&c->shape, N, H, W, x, w, y, ws);
    else conv2d_forward(c, N, H, W, x, w, y);
}
static void run_bwd(int via, Conv2d *c, int N, int H, int W, const float *x, const float *w, const float *dy,
                    float *dx, float *dw, void *ws) {
    if (via == VIA_OWN_DW) depthwise_backward(&c->shape, N, H, W, x, w, dy, dx, dw, ws);
    else conv2d_backward(c, N, H, W, x, w, dy, dx, dw);
}

typedef struct { int Ci, Co, k, s, p, g, d, N, H, W; } Case;

static void test_case(const Case *t, int via) {
    const ConvShape shape = { .C_in = t->Ci, .C_out = t->Co, .k = t->k, .stride = t->s, .pad = t->p,
                              .groups = t->g, .dilation = t->d };
    conv2d_use_own_depthwise(via != VIA_ONEDNN);
    Conv2d c;
    conv2d_init(&c, &shape);
    if (via == VIA_OWN_DW && !depthwise_applies(&c.shape)) {
        conv2d_free(&c);
        return;
    }
    const int N = t->N, H = t->H, W = t->W, Ho = conv_out_size(&c.shape, H), Wo = conv_out_size(&c.shape, W);
    const size_t nx = (size_t)N * H * W * t->Ci, nw = (size_t)t->Co * (t->Ci / c.shape.groups) * t->k * t->k;
    const size_t ny = (size_t)N * Ho * Wo * t->Co;
    void *ws = via == VIA_OWN_DW ? alignedAllocCheck(depthwise_workspace_bytes(&c.shape, N, H, W)) : NULL;
    float *x = frand(nx, 1.0), *w = frand(nw, 0.3), *dy = frand(ny, 1.0), *b = frand((size_t)t->Co, 1.0);
    float *y = falloc(ny), *y_ref = falloc(ny), *dx = falloc(nx), *dx_ref = falloc(nx);
    float *dw = falloc(nw), *dw_ref = falloc(nw);
    char tag[160], name[256];
    snprintf(tag, sizeof tag, "%d->%d k%d s%d p%d g%d d%d N%d %dx%d [%s: %s]", t->Ci, t->Co, t->k, t->s, t->p,
             c.shape.groups, c.shape.dilation, N, H, W, via_name[via],
             via == VIA_OWN_DW ? depthwise_isa_name() : conv2d_impl_name(&c, N, H, W));

    run_fwd(via, &c, N, H, W, x, w, y, ws);
    conv2d_reference_forward(&c, N, H, W, x, w, y_ref);
    snprintf(name, sizeof name, "fwd %s", tag);
    check_ff(name, y, y_ref, ny, 1e-5);

    /* dw accumulates: from a random start D0, two passes (the second without dx) give D0 + 2 dw */
    double *want = dalloc(nw);
    conv2d_reference_backward(&c, N, H, W, x, w, dy, dx_ref, dw_ref);
    for (size_t i = 0; i < nw; i++) {
        dw[i] = (float)urand();
        want[i] = dw[i] + 2.0 * dw_ref[i];
    }
    run_bwd(via, &c, N, H, W, x, w, dy, dx, dw, ws);
    run_bwd(via, &c, N, H, W, x, w, dy, NULL, dw, ws);
    snprintf(name, sizeof name, "dx  %s", tag);
    check_ff(name, dx, dx_ref, nx, 1e-5);
    snprintf(name, sizeof name, "dw += twice %s", tag);
    check(name, dw, want, nw, 1e-5);

    /* the same bits on 1, 2 and 3 threads, and after the weights changed */
    for (size_t i = 0; i < nw; i++) w[i] = -0.5f * w[i] + 0.01f;
    conv2d_weights_changed(&c);
    float *y1 = falloc(ny), *dx1 = falloc(nx), *dw1 = falloc(nw), *y2 = falloc(ny), *dx2 = falloc(nx), *dw2 = falloc(nw);
    omp_set_num_threads(1);
    run_fwd(via, &c, N, H, W, x, w, y1, ws);
    run_bwd(via, &c, N, H, W, x, w, dy, dx1, dw1, ws);
    int same = 1;
    for (int threads = 3; threads >= 2; threads--) {   /* 3: an uneven split */
        omp_set_num_threads(threads);
        memset(dw2, 0, nw * sizeof(float));
        run_fwd(via, &c, N, H, W, x, w, y2, ws);
        run_bwd(via, &c, N, H, W, x, w, dy, dx2, dw2, ws);
        same &= !memcmp(y1, y2, ny * sizeof(float)) && !memcmp(dx1, dx2, nx * sizeof(float)) &&
                !memcmp(dw1, dw2, nw * sizeof(float));
    }
    conv2d_reference_forward(&c, N, H, W, x, w, y_ref);
    snprintf(name, sizeof name, "fwd after weights_changed %s", tag);
    check_ff(name, y2, y_ref, ny, 1e-5);
    snprintf(name, sizeof name, "same bits on 1, 2 and 3 threads %s", tag);
    check_true(name, same);

    /* the bias after the convolution: y + b, and db += sum of dy */
    if (via == VIA_SELECTED) {
        const size_t M = (size_t)N * Ho * Wo;
        double *yb = dalloc(ny), *db_want = dalloc((size_t)t->Co);
        float *db = falloc((size_t)t->Co), *db1 = falloc((size_t)t->Co);
        for (size_t i = 0; i < ny; i++) yb[i] = (double)y2[i] + b[i % t->Co];
        for (int o = 0; o < t->Co; o++) {
            db[o] = db1[o] = (float)urand();
            db_want[o] = db[o];
        }
        for (size_t i = 0; i < ny; i++) db_want[i % t->Co] += dy[i];
        bias_add(y2, b, M, t->Co);
        snprintf(name, sizeof name, "bias_add %s", tag);
        check(name, y2, yb, ny, 1e-6);
        bias_grad(dy, db, M, t->Co);
        snprintf(name, sizeof name, "bias_grad += %s", tag);
        check(name, db, db_want, (size_t)t->Co, 1e-6);
        omp_set_num_threads(3);
        bias_grad(dy, db1, M, t->Co);
        omp_set_num_threads(2);
        snprintf(name, sizeof name, "bias_grad same bits on 2 and 3 threads %s", tag);
        check_true(name, !memcmp(db, db1, (size_t)t->Co * sizeof(float)));
        free(yb); free(db_want); free(db); free(db1);
    }

    conv2d_free(&c);
    free(ws); free(want); free(x); free(w); free(dy); free(b); free(y); free(y_ref); free(dx); free(dx_ref);
    free(dw); free(dw_ref); free(y1); free(dx1); free(dw1); free(y2); free(dx2); free(dw2);
}

/* ---- --bench: oneDNN's depthwise convolution against depthwise.c's ---- */

/* --cpu-time: the process's CPU time instead of wall time, which on a machine that other jobs
 * share leaves out the time slices they take (with 1 thread, where no thread waits for another). */
static int g_cpu_time;
static double clock_sec(void) {
    return g_cpu_time ? cpu_sec() : now_sec();
}

/* The best of at least 7 runs, more (up to 40) until half a second went by: on a machine that
 * other jobs share, a run of two threads now and then waits a whole time slice for one of
 * them, and only the best run says what the kernel costs. */
static double best_ms(void (*f)(void *), void *ctx) {
    f(ctx);
    double best = 1e30;
    const double t0 = now_sec();
    for (int r = 0; r < 40 && (r < 7 || now_sec() - t0 < 0.5); r++) {
        const double t = clock_sec();
        f(ctx);
        best = fmin(best, clock_sec() - t);
    }
    return best * 1e3;
}

typedef struct { int via; Conv2d *c; int N, H; float *x, *w, *y, *dy, *dx, *dw; void *ws; } Bench;
static void b_fwd(void *p) { Bench *b = p; run_fwd(b->via, b->c, b->N, b->H, b->H, b->x, b->w, b->y, b->ws); }
static void b_bwd(void *p) {
    Bench *b = p;
    run_bwd(b->via, b->c, b->N, b->H, b->H, b->x, b->w, b->dy, b->dx, b->dw, b->ws);
}

static void bench(int N, int threads, int only_C) {
    omp_set_num_threads(threads);
    printf("depthwise, %d threads, N=%d, best of 7 to 40 runs, ms of %s: forward, backward (dx + dw), and their sum\n",
           threads, N, g_cpu_time ? "process CPU time" : "wall time");
    printf("%-24s %8s %8s %8s %8s %8s %8s  %s\n", "   C   HxW  k  s", "dnn fwd", "dnn bwd", "dnn sum", "own fwd",
           "own bwd", "own sum", "oneDNN impl / selected");
    /* 96@64 and down: EfficientNet-B0's at 128 px; then the first depthwise convolutions of
     * MobileNetV3 (16, 64 channels), EfficientNet and MobileNetV2 (32, 96) at 128 and 224 px,
     * and more of the three's at 128 px (72@32, 192@16) and 224 px (72@56, 144@56, 240@28, 480@14) */
    static const int shapes[][2] = { { 96, 64 },  { 144, 32 }, { 240, 16 }, { 480, 8 },  { 960, 4 },
                                     { 16, 64 },  { 32, 64 },  { 64, 64 },  { 16, 112 }, { 32, 112 },
                                     { 64, 112 }, { 96, 112 }, { 72, 32 },  { 192, 16 }, { 72, 56 },
                                     { 144, 56 }, { 240, 28 }, { 480, 14 } };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        if (only_C && shapes[i][0] != only_C) continue;
        for (int k = 3; k <= 5; k += 2)
            for (int s = 1; s <= 2; s++) {
                const int C = shapes[i][0], H = shapes[i][1];
                const ConvShape sh = { .C_in = C, .C_out = C, .k = k, .stride = s, .pad = k / 2, .groups = C };
                double t[2][2];
                char impl[2][64];
                for (int via = 0; via < 2; via++) {
                    conv2d_use_own_depthwise(via);
                    Conv2d c;
                    conv2d_init(&c, &sh);
                    const int Ho = conv_out_size(&c.shape, H);
                    const size_t nx = (size_t)N * H * H * C, ny = (size_t)N * Ho * Ho * C;
                    Bench b = { via == 0 ? VIA_ONEDNN : VIA_OWN_DW, &c, N, H, frand(nx, 1.0), frand((size_t)C * k * k, 0.1),
                                falloc(ny), frand(ny, 1.0), falloc(nx), falloc((size_t)C * k * k),
                                alignedAllocCheck(depthwise_workspace_bytes(&c.shape, N, H, H)) };
                    t[via][0] = best_ms(b_fwd, &b);
                    t[via][1] = best_ms(b_bwd, &b);
                    snprintf(impl[via], sizeof impl[via], "%s", conv2d_impl_name(&c, N, H, H));
                    conv2d_free(&c);
                    free(b.x); free(b.w); free(b.y); free(b.dy); free(b.dx); free(b.dw); free(b.ws);
                }
                printf("%4d %3dx%-3d k%d s%d %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f  %s / %s\n", C, H, H, k, s,
                       t[0][0], t[0][1], t[0][0] + t[0][1], t[1][0], t[1][1], t[1][0] + t[1][1], impl[0], impl[1]);
                fflush(stdout);
            }
    }
    conv2d_use_own_depthwise(1);
}

/* ---- --dump FILE: the backend's results for tests/helpers/conv_torch.py ---- */

/* Per case: int32 C_in, C_out, k, stride, pad, groups, dilation, N, H, W (bf16: and whether
 * the convolution computed in bf16, conv2d_is_bf16); then float32 x (NHWC), w, b, dy (NHWC),
 * and the backend's y = conv + b, dx, dw, db (the gradients from zero). */
static void dump(const char *path, const Case *cases, size_t n, int bf16, int append) {
    FILE *f = fopen(path, append ? "ab" : "wb");
    conv2d_use_bf16(bf16);
    CHECK(f != NULL);
    for (size_t i = 0; i < n; i++) {
        const Case *t = &cases[i];
        const ConvShape shape = { .C_in = t->Ci, .C_out = t->Co, .k = t->k, .stride = t->s, .pad = t->p,
                                  .groups = t->g, .dilation = t->d };
        Conv2d c;
        conv2d_init(&c, &shape);
        const int N = t->N, H = t->H, W = t->W, Ho = conv_out_size(&c.shape, H), Wo = conv_out_size(&c.shape, W);
        const size_t nx = (size_t)N * H * W * t->Ci, nw = (size_t)t->Co * (t->Ci / c.shape.groups) * t->k * t->k;
        const size_t ny = (size_t)N * Ho * Wo * t->Co, M = (size_t)N * Ho * Wo;
        float *x = frand(nx, 1.0), *w = frand(nw, 0.3), *b = frand((size_t)t->Co, 1.0), *dy = frand(ny, 1.0);
        float *y = falloc(ny), *dx = falloc(nx), *dw = falloc(nw), *db = falloc((size_t)t->Co);
        conv2d_forward(&c, N, H, W, x, w, y);
        bias_add(y, b, M, t->Co);
        bias_grad(dy, db, M, t->Co);
        conv2d_backward(&c, N, H, W, x, w, dy, dx, dw);
        const int hdr[10] = { t->Ci, t->Co, t->k, t->s, t->p, c.shape.groups, c.shape.dilation, N, H, W };
        CHECK(fwrite(hdr, sizeof hdr, 1, f) == 1);
        const int is_bf16 = conv2d_is_bf16(&c, N, H, W);
        if (bf16) CHECK(fwrite(&is_bf16, sizeof is_bf16, 1, f) == 1);
        const float *arr[8] = { x, w, b, dy, y, dx, dw, db };
        const size_t len[8] = { nx, nw, (size_t)t->Co, ny, ny, nx, nw, (size_t)t->Co };
        for (int a = 0; a < 8; a++) CHECK(fwrite(arr[a], sizeof(float), len[a], f) == len[a]);
        printf("%d->%d k%d s%d p%d g%d d%d N%d %dx%d: %s\n", t->Ci, t->Co, t->k, t->s, t->p, c.shape.groups,
               c.shape.dilation, N, H, W, conv2d_impl_name(&c, N, H, W));
        conv2d_free(&c);
        free(x); free(w); free(b); free(dy); free(y); free(dx); free(dw); free(db);
    }
    CHECK(fclose(f) == 0);
    conv2d_use_bf16(0);
}

int main(int argc, char **argv) {
    int N = 32, threads = 2, do_bench = 0, only_C = 0;
    const char *dump_path = NULL;
    int bf16 = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--bench")) do_bench = 1;
        else if (!strcmp(argv[i], "-N") && i + 1 < argc) N = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-C") && i + 1 < argc) only_C = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dump") && i + 1 < argc) dump_path = argv[++i];
        else if (!strcmp(argv[i], "--dump-bf16") && i + 1 < argc) dump_path = argv[++i], bf16 = 1;
        else if (!strcmp(argv[i], "--cpu-time")) g_cpu_time = 1;
        else {
            fprintf(stderr, "usage: test_conv [--bench [-N batch] [-t threads] [-C channels] [--cpu-time] | --dump FILE | --dump-bf16 FILE]\n");
            return 2;
        }
    }
    if (do_bench) { bench(N > 0 ? N : 32, threads > 0 ? threads : 2, only_C); return 0; }
    omp_set_num_threads(2);
    printf("%s\n", ops_cpu_describe());
    /* C_in, C_out, k, stride, pad, groups, dilation, N, H, W */
    static const Case cases[] = {
        { 8, 8, 3, 1, 1, 2, 1, 2, 7, 6 },          /* groups 2 */
        { 16, 32, 3, 2, 1, 4, 1, 3, 9, 9 },        /* groups 4, strided, odd size */
        { 16, 16, 1, 2, 0, 4, 1, 2, 8, 7 },        /* grouped strided 1x1: the subsampled path */
        { 16, 16, 3, 1, 1, 16, 1, 2, 9, 7 },       /* depthwise */
        { 24, 24, 3, 2, 1, 24, 1, 3, 11, 10 },     /* depthwise, strided, a channel tail of 8 */
        { 37, 37, 5, 1, 2, 37, 1, 2, 8, 9 },       /* depthwise 5x5, a channel tail of 5 */
        { 40, 40, 5, 2, 2, 40, 1, 2, 13, 13 },     /* depthwise 5x5 strided */
        { 32, 32, 3, 1, 2, 32, 2, 2, 10, 9 },      /* depthwise dilated */
        { 12, 24, 3, 1, 1, 12, 1, 2, 8, 8 },       /* depthwise with a channel multiplier of 2 */
        { 12, 24, 3, 2, 1, 12, 1, 2, 9, 9 },       /* the same, strided */
        { 8, 16, 3, 1, 2, 1, 2, 2, 9, 8 },         /* dilation 2 */
        { 8, 8, 3, 2, 3, 2, 3, 3, 13, 11 },        /* dilation 3, grouped, strided */
        { 3, 16, 3, 1, 1, 1, 1, 2, 8, 8 },         /* dense, as before */
        { 32, 32, 3, 1, 0, 32, 1, 1, 5, 5 },       /* depthwise without padding */
        { 96, 96, 3, 1, 1, 96, 1, 8, 32, 32 },     /* depthwise at a MobileNet size: */
        { 96, 96, 3, 2, 1, 96, 1, 8, 32, 32 },     /* oneDNN's kernels split the batch */
        { 96, 96, 5, 1, 2, 96, 1, 8, 32, 32 },     /* among the threads here */
    };
    /* bf16 (--dump-bf16): dense shapes too, those of a ResNet's convolutions and of its strided
     * 1x1 shortcut (the subsampled path) */
    static const Case dense[] = {
        { 3, 16, 7, 2, 3, 1, 1, 2, 16, 16 },       /* a ResNet stem */
        { 64, 64, 3, 1, 1, 1, 1, 4, 8, 8 },
        { 32, 64, 3, 2, 1, 1, 1, 4, 9, 9 },
        { 32, 64, 1, 2, 0, 1, 1, 4, 8, 8 },        /* strided 1x1 */
        { 64, 16, 1, 1, 0, 1, 1, 4, 8, 8 },
    };
    if (dump_path) {
        if (bf16) dump(dump_path, dense, sizeof dense / sizeof *dense, 1, 0);
        dump(dump_path, cases, sizeof cases / sizeof *cases, bf16, bf16);
        return 0;
    }
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int via = 0; via < 3; via++) test_case(&cases[i], via);
    printf("%d of %d checks failed\n", g_failed, g_checks);
    return g_failed ? 1 : 0;
}
