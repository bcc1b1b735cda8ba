/* SPDX-License-Identifier: BSD-3-Clause */
/* transform_aug.h - transform.h's views with torchvision's per-image pixel augmentations: the
 * uint8 out x out view made first (TF_PAD_CROP's crop of the zero-padded image, TF_RRC's
 * resized box, TF_CENTRE's window), mirrored when the plan flips, then autoaug_apply on it
 * (torchvision's order: RandomResizedCrop or RandomCrop, RandomHorizontalFlip, the policy on
 * the PIL image), then normalised through the table. transform_apply stays the path without
 * augmentations, bit for bit what it was. */
#ifndef DDP_TRANSFORM_AUG_H
#define DDP_TRANSFORM_AUG_H

#include "autoaug.h"
#include "transform.h"

/* As transform_apply, then `a` with the draws from `r` (the sample's own stream). */
void transform_apply_aug(const Transform *t, const ImageView *src, int ox, int oy, int flip, PixelBox box, float *dst,
                         TransformScratch *s, const PixelAug *a, Rng *r);

#endif
