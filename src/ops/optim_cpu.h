/* SPDX-License-Identifier: BSD-3-Clause */
/* optim_cpu.h - the CPU's updates of the optimizers other than SGD (model/optim.h) and the sum
 * of squares of --clip_grad_norm and the trust ratios, over a slice of the flat buffers.
 *
 * Each update is PyTorch's single-tensor code (torch 1.13's torch.optim, foreach=False; timm's
 * Lamb and Lars) with its operations in its order and its float32 rounding: one rounding per
 * ATen kernel, and fma(a, b, c) = a * b + c rounded once where ATen's AVX2 kernels fuse
 * (add_(x, alpha=a) is fma(a, x, self), addcmul_(x, y, value=v) is fma(v * x, y, self);
 * addcdiv_ divides (v * x) / y and adds). fmaf is exact on every CPU, so the bits are the same
 * with or without FMA instructions (those only make it faster); they are PyTorch's AVX2 bits.
 * The scalars are OptimScalars (ops/backend.h), computed by model/optim.c.
 *
 *   adamw_step     p = p * decay; m = fma(1-b1, g, m * b1); v = fma((1-b2) * g, g, v * b2);
 *                  p = p + (-step_size * m) / (sqrt(v) / bc2_sqrt + eps)
 *   rmsprop_step   d = weight_decay ? fma(weight_decay, p, g) : g; v = fma((1-a) * d, d, v * a);
 *                  avg = sqrt(v) + eps; with momentum: buf = buf * momentum + d / avg,
 *                  p = fma(-lr, buf, p); without: p = p + (-lr * d) / avg   (a = beta2 here)
 *   lamb_moments   gc = g / grad_div; m = fma(1-b1, gc, m * b1); v = fma((1-b2) * gc, gc, v * b2);
 *                  when sumsq_p_u is not NULL: [0] += sum p^2, [1] += sum u^2 of the update u
 *                  lamb_apply makes (in double, in an order set by n alone, as sumsq)
 *   lamb_apply     u = (m / bc1) / (sqrt(v) / bc2_sqrt + eps); when adapt:
 *                  u = fma(weight_decay, p, u) * trust; p = fma(-lr, u, p)
 *   lars_step      d = adapt ? fma(weight_decay, p, g) * trust : g; with momentum:
 *                  buf = buf * momentum + d, and u = nesterov ? fma(momentum, buf, d) : buf;
 *                  without: u = d; p = fma(-lr, u, p)
 * A zero momentum buffer or moment makes the first step PyTorch's (its buf = d and m = (1-b1) g
 * come out of the same expressions on zeros). */
#ifndef DDP_OPTIM_CPU_H
#define DDP_OPTIM_CPU_H

#include <stddef.h>

#include "backend.h"

void optim_cpu_sumsq(const float *x, size_t n, double *out);
void optim_cpu_adamw(float *p, const float *g, float *exp_avg, float *exp_avg_sq, size_t n, const OptimScalars *s);
void optim_cpu_rmsprop(float *p, const float *g, float *square_avg, float *momentum_buffer, size_t n,
                       const OptimScalars *s);
void optim_cpu_lamb_moments(const float *p, const float *g, float *exp_avg, float *exp_avg_sq, size_t n,
                            const OptimScalars *s, double *sumsq_p_u);
void optim_cpu_lamb_apply(float *p, const float *exp_avg, const float *exp_avg_sq, size_t n, const OptimScalars *s);
void optim_cpu_lars(float *p, const float *g, float *momentum_buffer, size_t n, const OptimScalars *s);

#endif
