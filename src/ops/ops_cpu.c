/* SPDX-License-Identifier: BSD-3-Clause */
/* ops_cpu.c - see ops_cpu.h.
 *
 * Plain OpenMP over the NHWC [M, C] view. Reductions are computed per fixed block of rows and
 * the block partials combined in block order, so every result depends only on the data and the
 * shapes, never on the number of threads or their scheduling: a resumed run reproduces bit for
 * bit. */
#include "ops_cpu.h"

#include <math.h>
#include <string.h>

#include "act_value.h"
#include "backend.h"
#include "cpu_isa.h"
#include "rules.h"
#include "base/util.h"

/* ======================================================================================
 * Batch norm. Reductions run over fixed blocks of rows (the block size depends only on C), each
 * block summed in double into its own slot, then the slots are added in block order.
 * ====================================================================================== */

static size_t rows_per_block(int C) {
    const size_t r = 16384 / (size_t)C;   /* ~64 KB of floats per block: stays in L2 */
    return r ? r : 1;
}

/* The per-block kernels, compiled for each path of cpu_isa.h as depthwise.c's are. A block's
 * reductions run a tile of channels at a time down its rows, the tile's sums in registers: each
 * channel's sum takes its rows in the same order, one double addition per value as before, so
 * the sums are those of the scalar loops bit for bit, on every path and at every vector width
 * (C11 mode: GCC contracts nothing into an FMA unless asked). The elementwise passes are the
 * same operations, wider. Only silu and sigmoid differ by path: the AVX2 and AVX-512 ones use
 * act_value.h's exp_v (within an ulp of libm's expf), which vectorises. */
#define CB 16   /* channels per tile; the rest by tiles of 8, then of 1 */
#define ALWAYS_INLINE static inline __attribute__((always_inline))
/* A tile's loads and stores never overlap but where g is dy, each value read before written. */
#define FOR_L(n) _Pragma("GCC ivdep") for (int l = 0; l < (n); l++)
#define TILES(TILE)                                   \
    do {                                              \
        int c = 0;                                    \
        for (; c + CB <= C; c += CB) TILE(CB);        \
        for (; c + 8 <= C; c += 8) TILE(8);           \
        for (; c < C; c++) TILE(1);                   \
    } while (0)

/* NaN passes through (as in PyTorch) so that a diverging run shows up in the loss. */
static inline float relu1(float v) { return v < 0.0f ? 0.0f : v; }

ALWAYS_INLINE void stats_rows(const float *x, size_t r0, size_t r1, int C, double *s, double *q) {
#define STATS_TILE(w)                                                       \
    do {                                                                    \
        double as[CB], aq[CB];                                              \
        FOR_L(w) { as[l] = 0.0; aq[l] = 0.0; }                              \
        for (size_t r = r0; r < r1; r++) {                                  \
            const float *xr = x + r * C + c;                                \
            FOR_L(w) {                                                      \
                const double v = xr[l];                                     \
                as[l] += v;                                                 \
                aq[l] += v * v;                                             \
            }                                                               \
        }                                                                   \
        FOR_L(w) { s[c + l] = as[l]; q[c + l] = aq[l]; }                    \
    } while (0)
    TILES(STATS_TILE);
#undef STATS_TILE
}

ALWAYS_INLINE void apply_rows(const float *x, float *y, size_t r0, size_t r1, int C, const float *scale,
                              const float *shift, const float *residual, int relu) {
    for (size_t r = r0; r < r1; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        if (residual) {
            const float *rr = residual + r * C;
            if (relu) for (int c = 0; c < C; c++) yr[c] = relu1(xr[c] * scale[c] + shift[c] + rr[c]);
            else      for (int c = 0; c < C; c++) yr[c] = xr[c] * scale[c] + shift[c] + rr[c];
        } else {
            if (relu) for (int c = 0; c < C; c++) yr[c] = relu1(xr[c] * scale[c] + shift[c]);
            else      for (int c = 0; c < C; c++) yr[c] = xr[c] * scale[c] + shift[c];
        }
    }
}

/* g = dy masked by y > 0 (pick: a blend), then the tile's sums. */
ALWAYS_INLINE void reduce_rows(const float *x, const float *y, const float *dy, float *g, size_t r0, size_t r1,
                               int C, const float *mean, int relu, double *sg, double *sx) {
#define REDUCE_TILE(w)                                                      \
    do {                                                                    \
        double ag[CB], ax[CB];                                              \
        float mu[CB];                                                       \
        FOR_L(w) { ag[l] = 0.0; ax[l] = 0.0; mu[l] = mean[c + l]; }         \
        for (size_t r = r0; r < r1; r++) {                                  \
            const float *xr = x + r * C + c, *dyr = dy + r * C + c;         \
            const float *yr = relu ? y + r * C + c : dyr;                   \
            float *gr = g + r * C + c;                                      \
            FOR_L(w) {                                                      \
                const float d = dyr[l];                                     \
                const float gv = relu ? pick(yr[l] > 0.0f, d, 0.0f) : d;    \
                gr[l] = gv;                                                 \
                ag[l] += gv;                                                \
                ax[l] += (double)(gv * (xr[l] - mu[l]));                    \
            }                                                               \
        }                                                                   \
        FOR_L(w) { sg[c + l] = ag[l]; sx[c + l] = ax[l]; }                  \
    } while (0)
    TILES(REDUCE_TILE);
#undef REDUCE_TILE
}

ALWAYS_INLINE void bwd_apply_rows(const float *x, const float *g, float *dx, size_t r0, size_t r1, int C,
                                  const float *a, const float *bq, const float *d) {
    for (size_t r = r0; r < r1; r++) {
        const float *xr = x + r * C, *gr = g + r * C;
        float *dr = dx + r * C;
        for (int c = 0; c < C; c++) dr[c] = a[c] * gr[c] - bq[c] * xr[c] + d[c];
    }
}

/* One switch per call, a loop per function with the function inlined (act_value.h). V is the
 * suffix of the exp_v and erf_v flavours of silu, sigmoid and gelu, or empty. */
#define ACT_SWITCH(fn, ROWS, V)                            \
    switch (fn) {                                          \
    case ACT_RELU6: ROWS(relu6, ); break;                  \
    case ACT_HARDSWISH: ROWS(hardswish, ); break;          \
    case ACT_HARDSIGMOID: ROWS(hardsigmoid, ); break;      \
    case ACT_SILU: ROWS(silu, V); break;                   \
    case ACT_SIGMOID: ROWS(sigmoid, V); break;             \
    case ACT_GELU: ROWS(gelu, V); break;                   \
    case ACT_GELU_TANH: ROWS(gelu_tanh, ); break;          \
    case ACT_TANH: ROWS(tanh, ); break;                    \
    case ACT_LEAKY_RELU: ROWS(leaky_relu, ); break;        \
    default: CHECK(!"bn with an activation: fn is one of ActFn"); \
    }

#define APPLY_ACT_ROWS(F, V)                                                           \
    do {                                                                               \
        for (size_t r = r0; r < r1; r++) {                                             \
            const float *xr = x + r * C;                                               \
            float *yr = y + r * C;                                                     \
            _Pragma("omp simd")                                                        \
            for (int c = 0; c < C; c++) yr[c] = F##_f##V(xr[c] * scale[c] + shift[c], slope); \
        }                                                                              \
    } while (0)

#define REDUCE_ACT_TILE(F, V, w)                                                        \
    do {                                                                                \
        double ag[CB], ax[CB];                                                          \
        float sc[CB], sh[CB], mu[CB];                                                   \
        FOR_L(w) {                                                                      \
            ag[l] = 0.0; ax[l] = 0.0;                                                   \
            sc[l] = scale[c + l]; sh[l] = shift[c + l]; mu[l] = mean[c + l];            \
        }                                                                               \
        for (size_t r = r0; r < r1; r++) {                                              \
            const float *xr = x + r * C + c, *dyr = dy + r * C + c;                     \
            float *gr = g + r * C + c;                                                  \
            FOR_L(w) {                                                                  \
                const float xv = xr[l];                                                 \
                const float gv = F##_b##V(xv * sc[l] + sh[l], dyr[l], slope);           \
                gr[l] = gv;                                                             \
                ag[l] += gv;                                                            \
                ax[l] += (double)(gv * (xv - mu[l]));                                   \
            }                                                                           \
        }                                                                               \
        FOR_L(w) { sg[c + l] = ag[l]; sx[c + l] = ax[l]; }                              \
    } while (0)

/* bn_backward_reduce's tiles with g = dy * f'(z), z recomputed as bn_apply_act computes it. */
#define REDUCE_ACT_ROWS(F, V)                                                     \
    do {                                                                          \
        int c = 0;                                                                \
        for (; c + CB <= C; c += CB) REDUCE_ACT_TILE(F, V, CB);                   \
        for (; c + 8 <= C; c += 8) REDUCE_ACT_TILE(F, V, 8);                      \
        for (; c < C; c++) REDUCE_ACT_TILE(F, V, 1);                              \
    } while (0)

typedef struct {
    void (*stats)(const float *x, size_t r0, size_t r1, int C, double *s, double *q);
    void (*apply)(const float *x, float *y, size_t r0, size_t r1, int C, const float *scale,
                  const float *shift, const float *residual, int relu);
    void (*apply_act)(const float *x, float *y, size_t r0, size_t r1, int C, const float *scale,
                      const float *shift, int fn, float slope);
    void (*reduce)(const float *x, const float *y, const float *dy, float *g, size_t r0, size_t r1, int C,
                   const float *mean, int relu, double *sg, double *sx);
    void (*reduce_act)(const float *x, const float *dy, float *g, size_t r0, size_t r1, int C,
                       const float *scale, const float *shift, const float *mean, int fn, float slope,
                       double *sg, double *sx);
    void (*bwd_apply)(const float *x, const float *g, float *dx, size_t r0, size_t r1, int C,
                      const float *a, const float *bq, const float *d);
} BnKernels;

#define BN_KERNELS(sfx, attr, V)                                                                     \
    attr static void stats_##sfx(const float *x, size_t r0, size_t r1, int C, double *s, double *q) { \
        stats_rows(x, r0, r1, C, s, q);                                                              \
    }                                                                                                \
    attr static void apply_##sfx(const float *x, float *y, size_t r0, size_t r1, int C,              \
                                 const float *scale, const float *shift, const float *residual,      \
                                 int relu) {                                                         \
        apply_rows(x, y, r0, r1, C, scale, shift, residual, relu);                                   \
    }                                                                                                \
    attr static void apply_act_##sfx(const float *x, float *y, size_t r0, size_t r1, int C,          \
                                     const float *scale, const float *shift, int fn, float slope) {  \
        ACT_SWITCH(fn, APPLY_ACT_ROWS, V)                                                            \
    }                                                                                                \
    attr static void reduce_##sfx(const float *x, const float *y, const float *dy, float *g,         \
                                  size_t r0, size_t r1, int C, const float *mean, int relu,          \
                                  double *sg, double *sx) {                                          \
        reduce_rows(x, y, dy, g, r0, r1, C, mean, relu, sg, sx);                                     \
    }                                                                                                \
    attr static void reduce_act_##sfx(const float *x, const float *dy, float *g, size_t r0,          \
                                      size_t r1, int C, const float *scale, const float *shift,      \
                                      const float *mean, int fn, float slope, double *sg,            \
                                      double *sx) {                                                  \
        ACT_SWITCH(fn, REDUCE_ACT_ROWS, V)                                                           \
    }                                                                                                \
    attr static void bwd_apply_##sfx(const float *x, const float *g, float *dx, size_t r0,           \
                                     size_t r1, int C, const float *a, const float *bq,              \
                                     const float *d) {                                               \
        bwd_apply_rows(x, g, dx, r0, r1, C, a, bq, d);                                               \
    }                                                                                                \
    static const BnKernels bn_##sfx = { stats_##sfx, apply_##sfx, apply_act_##sfx,                   \
                                        reduce_##sfx, reduce_act_##sfx, bwd_apply_##sfx };

BN_KERNELS(sse41, , )
BN_KERNELS(avx2, CPU_ISA_ATTR_AVX2, v)
BN_KERNELS(avx512, CPU_ISA_ATTR_AVX512, v)

static const BnKernels *bn_kernels(void) {
    const int isa = cpu_isa();
    return isa == CPU_ISA_AVX512 ? &bn_avx512 : isa == CPU_ISA_AVX2 ? &bn_avx2 : &bn_sse41;
}

/* The elementwise passes in chunks of rows: each row is written the same way by whichever
 * thread takes it. */
#define APPLY_ROWS 64

/* Each block's sums into its own slot [sum[C], second[C]], then the slots added in block order:
 * the result does not depend on the threads. */
static void combine(const double *part, size_t nb, int C, double *sum, double *second) {
    for (int c = 0; c < C; c++) { sum[c] = 0.0; second[c] = 0.0; }
    for (size_t b = 0; b < nb; b++)
        for (int c = 0; c < C; c++) {
            sum[c] += part[b * 2 * C + c];
            second[c] += part[b * 2 * C + C + c];
        }
}

void bn_stats(const float *x, size_t M, int C, double *sum, double *sumsq) {
    const BnKernels *k = bn_kernels();
    const size_t R = rows_per_block(C), nb = (M + R - 1) / R;
    double *part = mallocCheck(nb * 2 * (size_t)C * sizeof(double));
    #pragma omp parallel for schedule(static)
    for (size_t b = 0; b < nb; b++)
        k->stats(x, b * R, (b + 1) * R < M ? (b + 1) * R : M, C, part + b * 2 * C, part + b * 2 * C + C);
    combine(part, nb, C, sum, sumsq);
    free(part);
}

void bn_finalize_stats(const double *sum, const double *sumsq, double count, int C, float eps,
                       float momentum, float *mean, float *invstd, float *running_mean,
                       float *running_var) {
    for (int c = 0; c < C; c++)
        bn_finalize_channel(c, sum, sumsq, count, eps, momentum, mean, invstd, running_mean, running_var);
}

/* y = x*scale + shift with the per-channel constants folded once: [scale[C], shift[C]], for
 * the caller to free. bn_apply_act and bn_backward_reduce_act fold and apply them as bn_apply
 * does, so that their pre-activation is bn_apply's output bit for bit. */
static float *bn_fold(int C, const float *mean, const float *invstd, const float *gamma, const float *beta) {
    float *scale = mallocCheck(2 * (size_t)C * sizeof(float)), *shift = scale + C;
    for (int c = 0; c < C; c++) {
        scale[c] = gamma[c] * invstd[c];
        shift[c] = beta[c] - mean[c] * scale[c];
    }
    return scale;
}

void bn_apply(const float *x, float *y, size_t M, int C, const float *mean, const float *invstd,
              const float *gamma, const float *beta, const float *residual, int relu) {
    const BnKernels *k = bn_kernels();
    float *scale = bn_fold(C, mean, invstd, gamma, beta), *shift = scale + C;
    #pragma omp parallel for schedule(static)
    for (size_t r = 0; r < M; r += APPLY_ROWS)
        k->apply(x, y, r, r + APPLY_ROWS < M ? r + APPLY_ROWS : M, C, scale, shift, residual, relu);
    free(scale);
}

void bn_backward_reduce(const float *x, const float *y, const float *dy, float *g, size_t M, int C,
                        const float *mean, const float *invstd, int relu, double *sum_g,
                        double *sum_gx) {
    const BnKernels *k = bn_kernels();
    const size_t R = rows_per_block(C), nb = (M + R - 1) / R;
    double *part = mallocCheck(nb * 2 * (size_t)C * sizeof(double));
    #pragma omp parallel for schedule(static)
    for (size_t b = 0; b < nb; b++)
        k->reduce(x, y, dy, g, b * R, (b + 1) * R < M ? (b + 1) * R : M, C, mean, relu, part + b * 2 * C,
                  part + b * 2 * C + C);
    combine(part, nb, C, sum_g, sum_gx);
    for (int c = 0; c < C; c++) sum_gx[c] *= invstd[c];
    free(part);
}

void bn_apply_act(const float *x, float *y, size_t M, int C, const float *mean, const float *invstd,
                  const float *gamma, const float *beta, int fn, float slope) {
    const BnKernels *k = bn_kernels();
    float *scale = bn_fold(C, mean, invstd, gamma, beta), *shift = scale + C;
    #pragma omp parallel for schedule(static)
    for (size_t r = 0; r < M; r += APPLY_ROWS)
        k->apply_act(x, y, r, r + APPLY_ROWS < M ? r + APPLY_ROWS : M, C, scale, shift, fn, slope);
    free(scale);
}

void bn_backward_reduce_act(const float *x, const float *dy, float *g, size_t M, int C, const float *mean,
                            const float *invstd, const float *gamma, const float *beta, int fn, float slope,
                            double *sum_g, double *sum_gx) {
    const BnKernels *k = bn_kernels();
    float *scale = bn_fold(C, mean, invstd, gamma, beta), *shift = scale + C;
    /* bn_backward_reduce's blocks and order, so the sums are those of act_backward followed by
     * bn_backward_reduce without ReLU, bit for bit (on the same path): each value's
     * pre-activation recomputed from x, its g, and its share of both sums in one pass. g may
     * alias dy: each dy is read before its g is written. */
    const size_t R = rows_per_block(C), nb = (M + R - 1) / R;
    double *part = mallocCheck(nb * 2 * (size_t)C * sizeof(double));
    #pragma omp parallel for schedule(static)
    for (size_t b = 0; b < nb; b++)
        k->reduce_act(x, dy, g, b * R, (b + 1) * R < M ? (b + 1) * R : M, C, scale, shift, mean, fn, slope,
                      part + b * 2 * C, part + b * 2 * C + C);
    combine(part, nb, C, sum_g, sum_gx);
    for (int c = 0; c < C; c++) sum_gx[c] *= invstd[c];
    free(part);
    free(scale);
}

void bn_backward_apply(const float *x, const float *g, float *dx, size_t M, int C,
                       const float *mean, const float *invstd, const float *gamma,
                       const double *local_sum_g, const double *local_sum_gx,
                       const double *global_sum_g, const double *global_sum_gx, double count,
                       float *dgamma, float *dbeta) {
    const BnKernels *k = bn_kernels();
    /* dx = a*g - b*x + d, per channel: a = gamma*invstd, b = a*invstd*sum_gx/count,
     * d = b*mean - a*sum_g/count. */
    float *a = mallocCheck(3 * (size_t)C * sizeof(float)), *bq = a + C, *d = a + 2 * C;
    for (int c = 0; c < C; c++) {
        const double ac = (double)gamma[c] * invstd[c];
        const double bc = ac * invstd[c] * global_sum_gx[c] / count;
        a[c] = (float)ac;
        bq[c] = (float)bc;
        d[c] = (float)(bc * mean[c] - ac * global_sum_g[c] / count);
        if (dgamma) dgamma[c] += (float)local_sum_gx[c];
        if (dbeta) dbeta[c] += (float)local_sum_g[c];
    }
    #pragma omp parallel for schedule(static)
    for (size_t r = 0; r < M; r += APPLY_ROWS)
        k->bwd_apply(x, g, dx, r, r + APPLY_ROWS < M ? r + APPLY_ROWS : M, C, a, bq, d);
    free(a);
}

/* ======================================================================================
 * A convolution's bias.
 * ====================================================================================== */

void bias_add(float *restrict y, const float *restrict b, size_t M, int C) {
    #pragma omp parallel for schedule(static)
    for (size_t r = 0; r < M; r++) {
        float *restrict yr = y + r * C;
        for (int c = 0; c < C; c++) yr[c] += b[c];
    }
}

/* The blocks of bn_stats: each summed in double into its own slot, the slots added in block
 * order, so the sum does not depend on the threads. */
void bias_grad(const float *dy, float *db, size_t M, int C) {
    const size_t R = rows_per_block(C), nb = (M + R - 1) / R;
    double *part = callocCheck(nb * (size_t)C, sizeof(double));
    #pragma omp parallel for schedule(static)
    for (size_t b = 0; b < nb; b++) {
        double *restrict s = part + b * C;
        const size_t r1 = (b + 1) * R < M ? (b + 1) * R : M;
        for (size_t r = b * R; r < r1; r++) {
            const float *restrict dr = dy + r * C;
            for (int c = 0; c < C; c++) s[c] += dr[c];
        }
    }
    for (int c = 0; c < C; c++) {
        double acc = 0.0;
        for (size_t b = 0; b < nb; b++) acc += part[b * C + c];
        db[c] += (float)acc;
    }
    free(part);
}

/* ======================================================================================
 * Max pooling.
 * ====================================================================================== */

void maxpool_forward(const float *x, float *y, int32_t *arg, int N, int H, int W, int C, int k, int stride, int pad,
                     int ceil_mode) {
    const int Ho = pool_out_size(H, k, stride, pad, ceil_mode), Wo = pool_out_size(W, k, stride, pad, ceil_mode);
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int oh = 0; oh < Ho; oh++)
            for (int ow = 0; ow < Wo; ow++) {
                const int h0 = oh * stride - pad, w0 = ow * stride - pad;
                const int ha = h0 < 0 ? 0 : h0, hb = h0 + k > H ? H : h0 + k;
                const int wa = w0 < 0 ? 0 : w0, wb = w0 + k > W ? W : w0 + k;
                float *yo = y + (((size_t)n * Ho + oh) * Wo + ow) * C;
                int32_t *ao = arg + (((size_t)n * Ho + oh) * Wo + ow) * C;
                /* PyTorch's rule: start from the window's first pixel, take a later one only
                 * when strictly larger or NaN */
                const float *x0 = x + (((size_t)n * H + ha) * W + wa) * C;
                for (int c = 0; c < C; c++) {
                    yo[c] = x0[c];
                    ao[c] = ha * W + wa;
                }
                /* the choice made on the bits (act_value.h's pick) and the index blended, so that
                 * the channels' loop vectorises (omp simd: -O2's cost model would not), where a
                 * branch per value kept it scalar */
                for (int h = ha; h < hb; h++)
                    for (int w = wa; w < wb; w++) {
                        if (h == ha && w == wa) continue;
                        const float *xp = x + (((size_t)n * H + h) * W + w) * C;
                        const int32_t idx = h * W + w;
                        #pragma omp simd
                        for (int c = 0; c < C; c++) {
                            const float v = xp[c], cur = yo[c];
                            const int take = (v > cur) | (v != v);
                            yo[c] = pick(take, v, cur);
                            ao[c] = take ? idx : ao[c];
                        }
                    }
            }
}

void maxpool_backward(const float *dy, const int32_t *arg, float *dx, int N, int H, int W, int C, int k, int stride,
                      int pad, int ceil_mode) {
    const int Ho = pool_out_size(H, k, stride, pad, ceil_mode), Wo = pool_out_size(W, k, stride, pad, ceil_mode);
    /* an image per thread, its outputs in order: overlapping windows add into one pixel in a
     * fixed order, so the result does not depend on the thread count */
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float *dn = dx + (size_t)n * H * W * C;
        memset(dn, 0, (size_t)H * W * C * sizeof(float));
        for (size_t o = 0; o < (size_t)Ho * Wo; o++) {
            const float *dyo = dy + ((size_t)n * Ho * Wo + o) * C;
            const int32_t *ao = arg + ((size_t)n * Ho * Wo + o) * C;
            for (int c = 0; c < C; c++) dn[(size_t)ao[c] * C + c] += dyo[c];
        }
    }
}

/* ======================================================================================
 * Blur.
 * ====================================================================================== */

/* Separable: a vertical pass of the row into v (x[h-1] + 2 x[h] + x[h+1], rows outside the
 * image 0), then a horizontal one (v[w-1] + 2 v[w] + v[w+1], v padded with a zero pixel at each
 * end), both over whole rows of W*C contiguous values, which vectorise. */
void blur3(const float *restrict x, float *restrict y, int N, int H, int W, int C) {
    const size_t row = (size_t)W * C;
    #pragma omp parallel
    {
        float *pad = callocCheck(row + 2 * (size_t)C, sizeof(float));
        float *restrict v = pad + C;
        #pragma omp for schedule(static)
        for (long r = 0; r < (long)N * H; r++) {
            const int h = (int)(r % H);
            const float *restrict mid = x + (size_t)r * row;
            float *restrict yr = y + (size_t)r * row;
            if (h > 0 && h + 1 < H) {
                const float *restrict up = mid - row, *restrict down = mid + row;
                for (size_t i = 0; i < row; i++) v[i] = up[i] + 2.0f * mid[i] + down[i];
            } else if (h > 0) {
                const float *restrict up = mid - row;
                for (size_t i = 0; i < row; i++) v[i] = up[i] + 2.0f * mid[i];
            } else if (h + 1 < H) {
                const float *restrict down = mid + row;
                for (size_t i = 0; i < row; i++) v[i] = 2.0f * mid[i] + down[i];
            } else {
                for (size_t i = 0; i < row; i++) v[i] = 2.0f * mid[i];
            }
            for (size_t i = 0; i < row; i++) yr[i] = (v[i - C] + 2.0f * v[i] + v[i + C]) * 0.0625f;
        }
        free(pad);
    }
}

/* ======================================================================================
 * Head.
 * ====================================================================================== */

void avgpool_forward(const float *x, float *y, int N, int HW, int C) {
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float *yn = y + (size_t)n * C;
        double *acc = callocCheck((size_t)C, sizeof(double));
        for (int p = 0; p < HW; p++) {
            const float *xp = x + ((size_t)n * HW + p) * C;
            for (int c = 0; c < C; c++) acc[c] += xp[c];
        }
        for (int c = 0; c < C; c++) yn[c] = (float)(acc[c] / HW);
        free(acc);
    }
}

void avgpool_backward(const float *dy, float *dx, int N, int HW, int C) {
    const float inv = 1.0f / (float)HW;
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int p = 0; p < HW; p++) {
            float *dp = dx + ((size_t)n * HW + p) * C;
            const float *dn = dy + (size_t)n * C;
            for (int c = 0; c < C; c++) dp[c] = dn[c] * inv;
        }
}

/* Row z's loss against label lab: -log p[lab], label-smoothed. */
static double row_xent(const float *z, int lab, int K, double zmax, double se, float smoothing) {
    const double nll = log(se) - ((double)z[lab] - zmax);
    if (smoothing == 0.0f) return nll;
    double sz = 0.0;   /* -log p[k] = log(se) - (z[k] - zmax), averaged over the K classes */
    for (int k = 0; k < K; k++) sz += (double)z[k] - zmax;
    return (1.0 - (double)smoothing) * nll + (double)smoothing * (log(se) - sz / K);
}

float softmax_xent(const float *logits, const int *labels, int N, int K, float scale, float smoothing, float mix,
                   float *dlogits, int *correct) {
    /* Sequential: N x K is tiny (64 x 10), and a fixed order keeps the loss bitwise stable. */
    double loss = 0.0;
    int ok = 0;
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * K;
        const int lab = labels[n], lab2 = labels[(n + N - 1) % N];   /* the second: the labels rolled by one */
        CHECK(lab >= 0 && lab < K && lab2 >= 0 && lab2 < K);
        int arg = 0;
        for (int k = 1; k < K; k++)
            if (z[k] > z[arg]) arg = k;
        ok += arg == (mix >= 0.5f ? lab : lab2);
        const double zmax = z[arg];
        double se = 0.0;
        for (int k = 0; k < K; k++) se += exp((double)z[k] - zmax);
        /* the loss is linear in the target: no one-hot vector is made */
        if (mix == 1.0f) loss += row_xent(z, lab, K, zmax, se, smoothing);
        else loss += (double)mix * row_xent(z, lab, K, zmax, se, smoothing) + (1.0 - (double)mix) * row_xent(z, lab2, K, zmax, se, smoothing);
        if (dlogits) {
            const double f = (double)scale / N;
            const double off = (double)smoothing / K, on = 1.0 - (double)smoothing;
            const double w1 = mix == 1.0f ? 1.0 : (double)mix, w2 = 1.0 - w1;
            for (int k = 0; k < K; k++) {
                const double p = exp((double)z[k] - zmax) / se;
                const double t = mix == 1.0f ? (k == lab ? on + off : off) : off + on * (w1 * (k == lab) + w2 * (k == lab2));
                dlogits[(size_t)n * K + k] = (float)(f * (p - t));
            }
        }
    }
    if (correct) *correct = ok;
    return (float)(loss / N);
}
