/* SPDX-License-Identifier: BSD-3-Clause */
/* conv_bench.c - time of MiniResNet's 3x3 stride-1 convolutions (width W: W@32x32, 2W@16x16,
 * 4W@8x8) per pass (forward, backward-data, backward-weights) through
 *   oneDNN   oneDNN alone, as the CPU backend used it before winograd.c: its Winograd where it has
 *            one (AVX-512, channels multiple of 16), else direct;
 *   direct   oneDNN's direct convolution;
 *   wino     winograd.h called directly;
 *   conv2d   conv2d_* as configured now (the selection in conv_cpu.c);
 * and the ratios oneDNN / wino. Best of --reps runs each. The conv2d API has no
 * backward-data-only call, so backward-data is timed as the full backward minus the backward
 * with dx == NULL (the same for all). --cpu-time measures the process's CPU time instead of
 * wall time: on a machine other jobs share, that is the figure that does not depend on them
 * (spinning threads count, though).
 * usage: conv_bench [--width W] [--batch N] [--reps R] [--cpu-time]
 * Run it under ONEDNN_MAX_CPU_ISA=AVX2 for the AVX2 path (oneDNN and the transforms alike). */
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "ops/conv_cpu.h"
#include "base/rng.h"
#include "base/util.h"
#include "ops/winograd.h"

typedef struct Times { double fwd, bwd, bwd_w; } Times;

static int g_cpu_time;

static double now(void) {
    return g_cpu_time ? cpu_sec() : now_sec();
}

static double best(double a, double b) { return a < b ? a : b; }

/* winograd: conv2d_use_winograd; own: conv2d_use_own_winograd. */
static void time_conv2d(int winograd, int own, int C, int N, int H, const float *x, const float *w,
                        const float *dy, float *y, float *dx, float *dw, int reps, Times *t,
                        char *name, size_t name_len) {
    conv2d_use_winograd(winograd);
    conv2d_use_own_winograd(own);
    Conv2d c;
    conv2d_init(&c, &(ConvShape){ .C_in = C, .C_out = C, .k = 3, .stride = 1, .pad = 1 });
    snprintf(name, name_len, "%s", conv2d_impl_name(&c, N, H, H));
    t->fwd = t->bwd = t->bwd_w = 1e30;
    for (int r = 0; r < reps + 1; r++) {   /* the first round warms up */
        double a = now();
        conv2d_forward(&c, N, H, H, x, w, y);
        double b = now();
        conv2d_backward(&c, N, H, H, x, w, dy, dx, dw);
        double d = now();
        conv2d_backward(&c, N, H, H, x, w, dy, NULL, dw);
        double e = now();
        if (r == 0) continue;
        t->fwd = best(t->fwd, b - a);
        t->bwd = best(t->bwd, d - b);
        t->bwd_w = best(t->bwd_w, e - d);
    }
    conv2d_free(&c);
    conv2d_use_winograd(1);
    conv2d_use_own_winograd(1);
}

static void time_winograd(int C, int N, int H, const float *x, const float *w, const float *dy,
                          float *y, float *dx, float *dw, int reps, Times *t) {
    Winograd p;
    winograd_init(&p, C, C, N, H, H);
    void *ws = alignedAllocCheck(winograd_workspace_bytes(&p));
    t->fwd = t->bwd = t->bwd_w = 1e30;
    for (int r = 0; r < reps + 1; r++) {
        /* A new version each round, as after an optimizer step: the weight transform counts. */
        double a = now();
        winograd_forward(&p, w, x, y, ws);
        double b = now();
        winograd_backward(&p, w, x, dy, dx, dw, ws);
        double d = now();
        winograd_backward(&p, w, x, dy, NULL, dw, ws);
        double e = now();
        if (r == 0) continue;
        t->fwd = best(t->fwd, b - a);
        t->bwd = best(t->bwd, d - b);
        t->bwd_w = best(t->bwd_w, e - d);
    }
    free(ws);
    winograd_free(&p);
}

int main(int argc, char **argv) {
    g_progname = "conv_bench";
    int width = 64, N = 64, reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cpu-time")) { g_cpu_time = 1; continue; }
        if (i + 1 >= argc) die_code(2, "%s needs a value", argv[i]);
        if (!strcmp(argv[i], "--width")) width = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch")) N = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
        else die_code(2, "unknown option %s", argv[i]);
    }
    if (width < 1 || N < 1 || reps < 1) die_code(2, "--width, --batch and --reps must be >= 1");
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
#else
    const int threads = 1;
#endif
    const char *limit = getenv("ONEDNN_MAX_CPU_ISA");
    printf("3x3 stride-1 convs, batch %d, %d threads, ONEDNN_MAX_CPU_ISA=%s, winograd transforms %s;"
           " ms %s, best of %d\n", N, threads, limit ? limit : "(unset)", winograd_isa_name(),
           g_cpu_time ? "of process CPU time" : "of wall time", reps);
    printf("%-14s %-8s %9s %9s %9s %9s  %s\n", "layer", "impl", "fwd", "bwd-data", "bwd-w",
           "total", "implementation");
    Rng r;
    rng_init(&r, 1, 2, 3);
    double sum_one = 0.0, sum_dir = 0.0, sum_own = 0.0, sum_cur = 0.0;
    for (int l = 0; l < 3; l++) {
        const int C = width << l, H = 32 >> l;
        const size_t n = (size_t)N * H * H * C, nw = (size_t)C * C * 9;
        float *x = mallocCheck(n * sizeof(float)), *dy = mallocCheck(n * sizeof(float));
        float *w = mallocCheck(nw * sizeof(float)), *y = mallocCheck(n * sizeof(float));
        float *dx = mallocCheck(n * sizeof(float)), *dw = callocCheck(nw, sizeof(float));
        for (size_t i = 0; i < n; i++) { x[i] = rng_normal(&r); dy[i] = rng_normal(&r); }
        for (size_t i = 0; i < nw; i++) w[i] = 0.05f * rng_normal(&r);
        Times one, dir, own, cur;
        char one_name[160], dir_name[160], cur_name[160];
        time_conv2d(1, 0, C, N, H, x, w, dy, y, dx, dw, reps, &one, one_name, sizeof one_name);
        time_conv2d(0, 0, C, N, H, x, w, dy, y, dx, dw, reps, &dir, dir_name, sizeof dir_name);
        time_winograd(C, N, H, x, w, dy, y, dx, dw, reps, &own);
        time_conv2d(1, 1, C, N, H, x, w, dy, y, dx, dw, reps, &cur, cur_name, sizeof cur_name);
        char layer[32];
        snprintf(layer, sizeof layer, "%d@%dx%d", C, H, H);
        const Times *ts[4] = { &one, &dir, &own, &cur };
        const char *names[4] = { "oneDNN", "direct", "wino", "conv2d" };
        const char *prims[4] = { one_name, dir_name, "winograd.c", cur_name };
        for (int k = 0; k < 4; k++) {
            const Times *t = ts[k];
            printf("%-14s %-8s %9.2f %9.2f %9.2f %9.2f  %s\n", k ? "" : layer, names[k], 1e3 * t->fwd,
                   1e3 * (t->bwd - t->bwd_w), 1e3 * t->bwd_w, 1e3 * (t->fwd + t->bwd), prims[k]);
        }
        printf("%-14s %-8s %9.2f %9.2f %9.2f %9.2f  (oneDNN time / wino time)\n", "",
               "ratio", one.fwd / own.fwd, (one.bwd - one.bwd_w) / (own.bwd - own.bwd_w),
               one.bwd_w / own.bwd_w, (one.fwd + one.bwd) / (own.fwd + own.bwd));
        sum_one += one.fwd + one.bwd;
        sum_dir += dir.fwd + dir.bwd;
        sum_own += own.fwd + own.bwd;
        sum_cur += cur.fwd + cur.bwd;
        free(x); free(dy); free(w); free(y); free(dx); free(dw);
    }
    printf("three layers, ms: oneDNN %.1f, direct %.1f, wino %.1f, conv2d %.1f; oneDNN/wino %.2f,"
           " direct/wino %.2f, oneDNN/conv2d %.2f\n", 1e3 * sum_one, 1e3 * sum_dir, 1e3 * sum_own,
           1e3 * sum_cur, sum_one / sum_own, sum_dir / sum_own, sum_one / sum_cur);
    return 0;
}
