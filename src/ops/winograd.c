/* SPDX-License-Identifier: BSD-3-Clause */
/* winograd.c - see winograd.h.
 *
 * Transform matrices, from the interpolation points 0, 1, -1, 2, -1/2 and infinity: against
 * the usual 0, +-1, +-2 (Lavin and Gray) they take the float32 error of a 64-channel tile from
 * about 5.7e-6 to 2.2e-6 of the largest output (simulated in double against float32), for a
 * few more additions in the transforms.
 *   B^T = [ 2  3 -4 -3  2  0 ]   G = [  1/2     0      0   ]   A^T = [ 1  1  1  1   1    0 ]
 *         [ 0 -2 -5 -1  2  0 ]       [ -1/6   -1/6   -1/6  ]         [ 0  1 -1  2 -1/2   0 ]
 *         [ 0  2  1 -5  2  0 ]       [  1/6   -1/6    1/6  ]         [ 0  1  1  4  1/4   0 ]
 *         [ 0 -1 -2  1  2  0 ]       [  1/30   1/15   2/15 ]         [ 0  1 -1  8 -1/8   1 ]
 *         [ 0  2 -1 -2  1  0 ]       [-16/15   8/15  -4/15 ]
 *         [ 0  2  3 -4 -3  2 ]       [   0      0     1/2  ]
 * A tile of outputs is A^T [(G g G^T) . (B^T d B)] A, with d the 6x6 inputs starting one row and
 * one column before it (the padding); the weight gradient is its adjoint in g,
 * G^T [(A dy A^T) . (B^T d B)] G, with dy the tile's 4x4 output gradient.
 *
 * The tile transforms work on blocks of CB channels at a time: each step is a short loop over
 * the block that the compiler turns into vector instructions of the ISA the enclosing function
 * is compiled for; the same source is compiled three times (AVX-512, AVX2+FMA, the build's
 * baseline SSE4.1) and the plan keeps the variant the CPU and oneDNN's ISA limit allow. */
#include "build_config.h"

#include "winograd.h"

#include "cpu_isa.h"

#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "base/util.h"

#ifdef HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#define NP 36          /* points of a transformed tile (6x6) */
#define CB 16          /* channels per transform step */

#define ALWAYS_INLINE static inline __attribute__((always_inline))
/* The blocks a step reads and writes never overlap: tell the vectoriser so. */
#define FOR_L _Pragma("GCC ivdep") for (int l = 0; l < CB; l++)

/* ---- one-dimensional transforms of CB-wide vectors ---- */

/* o = B^T d */
ALWAYS_INLINE void bt6(const float *const d[6], float *const o[6]) {
    const float *restrict d0 = d[0], *restrict d1 = d[1], *restrict d2 = d[2];
    const float *restrict d3 = d[3], *restrict d4 = d[4], *restrict d5 = d[5];
    float *restrict o0 = o[0], *restrict o1 = o[1], *restrict o2 = o[2];
    float *restrict o3 = o[3], *restrict o4 = o[4], *restrict o5 = o[5];
    FOR_L {
        const float a0 = d0[l], a1 = d1[l], a2 = d2[l], a3 = d3[l], a4 = d4[l], a5 = d5[l];
        o0[l] = 2.0f * (a0 - 2.0f * a2 + a4) + 3.0f * (a1 - a3);
        o1[l] = 2.0f * (a4 - a1) - 5.0f * a2 - a3;
        o2[l] = 2.0f * (a1 + a4) + a2 - 5.0f * a3;
        o3[l] = 2.0f * (a4 - a2) + a3 - a1;
        o4[l] = 2.0f * (a1 - a3) + a4 - a2;
        o5[l] = 2.0f * (a1 - 2.0f * a3 + a5) + 3.0f * (a2 - a4);
    }
}

/* o = A^T m (6 -> 4) */
ALWAYS_INLINE void at4(const float *const m[6], float *const o[4]) {
    const float *restrict m0 = m[0], *restrict m1 = m[1], *restrict m2 = m[2];
    const float *restrict m3 = m[3], *restrict m4 = m[4], *restrict m5 = m[5];
    float *restrict o0 = o[0], *restrict o1 = o[1], *restrict o2 = o[2], *restrict o3 = o[3];
    FOR_L {
        const float p12 = m1[l] + m2[l], q12 = m1[l] - m2[l], a3 = m3[l], a4 = m4[l];
        o0[l] = m0[l] + p12 + a3 + a4;
        o1[l] = q12 + 2.0f * a3 - 0.5f * a4;
        o2[l] = p12 + 4.0f * a3 + 0.25f * a4;
        o3[l] = q12 + 8.0f * a3 - 0.125f * a4 + m5[l];
    }
}

/* o = A v (4 -> 6) */
ALWAYS_INLINE void a6(const float *const v[4], float *const o[6]) {
    const float *restrict v0 = v[0], *restrict v1 = v[1], *restrict v2 = v[2], *restrict v3 = v[3];
    float *restrict o0 = o[0], *restrict o1 = o[1], *restrict o2 = o[2];
    float *restrict o3 = o[3], *restrict o4 = o[4], *restrict o5 = o[5];
    FOR_L {
        const float e = v0[l] + v2[l], f = v1[l] + v3[l];
        o0[l] = v0[l];
        o1[l] = e + f;
        o2[l] = e - f;
        o3[l] = v0[l] + 2.0f * v1[l] + 4.0f * v2[l] + 8.0f * v3[l];
        o4[l] = v0[l] - 0.5f * v1[l] + 0.25f * v2[l] - 0.125f * v3[l];
        o5[l] = v3[l];
    }
}

/* ---- tile transforms of one CB-channel block ---- */

/* o[i*6+j] = (B^T d B)[i][j], d[i*6+j] the input at row i, column j of the 6x6 window. */
ALWAYS_INLINE void in_block(const float *const d[NP], float *const o[NP], float *tmp) {
    for (int j = 0; j < 6; j++) {
        const float *col[6] = { d[j], d[6 + j], d[12 + j], d[18 + j], d[24 + j], d[30 + j] };
        float *t[6] = { tmp + (0 + j) * CB, tmp + (6 + j) * CB, tmp + (12 + j) * CB,
                        tmp + (18 + j) * CB, tmp + (24 + j) * CB, tmp + (30 + j) * CB };
        bt6(col, t);
    }
    for (int i = 0; i < 6; i++) {
        const float *row[6] = { tmp + (6 * i) * CB, tmp + (6 * i + 1) * CB, tmp + (6 * i + 2) * CB,
                                tmp + (6 * i + 3) * CB, tmp + (6 * i + 4) * CB, tmp + (6 * i + 5) * CB };
        bt6(row, o + 6 * i);
    }
}

/* o[i*4+j] = (A^T m A)[i][j] */
ALWAYS_INLINE void out_block(const float *const m[NP], float *const o[16], float *tmp) {
    for (int i = 0; i < 6; i++) {
        float *t[4] = { tmp + (4 * i) * CB, tmp + (4 * i + 1) * CB, tmp + (4 * i + 2) * CB,
                        tmp + (4 * i + 3) * CB };
        at4(m + 6 * i, t);
    }
    for (int j = 0; j < 4; j++) {
        const float *col[6] = { tmp + j * CB, tmp + (4 + j) * CB, tmp + (8 + j) * CB,
                                tmp + (12 + j) * CB, tmp + (16 + j) * CB, tmp + (20 + j) * CB };
        float *oc[4] = { o[j], o[4 + j], o[8 + j], o[12 + j] };
        at4(col, oc);
    }
}

/* o[i*6+j] = (A v A^T)[i][j], v[i*4+j] the output gradient at row i, column j of the tile. */
ALWAYS_INLINE void grad_block(const float *const v[16], float *const o[NP], float *tmp) {
    for (int j = 0; j < 4; j++) {
        const float *col[4] = { v[j], v[4 + j], v[8 + j], v[12 + j] };
        float *t[6] = { tmp + j * CB, tmp + (4 + j) * CB, tmp + (8 + j) * CB, tmp + (12 + j) * CB,
                        tmp + (16 + j) * CB, tmp + (20 + j) * CB };
        a6(col, t);
    }
    for (int i = 0; i < 6; i++) {
        const float *row[4] = { tmp + (4 * i) * CB, tmp + (4 * i + 1) * CB, tmp + (4 * i + 2) * CB,
                                tmp + (4 * i + 3) * CB };
        a6(row, o + 6 * i);
    }
}

/* ---- whole tiles: all channels, edges ---- */

/* Where tile t lies: image n, top-left output pixel (h0, w0). */
typedef struct TileGeom { int H, W, tiles_h, tiles_w; const float *zeros; } TileGeom;

ALWAYS_INLINE void tile_at(const TileGeom *g, long t, int *n, int *h0, int *w0) {
    const long per_image = (long)g->tiles_h * g->tiles_w;
    *n = (int)(t / per_image);
    const long r = t % per_image;
    *h0 = (int)(r / g->tiles_w) * 4;
    *w0 = (int)(r % g->tiles_w) * 4;
}

/* Channels [c, c+n) of the 'count' vectors src[k] + c through a zero-padded copy, for the last
 * block when C is not a multiple of CB. */
ALWAYS_INLINE void tail_load(const float *const *src, int count, int c, int n, float *buf, const float **out) {
    for (int k = 0; k < count; k++) {
        float *b = buf + k * CB;
        for (int l = 0; l < CB; l++) b[l] = l < n ? src[k][c + l] : 0.0f;
        out[k] = b;
    }
}

/* V[q * ps + c] = (B^T d B)[q] over channels c of tile t of x[N,H,W,C]. */
ALWAYS_INLINE void in_tile(const TileGeom *g, int C, const float *x, long t, float *V, size_t ps) {
    int n, h0, w0;
    tile_at(g, t, &n, &h0, &w0);
    const float *src[NP];
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) {
            const int h = h0 - 1 + i, w = w0 - 1 + j;
            src[i * 6 + j] = (h >= 0 && h < g->H && w >= 0 && w < g->W)
                ? x + (((size_t)n * g->H + h) * g->W + w) * C : g->zeros;
        }
    float tmp[NP * CB] __attribute__((aligned(64)));
    float ld[NP * CB] __attribute__((aligned(64))), lo[NP * CB] __attribute__((aligned(64)));
    const float *d[NP];
    float *o[NP];
    int c = 0;
    for (; c + CB <= C; c += CB) {
        for (int k = 0; k < NP; k++) { d[k] = src[k] + c; o[k] = V + k * ps + c; }
        in_block(d, o, tmp);
    }
    if (c < C) {
        const int nl = C - c;
        tail_load(src, NP, c, nl, ld, d);
        for (int k = 0; k < NP; k++) o[k] = lo + k * CB;
        in_block(d, o, tmp);
        for (int k = 0; k < NP; k++) memcpy(V + k * ps + c, lo + k * CB, nl * sizeof(float));
    }
}

/* The 4x4 outputs of tile t into y[N,H,W,C] from M[q * ps + c]; those past the image edge are
 * dropped. */
ALWAYS_INLINE void out_tile(const TileGeom *g, int C, const float *M, size_t ps, long t, float *y) {
    int n, h0, w0;
    tile_at(g, t, &n, &h0, &w0);
    float *dst[16];
    int full = 1;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            const int h = h0 + i, w = w0 + j;
            const int in = h < g->H && w < g->W;
            dst[i * 4 + j] = in ? y + (((size_t)n * g->H + h) * g->W + w) * C : NULL;
            full &= in;
        }
    float tmp[NP * CB] __attribute__((aligned(64)));
    float ld[NP * CB] __attribute__((aligned(64))), lo[16 * CB] __attribute__((aligned(64)));
    const float *m[NP];
    float *o[16];
    for (int c = 0; c < C; c += CB) {
        const int nl = C - c < CB ? C - c : CB;
        for (int k = 0; k < NP; k++) m[k] = M + k * ps + c;
        if (nl < CB) {
            const float *src[NP];
            for (int k = 0; k < NP; k++) src[k] = M + k * ps;
            tail_load(src, NP, c, nl, ld, m);
        }
        if (full && nl == CB) {
            for (int k = 0; k < 16; k++) o[k] = dst[k] + c;
            out_block(m, o, tmp);
        } else {
            for (int k = 0; k < 16; k++) o[k] = lo + k * CB;
            out_block(m, o, tmp);
            for (int k = 0; k < 16; k++)
                if (dst[k]) memcpy(dst[k] + c, lo + k * CB, nl * sizeof(float));
        }
    }
}

/* D[q * ps + c] = (A dy A^T)[q] over channels c of tile t of dy[N,H,W,C]; gradients past the
 * image edge are zero (those outputs do not exist). */
ALWAYS_INLINE void grad_tile(const TileGeom *g, int C, const float *dy, long t, float *D, size_t ps) {
    int n, h0, w0;
    tile_at(g, t, &n, &h0, &w0);
    const float *src[16];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            const int h = h0 + i, w = w0 + j;
            src[i * 4 + j] = h < g->H && w < g->W ? dy + (((size_t)n * g->H + h) * g->W + w) * C
                                                  : g->zeros;
        }
    float tmp[NP * CB] __attribute__((aligned(64)));
    float ld[16 * CB] __attribute__((aligned(64))), lo[NP * CB] __attribute__((aligned(64)));
    const float *v[16];
    float *o[NP];
    int c = 0;
    for (; c + CB <= C; c += CB) {
        for (int k = 0; k < 16; k++) v[k] = src[k] + c;
        for (int k = 0; k < NP; k++) o[k] = D + k * ps + c;
        grad_block(v, o, tmp);
    }
    if (c < C) {
        const int nl = C - c;
        tail_load(src, 16, c, nl, ld, v);
        for (int k = 0; k < NP; k++) o[k] = lo + k * CB;
        grad_block(v, o, tmp);
        for (int k = 0; k < NP; k++) memcpy(D + k * ps + c, lo + k * CB, nl * sizeof(float));
    }
}

/* ---- the three compilations ---- */

typedef struct Kernels {
    void (*in)(const TileGeom *g, int C, const float *x, long t0, long t1, float *V, size_t ps);
    void (*out)(const TileGeom *g, int C, const float *M, size_t ps, long t0, long t1, float *y);
    void (*grad)(const TileGeom *g, int C, const float *dy, long t0, long t1, float *D, size_t ps);
} Kernels;

/* Tiles [t0, t1); tile t's transformed copy is row t - t0 of each point's matrix. */
#define KERNELS(sfx, attr)                                                                        \
    attr static void in_##sfx(const TileGeom *g, int C, const float *x, long t0, long t1,        \
                              float *V, size_t ps) {                                              \
        for (long t = t0; t < t1; t++) in_tile(g, C, x, t, V + (t - t0) * C, ps);                 \
    }                                                                                             \
    attr static void out_##sfx(const TileGeom *g, int C, const float *M, size_t ps, long t0,      \
                               long t1, float *y) {                                               \
        for (long t = t0; t < t1; t++) out_tile(g, C, M + (t - t0) * C, ps, t, y);                \
    }                                                                                             \
    attr static void grad_##sfx(const TileGeom *g, int C, const float *dy, long t0, long t1,     \
                                float *D, size_t ps) {                                            \
        for (long t = t0; t < t1; t++) grad_tile(g, C, dy, t, D + (t - t0) * C, ps);              \
    }                                                                                             \
    static const Kernels kernels_##sfx = { in_##sfx, out_##sfx, grad_##sfx };

KERNELS(sse41, )
KERNELS(avx2, CPU_ISA_ATTR_AVX2)
KERNELS(avx512, CPU_ISA_ATTR_AVX512)

static const Kernels *kernels_for(int isa) {
    return isa == CPU_ISA_AVX512 ? &kernels_avx512 : isa == CPU_ISA_AVX2 ? &kernels_avx2 : &kernels_sse41;
}

const char *winograd_isa_name(void) {
    return cpu_isa_name(cpu_isa());
}

/* ---- GEMM: row-major C = A . B (+ C when accumulate), on the calling thread ---- */

static void gemm(int ta, long M, long N, long K, const float *A, long lda, const float *B,
                 long ldb, int accumulate, float *C, long ldc) {
#ifdef HAVE_DNNL
    const dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', 'N', M, N, K, 1.0f, A, lda, B, ldb,
                                        accumulate ? 1.0f : 0.0f, C, ldc);
    if (st != dnnl_success) fail_at(__FILE__, __LINE__, "dnnl_sgemm", "failed");
#else
    for (long i = 0; i < M; i++) {
        float *c = C + i * ldc;
        if (!accumulate) for (long j = 0; j < N; j++) c[j] = 0.0f;
        for (long k = 0; k < K; k++) {
            const float a = ta ? A[k * lda + i] : A[i * lda + k];
            const float *b = B + k * ldb;
            for (long j = 0; j < N; j++) c[j] += a * b[j];
        }
    }
#endif
}

/* ---- weights ---- */

/* out[q * os + k] = (G g_k G^T)[q] for k < n, where kernel k's taps are g[j * n + k], j < 9.
 * Computed in double, so that the transformed weights carry one rounding only, with the loops
 * over kernels innermost so that they vectorise; t holds 18 * n doubles. */
static void weight_rows(const float *restrict g, int n, double *restrict t, float *restrict out,
                        size_t os) {
    static const double G[6][3] = {
        { 1.0 / 2, 0.0, 0.0 }, { -1.0 / 6, -1.0 / 6, -1.0 / 6 }, { 1.0 / 6, -1.0 / 6, 1.0 / 6 },
        { 1.0 / 30, 1.0 / 15, 2.0 / 15 }, { -16.0 / 15, 8.0 / 15, -4.0 / 15 }, { 0.0, 0.0, 1.0 / 2 } };
    for (int a = 0; a < 6; a++)
        for (int j = 0; j < 3; j++) {
            const double c0 = G[a][0], c1 = G[a][1], c2 = G[a][2];
            const float *g0 = g + (size_t)j * n, *g1 = g + (size_t)(3 + j) * n, *g2 = g + (size_t)(6 + j) * n;
            double *tt = t + (size_t)(a * 3 + j) * n;
            for (int k = 0; k < n; k++) tt[k] = c0 * g0[k] + c1 * g1[k] + c2 * g2[k];
        }
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++) {
            const double c0 = G[b][0], c1 = G[b][1], c2 = G[b][2];
            const double *t0 = t + (size_t)(a * 3) * n, *t1 = t0 + n, *t2 = t1 + n;
            float *o = out + (size_t)(a * 6 + b) * os;
            for (int k = 0; k < n; k++) o[k] = (float)(c0 * t0[k] + c1 * t1[k] + c2 * t2[k]);
        }
}

/* u_fwd[q][ci][co] from w[co][ci] (rotate 0), or u_bwd[q][co][ci] from w[co][ci] rotated by 180
 * degrees. Row by row of the destination: the row's kernels are gathered tap by tap first, so
 * the transform reads and writes contiguous vectors. */
static void weights_transform(int Ci, int Co, const float *w, int rotate, float *dst) {
    const int rows = rotate ? Co : Ci, cols = rotate ? Ci : Co;
    #pragma omp parallel
    {
        float *g = mallocCheck((size_t)9 * cols * sizeof(float));
        double *t = mallocCheck((size_t)18 * cols * sizeof(double));
        #pragma omp for schedule(static)
        for (int r = 0; r < rows; r++) {
            for (int k = 0; k < cols; k++) {
                const float *src = w + ((rotate ? (size_t)r * Ci + k : (size_t)k * Ci + r) * 9);
                for (int j = 0; j < 9; j++) g[(size_t)j * cols + k] = src[rotate ? 8 - j : j];
            }
            weight_rows(g, cols, t, dst + (size_t)r * cols, (size_t)rows * cols);
        }
        free(g);
        free(t);
    }
}

/* ---- plans ---- */

/* Each thread takes a contiguous range of tiles and works through it in blocks: transform a
 * block, 36 GEMMs on it, transform back (or accumulate its weight gradient). A block's
 * transformed copies are about BLOCK_BYTES, so they stay in the core's caches between the
 * steps, but at least MIN_BLOCK tiles, so that each GEMM has rows enough to reuse the weights
 * it streams (block sizes from 16 to 256 tiles measured within noise of each other at 64-256
 * channels). No thread waits for another until the pass ends.
 *
 * The workspace, in this order:
 *   U       36 * C_in * C_out floats: the transformed weights of this pass. They are made again
 *           at every pass rather than kept per convolution: the weights change at every step,
 *           so a training step transforms each conv's weights once forward and once backward
 *           either way, and kept they took 8x the 3x3 weights (300 MB for ResNet-18). An
 *           evaluation, or a micro-step of accumulation, transforms again: 162 multiply-adds
 *           per (C_in, C_out) pair, against 36 per pair and tile in the GEMMs.
 *   blocks  a block's transformed tiles, for each thread
 *   dW^     the weight gradient's partial sums, 36 * C_in * C_out floats for each thread but
 *           the first, whose sums take U's place (U is done with once dx is computed). */
#define BLOCK_BYTES (2u << 20)
#define MIN_BLOCK 64
#define MAX_BLOCK 256

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

static int max_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

void winograd_init(Winograd *p, int C_in, int C_out, int N, int H, int W) {
    CHECK(C_in > 0 && C_out > 0 && N > 0 && H > 0 && W > 0);
    memset(p, 0, sizeof *p);
    p->C_in = C_in; p->C_out = C_out; p->N = N; p->H = H; p->W = W;
    p->tiles_h = (H + 3) / 4;
    p->tiles_w = (W + 3) / 4;
    p->tiles = (long)N * p->tiles_h * p->tiles_w;
    const size_t per_tile = (size_t)NP * (C_in + C_out) * sizeof(float);
    long block = (long)(BLOCK_BYTES / per_tile);
    if (block < MIN_BLOCK) block = MIN_BLOCK;
    if (block > MAX_BLOCK) block = MAX_BLOCK;
    p->threads = max_threads();
    /* A block is no larger than one thread's share of the tiles. */
    const long per_thread = (p->tiles + p->threads - 1) / p->threads;
    if (block > per_thread) block = per_thread;
    p->block = block;
    p->isa = cpu_isa();
    p->zeros = alignedAllocCheck((size_t)(C_in > C_out ? C_in : C_out) * sizeof(float));
    p->ws_thread = align64((size_t)NP * block * C_in * sizeof(float)) +
                   align64((size_t)NP * block * C_out * sizeof(float));
    p->ws_dw = align64((size_t)NP * C_in * C_out * sizeof(float));
}

void winograd_free(Winograd *p) {
    free(p->zeros);
    memset(p, 0, sizeof *p);
}

size_t winograd_workspace_bytes(const Winograd *p) {
    return (size_t)p->threads * (p->ws_thread + p->ws_dw);   /* U + blocks + threads - 1 dW^ */
}

static float *ws_u(const Winograd *p, void *ws) { (void)p; return ws; }

static char *ws_block(const Winograd *p, void *ws, int thread) {
    return (char *)ws + p->ws_dw + (size_t)thread * p->ws_thread;
}

static float *ws_dw_part(const Winograd *p, void *ws, int thread) {
    if (thread == 0) return ws_u(p, ws);
    return (float *)((char *)ws + p->ws_dw + (size_t)p->threads * p->ws_thread +
                     (size_t)(thread - 1) * p->ws_dw);
}

/* Split [0, n) into nthr contiguous parts; part i is [*a, *b). */
static void split(long n, int nthr, int i, long *a, long *b) {
    *a = n * i / nthr;
    *b = n * (i + 1) / nthr;
}

static int thread_num(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* y = conv3x3(x) with transformed weights U[q][Ci][Co]: the forward, and the backward-data pass
 * with the rotated weights. V and M are a block's transformed inputs and outputs. */
static void conv_pass(const Winograd *p, int Ci, int Co, const float *x, const float *U, float *y,
                      void *ws) {
    const TileGeom g = { p->H, p->W, p->tiles_h, p->tiles_w, p->zeros };
    const Kernels *k = kernels_for(p->isa);
    #pragma omp parallel num_threads(p->threads)
    {
        const int me = thread_num();
        char *mine = ws_block(p, ws, me);
        float *V = (float *)mine;
        float *M = (float *)(mine + align64((size_t)NP * p->block * Ci * sizeof(float)));
        long a, b;
        split(p->tiles, p->threads, me, &a, &b);
        for (long t0 = a; t0 < b; t0 += p->block) {
            const long nt = b - t0 < p->block ? b - t0 : p->block;
            k->in(&g, Ci, x, t0, t0 + nt, V, (size_t)nt * Ci);
            for (int q = 0; q < NP; q++)
                gemm(0, nt, Co, Ci, V + (size_t)q * nt * Ci, Ci, U + (size_t)q * Ci * Co, Co, 0,
                     M + (size_t)q * nt * Co, Co);
            k->out(&g, Co, M, (size_t)nt * Co, t0, t0 + nt, y);
        }
    }
}

void winograd_forward(const Winograd *p, const float *w, const float *x, float *y, void *ws) {
    float *U = ws_u(p, ws);
    weights_transform(p->C_in, p->C_out, w, 0, U);
    conv_pass(p, p->C_in, p->C_out, x, U, y, ws);
}

/* dw[co][ci] += G^T (sum over threads of dW^[thread][.][co][ci]) G, the threads' partial sums
 * added in thread order. */
static void dw_finish(const Winograd *p, void *ws, float *dw) {
    static const double GT[3][6] = {
        { 1.0 / 2, -1.0 / 6, 1.0 / 6, 1.0 / 30, -16.0 / 15, 0.0 },
        { 0.0, -1.0 / 6, -1.0 / 6, 1.0 / 15, 8.0 / 15, 0.0 },
        { 0.0, -1.0 / 6, 1.0 / 6, 2.0 / 15, -4.0 / 15, 1.0 / 2 } };
    const int Ci = p->C_in, Co = p->C_out;
    const size_t ps = (size_t)Ci * Co;
    #pragma omp parallel for schedule(static) num_threads(p->threads)
    for (int co = 0; co < Co; co++)
        for (int ci = 0; ci < Ci; ci++) {
            double X[6][6] = { { 0.0 } }, t[3][6];
            for (int th = 0; th < p->threads; th++) {
                const float *dWh = ws_dw_part(p, ws, th);
                for (int q = 0; q < NP; q++) X[q / 6][q % 6] += dWh[q * ps + (size_t)co * Ci + ci];
            }
            for (int a = 0; a < 3; a++)
                for (int j = 0; j < 6; j++) {
                    double s = 0.0;
                    for (int i = 0; i < 6; i++) s += GT[a][i] * X[i][j];
                    t[a][j] = s;
                }
            float *d = dw + ((size_t)co * Ci + ci) * 9;
            for (int a = 0; a < 3; a++)
                for (int b = 0; b < 3; b++) {
                    double s = 0.0;
                    for (int j = 0; j < 6; j++) s += t[a][j] * GT[b][j];
                    d[a * 3 + b] += (float)s;
                }
        }
}

void winograd_backward(const Winograd *p, const float *w, const float *x, const float *dy,
                       float *dx, float *dw, void *ws) {
    const int Ci = p->C_in, Co = p->C_out;
    if (dx) {
        float *U = ws_u(p, ws);
        weights_transform(Ci, Co, w, 1, U);
        conv_pass(p, Co, Ci, dy, U, dx, ws);
    }

    const TileGeom g = { p->H, p->W, p->tiles_h, p->tiles_w, p->zeros };
    const Kernels *k = kernels_for(p->isa);
    #pragma omp parallel num_threads(p->threads)
    {
        const int me = thread_num();
        char *mine = ws_block(p, ws, me);
        float *X = (float *)mine;
        float *D = (float *)(mine + align64((size_t)NP * p->block * Ci * sizeof(float)));
        float *dWh = ws_dw_part(p, ws, me);
        long a, b;
        split(p->tiles, p->threads, me, &a, &b);
        if (a == b) memset(dWh, 0, (size_t)NP * Ci * Co * sizeof(float));
        for (long t0 = a; t0 < b; t0 += p->block) {
            const long nt = b - t0 < p->block ? b - t0 : p->block;
            k->in(&g, Ci, x, t0, t0 + nt, X, (size_t)nt * Ci);
            k->grad(&g, Co, dy, t0, t0 + nt, D, (size_t)nt * Co);
            for (int q = 0; q < NP; q++)
                gemm(1, Co, Ci, nt, D + (size_t)q * nt * Co, Co, X + (size_t)q * nt * Ci, Ci,
                     t0 > a, dWh + (size_t)q * Ci * Co, Ci);
        }
    }
    dw_finish(p, ws, dw);
}
