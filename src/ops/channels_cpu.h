/* SPDX-License-Identifier: BSD-3-Clause */
/* channels_cpu.h - the CPU kernels that move or scale channels of NHWC maps (backend.h's
 * contract, operation by operation): the copies of a concatenation and a split, ShuffleNet's
 * channel shuffle, the transpose of a flatten into PyTorch's (C, H, W) order, a learned
 * per-channel scale (ConvNeXt's layer scale) and a fixed per-channel affine map (torchvision's
 * transform_input).
 *
 * Every result is a function of the data and the shapes alone, never of the thread count: the
 * moves are value by value, and the one reduction (channel_scale_backward's dg) sums fixed
 * blocks of pixels in double, in order. */
#ifndef DDP_CHANNELS_CPU_H
#define DDP_CHANNELS_CPU_H

#include <stddef.h>

/* y[m, y_off + c] = x[m, x_off + c] for c < C and m < M: rows of Cx values in x, Cy in y. */
void channel_copy(const float *x, int Cx, int x_off, float *y, int Cy, int y_off, int C, size_t M);

/* channel_shuffle(x, groups) of torchvision's ShuffleNetV2 over M pixels of C channels: output
 * channel j * groups + i is input channel i * (C / groups) + j. Its inverse is the same with
 * C / groups groups. */
void channel_shuffle(const float *x, float *y, size_t M, int C, int groups);

/* Per image of P pixels and C channels: y[c * P + p] = x[p * C + c] (NHWC to PyTorch's NCHW
 * order, a flatten's forward); transpose(dy, dx, N, C, P) is its backward. */
void transpose(const float *x, float *y, int N, int P, int C);

/* y[m, c] = x[m, c] * g[c]; and dx = dy * g (overwritten), dg[c] += the sum over m of
 * dy[m, c] * x[m, c] (each product rounded to float, summed in double over blocks of 256
 * pixels, the blocks in order). dx may be dy. */
void channel_scale_forward(const float *x, const float *g, float *y, size_t M, int C);
void channel_scale_backward(const float *x, const float *g, const float *dy, float *dx, float *dg, size_t M, int C);

/* y[m, c] = x[m, c] * a[c] + b[c], rounded after the product and after the sum as PyTorch's
 * x * a + b is. */
void channel_affine(const float *x, float *y, size_t M, int C, const float *a, const float *b);

#endif
