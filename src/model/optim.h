/* SPDX-License-Identifier: BSD-3-Clause */
/* optim.h - the optimizers, each a record of a table (OptimKind: its name, its state tensors and
 * their checkpoint names, its step, its documentation line), over the flat parameter and
 * gradient buffers; the arithmetic is the backend's (Backend.sgd_step, adamw_step, ...).
 *
 *   sgd      torch.optim.SGD(momentum, weight_decay, nesterov): d = g + weight_decay * p;
 *            buf = momentum * buf + d (buf = d on the first step); p -= lr * buf, or with
 *            Nesterov momentum p -= lr * (d + momentum * buf)
 *   adamw    torch.optim.AdamW(betas, eps, weight_decay): decoupled weight decay
 *   rmsprop  torch.optim.RMSprop(alpha, eps, momentum, weight_decay, centered=False)
 *   lamb     timm.optim.Lamb (timm 1.0's definition): Adam's moments with bias correction, the
 *            gradients first divided by max(1, their global norm / max_grad_norm), the update
 *            plus weight_decay * p scaled by the trust ratio |p| / |update| per tensor
 *   lars     timm.optim.Lars: SGD with momentum (and Nesterov) on the gradient plus
 *            weight_decay * p scaled by trust_coeff |p| / (|g| + weight_decay |p| + eps) per
 *            tensor
 * LAMB and LARS adapt (weight decay and trust ratio) only the tensors of a group whose weight
 * decay is not 0, as timm's always_adapt=False: with --no_decay_1d, norms' weights and
 * biases are excluded from both, as timm's filter_bias_and_bn does. A trust ratio is 1 where
 * the weight's or the update's norm is 0.
 *
 * Parameter groups, as PyTorch's param_groups: slices of the flat buffers with their own weight
 * decay and a multiplier of the step's learning rate (the group's lr is lr * lr_mult computed in
 * double, as PyTorch's group lr is a Python float). Without groups the whole buffer is one group
 * with the optimizer's weight decay and multiplier 1, and one tensor. */
#ifndef DDP_OPTIM_H
#define DDP_OPTIM_H

#include <stddef.h>

#include "model.h"
#include "ops/backend.h"

struct Optimizer;

#define OPTIM_MAX_STATE 2

/* One optimizer. state[k] of a parameter is /optimizer/<state[k]>/<parameter name> in
 * checkpoints, float32 of the parameter's shape, zero before the first step. */
typedef struct OptimKind {
    const char *name;                       /* --optimizer's value; /optimizer/name */
    int n_state;
    const char *state[OPTIM_MAX_STATE];     /* PyTorch's names of its state (SGD's "momentum": its
                                             * checkpoints' name from before the others existed) */
    int layerwise;                          /* steps tensor by tensor (trust ratios) */
    double eps;                             /* its default epsilon (--opt_eps 0), its author's */
    /* its step over the groups (or tensors) at learning rate lr. skip: the fp16 scaler's flag
     * (backend memory, may be NULL): SGD's backend update reads it, so that no step waits for the
     * host; the others (host backends only) read it first, and a skipped step is not counted */
    void (*step)(struct Optimizer *o, float *params, const float *grads, double lr, const int *skip);
    /* 1 when the backend has the operations its step needs */
    int (*available)(const Backend *be);
    const char *doc;                        /* one line: what it computes, after whom */
} OptimKind;

/* The kinds, in --optimizer's order, and a kind by name (NULL when none has it). */
extern const OptimKind optim_kinds[];
extern const int optim_n_kinds;
const OptimKind *optim_kind(const char *name);

/* The hyperparameters; each kind reads those its line above names. Doubles where PyTorch
 * computes with them as Python floats (weight decay in AdamW's 1 - lr * weight_decay, the betas'
 * powers), rounded to float where its kernels take them. */
typedef struct {
    float momentum;
    double weight_decay;
    int nesterov;                 /* SGD, LARS */
    double beta1, beta2;          /* AdamW, LAMB; RMSprop's alpha is beta2 */
    double eps;
    double trust_coeff;           /* LARS */
    double max_grad_norm;         /* LAMB's own clip of the global gradient norm (0: none) */
} OptimSettings;

typedef struct {
    size_t offset, n;   /* the slice [offset, offset + n) of params, grads and state */
    double weight_decay;
    double lr_mult;
} OptimGroup;

typedef struct Optimizer {
    const OptimKind *kind;
    const Backend *be;
    size_t n;
    float momentum;
    double weight_decay;
    int nesterov;
    double beta1, beta2, eps, trust_coeff, max_grad_norm;   /* OptimSettings' */
    OptimGroup *group;  /* NULL: one group, all n elements (optim_set_groups) */
    int n_group;
    OptimGroup *tensor; /* layerwise kinds: the parameter tensors with their group's settings, in
                         * order; NULL: the groups stand for them */
    int n_tensor;
    float *state[OPTIM_MAX_STATE];  /* backend memory, n floats each */
    double *sums;       /* backend memory: 2 doubles, the layerwise kinds' norms */
    long steps;         /* SGD: calls (a zero buffer gives PyTorch's first step); the others: the
                         * steps taken, PyTorch's state['step'] of the bias corrections */
} Optimizer;

/* An optimizer of `kind` over n parameters on backend be (the kind's operations must exist:
 * kind->available(be)), its state zeroed. */
void optim_init(Optimizer *o, const OptimKind *kind, const Backend *be, size_t n, const OptimSettings *set);
/* SGD with momentum and weight decay, on backend_cpu or on be. */
void sgd_init(Optimizer *o, size_t n, float momentum, float weight_decay);
void sgd_init_on(Optimizer *o, const Backend *be, size_t n, float momentum, float weight_decay);

/* Replace the single group by n_group slices (copied), which must cover [0, o->n) in order
 * without gaps or overlaps. The tensors, for a layerwise kind, are the groups themselves. */
void optim_set_groups(Optimizer *o, const OptimGroup *group, int n_group);
/* How a model's parameter tensors are grouped (docs/recipes.md): weight decay 0 for every 1-D
 * tensor (norms' weights and biases, the convolutions' and linear layers' biases) with
 * no_decay_1d; norm_weight_decay (when not negative) for the batch and layer norms' weights and
 * biases only, torchvision's --norm-weight-decay; the batch-norm biases at bn_bias_lr_mult times
 * the learning rate and bn_bias_wd_mult times their weight decay (airbench's 64 and 1/64, its
 * decay "decoupled" from the biases' learning rate); a frozen tensor (requires_grad=False) at
 * learning rate 0 and no weight decay. */
typedef struct {
    int no_decay_1d;
    double norm_weight_decay;   /* < 0: the optimizer's weight decay */
    double bn_bias_lr_mult, bn_bias_wd_mult;
} OptimGroupRules;

/* The settings of before any rule: one group, the optimizer's own. */
#define OPTIM_GROUP_RULES_DEFAULT ((OptimGroupRules){0, -1.0, 1.0, 1.0})

/* The groups of the rules over a model's parameter tensors; neighbouring tensors with equal
 * settings share one group. Installs them with optim_set_groups unless they come to a single
 * group of the optimizer's own settings (the defaults: nothing changes), and the tensors.
 * Returns the number of groups. */
int optim_set_model_groups(Optimizer *o, const Model *m, const OptimGroupRules *r);
/* The same over a table of n tensors (offset, numel, ndim, role and frozen of each, tiling [0, o->n)). */
int optim_set_tensor_groups(Optimizer *o, const TensorInfo *t, int n, const OptimGroupRules *r);

void optim_step(Optimizer *o, float *params, const float *grads, double lr);
/* The same, unless *skip (backend memory, may be NULL) is nonzero when the step runs: then
 * parameters and state stay as they are (a step the fp16 loss scaler rejected, scaler.h), and
 * only SGD counts the call. */
void optim_step_unless(Optimizer *o, float *params, const float *grads, double lr, const int *skip);
void optim_free(Optimizer *o);

#endif
