/* SPDX-License-Identifier: BSD-3-Clause */
/* test_winograd.c - the Winograd 3x3 convolution (winograd.h) against the double-accumulation
 * reference of conv_cpu.h: forward, dx and dw over many shapes (channel counts that fill no,
 * one or several vector blocks; images smaller than a tile, odd and even sizes; batches 1..5),
 * dw accumulated onto what is there, dx == NULL, bitwise repeatability, and the refresh of the
 * transformed weights when the weights change.
 *
 * Every comparison reports max|got - want| / max|want| next to the same figure for oneDNN's
 * direct convolution on the same data, and checks that a 1% error of the largest element would
 * fail the tolerance. Without arguments the program runs the checks itself and then again in
 * child processes with ONEDNN_MAX_CPU_ISA=AVX2 and =SSE41, so each transform variant the CPU
 * has is exercised. Exit status 0 when everything passes. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ops/conv_cpu.h"
#include "helpers/ops_testutil.h"
#include "base/util.h"
#include "ops/winograd.h"

/* Within oneDNN's and the test_ops tolerance; F(4x4, 3x3) typically lands near 1e-6. */
#define TOL 1e-4

static int g_failed, g_checks;

/* ops_testutil.h helpers this test does not need. */
static void unused_helpers(void) { (void)dalloc; (void)rel_err; }
static double g_worst_wino, g_worst_direct;

static double rel_err_bumped(const float *got, const float *want, size_t n, double bump) {
    double num = 0.0, den = 0.0;
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(want[i]) > fabs(want[j])) j = i;
    for (size_t i = 0; i < n; i++) {
        const double g = i == j ? got[i] * bump : got[i];
        num = fmax(num, fabs(g - want[i]));
        den = fmax(den, fabs(want[i]));
    }
    return den > 0.0 ? num / den : num;
}

/* got against want; direct (may be NULL) is oneDNN's result, reported for comparison. */
static void check(const char *name, const float *got, const float *want, const float *direct,
                  size_t n) {
    const double err = rel_err_bumped(got, want, n, 1.0), err_mut = rel_err_bumped(got, want, n, 1.01);
    const double derr = direct ? rel_err_bumped(direct, want, n, 1.0) : NAN;
    const int ok = err <= TOL && !isnan(err), sensitive = err_mut > TOL;
    g_checks++;
    if (!ok || !sensitive) g_failed++;
    g_worst_wino = fmax(g_worst_wino, err);
    if (direct) g_worst_direct = fmax(g_worst_direct, derr);
    char dtext[48] = "";
    if (direct) snprintf(dtext, sizeof dtext, " (oneDNN direct %.2e)", derr);
    printf("%-4s %-44s rel err %.2e%s%s\n", ok && sensitive ? "ok" : "FAIL", name, err, dtext,
           sensitive ? "" : "  [a 1% error would pass]");
}

static void check_true(const char *name, int cond) {
    g_checks++;
    if (!cond) g_failed++;
    printf("%-4s %s\n", cond ? "ok" : "FAIL", name);
}

static void test_shape(int Ci, int Co, int N, int H, int W) {
    Conv2d ref = { .shape = { .C_in = Ci, .C_out = Co, .k = 3, .stride = 1, .pad = 1 }, .impl = NULL };
    Conv2d direct;
    conv2d_use_winograd(0);
    conv2d_init(&direct, &ref.shape);
    Winograd p;
    winograd_init(&p, Ci, Co, N, H, W);
    void *ws = alignedAllocCheck(winograd_workspace_bytes(&p));
    const size_t nx = (size_t)N * H * W * Ci, ny = (size_t)N * H * W * Co, nw = (size_t)Co * Ci * 9;
    float *x = frand(nx, 1.0), *w = frand(nw, 0.1), *dy = frand(ny, 1.0), *dw0 = frand(nw, 1.0);
    float *y = falloc(ny), *y_ref = falloc(ny), *y_dir = falloc(ny);
    float *dx = falloc(nx), *dx_ref = falloc(nx), *dx_dir = falloc(nx);
    float *dw = falloc(nw), *dw_ref = falloc(nw), *dw_dir = falloc(nw), *dw2 = falloc(nw);
    char tag[96], name[160];
    snprintf(tag, sizeof tag, "%d->%d N%d %dx%d", Ci, Co, N, H, W);

    conv2d_reference_forward(&ref, N, H, W, x, w, y_ref);
    conv2d_forward(&direct, N, H, W, x, w, y_dir);
    winograd_forward(&p, w, x, y, ws);
    snprintf(name, sizeof name, "fwd %s", tag);
    check(name, y, y_ref, y_dir, ny);

    /* dw lands on top of what is there. */
    memcpy(dw, dw0, nw * sizeof(float));
    memcpy(dw_ref, dw0, nw * sizeof(float));
    memcpy(dw_dir, dw0, nw * sizeof(float));
    conv2d_reference_backward(&ref, N, H, W, x, w, dy, dx_ref, dw_ref);
    conv2d_backward(&direct, N, H, W, x, w, dy, dx_dir, dw_dir);
    winograd_backward(&p, w, x, dy, dx, dw, ws);
    snprintf(name, sizeof name, "dx  %s", tag);
    check(name, dx, dx_ref, dx_dir, nx);
    /* The accumulated dw is compared as the gradient alone, so that dw0 cannot hide errors. */
    for (size_t i = 0; i < nw; i++) {
        dw[i] -= dw0[i]; dw_ref[i] -= dw0[i]; dw_dir[i] -= dw0[i];
    }
    snprintf(name, sizeof name, "dw+ %s", tag);
    check(name, dw, dw_ref, dw_dir, nw);

    /* dx == NULL: the same dw, bit for bit, and dx untouched; then twice: += twice. */
    float *y2 = falloc(ny), *dx2 = falloc(nx), *dw3 = falloc(nw);
    memcpy(dw2, dw0, nw * sizeof(float));
    winograd_backward(&p, w, x, dy, NULL, dw2, ws);
    for (size_t i = 0; i < nw; i++) dw2[i] -= dw0[i];
    snprintf(name, sizeof name, "dx NULL: same dw bitwise %s", tag);
    check_true(name, !memcmp(dw2, dw, nw * sizeof(float)));
    winograd_backward(&p, w, x, dy, NULL, dw3, ws);
    winograd_backward(&p, w, x, dy, NULL, dw3, ws);
    for (size_t i = 0; i < nw; i++) dw3[i] -= 2.0f * dw_ref[i];
    double worst = 0.0, big = 0.0;
    for (size_t i = 0; i < nw; i++) { worst = fmax(worst, fabs(dw3[i])); big = fmax(big, fabs(dw_ref[i])); }
    snprintf(name, sizeof name, "dw += twice %s: rel err %.1e", tag, big > 0 ? worst / big : worst);
    check_true(name, worst <= 2 * TOL * big);

    /* Repeatable: the same inputs give the same bits. */
    memset(dw2, 0, nw * sizeof(float));
    memset(dw3, 0, nw * sizeof(float));
    winograd_forward(&p, w, x, y2, ws);
    winograd_backward(&p, w, x, dy, dx2, dw2, ws);
    winograd_backward(&p, w, x, dy, dx2, dw3, ws);
    snprintf(name, sizeof name, "bitwise repeatable %s", tag);
    check_true(name, !memcmp(y, y2, ny * sizeof(float)) && !memcmp(dx, dx2, nx * sizeof(float)) &&
                     !memcmp(dw2, dw3, nw * sizeof(float)));

    /* New weights: the transformed weights are made again at each pass, none kept. */
    for (size_t i = 0; i < nw; i++) w[i] = -0.5f * w[i] + 0.01f;
    conv2d_reference_forward(&ref, N, H, W, x, w, y_ref);
    conv2d_reference_backward(&ref, N, H, W, x, w, dy, dx_ref, dw_ref);
    winograd_forward(&p, w, x, y, ws);
    winograd_backward(&p, w, x, dy, dx, dw, ws);
    snprintf(name, sizeof name, "fwd after weights change %s", tag);
    check(name, y, y_ref, NULL, ny);
    snprintf(name, sizeof name, "dx  after weights change %s", tag);
    check(name, dx, dx_ref, NULL, nx);

    free(y2); free(dx2); free(dw3);
    free(x); free(w); free(dy); free(dw0); free(y); free(y_ref); free(y_dir);
    free(dx); free(dx_ref); free(dx_dir); free(dw); free(dw_ref); free(dw_dir); free(dw2);
    free(ws);
    winograd_free(&p);
    conv2d_free(&direct);
    conv2d_use_winograd(1);
}

/* Plans made under other thread counts, including more threads than tiles (threads with no
 * tiles still add their share, zero, to dw). */
static void test_threads(void) {
    const int nthr = omp_get_max_threads();
    static const int counts[] = { 1, 3, 5 };
    for (int i = 0; i < 3; i++) {
        omp_set_num_threads(counts[i]);
        char name[64];
        snprintf(name, sizeof name, "--- plans made with %d threads", counts[i]);
        printf("%s\n", name);
        test_shape(5, 17, 1, 4, 4);
        test_shape(16, 9, 2, 9, 7);
    }
    omp_set_num_threads(nthr);
}

static int run_checks(void) {
    const char *isa = winograd_isa_name(), *limit = getenv("ONEDNN_MAX_CPU_ISA");
    printf("winograd transforms: %s\n", isa);
    /* oneDNN's ISA limit must select the transforms too. */
    if (limit && !strcmp(limit, "AVX2")) check_true("AVX2 limit: no AVX-512 transforms", strcmp(isa, "avx512"));
    if (limit && !strcmp(limit, "SSE41")) check_true("SSE41 limit: SSE4.1 transforms", !strcmp(isa, "sse41"));
    /* Channel counts: below, at and past one vector block, and several blocks. */
    static const int chans[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 64 };
    static const int sizes[][2] = { { 1, 1 }, { 2, 3 }, { 3, 3 }, { 4, 4 }, { 5, 7 }, { 8, 8 },
                                    { 9, 6 }, { 6, 11 }, { 13, 13 }, { 16, 16 } };
    const int nc = (int)(sizeof chans / sizeof chans[0]), ns = (int)(sizeof sizes / sizeof sizes[0]);
    for (int i = 0; i < nc; i++) {
        const int Ci = chans[i], Co = chans[(i * 5 + 3) % nc];
        const int *s = sizes[i % ns];
        test_shape(Ci, Co, 1 + i % 5, s[0], s[1]);
    }
    for (int i = 0; i < ns; i++) test_shape(16, 17, 1 + (i + 2) % 5, sizes[i][0], sizes[i][1]);
    test_shape(64, 64, 2, 16, 16);
    test_shape(64, 128, 1, 8, 8);
    test_shape(3, 64, 4, 32, 32);
    test_threads();
    printf("worst rel err: winograd %.2e, oneDNN direct %.2e (tolerance %.0e)\n", g_worst_wino,
           g_worst_direct, TOL);
    printf("%d of %d checks failed\n", g_failed, g_checks);
    return g_failed ? 1 : 0;
}

/* This program again with ONEDNN_MAX_CPU_ISA=isa; returns its exit status. */
static int run_child(const char *self, const char *isa) {
    printf("\n==== ONEDNN_MAX_CPU_ISA=%s\n", isa);
    fflush(stdout);
    const pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        setenv("ONEDNN_MAX_CPU_ISA", isa, 1);
        execl(self, self, "--child", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int main(int argc, char **argv) {
    (void)unused_helpers;
    setvbuf(stdout, NULL, _IOLBF, 0);
    int rc = run_checks();
    if (argc > 1 && !strcmp(argv[1], "--child")) return rc;
    if (getenv("ONEDNN_MAX_CPU_ISA")) return rc;   /* the caller chose one */
    if (run_child("/proc/self/exe", "AVX2")) rc = 1;
    if (run_child("/proc/self/exe", "SSE41")) rc = 1;
    return rc;
}
