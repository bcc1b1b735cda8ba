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

#include "base/rng.h"

enum { AA_NONE = 0, AA_IMAGENET, AA_CIFAR10, AA_SVHN, AA_RA, AA_TA_WIDE, AA_AUGMIX };

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

/* What a sample's augmentation drew and did, for tests: the draws in order as torchvision asks
 * for them ('i' an integer below `bound`, 'f' a float in [0, 1) or a factor, 'p' an element of
 * torch.randperm(4), 'd' one of AugMix's Dirichlet weights, `bound` the group's size), and the
 * ops applied with their magnitudes. */
#define AUTOAUG_TRACE_MAX 64
typedef struct {
    int n;
    char kind[AUTOAUG_TRACE_MAX];
    int bound[AUTOAUG_TRACE_MAX];
    double value[AUTOAUG_TRACE_MAX];
    int nops;
    int op[AUTOAUG_TRACE_MAX];
    double mag[AUTOAUG_TRACE_MAX];
} AutoAugTrace;

/* Augments img (h rows of w RGB pixels, packed) in place; tmp is scratch of the same size;
 * trace may be NULL. */
void autoaug_apply(const PixelAug *a, Rng *r, uint8_t *img, int w, int h, uint8_t *tmp, AutoAugTrace *trace);

/* The magnitude torchvision's policy `policy` gives op at bin `bin` of `num_bins` for a w x h
 * image (its _augmentation_space: float32 linspace values, Posterize's bits; AugMix's
 * translations reach a third of the side, its Posterize 4 bits down to 0); 0 for the ops
 * without one. */
double autoaug_magnitude(int policy, int op, int bin, int num_bins, int w, int h);

#endif
