/* SPDX-License-Identifier: BSD-3-Clause */
/* pil_ops.h - the uint8 image operations torchvision's auto-augment policies and ColorJitter
 * apply to a PIL image (torchvision.transforms.functional on PIL, Pillow 9.4), with Pillow's
 * arithmetic: its fixed-point nearest-neighbour affine transform and rotate, Image.blend's
 * single-precision factor, the ITU-R 601-2 grey of convert("L"), the SMOOTH filter, ImageOps'
 * look-up tables, and the HSV conversion of Convert.c. Every function takes an RGB image of
 * h rows of w pixels, 3 bytes each, packed, and writes its result in place; `tmp` is scratch of
 * the image's size. */
#ifndef DDP_PIL_OPS_H
#define DDP_PIL_OPS_H

#include <stdint.h>

/* torchvision's _apply_op names, in the order of RandAugment's and TrivialAugmentWide's
 * augmentation spaces (Identity first); Invert after them (AutoAugment's policies only). */
enum {
    PIL_IDENTITY, PIL_SHEAR_X, PIL_SHEAR_Y, PIL_TRANSLATE_X, PIL_TRANSLATE_Y, PIL_ROTATE, PIL_BRIGHTNESS, PIL_COLOR,
    PIL_CONTRAST, PIL_SHARPNESS, PIL_POSTERIZE, PIL_SOLARIZE, PIL_AUTOCONTRAST, PIL_EQUALIZE, PIL_INVERT, PIL_NUM_OPS
};

/* The op's name as torchvision spells it ("ShearX"). */
const char *pil_op_name(int op);

/* torchvision.transforms.autoaugment._apply_op(img, op, magnitude, NEAREST, fill=None) on a
 * PIL image: the shears as F.affine with shear atan(magnitude) in degrees about (0, 0), the
 * translations by int(magnitude) pixels, Rotate by magnitude degrees about the centre, the
 * four enhancements with factor 1 + magnitude, Posterize to int(magnitude) bits, Solarize at
 * magnitude; outside the image is 0. */
void pil_apply_op(int op, double magnitude, uint8_t *img, int w, int h, uint8_t *tmp);

/* Pillow's Image.transform(size, AFFINE, m, NEAREST, fillcolor=0): out(x, y) is the input at
 * (m0 x' + m1 y' + m2, m3 x' + m4 y' + m5), x' = x + 0.5, y' = y + 0.5, truncated, 0 outside. */
void pil_affine(uint8_t *img, int w, int h, const double m[6], uint8_t *tmp);
/* torchvision's _get_inverse_affine_matrix(center, angle, translate, scale 1, shear), the
 * angles in degrees, in double precision as Python computes it: what F.affine hands Pillow,
 * and, in float32, the tensor path's grid (tensor_ops.h). */
void pil_inverse_affine(double cx, double cy, double angle, double tx, double ty, double shx, double shy, double m[6]);
/* Image.rotate(angle, NEAREST, expand=False, fillcolor=0), counter-clockwise degrees. */
void pil_rotate(uint8_t *img, int w, int h, double angle, uint8_t *tmp);

/* ImageEnhance's Brightness, Color, Contrast and Sharpness: Image.blend(degenerate, img, factor). */
void pil_brightness(uint8_t *img, int w, int h, double factor, uint8_t *tmp);
void pil_color(uint8_t *img, int w, int h, double factor, uint8_t *tmp);
void pil_contrast(uint8_t *img, int w, int h, double factor, uint8_t *tmp);
void pil_sharpness(uint8_t *img, int w, int h, double factor, uint8_t *tmp);

/* ImageOps' posterize, solarize, autocontrast, equalize and invert. */
void pil_posterize(uint8_t *img, int w, int h, int bits);
void pil_solarize(uint8_t *img, int w, int h, double threshold);
void pil_autocontrast(uint8_t *img, int w, int h);
void pil_equalize(uint8_t *img, int w, int h);
void pil_invert(uint8_t *img, int w, int h);

/* torchvision's F.adjust_hue on PIL: convert("HSV"), H += uint8(hue_factor * 255) modulo 256,
 * back to RGB; hue_factor in [-0.5, 0.5]. */
void pil_hue(uint8_t *img, int w, int h, double hue_factor);

#endif
