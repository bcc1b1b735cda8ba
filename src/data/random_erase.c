/* SPDX-License-Identifier: BSD-3-Clause */
/* random_erase.c - see random_erase.h.
 *
 * torchvision 0.14's RandomErasing.get_params in its precisions, as crops.c does for
 * RandomResizedCrop: the draws are float32 (torch.empty(1).uniform_(a, b) is u * (b - a) + a in
 * float), the log ratio bounds float32 (torch.log of torch.tensor(ratio)), the aspect ratio
 * the float32 exp widened to double (.item()), the sides Python's round (half to even) of a
 * double square root. Its test is strict: a side equal to the image's is refused. */
#include "random_erase.h"

#include <math.h>
#include <string.h>

#include "base/util.h"

#define ERASE_SALT 0x6572617365303031ULL   /* "erase001": separates the erasing streams */

void random_erase_stream(Rng *r, uint64_t seed, int epoch, int rank, size_t pos) {
    rng_init(r, seed ^ ERASE_SALT, ((uint64_t)(uint32_t)epoch << 32) | (uint32_t)rank, (uint64_t)pos);
}

PixelBox random_erase_box(Rng *r, int w, int h, double p, EraseDraws *draws) {
    CHECK(w > 0 && h > 0);
    const PixelBox none = {0, 0, 0, 0};
    /* torch.rand(1) < p: the comparison in float32, the tensor's type */
    const float coin = rng_uniform(r);
    if (draws) {
        draws->coin = coin;
        draws->tries = 0;
    }
    if (!(coin < (float)p)) return none;
    const double area = (double)w * h;
    const float scale_lo = (float)ERASE_SCALE_LO, scale_hi = (float)ERASE_SCALE_HI;
    const float log_lo = logf((float)ERASE_RATIO_LO), log_hi = logf((float)ERASE_RATIO_HI);
    if (draws) draws->tries = ERASE_TRIES + 1;
    for (int t = 0; t < ERASE_TRIES; t++) {
        const float scale = rng_uniform_f32(r, scale_lo, scale_hi);
        const float log_ratio = rng_uniform_f32(r, log_lo, log_hi);
        if (draws) {
            draws->scale[t] = scale;
            draws->log_ratio[t] = log_ratio;
        }
        const double erase_area = area * (double)scale;
        const double aspect = (double)expf(log_ratio);
        const long long eh = (long long)nearbyint(sqrt(erase_area * aspect));
        const long long ew = (long long)nearbyint(sqrt(erase_area / aspect));
        if (!(eh < h && ew < w)) continue;
        /* torch.randint(0, img_h - h + 1) for the top, then the left */
        const int top = (int)rng_below(r, (uint32_t)(h - eh + 1));
        const int left = (int)rng_below(r, (uint32_t)(w - ew + 1));
        if (draws) {
            draws->tries = t + 1;
            draws->top = top;
            draws->left = left;
        }
        return (PixelBox){.x = left, .y = top, .w = (int)ew, .h = (int)eh};
    }
    return none;   /* torchvision returns the image itself: nothing erased */
}

void random_erase_apply(float *x, int w, int h, PixelBox box) {
    if (box.w <= 0 || box.h <= 0) return;
    CHECK(box.x >= 0 && box.y >= 0 && box.x + box.w <= w && box.y + box.h <= h);
    for (int64_t y = box.y; y < box.y + box.h; y++)
        memset(x + ((size_t)y * (size_t)w + (size_t)box.x) * 3, 0, (size_t)box.w * 3 * sizeof(float));
}
