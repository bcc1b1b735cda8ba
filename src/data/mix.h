/* SPDX-License-Identifier: BSD-3-Clause */
/* mix.h - torchvision's reference RandomMixup and RandomCutmix (references/classification/
 * transforms.py, p = 1.0), through RandomChoice between the two when both are on, applied to a
 * process batch where the loader assembles it:
 *
 *   the batch rolled by one (sample i mixed with sample i - 1, sample 0 with the last);
 *   lambda = Dirichlet([alpha, alpha])[0], that is Beta(alpha, alpha);
 *   mixup:  x = lambda * x + (1 - lambda) * rolled x;
 *   cutmix: a box centred at (randint(W), randint(H)) with half sides int(r W), int(r H),
 *           r = 0.5 sqrt(1 - lambda), clamped to the image, pasted from the rolled batch;
 *           lambda recomputed as 1 - box area / image area.
 *
 * The targets become lambda * onehot(y) + (1 - lambda) * onehot(rolled y); the loss takes
 * them as the labels and lambda (ops_cpu.h's softmax_xent), never as one-hot vectors. */
#ifndef DDP_MIX_H
#define DDP_MIX_H

#include <stddef.h>
#include <stdint.h>

#include "base/rng.h"

enum { MIX_NONE = 0, MIX_MIXUP = 1, MIX_CUTMIX = 2 };

/* One batch's draws and what they make. */
typedef struct {
    int kind;                 /* MIX_NONE (both alphas 0), MIX_MIXUP or MIX_CUTMIX */
    double lambda_drawn;      /* the Beta draw */
    int rx, ry;               /* cutmix: the box's centre drawn */
    int x1, y1, x2, y2;       /* cutmix: the box pasted, columns [x1, x2), rows [y1, y2) */
    double lambda;            /* the weight of the batch's own labels */
} MixDraws;

/* The stream of batch b of epoch `epoch` on rank `rank`. */
void mix_stream(Rng *r, uint64_t seed, int epoch, int rank, size_t b);

/* Beta(alpha, alpha) as Dirichlet([alpha, alpha])[0]: two Gamma(alpha) draws, G1 / (G1 + G2),
 * computed in log space so that small alphas (0.2) never give 0 / 0. alpha > 0. */
double mix_beta(Rng *r, double alpha);

/* The draws of one batch of w x h images: which transform (a fair coin when both alphas are
 * positive, as RandomChoice), lambda, and cutmix's box. */
MixDraws mix_draw(Rng *r, double mixup_alpha, double cutmix_alpha, int w, int h);

/* Applies the draws to the NHWC batch x of n images of w x h x 3 floats in place. */
void mix_apply(const MixDraws *d, float *x, int n, int w, int h);

#endif
