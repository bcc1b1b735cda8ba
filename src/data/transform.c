/* SPDX-License-Identifier: BSD-3-Clause */
/* transform.c - see transform.h. */
#include "transform.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "crops.h"
#include "base/util.h"

void transform_scratch_free(TransformScratch *s) {
    resample_scratch_free(&s->rs);
    free(s->pix);
    free(s->aug);
    free(s->aug_tmp);
    memset(s, 0, sizeof *s);
}

/* CIFAR's view: out(y, x) = src(y + oy, x' + ox) with x' = S-1-x when flipped; outside the
 * image the padding is pixel value 0 before normalisation, or the mirrored image's pixel. */
static void pad_crop(const Transform *t, const ImageView *src, int ox, int oy, int flip, float *dst) {
    const int S = t->out;
    const float *lut = t->lut;
    CHECK(src->w >= S && src->h >= S);
    for (int y = 0; y < S; y++) {
        const int sy = t->reflect ? transform_reflect_index(y + oy, S) : y + oy;
        for (int xx = 0; xx < S; xx++) {
            const int sx0 = (flip ? S - 1 - xx : xx) + ox, sx = t->reflect ? transform_reflect_index(sx0, S) : sx0;
            float *d = dst + ((size_t)y * (size_t)S + (size_t)xx) * 3;
            if (sy < 0 || sy >= S || sx < 0 || sx >= S) {
                for (int c = 0; c < 3; c++) d[c] = lut[c * 256];
            } else {
                const uint8_t *q = src->rgb + (size_t)sy * src->stride + (size_t)sx * 3;
                for (int c = 0; c < 3; c++) d[c] = lut[c * 256 + q[c]];
            }
        }
    }
}

/* pix [out][out][3] uint8 to dst, normalised, mirrored when flip. */
static void normalise(const Transform *t, const uint8_t *pix, int flip, float *dst) {
    const int S = t->out;
    const float *lut = t->lut;
    for (int y = 0; y < S; y++) {
        const uint8_t *row = pix + (size_t)y * S * 3;
        float *d = dst + (size_t)y * S * 3;
        for (int x = 0; x < S; x++) {
            const uint8_t *q = row + (size_t)(flip ? S - 1 - x : x) * 3;
            d[3 * x] = lut[q[0]];
            d[3 * x + 1] = lut[256 + q[1]];
            d[3 * x + 2] = lut[512 + q[2]];
        }
    }
}

void transform_apply(const Transform *t, const ImageView *src, int ox, int oy, int flip, PixelBox box, float *dst,
                     TransformScratch *s) {
    if (t->mode == TF_PAD_CROP) {
        pad_crop(t, src, ox, oy, flip, dst);
        return;
    }
    const size_t need = (size_t)t->out * t->out * 3;
    if (s->cap < need) {
        free(s->pix);
        s->pix = mallocCheck(need);
        s->cap = need;
    }
    /* resample_box reads rows of src->w pixels: a view with another stride is its own image */
    CHECK(src->stride == (size_t)src->w * 3);
    if (t->mode == TF_RRC) {
        resample_box(src->rgb, src->w, src->h, box, t->out, t->out, (PixelBox){0, 0, t->out, t->out}, s->pix, &s->rs);
        normalise(t, s->pix, flip, dst);
        return;
    }
    int rw, rh;
    resize_shorter(src->w, src->h, t->resize, &rw, &rh);
    const PixelBox win = centre_crop(rw, rh, t->out);
    resample_box(src->rgb, src->w, src->h, (PixelBox){0, 0, src->w, src->h}, rw, rh, win, s->pix, &s->rs);
    normalise(t, s->pix, 0, dst);
}

int transform_jpeg_denom(const Transform *t, PixelBox box, int w, int h) {
    if (t->mode == TF_PAD_CROP) return 1;
    const int bw = t->mode == TF_RRC ? box.w : w, bh = t->mode == TF_RRC ? box.h : h;
    const int need = t->mode == TF_RRC ? t->out : t->resize;
    for (int d = 8; d > 1; d /= 2)
        if (t->mode == TF_RRC ? bw / d >= need && bh / d >= need : (bw < bh ? bw : bh) / d >= need) return d;
    return 1;
}

PixelBox transform_scale_box(PixelBox b, int w, int h, int w2, int h2) {
    const double sx = (double)w2 / w, sy = (double)h2 / h;
    int x0 = (int)floor(b.x * sx), y0 = (int)floor(b.y * sy);
    int x1 = (int)ceil((b.x + b.w) * sx), y1 = (int)ceil((b.y + b.h) * sy);
    if (x1 > w2) x1 = w2;
    if (y1 > h2) y1 = h2;
    if (x0 >= x1) x0 = x1 - 1;
    if (y0 >= y1) y0 = y1 - 1;
    return (PixelBox){x0, y0, x1 - x0, y1 - y0};
}
