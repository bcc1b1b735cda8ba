/* SPDX-License-Identifier: BSD-3-Clause */
/* crops.h - the boxes of torchvision's crops: RandomResizedCrop's random box and the centre
 * crop after a resize of the shorter side, with torchvision's arithmetic (its rounding:
 * Python's round, half to even), so that the same random draws give the same box. */
#ifndef DDP_CROPS_H
#define DDP_CROPS_H

#include "resample.h"
#include "base/rng.h"

/* RandomResizedCrop's aspect ratios, (3/4, 4/3), and its tries before the centre fallback. */
#define RRC_RATIO_MIN (3.0 / 4.0)
#define RRC_RATIO_MAX (4.0 / 3.0)
#define RRC_TRIES 10

/* The draws one box took, in order, for checking against torchvision (tests only): per try an
 * area fraction and a log aspect ratio (float32, as torch.empty(1).uniform_ gives), and for
 * the try that fits the two offsets. */
typedef struct {
    int tries;                    /* tries drawn; RRC_TRIES + 1 means the centre fallback */
    float scale[RRC_TRIES], log_ratio[RRC_TRIES];
    int top, left;                /* the offsets drawn, when a try fitted */
} RrcDraws;

/* torchvision's RandomResizedCrop.get_params for an image of w x h pixels and area fractions
 * in [scale_lo, scale_hi], drawing from r; draws may be NULL. */
PixelBox rrc_box(Rng *r, int w, int h, double scale_lo, double scale_hi, RrcDraws *draws);

/* torchvision's Resize(size) of a w x h image (the shorter side to size, the longer side
 * truncated in proportion): *out_w x *out_h. */
void resize_shorter(int w, int h, int size, int *out_w, int *out_h);

/* torchvision's CenterCrop(crop) of a w x h image: the window (crop <= w, h). */
PixelBox centre_crop(int w, int h, int crop);

#endif
