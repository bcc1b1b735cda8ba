/* SPDX-License-Identifier: BSD-3-Clause */
/* winograd.h - Winograd F(4x4, 3x3) for the 3x3 stride-1 pad-1 convolutions of the CPU backend.
 *
 * Each 4x4 block of outputs ("tile") is computed from a 6x6 block of inputs with 36
 * element-wise products per (input, output) channel pair instead of 144 multiply-adds, so the
 * bulk of the work becomes 36 independent GEMMs, one per point of the 6x6 transformed tile:
 *   forward          Y^[p] (tiles x C_out) = X^[p] (tiles x C_in) . U[p] (C_in x C_out)
 *   backward data    the forward of dy with the weights rotated by 180 degrees (pad 1 keeps
 *                    the size), in and out channels swapped
 *   backward weights dW^[p] (C_out x C_in) = sum over tiles of dY^[p]^T . X^[p], where dY^ is
 *                    A dy A^T of each 4x4 tile of dy, then dw += G^T dW^ G per channel pair.
 * Layouts follow conv_cpu.h: activations NHWC float32, weights OIHW float32, dw accumulated.
 *
 * The transforms run over channels with AVX-512, AVX2+FMA or SSE4.1 code picked at run time
 * from the ISA oneDNN reports (so ONEDNN_MAX_CPU_ISA limits both); the GEMMs go through
 * oneDNN's sgemm. Each thread works through its own range of tiles a block at a time, and a
 * block's transformed copies live in a workspace the caller owns (one for all layers), so
 * memory grows with the thread count, not with the batch; the transformed weights are made
 * there at each pass, not kept per convolution. The weight gradient is summed per
 * thread and the partial sums added in thread order: results are bitwise repeatable for a
 * given thread count (the one current when the plan was made). */
#ifndef DDP_WINOGRAD_H
#define DDP_WINOGRAD_H

#include <stddef.h>

/* A plan for one input shape. */
typedef struct Winograd {
    int C_in, C_out, N, H, W;
    int tiles_h, tiles_w;
    long tiles;             /* N * tiles_h * tiles_w */
    long block;             /* tiles a thread transforms at a time */
    int threads;            /* OpenMP threads, fixed when the plan is made */
    int isa;                /* transform code in use, see winograd_isa_name */
    float *zeros;           /* max(C_in, C_out) zeros: the padding around the image */
    size_t ws_thread;       /* workspace per thread: a block's transformed tiles */
    size_t ws_dw;           /* the transformed weights, or a thread's partial weight gradient */
} Winograd;

void winograd_init(Winograd *p, int C_in, int C_out, int N, int H, int W);
void winograd_free(Winograd *p);

/* Bytes of workspace the passes need (the larger of forward and backward), 64-byte aligned:
 * the transformed weights live there too, made at every pass. */
size_t winograd_workspace_bytes(const Winograd *p);

/* y[N,H,W,C_out] = conv3x3(x[N,H,W,C_in], w[C_out,C_in,3,3]), stride 1, pad 1. */
void winograd_forward(const Winograd *p, const float *w, const float *x, float *y, void *ws);

/* dw += dL/dw; dx = dL/dx (overwritten) unless dx == NULL. */
void winograd_backward(const Winograd *p, const float *w, const float *x, const float *dy,
                       float *dx, float *dw, void *ws);

/* "avx512", "avx2" or "sse41": the transform code a plan made now would use. */
const char *winograd_isa_name(void);

#endif
