/* SPDX-License-Identifier: BSD-3-Clause */
/* scale_cpu.h - the CPU kernels that multiply a map by a factor broadcast over part of it
 * (backend.h's contract, operation by operation): squeeze-excitation's per-image, per-channel
 * gate and its backward, dropout's per-value mask, stochastic depth's per-image factor.
 *
 * NHWC float32 as everywhere (ops_cpu.h). Every result is a function of the data and the
 * shapes alone, never of the thread count: the products are value by value, the one reduction
 * (mul_backward's ds) runs in a fixed order, and the masks are drawn from (key, index). */
#ifndef DDP_SCALE_CPU_H
#define DDP_SCALE_CPU_H

#include <stddef.h>
#include <stdint.h>

/* y[n,p,c] = x[n,p,c] * s[n,c] over N images of HW pixels of C channels. */
void mul_forward(const float *x, const float *s, float *y, int N, int HW, int C);

/* dx = dy * s, and ds[n,c] = the sum over the pixels p of dy[n,p,c] * x[n,p,c], both
 * overwritten. Each product is rounded to float, as PyTorch's grad * self is, and the sum runs
 * in double in pixel order, rounded once: at least as close to the exact sum as PyTorch's float
 * sum, and the same bits on any number of threads. dx may be dy. */
void mul_backward(const float *x, const float *s, const float *dy, float *dx, float *ds, int N, int HW, int C);

/* keep[i] = 1 when rng_hash_uniform(key, i) < 1 - p (rng.h), else 0, for i < n: p = 0 keeps
 * everything, p = 1 nothing. */
void dropout_mask(uint8_t *keep, size_t n, float p, uint64_t key);

/* y = keep ? x * (1 / (1 - p)) : 0 over n values, the factor rounded as PyTorch's
 * noise.div_(1 - p) rounds it (1 - p in double, then float); all zeros when p is 1. y may be x.
 * Dropout's forward on x and its backward on dy alike. */
void dropout_apply(const float *x, const uint8_t *keep, float *y, size_t n, float p);

/* y[n, j] = x[n, j] * s[n] over N images of `per` values (stochastic depth "row", forward and
 * backward). y may be x. */
void sample_scale(const float *x, const float *s, float *y, int N, size_t per);

#endif
