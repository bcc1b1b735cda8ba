/* SPDX-License-Identifier: BSD-3-Clause */
/* transform.h - a sample's network input made from its stored image: the float32 NHWC pixels,
 * normalised through the loader's table, of one of three views:
 *
 *   TF_PAD_CROP  CIFAR's augmentation: the S x S image padded with zeros (or by reflection,
 *                F.pad(mode='reflect'): airbench's translate), a crop of its own size at the
 *                plan's offset, flipped when the plan says (data/README.md);
 *   TF_RRC       torchvision's RandomResizedCrop: the plan's box of the image resized to
 *                out x out with Pillow's bilinear filter (resample.h), flipped when the plan says;
 *   TF_CENTRE    torchvision's Resize(resize) + CenterCrop(out): the shorter side scaled to
 *                `resize`, the centre out x out kept (only that window is computed).
 *
 * The draws (offsets, boxes, flips) are made by the loader's plan; nothing here is random, so a
 * sample's pixels depend on its plan alone, whichever thread makes them. */
#ifndef DDP_TRANSFORM_H
#define DDP_TRANSFORM_H

#include <stddef.h>
#include <stdint.h>

#include "resample.h"

enum { TF_PAD_CROP = 0, TF_RRC = 1, TF_CENTRE = 2 };

typedef struct {
    int mode;
    int out;                /* output height and width */
    int resize;             /* TF_CENTRE: the shorter side's length before the crop */
    const float *lut;       /* [3][256]: the normalised value of each pixel value per channel */
    int reflect;            /* TF_PAD_CROP: the padding mirrors the image (index -1 reads 1, S reads S - 2) */
} Transform;

/* An image as stored or decoded: h rows of w RGB pixels, `stride` bytes apart. */
typedef struct {
    const uint8_t *rgb;
    int w, h;
    size_t stride;
} ImageView;

/* F.pad(mode="reflect") of an S-pixel row at index i in [-S + 1, 2S - 2]: the edge pixel is
 * not repeated (index -1 reads 1, S reads S - 2). */
static inline int transform_reflect_index(int i, int S) { return i < 0 ? -i : i >= S ? 2 * S - 2 - i : i; }

/* A worker's buffers, grown as needed; zero-initialise, free with transform_scratch_free. */
typedef struct {
    ResampleScratch rs;
    uint8_t *pix;           /* the out x out view before normalisation */
    size_t cap;
    uint8_t *aug, *aug_tmp; /* transform_aug.h: the flipped view and the ops' scratch */
    size_t aug_cap;
} TransformScratch;

void transform_scratch_free(TransformScratch *s);

/* dst [out][out][3] from src: TF_PAD_CROP takes the crop offset (ox, oy) and flip (src is
 * out x out); TF_RRC `box` (within src) and flip; TF_CENTRE neither. */
void transform_apply(const Transform *t, const ImageView *src, int ox, int oy, int flip, PixelBox box, float *dst,
                     TransformScratch *s);

/* The DCT scaling (1, 2, 4 or 8: libjpeg's scale 1/denom) a JPEG of w x h pixels can be decoded
 * at for this view: the largest that still leaves the box (TF_RRC) or the shorter side
 * (TF_CENTRE) at least the output's size, so the resize after it still only shrinks; 1 for
 * TF_PAD_CROP. */
int transform_jpeg_denom(const Transform *t, PixelBox box, int w, int h);
/* `box` of a w x h image carried to the same image decoded at w2 x h2 (covering at least the
 * same area, within the image). */
PixelBox transform_scale_box(PixelBox box, int w, int h, int w2, int h2);

#endif
