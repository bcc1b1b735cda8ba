/* SPDX-License-Identifier: BSD-3-Clause */
/* image_fit.h - torchvision's Resize(S) of a PIL image with the aspect kept, for the JPEG
 * shards of `ddptrain-data import --encoding jpeg` (stored above the crop: a training crop
 * then chooses its box from the whole image, not from a square that lost the sides).
 *
 * The shorter side becomes S and the longer int(S * long / short), with PIL's BILINEAR
 * arithmetic exactly as image_resize_crop (image.h) computes it; a longer side past 2S keeps
 * its centre 2S (offset int(round((long' - 2S) / 2)), half to even, as CenterCrop), so a
 * panorama does not make one sample hundreds of times the size of the others. */
#ifndef DDP_IMAGE_FIT_H
#define DDP_IMAGE_FIT_H

#include "image.h"

/* The size image_fit makes of a w x h image: *ow x *oh. */
void image_fit_size(int w, int h, int S, int *ow, int *oh);

/* out->rgb malloc'd, out->w x out->h as image_fit_size says. */
void image_fit(const ImageRGB *in, int S, ImageRGB *out);

#endif
