/* SPDX-License-Identifier: BSD-3-Clause */
/* depthwise.h - the depthwise convolution of the CPU backend (groups == C_in == C_out, as
 * MobileNet's and EfficientNet's), direct over the NHWC tensors, where conv_cpu.c measured it
 * faster than oneDNN's.
 *
 * Each output is the sum of its window's products in the window's row-major order, in float,
 * computed by one thread: forward and data gradient depend only on the data and the shape, not
 * on the thread count nor on the ISA (the products are not fused with the additions). The
 * weight gradient is summed in float along each output row, the rows in float within fixed
 * blocks of rows, and the blocks in double in block order: likewise independent of the
 * threads. Loops run over channels, 16 at a time, in code compiled for AVX-512, AVX2+FMA and
 * SSE4.1 and picked by cpu_isa.h. Layouts as conv_cpu.h: weights [C, 1, k, k], dw
 * accumulated, dx overwritten. */
#ifndef DDP_DEPTHWISE_H
#define DDP_DEPTHWISE_H

#include <stddef.h>

#include "backend.h"   /* ConvShape, conv_out_size */

/* The largest kernel it takes: a window's taps are listed on the stack. */
#define DEPTHWISE_MAX_KERNEL 7

/* Nonzero for a (normalised) shape it computes: depthwise without channel multiplier, a
 * kernel of at most DEPTHWISE_MAX_KERNEL, any stride, padding and dilation. */
int depthwise_applies(const ConvShape *sh);

/* Bytes of scratch the calls at this input size need, 64-byte aligned. */
size_t depthwise_workspace_bytes(const ConvShape *sh, int N, int H, int W);

/* y[N,Ho,Wo,C] = depthwise conv of x[N,H,W,C] with w[C,1,k,k]. */
void depthwise_forward(const ConvShape *sh, int N, int H, int W, const float *x, const float *w, float *y,
                       void *ws);

/* dw += dL/dw; dx = dL/dx (overwritten) unless dx == NULL. */
void depthwise_backward(const ConvShape *sh, int N, int H, int W, const float *x, const float *w,
                        const float *dy, float *dx, float *dw, void *ws);

/* "avx512", "avx2" or "sse41": the code a call now runs. */
const char *depthwise_isa_name(void);

#endif
