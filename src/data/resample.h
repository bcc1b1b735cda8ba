/* SPDX-License-Identifier: BSD-3-Clause */
/* resample.h - resizing uint8 RGB images the way torchvision's transforms do on PIL images.
 *
 * torchvision's RandomResizedCrop, Resize and CenterCrop of a PIL image come down to Pillow's
 * Image.resize(size, BILINEAR) of an integer box of the image: a separable resampling with the
 * triangle filter widened by the scale factor when it shrinks (so a downscale averages every
 * source pixel, "antialiased"), each pass in 22-bit fixed point rounded to uint8, horizontal
 * first. resample_box computes the same arithmetic, so its pixels are Pillow's (the suite checks
 * them against torchvision's), and only the part of the output asked for: a centre crop of a
 * resized image is the resize of its window, with no pixel computed to be thrown away. */
#ifndef DDP_RESAMPLE_H
#define DDP_RESAMPLE_H

#include <stddef.h>
#include <stdint.h>

/* A rectangle of pixels: columns [x, x + w), rows [y, y + h). The offsets are 64-bit because a
 * window of a resized image can lie past 2^31: Resize(4096) of a 1 x 600,000 image is
 * 2,457,600,000 pixels long, of which `ddptrain-data import` computes only the centre. */
typedef struct {
    int64_t x, y;
    int w, h;
} PixelBox;

/* Buffers the passes grow and reuse; zero-initialise, free with resample_scratch_free. One per
 * thread. */
typedef struct {
    int32_t *kx, *ky;      /* fixed-point weights, ksize per output column / row */
    int *bx, *by;          /* first source column / row and tap count per output column / row */
    double *w;             /* the weights before rounding */
    uint8_t *tmp;          /* the horizontal pass's rows */
    size_t cap_kx, cap_ky, cap_b, cap_w, cap_tmp;
} ResampleScratch;

void resample_scratch_free(ResampleScratch *s);

/* dst [win.h][win.w][3] = the window `win` of the box `box` of src (an image of src_w x src_h
 * pixels, rows of src_w * 3 bytes) resized to out_w x out_h with Pillow's bilinear filter, as
 * torchvision's resized_crop does it on a PIL image: img.crop(box).resize((out_w, out_h)), so
 * the filter reads nothing outside the box (Image.resize's own box argument would read past its
 * edges). box lies within the image, win within the out_w x out_h output (either side may pass
 * 2^31). */
void resample_box(const uint8_t *src, int src_w, int src_h, PixelBox box, int64_t out_w, int64_t out_h,
                  PixelBox win, uint8_t *dst, ResampleScratch *s);

#endif
