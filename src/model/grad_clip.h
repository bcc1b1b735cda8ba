/* SPDX-License-Identifier: BSD-3-Clause */
/* grad_clip.h - --clip_grad_norm: torch.nn.utils.clip_grad_norm_(parameters, max_norm) over the
 * flat gradient buffer, after the all-reduce (and the fp16 scaler's unscale), before the step:
 *
 *   total = |g| (L2, all gradients); coef = min(1, max_norm / (total + 1e-6)); g *= coef
 *
 * with PyTorch's float32 arithmetic on the scalars (total + 1e-6, its reciprocal times max_norm,
 * as Tensor.__rtruediv__ computes; the multiplication is skipped where coef is 1, which leaves
 * every gradient as it is). The total is taken in double from the backend's sum of squares
 * (PyTorch's from each tensor's float32 norm), in an order that depends on the buffer's size
 * alone: every rank, holding the same averaged gradients, computes the same coefficient. A
 * total of inf or NaN makes every gradient NaN, as PyTorch's does (the fp16 scaler skips such
 * a step anyway). */
#ifndef DDP_GRAD_CLIP_H
#define DDP_GRAD_CLIP_H

#include <stddef.h>

#include "ops/backend.h"

typedef struct {
    const Backend *be;   /* NULL: off */
    double max_norm;
    double *sum;         /* backend memory: the sum of squares */
    float *coef;         /* backend memory: the coefficient */
} GradClip;

/* Clipping at max_norm on be (be->sumsq must exist); max_norm 0 leaves it off. */
void grad_clip_init(GradClip *c, const Backend *be, double max_norm);
/* Clips grads[0..n) and returns their norm before clipping (PyTorch's total_norm). */
float grad_clip(GradClip *c, float *grads, size_t n);
void grad_clip_free(GradClip *c);

#endif
