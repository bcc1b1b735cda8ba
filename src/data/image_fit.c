/* SPDX-License-Identifier: BSD-3-Clause */
/* image_fit.c - see image_fit.h. The resampling is resample.h's (PIL's bilinear arithmetic),
 * computing only the kept window of the resized image. */
#include "image_fit.h"

#include <stdlib.h>

#include "resample.h"
#include "base/util.h"

/* Python's int(round(x / 2.0)) for x >= 0: half to even. */
static int64_t half_round_even(int64_t x) {
    int64_t q = x / 2;
    return (x % 2 == 0 || q % 2 == 0) ? q : q + 1;
}

/* The resized size (64-bit: a 1 x 2^20 image at S = 4096 passes 2^31 along its length). */
static void resized(int64_t w, int64_t h, int S, int64_t *nw, int64_t *nh) {
    if (w <= h) {
        *nw = S;
        *nh = (int64_t)S * h / w;
    } else {
        *nh = S;
        *nw = (int64_t)S * w / h;
    }
}

void image_fit_size(int w, int h, int S, int *ow, int *oh) {
    int64_t nw, nh;
    resized(w, h, S, &nw, &nh);
    *ow = (int)(nw < 2 * (int64_t)S ? nw : 2 * (int64_t)S);
    *oh = (int)(nh < 2 * (int64_t)S ? nh : 2 * (int64_t)S);
}

void image_fit(const ImageRGB *in, int S, ImageRGB *out) {
    int64_t nw, nh;
    resized(in->w, in->h, S, &nw, &nh);
    int OW, OH;
    image_fit_size(in->w, in->h, S, &OW, &OH);
    out->w = OW;
    out->h = OH;
    out->rgb = mallocCheck((size_t)OW * (size_t)OH * 3);
    const PixelBox whole = {0, 0, in->w, in->h}, win = {half_round_even(nw - OW), half_round_even(nh - OH), OW, OH};
    ResampleScratch scratch = {0};
    resample_box(in->rgb, in->w, in->h, whole, nw, nh, win, out->rgb, &scratch);
    resample_scratch_free(&scratch);
}
