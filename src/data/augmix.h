/* SPDX-License-Identifier: BSD-3-Clause */
/* augmix.h - torchvision 0.14's AugMix (transforms/autoaugment.py) as its reference train.py
 * builds it (--auto-augment augmix: severity --augmix-severity, mixture_width 3, chain_depth -1,
 * alpha 1, all_ops, BILINEAR, fill None) on a uint8 image: the PIL image goes through
 * pil_to_tensor, so the ops are the tensor ones (tensor_ops.h), mixed in float32 and truncated
 * back to uint8. */
#ifndef DDP_AUGMIX_H
#define DDP_AUGMIX_H

#include <stdint.h>

#include "aug_space.h"
#include "base/rng.h"

#define AUGMIX_WIDTH 3   /* mixture_width: chains mixed */
#define AUGMIX_NUM_OPS 13   /* _augmentation_space with all_ops */

/* The pil_ops.h op at index i of AugMix's _augmentation_space, in its dict order. */
int augmix_op(int i);

/* One Dirichlet(1, ..., 1) draw of n weights as float32, from exponential (Gamma(1)) draws
 * normalised by their sum: what torch._sample_dirichlet samples (its own draws differ). */
void augmix_dirichlet(Rng *r, int n, float *out);

/* AugMix.forward on img (h rows of w RGB pixels, packed) in place, drawing from r in
 * torchvision's order (augmix.c); trace as autoaug_apply's, the Dirichlet draws as kind 'd'
 * with the group's size as the bound. */
void augmix_apply(int severity, Rng *r, uint8_t *img, int w, int h, AutoAugTrace *trace);

#endif
