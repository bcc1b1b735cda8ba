/* SPDX-License-Identifier: BSD-3-Clause */
/* optim.h - SGD with momentum and weight decay, PyTorch's exact update rule, over the flat
 * parameter and gradient buffers:
 *   d = g + weight_decay * p;  buf = momentum * buf + d  (buf = d on the first step);  p -= lr * buf
 * or with Nesterov momentum (torch.optim.SGD(nesterov=True)) p -= lr * (d + momentum * buf).
 * The arithmetic is the backend's (Backend.sgd_step); buf lives in the backend's memory.
 *
 * Parameter groups, as PyTorch's optimizer param_groups: slices of the flat buffers with their
 * own weight decay and a multiplier of the step's learning rate (the group's lr is
 * (float)(lr * lr_mult), computed in double as PyTorch's group lr is a Python float). Without
 * groups the whole buffer is one group with the optimizer's weight decay and multiplier 1. */
#ifndef DDP_OPTIM_H
#define DDP_OPTIM_H

#include <stddef.h>

#include "ops/backend.h"

struct Model;

typedef struct {
    size_t offset, n;   /* the slice [offset, offset + n) of params, grads and buf */
    float weight_decay;
    double lr_mult;
} SgdGroup;

typedef struct {
    const Backend *be;
    size_t n;
    float momentum, weight_decay;
    int nesterov;       /* 0 unless set after sgd_init */
    SgdGroup *group;    /* NULL: one group, all n elements (sgd_set_groups) */
    int n_group;
    float *buf;         /* momentum buffer, zero until the first step (then equal to d) */
    long steps;
} SGD;

void sgd_init(SGD *o, size_t n, float momentum, float weight_decay);   /* on backend_cpu */
void sgd_init_on(SGD *o, const Backend *be, size_t n, float momentum, float weight_decay);
/* Replace the single group by n_group slices (copied), which must cover [0, o->n) in order
 * without gaps or overlaps. */
void sgd_set_groups(SGD *o, const SgdGroup *group, int n_group);
/* The groups of --no_decay_1d and --bn_bias_lr_mult over a model's parameter tensors: weight
 * decay 0 for every 1-D tensor (batch-norm weights and biases, the linear bias) when
 * no_decay_1d, learning rate times bn_bias_lr_mult for the batch-norm biases; neighbouring
 * tensors with equal settings share one group. Installs them with sgd_set_groups unless they
 * come to a single group of the optimizer's own settings (the defaults: nothing changes).
 * Returns the number of groups. */
int sgd_set_model_groups(SGD *o, const struct Model *m, int no_decay_1d, double bn_bias_lr_mult);
void sgd_step(SGD *o, float *params, const float *grads, double lr);
/* The same, unless *skip (backend memory, may be NULL) is nonzero when the step runs: then
 * parameters and momentum stay as they are (a step the fp16 loss scaler rejected, scaler.h). */
void sgd_step_unless(SGD *o, float *params, const float *grads, double lr, const int *skip);
void sgd_free(SGD *o);

#endif
