/* SPDX-License-Identifier: BSD-3-Clause */
/* crops.c - see crops.h.
 *
 * The arithmetic follows torchvision 0.14 line by line, in its precisions: the draws are
 * float32 (torch.empty(1).uniform_(a, b) on a float tensor is a + u * (b - a) in float, with u
 * of 24 bits), the log ratio bounds are float32 (torch.log of torch.tensor(ratio)), the aspect
 * ratio is the float32 exp of the draw widened to double (.item()), and the rest is Python's
 * double arithmetic with its round (half to even). */
#include "crops.h"

#include <math.h>

#include "base/util.h"

/* Python's round() of a double to an integer: half to even, as nearbyint does in the default
 * rounding mode (which nothing here changes). long long: sqrt of a large area times 4/3 can
 * pass INT_MAX before the bounds check refuses it. */
static long long round_half_even(double x) {
    return (long long)nearbyint(x);
}

/* torch.empty(1).uniform_(lo, hi) on a float32 tensor: the bounds cast to float, then
 * u * (hi - lo) + lo in float. -std=c11 keeps GCC from fusing the multiply and add. */
PixelBox rrc_box(Rng *r, int w, int h, double scale_lo, double scale_hi, RrcDraws *draws) {
    CHECK(w > 0 && h > 0 && 0.0 <= scale_lo && scale_lo <= scale_hi);
    const double area = (double)w * h;
    const float scale_lo_f = (float)scale_lo, scale_hi_f = (float)scale_hi;
    const float log_lo = logf((float)RRC_RATIO_MIN), log_hi = logf((float)RRC_RATIO_MAX);
    if (draws) draws->tries = RRC_TRIES + 1;
    for (int t = 0; t < RRC_TRIES; t++) {
        const float scale = rng_uniform_f32(r, scale_lo_f, scale_hi_f);
        const float log_ratio = rng_uniform_f32(r, log_lo, log_hi);
        if (draws) {
            draws->scale[t] = scale;
            draws->log_ratio[t] = log_ratio;
        }
        const double target_area = area * (double)scale;
        const double aspect = (double)expf(log_ratio);
        const long long cw = round_half_even(sqrt(target_area * aspect));
        const long long ch = round_half_even(sqrt(target_area / aspect));
        if (0 < cw && cw <= w && 0 < ch && ch <= h) {
            /* torch.randint(0, n, (1,)): the top offset is drawn before the left one */
            const int top = (int)rng_below(r, (uint32_t)(h - ch + 1));
            const int left = (int)rng_below(r, (uint32_t)(w - cw + 1));
            if (draws) {
                draws->tries = t + 1;
                draws->top = top;
                draws->left = left;
            }
            return (PixelBox){.x = left, .y = top, .w = (int)cw, .h = (int)ch};
        }
    }
    /* The fallback: the whole image, or its centre at the nearest ratio bound when it is more
     * elongated than (3/4, 4/3). */
    const double in_ratio = (double)w / (double)h;
    long long cw = w, ch = h;
    if (in_ratio < RRC_RATIO_MIN) {
        ch = round_half_even(w / RRC_RATIO_MIN);
    } else if (in_ratio > RRC_RATIO_MAX) {
        cw = round_half_even(h * RRC_RATIO_MAX);
    }
    /* in_ratio < 3/4 gives w / (3/4) < h, which rounds to at most h (and so for w) */
    CHECK(0 < cw && cw <= w && 0 < ch && ch <= h);
    return (PixelBox){.x = (int)((w - cw) / 2), .y = (int)((h - ch) / 2), .w = (int)cw, .h = (int)ch};
}

void resize_shorter(int w, int h, int size, int *out_w, int *out_h) {
    CHECK(w > 0 && h > 0 && size > 0);
    const int shorter = w <= h ? w : h, longer = w <= h ? h : w;
    /* Python's int(size * long / short): the product is exact in a double below 2^53, the
     * quotient correctly rounded as Python's true division is, then truncated. */
    const double q = (double)((long long)size * longer) / shorter;
    CHECK(q < 2147483648.0);
    const int new_long = (int)q;
    *out_w = w <= h ? size : new_long;
    *out_h = w <= h ? new_long : size;
}

PixelBox centre_crop(int w, int h, int crop) {
    CHECK(crop > 0 && crop <= w && crop <= h);
    /* int(round((h - crop) / 2.0)): an odd margin's half goes to the even side */
    return (PixelBox){.x = (int)round_half_even((w - crop) / 2.0), .y = (int)round_half_even((h - crop) / 2.0),
                      .w = crop, .h = crop};
}
