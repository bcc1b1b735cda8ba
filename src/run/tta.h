/* SPDX-License-Identifier: BSD-3-Clause */
/* tta.h - test-time augmentation of the evaluation (--tta): the logits of several views of
 * each test image averaged, as airbench's evaluation does (tta_level 1 and 2):
 *
 *   flip:        0.5 * f(x) + 0.5 * f(flip(x))                                    (2 views)
 *   flip_shift:  0.5 * m(x) + 0.5 * mean(m(shift(x, -1)), m(shift(x, +1)))        (6 views)
 *                with m(v) = 0.5 * f(v) + 0.5 * f(flip(v))
 *
 * flip(x) mirrors the image left to right; shift(x, s) moves it by s pixels along both axes
 * with reflection at the borders: with p = F.pad(x, (1, 1, 1, 1), mode="reflect"),
 * shift(x, -1) = p[:, :, 0:H, 0:W] (the content moves one pixel down and right) and
 * shift(x, +1) = p[:, :, 2:H+2, 2:W+2] (one pixel up and left). The views are made on the host
 * from the normalised batch (NHWC) and each goes through an ordinary evaluation forward; the
 * averaging, the predictions (first maximum) and the cross-entropy of the averaged logits are
 * computed on the host (float32 logits, the loss in double). */
#ifndef DDP_TTA_H
#define DDP_TTA_H

#include "eval_tally.h"
#include "model/model.h"

enum { TTA_NONE = 0, TTA_FLIP = 1, TTA_FLIP_SHIFT = 2 };

/* "none", "flip", "flip_shift" -> TTA_*, or -1. */
int tta_parse(const char *name);
/* Views per image: 1, 2 or 6. */
int tta_views(int mode);

/* View v (0: the image, 1: flipped, 2: shifted by -1, 3: that flipped, 4: shifted by +1, 5:
 * that flipped) of N NHWC images of S x S pixels and C channels, into out (host memory). */
void tta_view(const float *x, float *out, int N, int S, int C, int v);

/* The averaged logits of N images (host memory, any N: forwards of at most m->max_batch
 * images) into logits [N, num_classes] (host). scratch: host memory of m->max_batch images. */
void tta_logits(Model *m, int mode, const float *x, const int *labels, int N, float *scratch, float *logits);

/* model_evaluate with test-time augmentation: *correct (exact) and *loss_sum (the sum of the
 * per-image cross-entropy of the averaged logits) over N images on a host backend. scratch as
 * tta_logits, logits of m->max_batch * num_classes floats. tally (may be NULL) counts the
 * averaged logits too (top-5, per class). */
void tta_evaluate(Model *m, int mode, const float *x, const int *labels, int N, float *scratch, float *logits,
                  long *correct, double *loss_sum, EvalTally *tally);

#endif
