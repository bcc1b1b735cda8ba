/* SPDX-License-Identifier: BSD-3-Clause */
/* whiten.h - airbench's whitening initialisation of a first convolution ("whiten": true in a
 * network file, kind_conv.c): its 2 d filters (d = 3 x kh x kw, the values of one patch) are
 * the eigenvectors of the patches' second moment E[x x^T] over the training images, scaled by
 * 1 / sqrt(eigenvalue + eps), in order of decreasing eigenvalue, followed by their negatives:
 *
 *   airbench (utils.py): get_patches (every kh x kw patch at stride 1 of the normalised
 *   images), cov = X^T X / n, torch.linalg.eigh, flipped to decreasing order,
 *   W = cat(V / sqrt(L + eps), -V / sqrt(L + eps)).
 *
 * Here the sums are in double and the eigenvectors come from the cyclic Jacobi method in
 * double (no LAPACK): an eigenvector's sign is free in any solver, so each is turned to make its
 * largest component positive; with its negative beside it the layer is the same up to the order
 * of its filters. The sums can be added across ranks (an all-reduce of d*d + 1 doubles) before
 * whiten_weights, which is deterministic: the same sums give the same weights on every rank. */
#ifndef DDP_WHITEN_H
#define DDP_WHITEN_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* The kernel (kh, kw) of the model's whitening convolution: 1 when it has one (it reads the
 * image; netspec refuses one elsewhere), else 0. */
int whiten_kernel(const Model *m, int *kh, int *kw);

/* sums[d*d] += x x^T over every kh x kw patch at stride 1 of n images (uint8 [n][S][S][3],
 * normalised through lut[c * 256 + v]), x indexed as the weight's [c][i][j]; *count += the
 * patches. */
void whiten_patch_moments(const uint8_t *img, size_t n, int S, const float *lut, int kh, int kw, double *sums,
                          double *count);

/* w [2d][d] (OIHW of [2d][3][kh][kw]) from the sums: the eigenvectors of sums / count scaled
 * by 1 / sqrt(eigenvalue + eps), then their negatives. Returns 0, or -1 when the Jacobi sweeps
 * do not converge (a matrix of NaN). */
int whiten_weights(const double *sums, double count, int d, double eps, float *w);

/* The whitening convolution's weight of m set from the sums (on m's backend). 0, or -1. */
int model_whiten(Model *m, const double *sums, double count, double eps);

#endif
