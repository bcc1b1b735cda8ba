/* SPDX-License-Identifier: BSD-3-Clause */
/* fma_peak.c - the machine's float32 peak, measured rather than taken from a data sheet (clock
 * speeds of shared and virtual machines are unknown): every OpenMP thread runs independent
 * chains of fused multiply-adds, enough of them to hide the FMA latency on all FMA units, in
 * the widest vectors the CPU has. The build targets x86-64-v2, so the AVX-512 and AVX2 loops
 * are compiled for their own ISA and chosen at run time from CPUID. ONEDNN_MAX_CPU_ISA caps the
 * choice the way it caps oneDNN's, so that a training step measured on oneDNN's AVX2 path is
 * compared with the AVX2 peak of the same machine. The figure is the sum of the threads' rates,
 * each timed by its own CPU time (see timed_region); the wall-clock figure is printed too.
 * usage: fma_peak [--seconds S] [--repeats R]      threads: OMP_NUM_THREADS
 * prints: fma_peak: ISA, T threads: X GFLOP/s (...) */
#include <ctype.h>
#include <immintrin.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "base/util.h"

typedef enum { ISA_SSE, ISA_AVX2, ISA_AVX512 } Isa;

static const char *const isa_name[] = { "sse4.2 (no FMA: multiply + add)", "avx2 (FMA, 8 floats)",
                                        "avx512 (FMA, 16 floats)" };

/* Values that stay finite and normal forever: a -> a*b + c converges to c / (1 - b). */
#define MUL 0.999999f
#define ADD 1e-6f

/* Each loop body is 16 (AVX-512: 32 registers) or 12 (AVX2, SSE: 16 registers) independent
 * chains, more than the 2 FMA units x 4 cycles of latency of current x86 cores. */
#define STEP16(f) \
    a0 = f(a0, b, c); a1 = f(a1, b, c); a2 = f(a2, b, c); a3 = f(a3, b, c); \
    a4 = f(a4, b, c); a5 = f(a5, b, c); a6 = f(a6, b, c); a7 = f(a7, b, c); \
    a8 = f(a8, b, c); a9 = f(a9, b, c); a10 = f(a10, b, c); a11 = f(a11, b, c); \
    a12 = f(a12, b, c); a13 = f(a13, b, c); a14 = f(a14, b, c); a15 = f(a15, b, c)
/* Every chain starts from its own value, known only at run time: chains that start equal are
 * one chain to the compiler, which then computes it once. */
#define INIT16(T, set1) \
    T a0 = set1(x), a1 = set1(x + 1), a2 = set1(x + 2), a3 = set1(x + 3), a4 = set1(x + 4), \
      a5 = set1(x + 5), a6 = set1(x + 6), a7 = set1(x + 7), a8 = set1(x + 8), a9 = set1(x + 9), \
      a10 = set1(x + 10), a11 = set1(x + 11), a12 = set1(x + 12), a13 = set1(x + 13), \
      a14 = set1(x + 14), a15 = set1(x + 15)
#define INIT12(T, set1) \
    T a0 = set1(x), a1 = set1(x + 1), a2 = set1(x + 2), a3 = set1(x + 3), a4 = set1(x + 4), \
      a5 = set1(x + 5), a6 = set1(x + 6), a7 = set1(x + 7), a8 = set1(x + 8), a9 = set1(x + 9), \
      a10 = set1(x + 10), a11 = set1(x + 11)
#define STEP12(f) \
    a0 = f(a0, b, c); a1 = f(a1, b, c); a2 = f(a2, b, c); a3 = f(a3, b, c); \
    a4 = f(a4, b, c); a5 = f(a5, b, c); a6 = f(a6, b, c); a7 = f(a7, b, c); \
    a8 = f(a8, b, c); a9 = f(a9, b, c); a10 = f(a10, b, c); a11 = f(a11, b, c)

/* Each returns the sum of its chains (so the compiler must compute them) and sets *flops. */
__attribute__((target("avx512f")))
static float chains_avx512(long iters, float x, double *flops) {
    const __m512 b = _mm512_set1_ps(MUL), c = _mm512_set1_ps(ADD);
    INIT16(__m512, _mm512_set1_ps);
    for (long i = 0; i < iters; i++) { STEP16(_mm512_fmadd_ps); }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)),
                                       _mm512_add_ps(_mm512_add_ps(a12, a13), _mm512_add_ps(a14, a15))));
    *flops = (double)iters * 16 * 16 * 2;
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma")))
static float chains_avx2(long iters, float x, double *flops) {
    const __m256 b = _mm256_set1_ps(MUL), c = _mm256_set1_ps(ADD);
    INIT12(__m256, _mm256_set1_ps);
    for (long i = 0; i < iters; i++) { STEP12(_mm256_fmadd_ps); }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
    float v[8];
    _mm256_storeu_ps(v, s);
    *flops = (double)iters * 12 * 8 * 2;
    return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

static inline __m128 mul_add_sse(__m128 a, __m128 b, __m128 c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }

static float chains_sse(long iters, float x, double *flops) {
    const __m128 b = _mm_set1_ps(MUL), c = _mm_set1_ps(ADD);
    INIT12(__m128, _mm_set1_ps);
    for (long i = 0; i < iters; i++) { STEP12(mul_add_sse); }
    __m128 s = _mm_add_ps(_mm_add_ps(_mm_add_ps(a0, a1), _mm_add_ps(a2, a3)),
                          _mm_add_ps(_mm_add_ps(a4, a5), _mm_add_ps(a6, a7)));
    s = _mm_add_ps(s, _mm_add_ps(_mm_add_ps(a8, a9), _mm_add_ps(a10, a11)));
    float v[4];
    _mm_storeu_ps(v, s);
    *flops = (double)iters * 12 * 4 * 2;
    return v[0] + v[1] + v[2] + v[3];
}

static Isa isa_of_cpu(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return ISA_AVX2;
    return ISA_SSE;
}

/* oneDNN's names (SSE41, AVX, AVX2, AVX2_VNNI, AVX512_CORE..., ALL; older builds read
 * DNNL_MAX_CPU_ISA) mapped onto the loops here; AVX without AVX2 has no FMA and gets the SSE
 * loop. Returns -1 when unset or unrecognised (oneDNN then ignores it too). */
static int isa_cap_from_env(const char **value) {
    const char *v = getenv("ONEDNN_MAX_CPU_ISA");
    if (!v || !*v) v = getenv("DNNL_MAX_CPU_ISA");
    *value = v;
    if (!v || !*v) return -1;
    char u[64];
    size_t n = 0;
    for (; v[n] && n + 1 < sizeof u; n++) u[n] = (char)toupper((unsigned char)v[n]);
    u[n] = '\0';
    if (!strcmp(u, "ALL") || !strncmp(u, "AVX512", 6)) return ISA_AVX512;
    if (!strncmp(u, "AVX2", 4)) return ISA_AVX2;
    if (!strcmp(u, "AVX") || !strcmp(u, "SSE41")) return ISA_SSE;
    return -1;
}

static float run_chains(Isa isa, long iters, float x, double *flops) {
    switch (isa) {
    case ISA_AVX512: return chains_avx512(iters, x, flops);
    case ISA_AVX2: return chains_avx2(iters, x, flops);
    default: return chains_sse(iters, x, flops);
    }
}

static double thread_cpu_sec(void) {
    struct timespec ts;
    CHECK(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One parallel region in which every thread runs `iters` iterations. Returns the sum of the
 * threads' rates, each over the CPU time of its own thread: on a shared machine another
 * process may hold a core for part of the region, and the wall clock would count that against
 * the hardware (*wall_rate gets the wall-clock figure). */
static double timed_region(Isa isa, long iters, double *wall_rate, volatile float *sink) {
    double rate = 0.0, total = 0.0;
    float sum = 0.0f;
    double t0 = now_sec();
    #pragma omp parallel reduction(+ : rate, total, sum)
    {
        double f, c0 = thread_cpu_sec();
        sum += run_chains(isa, iters, (float)(iters % 7), &f);
        rate += f / (thread_cpu_sec() - c0);
        total += f;
    }
    *wall_rate = total / (now_sec() - t0);
    *sink = sum;
    return rate;
}

int main(int argc, char **argv) {
    g_progname = "fma_peak";
    double seconds = 0.3;
    int repeats = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--repeats")) repeats = atoi(argv[i + 1]);
        else die_code(2, "unknown option %s", argv[i]);
    }
    if (!(seconds > 0.0) || repeats < 1) die_code(2, "--seconds must be > 0 and --repeats >= 1");

    const Isa cpu = isa_of_cpu();
    const char *cap_value;
    const int cap = isa_cap_from_env(&cap_value);
    const Isa isa = (cap >= 0 && (Isa)cap < cpu) ? (Isa)cap : cpu;
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
#else
    const int threads = 1;
#endif

    /* Calibrate: double the iterations until a region lasts 1/10 of the target. */
    volatile float sink;
    double rate, wall_rate, t0, dt;
    long iters = 1 << 14;
    for (;;) {
        t0 = now_sec();
        timed_region(isa, iters, &wall_rate, &sink);
        if ((dt = now_sec() - t0) >= seconds / 10) break;
        iters *= 2;
    }
    iters = (long)(iters * seconds / dt) + 1;

    double best = 0.0, best_wall = 0.0;
    for (int r = 0; r < repeats; r++) {
        rate = timed_region(isa, iters, &wall_rate, &sink);
        if (rate > best) best = rate;
        if (wall_rate > best_wall) best_wall = wall_rate;
    }
    printf("fma_peak: %s, %d threads: %.1f GFLOP/s (%.1f per thread by its CPU time; %.1f GFLOP/s by the "
           "wall clock; best of %d x %.2f s)", isa_name[isa], threads, best / 1e9, best / 1e9 / threads,
           best_wall / 1e9, repeats, seconds);
    if (cap_value && *cap_value)
        printf(" [ONEDNN_MAX_CPU_ISA=%s%s]", cap_value, cap < 0 ? ": not recognised, ignored" : "");
    if (isa != cpu) printf(" [the CPU also has %s]", isa_name[cpu]);
    printf("\n");
    return 0;
}
