/* SPDX-License-Identifier: BSD-3-Clause */
/* jpegs.h - JPEG bytes in shards: the encoder `ddptrain-data import --encoding jpeg` stores
 * images with, and the decoder that reads them back (inspect, the data loader), both through
 * libjpeg-turbo and both on memory. No HDF5 here: shards.h reads and writes the bytes.
 *
 * Errors are one line without a file name (the caller prefixes "<shard>: sample <i>: ") and
 * never end the process. A stored JPEG is data ddptrain wrote itself, so the decoder is
 * stricter than a photo viewer: any warning libjpeg raises (corrupt data, a missing marker,
 * the data ending before the image, where libjpeg would carry on and pad with grey) is an
 * error, as are CMYK and images of more than IMAGE_MAX_PIXELS pixels. */
#ifndef DDP_JPEGS_H
#define DDP_JPEGS_H

#include <stddef.h>
#include <stdint.h>

#include "image.h"

#define JPEG_QUALITY_DEFAULT 90
#define JPEG_ERR_LEN 256   /* room for any of the one-line errors below */

/* 1 when this build has libjpeg; the functions below otherwise fail with a line naming it. */
int jpegs_available(void);

/* Encodes rgb (h rows of w RGB pixels) as a baseline JPEG at quality 1..100 with libjpeg's
 * defaults otherwise (4:2:0 chroma, the integer DCT, the standard Huffman tables, a JFIF
 * header without timestamps), so the same pixels always give the same bytes. *out is
 * malloc'd (free it with free()), *len its length. 0, or -1 with err. */
int jpeg_encode_rgb(const uint8_t *rgb, int w, int h, int quality, uint8_t **out, size_t *len,
                    char *err, size_t errlen);

/* The size a w x h JPEG decodes to at 1/denom (libjpeg's DCT scaling: ceil(w / denom)). */
void jpeg_scaled_size(int w, int h, int denom, int *out_w, int *out_h);

/* Decodes a JPEG at scale 1/denom (denom 1, 2, 4 or 8: libjpeg's scale_num = 1,
 * scale_denom = denom, so the IDCT itself makes the smaller image, much faster than decoding
 * and shrinking) to RGB: out->rgb malloc'd, out->w/out->h as decoded. want_w x want_h: the
 * full-scale size the shard records for it (`sizes`), checked against the JPEG's header
 * before anything is decoded, at every scale (0, 0: any size). 0, or -1 with err (out->rgb
 * NULL then). */
int jpeg_decode_scaled(const uint8_t *data, size_t len, int denom, int want_w, int want_h, ImageRGB *out,
                       char *err, size_t errlen);

/* The same into the caller's buffer dst of cap bytes, which must hold the decoded image
 * (*w x *h x 3; a larger image is an error, nothing written past cap). No allocation. */
int jpeg_decode_scaled_into(const uint8_t *data, size_t len, int denom, int want_w, int want_h, uint8_t *dst,
                            size_t cap, int *w, int *h, char *err, size_t errlen);

#endif
