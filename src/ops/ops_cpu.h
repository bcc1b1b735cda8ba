/* SPDX-License-Identifier: BSD-3-Clause */
/* ops_cpu.h - the CPU kernels, forward and backward, of every operation a network
 * description (netspec.h) uses but the convolution (conv_cpu.h): batch norm, max pooling, blur,
 * a convolution's bias, the head (average pooling, softmax cross-entropy); the linear layer is
 * linear_cpu.h's.
 *
 * Layout conventions (the whole CPU backend follows them, conv_cpu.h included):
 *  - activations and their gradients are NHWC float32, contiguous: x[((n*H + h)*W + w)*C + c].
 *    "M" below is the number of pixels N*H*W, so a per-channel op sees an [M, C] matrix.
 *  - convolution weights are OIHW (PyTorch's order) inside the flat parameter buffer, so a
 *    checkpoint or a comparison against PyTorch needs no transposition.
 *  - gradients of parameters are ACCUMULATED (+=) into the flat gradient buffer, as in
 *    PyTorch, so gradient accumulation over micro-steps needs nothing extra; the caller zeroes.
 *  - all kernels use OpenMP over the threads set with omp_set_num_threads.
 *
 * Batch norm is split into phases (stats, apply, backward-reduce, backward-apply) so that the
 * model can all-reduce the per-channel sums between phases for synchronised batch norm. */
#ifndef DDP_OPS_CPU_H
#define DDP_OPS_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"   /* window_out_size */

/* ---- batch norm over [M, C] (training: batch statistics; eval: running statistics) ---- */

/* Per-channel sum and sum of squares of x, in double (exactness across ranks). */
void bn_stats(const float *x, size_t M, int C, double *sum, double *sumsq);

/* From sums over `count` values: mean, 1/sqrt(var_biased + eps), and the PyTorch running-stat
 * update with momentum and the unbiased variance (count/(count-1)). running_* may be NULL.
 * Per channel rules.h's bn_finalize_channel, which the CUDA backend shares. */
void bn_finalize_stats(const double *sum, const double *sumsq, double count, int C, float eps,
                       float momentum, float *mean, float *invstd, float *running_mean,
                       float *running_var);

/* y = gamma*(x-mean)*invstd + beta [+ residual] [then ReLU]. residual may be NULL. y may alias
 * nothing else. For evaluation, pass mean = running_mean and invstd from the running variance. */
void bn_apply(const float *x, float *y, size_t M, int C, const float *mean, const float *invstd,
              const float *gamma, const float *beta, const float *residual, int relu);

/* Backward, phase 1. g = dy masked by (y > 0) when relu (written into g, which may alias dy);
 * then per-channel sum_g = sum(g) and sum_gx = sum(g * xhat) in double. */
void bn_backward_reduce(const float *x, const float *y, const float *dy, float *g, size_t M, int C,
                        const float *mean, const float *invstd, int relu, double *sum_g,
                        double *sum_gx);

/* Batch norm and an activation function (act_cpu.h's fn, slope) in one pass: y = f(z) with z
 * bn_apply's output without residual or ReLU, bit for bit. y may alias nothing else. */
void bn_apply_act(const float *x, float *y, size_t M, int C, const float *mean, const float *invstd,
                  const float *gamma, const float *beta, int fn, float slope);

/* Backward, phase 1 after bn_apply_act: g = dy * f'(z) (written into g, which may alias dy), z
 * recomputed from x as bn_apply_act computed it instead of kept; then sum_g and sum_gx as
 * bn_backward_reduce's. The same bits as act_backward on z followed by bn_backward_reduce
 * without ReLU, with one pass over the map fewer, and no z kept between forward and backward. */
void bn_backward_reduce_act(const float *x, const float *dy, float *g, size_t M, int C, const float *mean,
                            const float *invstd, const float *gamma, const float *beta, int fn, float slope,
                            double *sum_g, double *sum_gx);

/* Backward, phase 2 from (possibly all-reduced) sums over `count` values:
 * dgamma += sum_gx (local sums!), dbeta += sum_g (local), and
 * dx = gamma*invstd*(g - sum_g/count - xhat*sum_gx/count). dgamma/dbeta take the LOCAL sums and
 * dx the GLOBAL ones, so the caller passes both. dx may alias g. */
void bn_backward_apply(const float *x, const float *g, float *dx, size_t M, int C,
                       const float *mean, const float *invstd, const float *gamma,
                       const double *local_sum_g, const double *local_sum_gx,
                       const double *global_sum_g, const double *global_sum_gx, double count,
                       float *dgamma, float *dbeta);

/* ---- a convolution's bias over [M, C] ---- */

/* y[m,c] += b[c]. */
void bias_add(float *y, const float *b, size_t M, int C);
/* db[c] += sum over m of dy[m,c]: per fixed block of rows in double, the blocks added in order
 * (as bn_stats), then rounded once and added. */
void bias_grad(const float *dy, float *db, size_t M, int C);

/* ---- max pooling: nn.MaxPool2d(k, stride, pad) (torchvision's ResNets: 3x3, stride 2, padding 1) ---- */

/* y[N,Ho,Wo,C] = the maximum of each window of x[N,H,W,C] (NHWC), padding never chosen, and
 * arg[N,Ho,Wo,C] the index (h * W + w) of the input pixel it came from; Ho and Wo as
 * pool_out_size (backend.h) for ceil_mode. Among equal values the first in the window's row-major order
 * wins and a NaN wins over any number (the later of two NaNs), as PyTorch's CPU kernel chooses,
 * so the gradient goes where PyTorch sends it. */
void maxpool_forward(const float *x, float *y, int32_t *arg, int N, int H, int W, int C, int k, int stride, int pad,
                     int ceil_mode);
/* dx[N,H,W,C] = the sum of dy over the outputs whose arg is that pixel (overwritten). */
void maxpool_backward(const float *dy, const int32_t *arg, float *dx, int N, int H, int W, int C, int k, int stride,
                      int pad, int ceil_mode);

/* ---- blur ---- */

/* FFCV's blur (netspec.h NODE_BLUR): y = x convolved per channel with [1 2 1]^T [1 2 1] / 16,
 * stride 1, zero padding 1, NHWC. The kernel is symmetric and the padding keeps the shape, so
 * the operation is its own adjoint: the backward is blur3(dy, dx). The weights are powers of
 * two: only the additions round. */
void blur3(const float *x, float *y, int N, int H, int W, int C);

/* ---- head: global average pool, softmax cross-entropy (the linear layer: linear_cpu.h) ---- */

/* y[N,C] = mean over HW of x[N,HW,C]. */
void avgpool_forward(const float *x, float *y, int N, int HW, int C);
/* dx[N,HW,C] = dy[N,C] / HW (overwritten). */
void avgpool_backward(const float *dy, float *dx, int N, int HW, int C);

/* Mean softmax cross-entropy over N rows of K logits. Returns the loss; if dlogits != NULL it
 * receives d(loss * scale)/dlogits. `correct` (may be NULL) gets the number of rows whose argmax
 * equals the label. Labels must be in [0, K). With label smoothing E (nn.CrossEntropyLoss's
 * label_smoothing) a row's loss is (1-E) * (-log p[label]) + E * mean over k of (-log p[k]),
 * and its gradient p - ((1-E) * onehot + E/K); E = 0 is the plain loss, bit for bit.
 * mix < 1 (mixup and cutmix, data/mix.h): row n's target is mix * t(labels[n]) +
 * (1 - mix) * t(labels[n - 1]) (labels[N - 1] for row 0; t the smoothed one-hot), so its loss
 * is mix * CE(labels[n]) + (1 - mix) * CE(labels[n - 1]), torch's CrossEntropyLoss with those
 * probabilities as the target; a row is correct when its argmax is the label of the larger
 * weight (its own at mix >= 0.5). mix = 1 is the loss without mixing, bit for bit. */
float softmax_xent(const float *logits, const int *labels, int N, int K, float scale, float smoothing, float mix,
                   float *dlogits, int *correct);

#endif
