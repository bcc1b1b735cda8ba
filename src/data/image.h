/* SPDX-License-Identifier: BSD-3-Clause */
/* image.h - JPEG and PNG files to 8-bit RGB, and torchvision's Resize(S) + CenterCrop(S), for
 * `ddptrain-data import` and `ddptrain-predict`.
 *
 * The format is recognised by the first bytes (JPEG: FF D8 FF; PNG: the 8-byte signature), not
 * by the file name. What comes out is what PIL's Image.open(f).convert("RGB") gives:
 *   - grey becomes R = G = B; palette images are looked up; 1, 2 and 4-bit grey is scaled to
 *     0..255 (x255, x85, x17);
 *   - alpha (an alpha channel or a tRNS chunk) is dropped, not composited;
 *   - 16-bit PNG samples keep their high byte (v >> 8), as PIL does for 16-bit colour and
 *     grey+alpha PNGs (PIL clips 16-bit grey at 255 instead; this keeps the image);
 *   - no gamma, colour profile or EXIF orientation is applied (PIL applies none on open);
 *   - CMYK and YCCK JPEGs are refused, and PNG palette indices past the palette (PIL gives
 *     such an index the grey of its value, libpng black: refused rather than guessed).
 * A truncated file is an error (libjpeg would pad the image with grey and warn). */
#ifndef DDP_IMAGE_H
#define DDP_IMAGE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define IMAGE_MAX_PIXELS (1ll << 27)   /* larger images are refused (PIL: 178956970) */

typedef struct {
    int w, h;
    uint8_t *rgb;   /* h rows of w RGB pixels, malloc'd */
} ImageRGB;

/* 1 when this build decodes the format; names the missing libraries (or "" when none). */
int image_have_jpeg(void);
int image_have_png(void);
const char *image_missing_libs(void);

/* Decodes the image of the stream f (at its start, seekable: a regular file) into out
 * (out->rgb malloc'd; free it with free()). Images of more than max_pixels pixels are refused.
 * The file is read through the decoders' small buffers, never held whole: the memory taken is
 * that of the decoded image, whatever the file's size, and of a file that is no image only its
 * first 8 bytes are read. Returns 0, or -1 with one line in err (without the file name: the
 * caller prefixes it). */
int image_decode_file(FILE *f, long long max_pixels, ImageRGB *out, char *err, size_t errlen);
/* image_decode_file on the file at path, with one line in err naming it (QUOTED) on failure.
 * What is not a regular file is refused before it is opened (opening a FIFO for reading waits
 * for a writer, forever, and opening a device may act on it), a symbolic link to a missing file
 * is named as such, and the file is read 64 kB per system call (for shared file systems). */
int image_decode_path(const char *path, long long max_pixels, ImageRGB *out, char *err, size_t errlen);
/* The same on a file's bytes in memory. */
int image_decode(const uint8_t *data, size_t size, long long max_pixels, ImageRGB *out,
                 char *err, size_t errlen);

/* The S x S image torchvision's Resize(S) + CenterCrop(S) make of `in` on a PIL image: the
 * shorter side scaled to S (the longer to int(S * long / short)) with PIL's BILINEAR resampling
 * (a triangle filter widened by the scale factor when shrinking, so antialiased; 22-bit fixed
 * point coefficients, horizontal pass first, as PIL does), then the centre S x S, offsets
 * int(round((size - S) / 2)) (Python's rounding: half to even). An image already S x S is
 * copied. out: S*S*3 bytes. */
void image_resize_crop(const ImageRGB *in, int S, uint8_t *out);

#endif
