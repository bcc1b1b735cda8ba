/* SPDX-License-Identifier: BSD-3-Clause */
/* optim_cpu.c - see optim_cpu.h.
 *
 * Every update is written once, as a formula over a type, and compiled twice: one element at a
 * time in floats with libm's fmaf and sqrtf (the build's baseline), and 8 at a time with AVX2's
 * fused multiply-add and square root (cpu_isa.h's choice, the tail as floats). Every operation
 * is correctly rounded on either path, so both give the same bits. Sums of squares are taken
 * in double over blocks of a fixed size, the blocks' sums added in order: the bits depend on n
 * alone, not on the threads nor on the path. */
#include "optim_cpu.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>

#include "cpu_isa.h"
#include "base/util.h"

/* Below this many elements a slice is updated by one thread: a parallel region costs more. */
#define PAR_MIN 32768
#define SUM_BLOCK 8192

/* What a span of an update works on: [lo, hi) of the slice, a block of SUM_BLOCK elements or
 * the slice's last, shorter one (the block's index is lo / SUM_BLOCK). */
typedef struct {
    float *p;
    const float *g;
    float *s1, *s2;              /* the state tensors: m and v, or v and the momentum buffer */
    const OptimScalars *s;
    double *sums;                /* lamb_moments: 2 per block, or NULL */
} Span;

/* The float scalars an element's update reads, as floats (K of the formulas below is a KS) or
 * broadcast to 8 lanes (a KV). */
#define K_FIELDS(T) T lr, wd, mom, b1, omb1, b2, omb2, eps, decay, step, bc1, bc2s, gdiv, trust, neg_lr
typedef struct { K_FIELDS(float); } KS;
typedef float v8f __attribute__((vector_size(32)));   /* GCC's vectors: +, -, * and / act lane by lane */
typedef struct { K_FIELDS(v8f); } KV;

static KS scalars(const OptimScalars *s) {
    return (KS){.lr = s->lr, .wd = s->weight_decay, .mom = s->momentum, .b1 = s->beta1, .omb1 = s->one_minus_beta1,
                .b2 = s->beta2, .omb2 = s->one_minus_beta2, .eps = s->eps, .decay = s->decay, .step = s->step_size,
                .bc1 = s->bc1, .bc2s = s->bc2_sqrt, .gdiv = s->grad_div, .trust = s->adapt ? s->trust : 1.0f, .neg_lr = -s->lr};
}

#define SPAN_PTRS                                                                                   \
    float *restrict p = a->p;                                                                      \
    const float *restrict g = a->g;                                                                \
    float *restrict s1 = a->s1, *restrict s2 = a->s2;                                              \
    const int adapt = a->s->adapt, nesterov = a->s->nesterov;                                      \
    const KS ks = scalars(a->s);                                                                   \
    (void)p; (void)g; (void)s1; (void)s2; (void)adapt; (void)nesterov

/* The element formulas, each written once for both types: T float with FMA fmaf and SQRT sqrtf,
 * or v8f with the AVX2 instructions (the same correctly rounded operations, 8 at a time).
 * P, G, S1, S2 are the element's (or 8 elements') lvalues. */
#define ADAMW(T, K, FMA, SQRT, P, G, S1, S2)                                                        \
    do {                                                                                           \
        const T gi = (G), pi = (P) * K.decay;                                                      \
        const T mi = FMA(K.omb1, gi, (S1) * K.b1);                                                 \
        const T vi = FMA(K.omb2 * gi, gi, (S2) * K.b2);                                            \
        (S1) = mi;                                                                                 \
        (S2) = vi;                                                                                 \
        (P) = pi + (-K.step * mi) / (SQRT(vi) / K.bc2s + K.eps);                                   \
    } while (0)

/* RMSprop: S1 square_avg, S2 the momentum buffer (untouched when mom is 0) */
#define RMSPROP(T, K, FMA, SQRT, P, G, S1, S2)                                                      \
    do {                                                                                           \
        const T d = with_wd ? FMA(K.wd, (P), (G)) : (G);                                           \
        const T vi = FMA(K.omb2 * d, d, (S1) * K.b2);                                              \
        (S1) = vi;                                                                                 \
        if (with_mom) {                                                                            \
            const T b = (S2) * K.mom + d / (SQRT(vi) + K.eps);                                     \
            (S2) = b;                                                                              \
            (P) = FMA(K.neg_lr, b, (P));                                                           \
        } else {                                                                                   \
            (P) = (P) + (K.neg_lr * d) / (SQRT(vi) + K.eps);                                       \
        }                                                                                          \
    } while (0)

#define LAMB_MOMENTS(T, K, FMA, G, S1, S2)                                                          \
    do {                                                                                           \
        const T gc = (G) / K.gdiv;                                                                 \
        (S1) = FMA(K.omb1, gc, (S1) * K.b1);                                                       \
        (S2) = FMA(K.omb2 * gc, gc, (S2) * K.b2);                                                  \
    } while (0)

/* LAMB's update of an element from its moments, before the trust ratio (timm's `update`) */
#define LAMB_UPDATE(K, FMA, SQRT, P, S1, S2)                                                        \
    (adapt ? FMA(K.wd, (P), ((S1) / K.bc1) / (SQRT(S2) / K.bc2s + K.eps))                          \
           : ((S1) / K.bc1) / (SQRT(S2) / K.bc2s + K.eps))

/* u * 1 is u: the trust ratio of a tensor without one is 1 */
#define LAMB_APPLY(K, FMA, SQRT, P, S1, S2) ((P) = FMA(K.neg_lr, LAMB_UPDATE(K, FMA, SQRT, P, S1, S2) * K.trust, (P)))

/* LARS: S1 the momentum buffer (untouched when mom is 0) */
#define LARS(T, K, FMA, P, G, S1)                                                                   \
    do {                                                                                           \
        const T d = adapt ? FMA(K.wd, (P), (G)) * K.trust : (G);                                   \
        if (with_mom) {                                                                            \
            const T b = (S1) * K.mom + d;                                                          \
            (S1) = b;                                                                              \
            (P) = FMA(K.neg_lr, nesterov ? FMA(K.mom, b, d) : b, (P));                             \
        } else {                                                                                   \
            (P) = FMA(K.neg_lr, d, (P));                                                           \
        }                                                                                          \
    } while (0)

/* ---- the baseline path: one element at a time, fmaf and sqrtf from libm ---------------------- */

static void adamw_base(const Span *a, size_t lo, size_t hi) {
    SPAN_PTRS;
    for (size_t i = lo; i < hi; i++) ADAMW(float, ks, fmaf, sqrtf, p[i], g[i], s1[i], s2[i]);
}

static void rmsprop_base(const Span *a, size_t lo, size_t hi) {
    SPAN_PTRS;
    const int with_wd = ks.wd != 0.0f, with_mom = ks.mom > 0.0f;
    for (size_t i = lo; i < hi; i++) RMSPROP(float, ks, fmaf, sqrtf, p[i], g[i], s1[i], s2[i]);
}

/* The moments, then (with sums) the block's sums of p^2 and u^2 in double, in order. */
static void lamb_moments_base(const Span *a, size_t lo, size_t hi) {
    SPAN_PTRS;
    for (size_t i = lo; i < hi; i++) LAMB_MOMENTS(float, ks, fmaf, g[i], s1[i], s2[i]);
    if (!a->sums) return;
    double sp = 0.0, su = 0.0;
    for (size_t i = lo; i < hi; i++) {
        const double u = LAMB_UPDATE(ks, fmaf, sqrtf, p[i], s1[i], s2[i]);
        sp += (double)p[i] * p[i];
        su += u * u;
    }
    a->sums[2 * (lo / SUM_BLOCK)] = sp;
    a->sums[2 * (lo / SUM_BLOCK) + 1] = su;
}

static void lamb_apply_base(const Span *a, size_t lo, size_t hi) {
    SPAN_PTRS;
    for (size_t i = lo; i < hi; i++) LAMB_APPLY(ks, fmaf, sqrtf, p[i], s1[i], s2[i]);
}

static void lars_base(const Span *a, size_t lo, size_t hi) {
    SPAN_PTRS;
    const int with_mom = ks.mom != 0.0f;
    for (size_t i = lo; i < hi; i++) LARS(float, ks, fmaf, p[i], g[i], s1[i]);
}

/* ---- the AVX2 path: 8 elements at a time, the rest as above (fmaf is one instruction here) --- */

#define AVX2 CPU_ISA_ATTR_AVX2 static inline
AVX2 v8f vfma(v8f x, v8f y, v8f z) { return (v8f)_mm256_fmadd_ps((__m256)x, (__m256)y, (__m256)z); }
AVX2 v8f vsqrt(v8f x) { return (v8f)_mm256_sqrt_ps((__m256)x); }
AVX2 v8f ld(const float *x) { return (v8f)_mm256_loadu_ps(x); }
AVX2 void st(float *x, v8f v) { _mm256_storeu_ps(x, (__m256)v); }
AVX2 KV broadcast(const KS *k) {
    KV v;
#define B(f) v.f = (v8f)_mm256_set1_ps(k->f)
    B(lr); B(wd); B(mom); B(b1); B(omb1); B(b2); B(omb2); B(eps); B(decay); B(step); B(bc1); B(bc2s); B(gdiv);
    B(trust); B(neg_lr);
#undef B
    return v;
}
#undef AVX2

CPU_ISA_ATTR_AVX2 static void adamw_avx2(const Span *a, size_t lo, size_t hi) {
    SPAN_PTRS;
    const KV kv = broadcast(&ks);
    size_t i = lo;
    for (; i + 8 <= hi; i += 8) {
        v8f P = ld(p + i), M = ld(s1 + i), V = ld(s2 + i);
        ADAMW(v8f, kv, vfma, vsqrt, P, ld(g + i), M, V);
        st(p + i, P); st(s1 + i, M); st(s2 + i, V);
    }
    for (; i < hi; i++) ADAMW(float, ks, fmaf, sqrtf, p[i], g[i], s1[i], s2[i]);
}

CPU_ISA_ATTR_AVX2 static void rmsprop_avx2(const Span *a, size_t lo, size_t hi) {
    SPAN_PTRS;
    const int with_wd = ks.wd != 0.0f, with_mom = ks.mom > 0.0f;
    const KV kv = broadcast(&ks);
    size_t i = lo;
    for (; i + 8 <= hi; i += 8) {
        v8f P = ld(p + i), V = ld(s1 + i), B = with_mom ? ld(s2 + i) : V;
        RMSPROP(v8f, kv, vfma, vsqrt, P, ld(g + i), V, B);
        st(p + i, P); st(s1 + i, V);
        if (with_mom) st(s2 + i, B);
    }
    for (; i < hi; i++) RMSPROP(float, ks, fmaf, sqrtf, p[i], g[i], s1[i], s2[i]);
}

CPU_ISA_ATTR_AVX2 static void lamb_moments_avx2(const Span *a, size_t lo, size_t hi) {
    SPAN_PTRS;
    const KV kv = broadcast(&ks);
    size_t i = lo;
    for (; i + 8 <= hi; i += 8) {
        v8f M = ld(s1 + i), V = ld(s2 + i);
        LAMB_MOMENTS(v8f, kv, vfma, ld(g + i), M, V);
        st(s1 + i, M); st(s2 + i, V);
    }
    for (; i < hi; i++) LAMB_MOMENTS(float, ks, fmaf, g[i], s1[i], s2[i]);
    if (!a->sums) return;
    double sp = 0.0, su = 0.0;   /* as lamb_moments_base: sums in double do not vectorise in order */
    for (i = lo; i < hi; i++) {
        const double u = LAMB_UPDATE(ks, fmaf, sqrtf, p[i], s1[i], s2[i]);
        sp += (double)p[i] * p[i];
        su += u * u;
    }
    a->sums[2 * (lo / SUM_BLOCK)] = sp;
    a->sums[2 * (lo / SUM_BLOCK) + 1] = su;
}

CPU_ISA_ATTR_AVX2 static void lamb_apply_avx2(const Span *a, size_t lo, size_t hi) {
    SPAN_PTRS;
    const KV kv = broadcast(&ks);
    size_t i = lo;
    for (; i + 8 <= hi; i += 8) {
        v8f P = ld(p + i);
        LAMB_APPLY(kv, vfma, vsqrt, P, ld(s1 + i), ld(s2 + i));
        st(p + i, P);
    }
    for (; i < hi; i++) LAMB_APPLY(ks, fmaf, sqrtf, p[i], s1[i], s2[i]);
}

CPU_ISA_ATTR_AVX2 static void lars_avx2(const Span *a, size_t lo, size_t hi) {
    SPAN_PTRS;
    const int with_mom = ks.mom != 0.0f;
    const KV kv = broadcast(&ks);
    size_t i = lo;
    for (; i + 8 <= hi; i += 8) {
        v8f P = ld(p + i), B = with_mom ? ld(s1 + i) : P;
        LARS(v8f, kv, vfma, P, ld(g + i), B);
        st(p + i, P);
        if (with_mom) st(s1 + i, B);
    }
    for (; i < hi; i++) LARS(float, ks, fmaf, p[i], g[i], s1[i]);
}

typedef void (*SpanFn)(const Span *a, size_t lo, size_t hi);

static int use_avx2(void) {
    static int isa = -1;   /* asked once, by the thread that steps (never inside a parallel region) */
    if (isa < 0) isa = cpu_isa();
    return isa >= CPU_ISA_AVX2;
}

void optim_cpu_sumsq(const float *x, size_t n, double *out) {
    const size_t nb = (n + SUM_BLOCK - 1) / SUM_BLOCK;
    double *part = mallocCheck((nb ? nb : 1) * sizeof(double));
    #pragma omp parallel for schedule(static) if(n >= PAR_MIN)
    for (size_t b = 0; b < nb; b++) {
        const size_t a = b * SUM_BLOCK, z = a + SUM_BLOCK < n ? a + SUM_BLOCK : n;
        double acc = 0.0;
        for (size_t i = a; i < z; i++) acc += (double)x[i] * x[i];
        part[b] = acc;
    }
    double total = 0.0;
    for (size_t b = 0; b < nb; b++) total += part[b];
    free(part);
    *out = total;
}

/* f over [0, n) in blocks of SUM_BLOCK, the blocks shared among the threads. */
static void run(SpanFn base, SpanFn avx2, const Span *a, size_t n) {
    const SpanFn f = use_avx2() ? avx2 : base;
    const size_t nb = (n + SUM_BLOCK - 1) / SUM_BLOCK;
    #pragma omp parallel for schedule(static) if(n >= PAR_MIN)
    for (size_t b = 0; b < nb; b++) f(a, b * SUM_BLOCK, (b + 1) * SUM_BLOCK < n ? (b + 1) * SUM_BLOCK : n);
}

void optim_cpu_adamw(float *p, const float *g, float *exp_avg, float *exp_avg_sq, size_t n, const OptimScalars *s) {
    const Span a = {.p = p, .g = g, .s1 = exp_avg, .s2 = exp_avg_sq, .s = s};
    run(adamw_base, adamw_avx2, &a, n);
}

void optim_cpu_rmsprop(float *p, const float *g, float *square_avg, float *momentum_buffer, size_t n,
                       const OptimScalars *s) {
    const Span a = {.p = p, .g = g, .s1 = square_avg, .s2 = momentum_buffer, .s = s};
    run(rmsprop_base, rmsprop_avx2, &a, n);
}

void optim_cpu_lamb_moments(const float *p, const float *g, float *exp_avg, float *exp_avg_sq, size_t n,
                            const OptimScalars *s, double *sumsq_p_u) {
    const size_t nb = (n + SUM_BLOCK - 1) / SUM_BLOCK;
    /* p is only read here */
    Span a = {.p = (float *)p, .g = g, .s1 = exp_avg, .s2 = exp_avg_sq, .s = s};
    if (sumsq_p_u) a.sums = mallocCheck((nb ? 2 * nb : 1) * sizeof(double));
    run(lamb_moments_base, lamb_moments_avx2, &a, n);
    if (!a.sums) return;
    double sp = 0.0, su = 0.0;
    for (size_t b = 0; b < nb; b++) {
        sp += a.sums[2 * b];
        su += a.sums[2 * b + 1];
    }
    free(a.sums);
    sumsq_p_u[0] = sp;
    sumsq_p_u[1] = su;
}

void optim_cpu_lamb_apply(float *p, const float *exp_avg, const float *exp_avg_sq, size_t n, const OptimScalars *s) {
    const Span a = {.p = p, .s1 = (float *)exp_avg, .s2 = (float *)exp_avg_sq, .s = s};   /* only read */
    run(lamb_apply_base, lamb_apply_avx2, &a, n);
}

void optim_cpu_lars(float *p, const float *g, float *momentum_buffer, size_t n, const OptimScalars *s) {
    const Span a = {.p = p, .g = g, .s1 = momentum_buffer, .s = s};
    run(lars_base, lars_avx2, &a, n);
}
