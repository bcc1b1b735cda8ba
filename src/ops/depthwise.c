/* SPDX-License-Identifier: BSD-3-Clause */
/* depthwise.c - see depthwise.h.
 *
 * Forward and data gradient are one gather: an output pixel (forward) or an input pixel
 * (data gradient) lists the taps of its window that fall inside the other tensor, as offsets
 * into it and into the weights transposed to [k*k, C], and sums their products 16 channels at
 * a time in a register-sized block. The weight gradient runs tap by tap along an output row,
 * the 16 channels' sums held in a block the same way. */
#include "build_config.h"

#include "depthwise.h"

#include <string.h>

#include "cpu_isa.h"
#include "base/util.h"

#define CB 16            /* channels per block */
#define MAXT (DEPTHWISE_MAX_KERNEL * DEPTHWISE_MAX_KERNEL)

#define ALWAYS_INLINE static inline __attribute__((always_inline))
/* A block's loads and stores never overlap: tell the vectoriser so. */
#define FOR_L(n) _Pragma("GCC ivdep") for (int l = 0; l < (n); l++)

typedef struct {
    int N, H, W, Ho, Wo, C, k, s, p, d;
} Geom;

static Geom geom(const ConvShape *sh, int N, int H, int W) {
    return (Geom){ .N = N, .H = H, .W = W, .Ho = conv_out_size(sh, H), .Wo = conv_out_size(sh, W),
                   .C = sh->C_in, .k = sh->k, .s = sh->stride, .p = sh->pad, .d = sh->dilation };
}

int depthwise_applies(const ConvShape *sh) {
    return sh->groups == sh->C_in && sh->C_out == sh->C_in && sh->k <= DEPTHWISE_MAX_KERNEL && sh->kw == sh->k &&
           sh->padw == sh->pad;
}

/* Rows of output per block of the weight gradient: about 256 output pixels (each block keeps
 * k*k*C partial sums in the workspace: tens of MB at most for a batch of 256 at 224x224), but
 * no fewer than 64 blocks where there are rows enough, for the threads. Depends on the shape
 * alone. */
static long dw_rows_per_block(const Geom *g) {
    const long rows = (long)g->N * g->Ho;
    long r = (256 + g->Wo - 1) / g->Wo;
    if (r > rows / 64) r = rows / 64;
    return r < 1 ? 1 : r;
}

static size_t up64(size_t b) { return (b + 63) / 64 * 64; }

size_t depthwise_workspace_bytes(const ConvShape *sh, int N, int H, int W) {
    const Geom g = geom(sh, N, H, W);
    const size_t kkc = (size_t)g.k * g.k * g.C;
    const long rows = (long)N * g.Ho, R = dw_rows_per_block(&g), nb = (rows + R - 1) / R;
    /* transposed weights; the blocks' partial weight gradients; their double sums */
    return up64(kkc * sizeof(float)) + up64((size_t)nb * kkc * sizeof(float)) + up64(kkc * sizeof(double));
}

/* out[c] = the sum over taps t of a[ao[t] + c] * wt[wo[t] + c]. */
ALWAYS_INLINE void gather(int C, int nt, const float *a, const long *ao, const float *wt, const int *wo,
                          float *restrict out) {
    int c = 0;
    for (; c + CB <= C; c += CB) {
        float acc[CB] = { 0 };
        for (int t = 0; t < nt; t++) {
            const float *restrict ap = a + ao[t] + c, *restrict wp = wt + wo[t] + c;
            FOR_L(CB) acc[l] += ap[l] * wp[l];
        }
        FOR_L(CB) out[c + l] = acc[l];
    }
    for (; c + 8 <= C; c += 8) {
        float acc[8] = { 0 };
        for (int t = 0; t < nt; t++) {
            const float *restrict ap = a + ao[t] + c, *restrict wp = wt + wo[t] + c;
            FOR_L(8) acc[l] += ap[l] * wp[l];
        }
        FOR_L(8) out[c + l] = acc[l];
    }
    for (; c < C; c++) {
        float acc = 0.0f;
        for (int t = 0; t < nt; t++) acc += a[ao[t] + c] * wt[wo[t] + c];
        out[c] = acc;
    }
}

/* The same for PX pixels at once, pixel j reading a at ao[t] + j * step and writing out + j *
 * C: where their taps are the same, each weight is loaded once for the PX of them. The sums
 * are those of gather, term for term. */
#define PX 4
ALWAYS_INLINE void gather_px(int C, int nt, const float *a, const long *ao, long step, const float *wt,
                             const int *wo, float *restrict out) {
    int c = 0;
    for (; c + CB <= C; c += CB) {
        float acc[PX][CB] = { { 0 } };
        for (int t = 0; t < nt; t++) {
            const float *restrict wp = wt + wo[t] + c;
            _Pragma("GCC unroll 4") for (int j = 0; j < PX; j++) {
                const float *restrict ap = a + ao[t] + j * step + c;
                FOR_L(CB) acc[j][l] += ap[l] * wp[l];
            }
        }
        _Pragma("GCC unroll 4") for (int j = 0; j < PX; j++) FOR_L(CB) out[(size_t)j * C + c + l] = acc[j][l];
    }
    /* a tail of 8 (MobileNetV3's 72, 120, 184 and 200 channels): one AVX2 register a pixel */
    for (; c + 8 <= C; c += 8) {
        float acc[PX][8] = { { 0 } };
        for (int t = 0; t < nt; t++) {
            const float *restrict wp = wt + wo[t] + c;
            _Pragma("GCC unroll 4") for (int j = 0; j < PX; j++) {
                const float *restrict ap = a + ao[t] + j * step + c;
                FOR_L(8) acc[j][l] += ap[l] * wp[l];
            }
        }
        _Pragma("GCC unroll 4") for (int j = 0; j < PX; j++) FOR_L(8) out[(size_t)j * C + c + l] = acc[j][l];
    }
    if (c < C)
        for (int j = 0; j < PX; j++) {
            long aj[MAXT];
            for (int t = 0; t < nt; t++) aj[t] = ao[t] + j * step + c;
            gather(C - c, nt, a, aj, wt + c, wo, out + (size_t)j * C + c);
        }
}

/* Output row nh = n * Ho + ho of the forward. */
ALWAYS_INLINE void fwd_row(const Geom *g, const float *x, const float *wt, float *y, long nh) {
    const int n = (int)(nh / g->Ho), ho = (int)(nh % g->Ho), C = g->C, k = g->k;
    const float *xn = x + (size_t)n * g->H * g->W * C;
    long ao[MAXT];
    int wo_[MAXT];
    /* columns whose window lies inside the image: wo * s - p >= 0 and wo * s - p + (k-1) d < W */
    const int in_lo = (g->p + g->s - 1) / g->s, in_hi = g->W - 1 - (k - 1) * g->d + g->p;
    const int inner_end = in_hi < 0 ? 0 : in_hi / g->s + 1;
    for (int wo = 0; wo < g->Wo;) {
        int nt = 0;
        for (int kh = 0; kh < k; kh++) {
            const int h = ho * g->s - g->p + kh * g->d;
            if (h < 0 || h >= g->H) continue;
            for (int kw = 0; kw < k; kw++) {
                const int w = wo * g->s - g->p + kw * g->d;
                if (w < 0 || w >= g->W) continue;
                ao[nt] = ((long)h * g->W + w) * C;
                wo_[nt++] = (kh * k + kw) * C;
            }
        }
        float *out = y + ((size_t)nh * g->Wo + wo) * C;
        if (wo >= in_lo && wo + PX <= inner_end && wo + PX <= g->Wo) {
            gather_px(C, nt, xn, ao, (long)g->s * C, wt, wo_, out);
            wo += PX;
        } else {
            gather(C, nt, xn, ao, wt, wo_, out);
            wo++;
        }
    }
}

/* Input row nh = n * H + h of the data gradient: each pixel gathers from the outputs whose
 * window covers it. */
ALWAYS_INLINE void bwd_data_row(const Geom *g, const float *dy, const float *wt, float *dx, long nh) {
    const int n = (int)(nh / g->H), h = (int)(nh % g->H), C = g->C, k = g->k;
    const float *dyn = dy + (size_t)n * g->Ho * g->Wo * C;
    long ao[MAXT];
    int wo_[MAXT];
    for (int w = 0; w < g->W; w++) {
        int nt = 0;
        for (int kh = 0; kh < k; kh++) {
            const int th = h + g->p - kh * g->d;
            if (th < 0 || th % g->s || th / g->s >= g->Ho) continue;
            for (int kw = 0; kw < k; kw++) {
                const int tw = w + g->p - kw * g->d;
                if (tw < 0 || tw % g->s || tw / g->s >= g->Wo) continue;
                ao[nt] = ((long)(th / g->s) * g->Wo + tw / g->s) * C;
                wo_[nt++] = (kh * k + kw) * C;
            }
        }
        gather(C, nt, dyn, ao, wt, wo_, dx + ((size_t)nh * g->W + w) * C);
    }
}

/* part[t * C + c] += the sum along output row nh of dy * x at tap t. */
ALWAYS_INLINE void bwd_w_row(const Geom *g, const float *x, const float *dy, float *part, long nh) {
    const int n = (int)(nh / g->Ho), ho = (int)(nh % g->Ho), C = g->C, k = g->k, s = g->s;
    const float *dyr = dy + (size_t)nh * g->Wo * C;
    for (int kh = 0; kh < k; kh++) {
        const int h = ho * s - g->p + kh * g->d;
        if (h < 0 || h >= g->H) continue;
        const float *xr = x + ((size_t)n * g->H + h) * g->W * C;
        for (int kw = 0; kw < k; kw++) {
            const int off = kw * g->d - g->p;   /* the input column of output column wo: wo * s + off */
            const int lo = off >= 0 ? 0 : (-off + s - 1) / s;
            const int hi = g->W - 1 - off < 0 ? 0 : (g->W - 1 - off) / s + 1 < g->Wo ? (g->W - 1 - off) / s + 1 : g->Wo;
            if (lo >= hi) continue;
            float *pt = part + (size_t)(kh * k + kw) * C;
            int c = 0;
            for (; c + CB <= C; c += CB) {
                float acc[CB] = { 0 };
                for (int wo = lo; wo < hi; wo++) {
                    const float *restrict a = dyr + (size_t)wo * C + c, *restrict b = xr + ((size_t)wo * s + off) * C + c;
                    FOR_L(CB) acc[l] += a[l] * b[l];
                }
                FOR_L(CB) pt[c + l] += acc[l];
            }
            for (; c + 8 <= C; c += 8) {
                float acc[8] = { 0 };
                for (int wo = lo; wo < hi; wo++) {
                    const float *restrict a = dyr + (size_t)wo * C + c, *restrict b = xr + ((size_t)wo * s + off) * C + c;
                    FOR_L(8) acc[l] += a[l] * b[l];
                }
                FOR_L(8) pt[c + l] += acc[l];
            }
            for (; c < C; c++) {
                float acc = 0.0f;
                for (int wo = lo; wo < hi; wo++) acc += dyr[(size_t)wo * C + c] * xr[((size_t)wo * s + off) * C + c];
                pt[c] += acc;
            }
        }
    }
}

typedef struct {
    void (*fwd)(const Geom *g, const float *x, const float *wt, float *y, long r0, long r1);
    void (*bwd_data)(const Geom *g, const float *dy, const float *wt, float *dx, long r0, long r1);
    void (*bwd_w)(const Geom *g, const float *x, const float *dy, float *part, long r0, long r1);
} Kernels;

#define KERNELS(sfx, attr)                                                                          \
    attr static void fwd_##sfx(const Geom *g, const float *x, const float *wt, float *y, long r0, long r1) { \
        for (long r = r0; r < r1; r++) fwd_row(g, x, wt, y, r);                                     \
    }                                                                                               \
    attr static void bwd_data_##sfx(const Geom *g, const float *dy, const float *wt, float *dx, long r0,   \
                                    long r1) {                                                      \
        for (long r = r0; r < r1; r++) bwd_data_row(g, dy, wt, dx, r);                              \
    }                                                                                               \
    attr static void bwd_w_##sfx(const Geom *g, const float *x, const float *dy, float *part, long r0,     \
                                 long r1) {                                                         \
        for (long r = r0; r < r1; r++) bwd_w_row(g, x, dy, part, r);                                \
    }                                                                                               \
    static const Kernels kernels_##sfx = { fwd_##sfx, bwd_data_##sfx, bwd_w_##sfx };

KERNELS(sse41, )
KERNELS(avx2, CPU_ISA_ATTR_AVX2)
KERNELS(avx512, CPU_ISA_ATTR_AVX512)

static const Kernels *kernels(void) {
    const int isa = cpu_isa();
    return isa == CPU_ISA_AVX512 ? &kernels_avx512 : isa == CPU_ISA_AVX2 ? &kernels_avx2 : &kernels_sse41;
}

const char *depthwise_isa_name(void) { return cpu_isa_name(cpu_isa()); }

/* wt[t * C + c] = w[c * k*k + t]: a tap's weights contiguous over channels. */
static void transpose_weights(const Geom *g, const float *w, float *wt) {
    const int kk = g->k * g->k;
    for (int c = 0; c < g->C; c++)
        for (int t = 0; t < kk; t++) wt[(size_t)t * g->C + c] = w[(size_t)c * kk + t];
}

/* Rows of work in chunks of 4 for OpenMP: each row is written by whichever thread takes it,
 * always in the same way, so the split does not matter. */
#define ROWS 4

void depthwise_forward(const ConvShape *sh, int N, int H, int W, const float *x, const float *w, float *y,
                       void *ws) {
    const Geom g = geom(sh, N, H, W);
    const Kernels *kf = kernels();
    float *wt = ws;
    transpose_weights(&g, w, wt);
    const long rows = (long)N * g.Ho;
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r += ROWS) kf->fwd(&g, x, wt, y, r, r + ROWS < rows ? r + ROWS : rows);
}

void depthwise_backward(const ConvShape *sh, int N, int H, int W, const float *x, const float *w,
                        const float *dy, float *dx, float *dw, void *ws) {
    const Geom g = geom(sh, N, H, W);
    const Kernels *kf = kernels();
    const int kk = g.k * g.k, C = g.C;
    const size_t kkc = (size_t)kk * C;
    const long rows = (long)N * g.Ho, R = dw_rows_per_block(&g), nb = (rows + R - 1) / R;
    float *wt = ws;
    float *part = (float *)((char *)ws + up64(kkc * sizeof(float)));
    double *sum = (double *)((char *)part + up64((size_t)nb * kkc * sizeof(float)));
    if (dx) {
        transpose_weights(&g, w, wt);
        const long in_rows = (long)N * H;
        #pragma omp parallel for schedule(static)
        for (long r = 0; r < in_rows; r += ROWS)
            kf->bwd_data(&g, dy, wt, dx, r, r + ROWS < in_rows ? r + ROWS : in_rows);
    }
    #pragma omp parallel for schedule(static)
    for (long b = 0; b < nb; b++) {
        float *pb = part + (size_t)b * kkc;
        memset(pb, 0, kkc * sizeof(float));
        kf->bwd_w(&g, x, dy, pb, b * R, (b + 1) * R < rows ? (b + 1) * R : rows);
    }
    /* The blocks in block order, each tap's channels by one thread. */
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < kk; t++) {
        double *st = sum + (size_t)t * C;
        for (int c = 0; c < C; c++) st[c] = 0.0;
        for (long b = 0; b < nb; b++) {
            const float *pt = part + (size_t)b * kkc + (size_t)t * C;
            for (int c = 0; c < C; c++) st[c] += pt[c];
        }
        for (int c = 0; c < C; c++) dw[(size_t)c * kk + t] += (float)st[c];
    }
}
