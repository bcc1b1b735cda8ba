/* SPDX-License-Identifier: BSD-3-Clause */
/* ema.h - an exponential moving average of the model's parameters and batch-norm buffers, as
 * torch.optim.swa_utils.AveragedModel(model, use_buffers=True) keeps it with the EMA average
 * (avg_fn = lambda e, p, n: D * e + (1 - D) * p, get_ema_avg_fn(D) in PyTorch >= 2.1):
 *
 *   update: n_averaged == 0: every tensor copied from the model;
 *           otherwise, per element, e = D * e + (1 - D) * p, in float32: the two products
 *           rounded, then their sum (D and 1 - D as float32, 1 - D computed in double);
 *           then n_averaged += 1.
 *   The buffers are the running means and variances (float32, the same formula) and every
 *   layer's num_batches_tracked (int64: the formula in float32, truncated toward zero, as
 *   PyTorch's copy_ of a float tensor into a long one does).
 *
 * The arithmetic runs on the model's backend through existing operations (copy,
 * scale_inplace, add_inplace), so the average lives where the model does. Updates only read
 * the model; ema_swap_in / ema_swap_out put the average into the model (for an evaluation)
 * and the model's own state back, bit for bit. */
#ifndef DDP_EMA_H
#define DDP_EMA_H

#include <stdint.h>

#include "model.h"

typedef struct {
    const Backend *be;
    double decay;
    long n_averaged;          /* AveragedModel.n_averaged: updates so far */
    size_t num_params, num_buffers;
    float *params, *buffers;  /* backend memory, the model's layout */
    int n_bn;
    int64_t *nbt;             /* host: num_batches_tracked per batch-norm layer (bn_info order) */
    float *tmp;               /* backend scratch of max(num_params, num_buffers) floats */
    float *d_decay, *d_rest;  /* backend scalars (float)D and (float)(1 - D) */
    float *d_minus1;          /* backend scalar -1 (ema_lerp) */
    float *saved_params, *saved_buffers;   /* the model's own while the average is in it */
    int64_t *saved_nbt;
    int swapped;
} Ema;

/* An empty average (n_averaged 0) for m's layout on m's backend; 0 <= decay < 1 (0: a copy of the weights). */
void ema_init(Ema *e, const Model *m, double decay);
void ema_free(Ema *e);

/* A new decay for the next updates (0 <= decay < 1): Lookahead's, which changes at every pull. */
void ema_set_decay(Ema *e, double decay);

/* torch's avg.lerp_(p, weight) over the parameters and buffers (not num_batches_tracked), as
 * airbench's Lookahead updates its copy: avg + w * (p - avg) when w < 0.5, else
 * p - (p - avg) * (1 - w), w and 1 - w in float32; n_averaged += 1. Changes the decay's scalars:
 * ema_set_decay before the next ema_update. */
void ema_lerp(Ema *e, const Model *m, double weight);

/* AveragedModel.update_parameters(m). */
void ema_update(Ema *e, const Model *m);

/* The average into m (parameters, buffers, num_batches_tracked), m's own kept; then back. */
void ema_swap_in(Ema *e, Model *m);
void ema_swap_out(Ema *e, Model *m);

/* Host copies for checkpoints: num_params and num_buffers floats, n_bn counts. */
void ema_download(const Ema *e, float *params, float *buffers, int64_t *nbt);
void ema_upload(Ema *e, const float *params, const float *buffers, const int64_t *nbt, long n_averaged);

#endif
