/* SPDX-License-Identifier: BSD-3-Clause */
/* transform_aug.c - see transform_aug.h. */
#include "transform_aug.h"

#include <stdlib.h>
#include <string.h>

#include "crops.h"
#include "base/util.h"

/* TF_PAD_CROP's view in uint8: out(y, x) = src(y + oy, x' + ox), x' = S-1-x when flipped,
 * outside the image 0 (RandomCrop's padding fill) or, with reflect, the mirrored image's pixel
 * (RandomCrop's padding_mode="reflect"), as transform.c's pad_crop. */
static void pad_crop_u8(const ImageView *src, int S, int ox, int oy, int flip, int reflect, uint8_t *out) {
    CHECK(src->w >= S && src->h >= S);
    for (int y = 0; y < S; y++)
        for (int x = 0; x < S; x++) {
            int sy = y + oy, sx = (flip ? S - 1 - x : x) + ox;
            if (reflect) {
                sy = transform_reflect_index(sy, S);
                sx = transform_reflect_index(sx, S);
            }
            uint8_t *d = out + ((size_t)y * S + x) * 3;
            if (sy < 0 || sy >= S || sx < 0 || sx >= S) memset(d, 0, 3);
            else memcpy(d, src->rgb + (size_t)sy * src->stride + (size_t)sx * 3, 3);
        }
}

static void mirror(uint8_t *p, int S) {
    for (int y = 0; y < S; y++) {
        uint8_t *row = p + (size_t)y * S * 3;
        for (int a = 0, b = S - 1; a < b; a++, b--) {
            uint8_t t[3];
            memcpy(t, row + 3 * a, 3);
            memcpy(row + 3 * a, row + 3 * b, 3);
            memcpy(row + 3 * b, t, 3);
        }
    }
}

void transform_apply_aug(const Transform *t, const ImageView *src, int ox, int oy, int flip, PixelBox box, float *dst,
                         TransformScratch *s, const PixelAug *a, Rng *r) {
    const int S = t->out;
    const size_t need = (size_t)S * S * 3;
    if (s->aug_cap < need) {
        free(s->aug);
        free(s->aug_tmp);
        s->aug = mallocCheck(need);
        s->aug_tmp = mallocCheck(need);
        s->aug_cap = need;
    }
    if (t->mode == TF_PAD_CROP) {
        pad_crop_u8(src, S, ox, oy, flip, t->reflect, s->aug);
    } else {
        CHECK(src->stride == (size_t)src->w * 3);   /* resample_box reads rows of src->w pixels */
        if (t->mode == TF_RRC) {
            resample_box(src->rgb, src->w, src->h, box, S, S, (PixelBox){0, 0, S, S}, s->aug, &s->rs);
            if (flip) mirror(s->aug, S);
        } else {
            int rw, rh;
            resize_shorter(src->w, src->h, t->resize, &rw, &rh);
            resample_box(src->rgb, src->w, src->h, (PixelBox){0, 0, src->w, src->h}, rw, rh, centre_crop(rw, rh, S), s->aug,
                         &s->rs);
        }
    }
    autoaug_apply(a, r, s->aug, S, S, s->aug_tmp, NULL);
    const float *lut = t->lut;
    for (size_t i = 0; i < (size_t)S * S; i++)
        for (int c = 0; c < 3; c++) dst[3 * i + c] = lut[c * 256 + s->aug[3 * i + c]];
}
