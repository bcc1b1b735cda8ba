/* SPDX-License-Identifier: BSD-3-Clause */
/* random_erase.h - torchvision's RandomErasing(p, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0)
 * as its reference classification recipe applies it: after Normalize, on the float tensor, a
 * box of the normalised image set to 0 in every channel.
 *
 * A sample's draws come from its own stream (random_erase_stream), a function of (seed, epoch,
 * rank, the sample's position in the epoch's order): the loader's worker threads may make the
 * samples of a batch in any order, and a resumed run draws the same boxes. */
#ifndef DDP_RANDOM_ERASE_H
#define DDP_RANDOM_ERASE_H

#include <stddef.h>
#include <stdint.h>

#include "resample.h"
#include "base/rng.h"

#define ERASE_SCALE_LO 0.02
#define ERASE_SCALE_HI 0.33
#define ERASE_RATIO_LO 0.3
#define ERASE_RATIO_HI 3.3
#define ERASE_TRIES 10

/* The draws one sample took, in order, for checking against torchvision (tests only): the coin
 * (torch.rand(1) < p), then per try the area fraction and the log aspect ratio (float32, as
 * torch.empty(1).uniform_ gives), and for the try that fits the two offsets. */
typedef struct {
    float coin;
    int tries;                        /* tries drawn; 0: the coin said no; ERASE_TRIES + 1: none fitted */
    float scale[ERASE_TRIES], log_ratio[ERASE_TRIES];
    int top, left;
} EraseDraws;

/* The stream of the sample at position `pos` of epoch `epoch`'s order on rank `rank`. */
void random_erase_stream(Rng *r, uint64_t seed, int epoch, int rank, size_t pos);

/* RandomErasing.forward's draws for an h x w image with probability p: the box to erase
 * (w == 0 or h == 0: nothing to erase). draws may be NULL. */
PixelBox random_erase_box(Rng *r, int w, int h, double p, EraseDraws *draws);

/* Sets the box of the normalised NHWC image x (w x h pixels, 3 channels) to 0. */
void random_erase_apply(float *x, int w, int h, PixelBox box);

#endif
