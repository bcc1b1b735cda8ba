/* SPDX-License-Identifier: BSD-3-Clause */
/* tensor_ops.h - the uint8 image operations of torchvision 0.14's autoaugment._apply_op on a
 * tensor (transforms/functional_tensor.py), the path AugMix takes: it turns its PIL image into a
 * tensor first, so its ops are these and not Pillow's (pil_ops.h). Float32 arithmetic as torch
 * does it on the CPU: _blend's ratio * img1 + (1 - ratio) * img2 clamped and truncated, the
 * grey of rgb_to_grayscale, grid_sample's bilinear sampling rounded half to even. Images are h
 * rows of w RGB pixels, 3 bytes each, packed, written in place; `tmp` is scratch of their size. */
#ifndef DDP_TENSOR_OPS_H
#define DDP_TENSOR_OPS_H

#include <stdint.h>

/* _apply_op(img, op, magnitude, BILINEAR, fill=None) for a uint8 tensor, op one of pil_ops.h's
 * PIL_* (Identity and Invert included): the shears about the top-left corner, the translations
 * by int(magnitude) pixels and Rotate about the centre through F_t.affine's grid and
 * grid_sample (bilinear, align_corners=False, zeros outside); the enhancements at 1 +
 * magnitude; Posterize to int(magnitude) bits; Solarize at magnitude. */
void tensor_apply_op(int op, double magnitude, uint8_t *img, int w, int h, uint8_t *tmp);

/* F_t.affine(img, matrix, "bilinear") with the inverse matrix of pil_inverse_affine (the tensor
 * convention: the centre is relative to the image's centre): theta in float32, the grid of
 * _gen_affine_grid, grid_sample as torch's vectorised CPU kernel computes it (its multiply-adds
 * fused: fmaf), rounded half to even. */
void tensor_affine(uint8_t *img, int w, int h, const double m[6], uint8_t *tmp);

#endif
