/* SPDX-License-Identifier: BSD-3-Clause */
/* conv_shapes.c - which precision and algorithm is fastest for each kind of convolution the
 * zoo's networks run, on the ISA at hand. For a compact list of shapes (ResNet-18/50's 3x3
 * stride-1 and stride-2, 1x1 stride-1 and stride-2 and 7x7 stem convolutions, MobileNetV3's
 * and EfficientNet-B0's depthwise 3x3 and 5x5 and pointwise ones, ResNeXt-50's grouped 3x3,
 * all at 128 px input), each timed per pass (forward, backward-data, backward-weights, their
 * sum) up to four ways:
 *   f32         conv2d_* as the CPU backend selects (conv_cpu.c): winograd.c, depthwise.c or
 *               oneDNN;
 *   f32-dnnl    float32 through oneDNN alone (its own Winograd where it has one): timed only
 *               where f32 picked a kernel of ddptrain's own, else it is the same path;
 *   f32-direct  oneDNN's direct convolution (conv2d_use_winograd(0)): timed where one of the
 *               two above is a Winograd, so that the table says whether Winograd pays there;
 *   bf16        conv2d_use_bf16(1), --use_amp's convolutions: oneDNN with bf16 src, weights
 *               and diff_dst, float32 diff_weights (the rounding reorders count, as in
 *               training); not timed where oneDNN has no bf16 kernel (below AVX-512, or a
 *               shape it has only reference loops for: conv2d falls back to float32 there);
 * and which of them wins each pass ("a~b": b within 5% of a, a tie on a shared machine). The weights are marked changed before every round, as an
 * optimizer step does, so their reorders (and winograd.c's transforms) count. Best of --reps
 * rounds after one warm-up. The conv2d API has no backward-data-only call, so backward-data is
 * the full backward minus the backward with dx == NULL, for every path alike (the stem, whose
 * input is the image, has no backward-data in training and none here). --cpu-time
 * measures the process's CPU time: on a machine other jobs share, that does not depend on
 * them. This is a program of its own rather than a mode of conv_bench, whose table compares
 * Winograd implementations on MiniResNet's layers; bench/conv_shapes.sh runs it.
 * usage: conv_shapes [--batch N] [--reps R] [--cpu-time] [--markdown] [--only TEXT]
 *   --markdown: one table row per shape (docs/benchmarks.md's form);
 *   --only TEXT: the shapes whose name or networks contain TEXT. */
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "base/rng.h"
#include "base/util.h"
#include "ops/conv_cpu.h"
#include "ops/cpu_isa.h"

/* One convolution of a network at 128 px input: its shape and its input's side. image: its
 * input is the image, whose gradient training never asks for (kind_conv.c passes dx == NULL),
 * so backward-data is neither timed nor counted in the total. */
typedef struct Case {
    const char *nets;
    ConvShape sh;
    int H;
    int image;
} Case;

#define R1850 "ResNet-18/50"
#define CASE(nets, H, ...) { nets, { __VA_ARGS__ }, H, 0 }
#define IMAGE(nets, H, ...) { nets, { __VA_ARGS__ }, H, 1 }
static const Case k_cases[] = {
    IMAGE(R1850, 128, .C_in = 3, .C_out = 64, .k = 7, .stride = 2, .pad = 3),
    CASE(R1850, 32, .C_in = 64, .C_out = 64, .k = 3, .stride = 1, .pad = 1),
    CASE(R1850, 16, .C_in = 128, .C_out = 128, .k = 3, .stride = 1, .pad = 1),
    CASE(R1850, 8, .C_in = 256, .C_out = 256, .k = 3, .stride = 1, .pad = 1),
    CASE(R1850, 4, .C_in = 512, .C_out = 512, .k = 3, .stride = 1, .pad = 1),
    CASE("ResNet-18", 32, .C_in = 64, .C_out = 128, .k = 3, .stride = 2, .pad = 1),
    CASE("ResNet-50", 16, .C_in = 256, .C_out = 256, .k = 3, .stride = 2, .pad = 1),
    CASE("ResNet-50", 32, .C_in = 64, .C_out = 256, .k = 1, .stride = 1),
    CASE("ResNet-50", 16, .C_in = 512, .C_out = 128, .k = 1, .stride = 1),
    CASE("ResNet-18", 32, .C_in = 64, .C_out = 128, .k = 1, .stride = 2),
    CASE("ResNet-50", 32, .C_in = 256, .C_out = 512, .k = 1, .stride = 2),
    CASE("EfficientNet-B0", 64, .C_in = 32, .C_out = 32, .k = 3, .stride = 1, .pad = 1, .groups = 32),
    CASE("EfficientNet-B0", 64, .C_in = 96, .C_out = 96, .k = 3, .stride = 2, .pad = 1, .groups = 96),
    CASE("MobileNetV3-L", 32, .C_in = 72, .C_out = 72, .k = 3, .stride = 1, .pad = 1, .groups = 72),
    CASE("EfficientNet-B0", 32, .C_in = 144, .C_out = 144, .k = 5, .stride = 1, .pad = 2, .groups = 144),
    CASE("EfficientNet-B0", 32, .C_in = 144, .C_out = 144, .k = 5, .stride = 2, .pad = 2, .groups = 144),
    CASE("EfficientNet-B0", 8, .C_in = 480, .C_out = 480, .k = 3, .stride = 1, .pad = 1, .groups = 480),
    CASE("EfficientNet-B0", 8, .C_in = 672, .C_out = 672, .k = 5, .stride = 1, .pad = 2, .groups = 672),
    CASE("EfficientNet-B0", 32, .C_in = 24, .C_out = 144, .k = 1, .stride = 1),
    CASE("EfficientNet-B0", 8, .C_in = 672, .C_out = 112, .k = 1, .stride = 1),
    CASE("ResNeXt-50", 32, .C_in = 128, .C_out = 128, .k = 3, .stride = 1, .pad = 1, .groups = 32),
    CASE("ResNeXt-50", 16, .C_in = 256, .C_out = 256, .k = 3, .stride = 1, .pad = 1, .groups = 32),
};
#define N_CASES ((int)(sizeof k_cases / sizeof *k_cases))

/* The ways of computing a convolution. */
enum { P_F32, P_DNNL, P_DIRECT, P_BF16, N_PATHS };
static const char *const k_path_names[N_PATHS] = { "f32", "f32-dnnl", "f32-direct", "bf16" };

typedef struct Times {
    int timed;                 /* 0: not run (same path as f32, or no bf16 kernel) */
    double fwd, bwd, bwd_w;    /* bwd: the full backward (dx and dw); bwd_w: dw alone */
    char impl[96];
} Times;

static int g_cpu_time;

static double now(void) {
    return g_cpu_time ? cpu_sec() : now_sec();
}

static double best(double a, double b) { return a < b ? a : b; }

/* The pass p of t: 0 forward, 1 backward-data, 2 backward-weights, 3 the sum. */
static double pass(const Times *t, int p) {
    switch (p) {
    case 0: return t->fwd;
    case 1: return t->bwd - t->bwd_w;
    case 2: return t->bwd_w;
    default: return t->fwd + t->bwd;
    }
}

/* The conv under the selection flags as they are set now (conv2d_init reads them). */
static void time_path(const Case *cs, int N, const float *x, const float *w, const float *dy,
                      float *y, float *dx, float *dw, int reps, Times *t) {
    Conv2d c;
    conv2d_init(&c, &cs->sh);
    t->fwd = t->bwd = t->bwd_w = 1e30;
    for (int r = 0; r < reps + 1; r++) {   /* the first round warms up (and makes the plans) */
        conv2d_weights_changed(&c);
        double a = now();
        conv2d_forward(&c, N, cs->H, cs->H, x, w, y);
        double b = now();
        if (!cs->image) conv2d_backward(&c, N, cs->H, cs->H, x, w, dy, dx, dw);
        double d = now();
        conv2d_backward(&c, N, cs->H, cs->H, x, w, dy, NULL, dw);
        double e = now();
        if (r == 0) continue;
        t->fwd = best(t->fwd, b - a);
        t->bwd_w = best(t->bwd_w, e - d);
        t->bwd = cs->image ? t->bwd_w : best(t->bwd, d - b);
    }
    t->timed = 1;
    conv2d_free(&c);
}

static void set_paths(int winograd, int own, int bf16) {
    conv2d_use_winograd(winograd);
    conv2d_use_own_winograd(own);
    conv2d_use_own_depthwise(own);
    conv2d_use_bf16(bf16);
}

/* "3x3 s1 64->64 @32", "dw5x5 s2 144 @32", "3x3 s1 g32 128->128 @16" */
static void case_name(const Case *cs, char *buf, size_t n) {
    const ConvShape *sh = &cs->sh;
    const int g = sh->groups ? sh->groups : 1;
    if (g > 1 && g == sh->C_in && g == sh->C_out)
        snprintf(buf, n, "dw%dx%d s%d %d @%d", sh->k, sh->k, sh->stride, sh->C_in, cs->H);
    else if (g > 1)
        snprintf(buf, n, "%dx%d s%d g%d %d->%d @%d", sh->k, sh->k, sh->stride, g, sh->C_in, sh->C_out, cs->H);
    else
        snprintf(buf, n, "%dx%d s%d %d->%d @%d", sh->k, sh->k, sh->stride, sh->C_in, sh->C_out, cs->H);
}

/* The fastest timed path at pass p. */
static int winner(const Times *t, int p) {
    int w = P_F32;
    for (int k = 1; k < N_PATHS; k++)
        if (t[k].timed && pass(&t[k], p) < pass(&t[w], p)) w = k;
    return w;
}

/* The best float32 sum over the bf16 sum: above 1, bf16 is faster. */
static double bf16_speedup(const Times *t) {
    double f = pass(&t[P_F32], 3);
    for (int k = P_DNNL; k < P_BF16; k++)
        if (t[k].timed) f = best(f, pass(&t[k], 3));
    return f / pass(&t[P_BF16], 3);
}

/* Path k's time of pass p in ms, or "-" where it was not run (not timed; backward-data of an
 * image's convolution). */
static const char *ms(const Times *t, int k, int p, int image, char *buf, size_t n) {
    if (!t[k].timed || (image && p == 1)) return "-";
    snprintf(buf, n, "%.2f", 1e3 * pass(&t[k], p));
    return buf;
}

/* Within this of the fastest, a path ties with it: repeated runs on a shared machine moved
 * single passes by about that much. */
#define TIE 1.05

/* The fastest path of pass p, "f32-dnnl~f32" where the runner-up ties with it. */
static const char *wins(const Times *t, int p, int image, char *buf, size_t n) {
    if (image && p == 1) return "-";
    const int w = winner(t, p);
    int r = -1;   /* the runner-up */
    for (int k = 0; k < N_PATHS; k++)
        if (k != w && t[k].timed && (r < 0 || pass(&t[k], p) < pass(&t[r], p))) r = k;
    if (r >= 0 && pass(&t[r], p) <= TIE * pass(&t[w], p))
        snprintf(buf, n, "%s~%s", k_path_names[w], k_path_names[r]);
    else
        snprintf(buf, n, "%s", k_path_names[w]);
    return buf;
}

static void print_text(const char *name, const Case *cs, const Times *t) {
    char b[4][32];
    for (int k = 0; k < N_PATHS; k++) {
        printf("%-23s %-16s %-10s", k ? "" : name, k ? "" : cs->nets, k_path_names[k]);
        for (int p = 0; p < 4; p++) printf(" %9s", ms(t, k, p, cs->image, b[p], sizeof b[p]));
        printf("  %s\n", t[k].impl);
    }
    printf("%-23s %-16s %-10s", "", "", "wins");
    for (int p = 0; p < 4; p++) printf(" %9s", wins(t, p, cs->image, b[p], sizeof b[p]));
    if (t[P_BF16].timed) printf("  bf16 speed-up %.2fx", bf16_speedup(t));
    printf("\n");
}

/* bf16: whether the CPU has bf16 kernels; without, the table has no bf16 columns. */
static void print_markdown(const char *name, const Case *cs, const Times *t, int bf16) {
    char b[4][32];
    printf("| %s | %s |", name, cs->nets);
    for (int k = 0; k < (bf16 ? N_PATHS : P_BF16); k++) {
        if (!t[k].timed) { printf(" %s |", t[k].impl); continue; }
        printf(" `%s` %s + %s + %s = %s |", t[k].impl, ms(t, k, 0, cs->image, b[0], sizeof b[0]),
               ms(t, k, 1, cs->image, b[1], sizeof b[1]), ms(t, k, 2, cs->image, b[2], sizeof b[2]),
               ms(t, k, 3, cs->image, b[3], sizeof b[3]));
    }
    printf(" %s, %s, %s, **%s** |", wins(t, 0, cs->image, b[0], sizeof b[0]), wins(t, 1, cs->image, b[1], sizeof b[1]),
           wins(t, 2, cs->image, b[2], sizeof b[2]), wins(t, 3, cs->image, b[3], sizeof b[3]));
    if (!bf16) printf("\n");
    else if (t[P_BF16].timed) printf(" %.2fx |\n", bf16_speedup(t));
    else printf(" - |\n");
}

/* One path, under the selection flags set_paths takes: the implementation it picks and its
 * times; a bf16 plan that oneDNN could give only its reference loops stays float32
 * (conv_cpu.c) and is not timed. */
static void run_path(const Case *cs, int N, int reps, int winograd, int own, int bf16, const float *x,
                     const float *w, const float *dy, float *y, float *dx, float *dw, Times *t) {
    set_paths(winograd, own, bf16);
    Conv2d probe;
    conv2d_init(&probe, &cs->sh);
    const int timed = !bf16 || conv2d_is_bf16(&probe, N, cs->H, cs->H);
    if (timed) snprintf(t->impl, sizeof t->impl, "%s", conv2d_impl_name(&probe, N, cs->H, cs->H));
    else snprintf(t->impl, sizeof t->impl, "float32: oneDNN has only reference bf16 code");
    conv2d_free(&probe);
    if (timed) time_path(cs, N, x, w, dy, y, dx, dw, reps, t);
    set_paths(1, 1, 0);
}

/* All paths of one case that differ from each other (see the top of the file). */
static void measure_case(const Case *cs, int N, int reps, CpuBf16Path bf16_path, const float *x,
                         const float *w, const float *dy, float *y, float *dx, float *dw, Times *t) {
    memset(t, 0, N_PATHS * sizeof *t);
    run_path(cs, N, reps, 1, 1, 0, x, w, dy, y, dx, dw, &t[P_F32]);
    /* only winograd.c and depthwise.c differ from oneDNN's own choice */
    if (!strncmp(t[P_F32].impl, "winograd4x3", 11) || !strncmp(t[P_F32].impl, "own_dw", 6))
        run_path(cs, N, reps, 1, 0, 0, x, w, dy, y, dx, dw, &t[P_DNNL]);
    else
        snprintf(t[P_DNNL].impl, sizeof t[P_DNNL].impl, "same as f32");
    if (strstr(t[P_F32].impl, "wino") || strstr(t[P_DNNL].impl, "wino"))
        run_path(cs, N, reps, 0, 0, 0, x, w, dy, y, dx, dw, &t[P_DIRECT]);
    else
        snprintf(t[P_DIRECT].impl, sizeof t[P_DIRECT].impl, "no Winograd to compare");
    if (bf16_path == CPU_BF16_NONE)
        snprintf(t[P_BF16].impl, sizeof t[P_BF16].impl, "no bf16 kernels below AVX-512");
    else
        run_path(cs, N, reps, 1, 1, 1, x, w, dy, y, dx, dw, &t[P_BF16]);
}

int main(int argc, char **argv) {
    g_progname = "conv_shapes";
    int N = 32, reps = 3, markdown = 0;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cpu-time")) { g_cpu_time = 1; continue; }
        if (!strcmp(argv[i], "--markdown")) { markdown = 1; continue; }
        if (i + 1 >= argc) die_code(2, "%s needs a value", argv[i]);
        if (!strcmp(argv[i], "--batch")) N = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only")) only = argv[++i];
        else die_code(2, "unknown option %s", argv[i]);
    }
    if (N < 1 || reps < 1) die_code(2, "--batch and --reps must be >= 1");
    int selected[N_CASES], n_selected = 0;
    for (int ci = 0; ci < N_CASES; ci++) {
        char name[64];
        case_name(&k_cases[ci], name, sizeof name);
        selected[ci] = !only || strstr(name, only) || strstr(k_cases[ci].nets, only);
        n_selected += selected[ci];
    }
    if (!n_selected) die_code(2, "--only %s: no shape's name or networks contain it", only);
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
#else
    const int threads = 1;
#endif
    char bf16_impl[96];
    const CpuBf16Path bf16_path = conv2d_bf16_path(bf16_impl, sizeof bf16_impl);
    const char *bf16_what = bf16_path == CPU_BF16_NATIVE ? "native" : bf16_path == CPU_BF16_EMULATED
        ? "emulated with float32 instructions" : "none: oneDNN has no bf16 kernels on this ISA";
    const char *limit = getenv("ONEDNN_MAX_CPU_ISA");
    printf("# conv_shapes: batch %d, %d thread%s, ONEDNN_MAX_CPU_ISA=%s, vectors %s, %s\n", N, threads,
           threads == 1 ? "" : "s", limit ? limit : "(unset)", cpu_isa_name(cpu_isa()), ops_cpu_describe());
    printf("# bf16: %s (a 3x3 conv gets %s); ms %s, best of %d after 1 warm-up\n", bf16_what, bf16_impl,
           g_cpu_time ? "of process CPU time" : "of wall time", reps);
    printf("# f32: conv2d as selected; f32-dnnl: oneDNN alone (where f32 is not oneDNN); f32-direct:"
           " oneDNN direct (where one of those is Winograd); bf16: conv2d_use_bf16(1); the forward's"
           " implementation named\n");
    if (markdown && bf16_path != CPU_BF16_NONE) {
        printf("| shape (@ input side) | networks | f32: conv2d's choice, ms fwd + bwd-data + bwd-w = total |"
               " f32-dnnl: oneDNN alone | f32-direct: no Winograd | bf16 (`--use_amp`) |"
               " fastest: fwd, bwd-data, bwd-w, **total** | bf16 speed-up |\n|---|---|---|---|---|---|---|---|\n");
    } else if (markdown) {   /* no bf16 columns: oneDNN has no bf16 kernels here */
        printf("| shape (@ input side) | networks | f32: conv2d's choice, ms fwd + bwd-data + bwd-w = total |"
               " f32-dnnl: oneDNN alone | f32-direct: no Winograd | fastest: fwd, bwd-data, bwd-w, **total** |"
               "\n|---|---|---|---|---|---|\n");
    } else {
        printf("%-23s %-16s %-10s %9s %9s %9s %9s  %s\n", "shape", "networks", "path", "fwd", "bwd-data",
               "bwd-w", "total", "implementation");
    }
    Rng r;
    rng_init(&r, 1, 2, 3);
    for (int ci = 0; ci < N_CASES; ci++) {
        const Case *cs = &k_cases[ci];
        char name[64];
        case_name(cs, name, sizeof name);
        if (!selected[ci]) continue;
        const ConvShape *sh = &cs->sh;
        const int g = sh->groups ? sh->groups : 1, Ho = conv_out_size(sh, cs->H);
        const size_t nx = (size_t)N * cs->H * cs->H * sh->C_in, ny = (size_t)N * Ho * Ho * sh->C_out;
        const size_t nw = (size_t)sh->C_out * (sh->C_in / g) * sh->k * sh->k;
        float *x = mallocCheck(nx * sizeof(float)), *dx = mallocCheck(nx * sizeof(float));
        float *y = mallocCheck(ny * sizeof(float)), *dy = mallocCheck(ny * sizeof(float));
        float *w = mallocCheck(nw * sizeof(float)), *dw = callocCheck(nw, sizeof(float));
        for (size_t i = 0; i < nx; i++) x[i] = rng_normal(&r);
        for (size_t i = 0; i < ny; i++) dy[i] = rng_normal(&r);
        for (size_t i = 0; i < nw; i++) w[i] = 0.05f * rng_normal(&r);

        Times t[N_PATHS];
        measure_case(cs, N, reps, bf16_path, x, w, dy, y, dx, dw, t);
        if (markdown) print_markdown(name, cs, t, bf16_path != CPU_BF16_NONE);
        else print_text(name, cs, t);
        fflush(stdout);
        free(x); free(dx); free(y); free(dy); free(w); free(dw);
    }
    return 0;
}
