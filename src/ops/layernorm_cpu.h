/* SPDX-License-Identifier: BSD-3-Clause */
/* layernorm_cpu.h - nn.LayerNorm over the channels of each pixel of an NHWC map, as ConvNeXt
 * normalises (its LayerNorm2d, and nn.LayerNorm after its blocks' permute to channels-last),
 * with a learned per-channel weight and bias.
 *
 * The statistics of a pixel are its C values' mean and biased variance, two passes in float
 * over contiguous values; the parameters' gradients sum fixed blocks of pixels in double, the
 * blocks in order: the same bits on any number of threads. */
#ifndef DDP_LAYERNORM_CPU_H
#define DDP_LAYERNORM_CPU_H

#include <stddef.h>

/* y[m, c] = (x[m, c] - mean[m]) * rstd[m] * gamma[c] + beta[c] over M pixels of C channels,
 * rstd = 1 / sqrt(var + eps); mean and rstd (M each) kept for the backward. */
void layernorm_forward(const float *x, float *y, float *mean, float *rstd, const float *gamma, const float *beta,
                       size_t M, int C, float eps);

/* dx (overwritten; may be dy) = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * gamma
 * and xhat = (x - mean) * rstd; dgamma[c] += sum over m of dy * xhat, dbeta[c] += sum of dy. */
void layernorm_backward(const float *x, const float *dy, const float *mean, const float *rstd, const float *gamma,
                        float *dx, float *dgamma, float *dbeta, size_t M, int C);

#endif
