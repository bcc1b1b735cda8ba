/* SPDX-License-Identifier: BSD-3-Clause */
/* autoaug.h - torchvision 0.14's per-image pixel augmentations of a training view: the
 * auto-augment policies of its reference train.py (--auto-augment imagenet, cifar10, svhn: the
 * AutoAugment policies; ra: RandAugment; ta_wide: TrivialAugmentWide; augmix: AugMix, whose
 * ops are the tensor ones, augmix.h), then ColorJitter, on the
 * uint8 out x out view after the crop and the flip, with PIL's arithmetic (pil_ops.h), fill 0
 * and nearest-neighbour geometry. The draws come from a stream the caller gives, one per
 * sample, in torchvision's order (documented per function in autoaug.c). */
#ifndef DDP_AUTOAUG_H
#define DDP_AUTOAUG_H

#include <stdint.h>

#include "aug_space.h"
#include "base/rng.h"

typedef struct {
    int policy;               /* AA_* */
    int ra_magnitude;         /* RandAugment: the bin of 31 (0 to 30) */
    int ra_num_ops;           /* RandAugment: ops applied in turn */
    double jitter[4];         /* ColorJitter's brightness, contrast, saturation, hue; 0: that one off */
    int augmix_severity;      /* AugMix: its bins are the first `severity` of 10 (1 to 10; 0: the default 3) */
} PixelAug;

/* The policy of a --auto_augment spelling (none, imagenet, cifar10, svhn, ra, ta_wide, augmix); -1 if none. */
int autoaug_policy(const char *name);
/* 1 when `a` changes pixels (a policy or a jitter is on). */
int autoaug_active(const PixelAug *a);

/* Augments img (h rows of w RGB pixels, packed) in place; tmp is scratch of the same size;
 * trace may be NULL. */
void autoaug_apply(const PixelAug *a, Rng *r, uint8_t *img, int w, int h, uint8_t *tmp, AutoAugTrace *trace);

#endif
