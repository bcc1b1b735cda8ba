/* SPDX-License-Identifier: BSD-3-Clause */
/* optim_kinds.c - the table of optimizers (optim.h) and their steps: what each computes per
 * group or tensor on the host (the bias corrections, trust ratios and clip factor, in double
 * where PyTorch computes a Python float and in float where it computes a 0-dim float32 tensor),
 * and the backend's update of the elements with those scalars (OptimScalars). */
#include <math.h>

#include "optim.h"
#include "base/util.h"

/* The slices a step walks: the groups, or the tensors of a layerwise kind, or the whole buffer
 * as one with the optimizer's settings (`whole`). */
static int slices(const Optimizer *o, const OptimGroup **s, OptimGroup *whole) {
    if (o->kind->layerwise && o->tensor) { *s = o->tensor; return o->n_tensor; }
    if (o->group) { *s = o->group; return o->n_group; }
    *whole = (OptimGroup){.offset = 0, .n = o->n, .weight_decay = o->weight_decay, .lr_mult = 1.0};
    *s = whole;
    return 1;
}

/* A step the fp16 scaler rejected (its flag in backend memory): nothing happens, and the step
 * is not counted, as GradScaler skips optimizer.step(). */
static int skipped(const Optimizer *o, const int *skip) {
    if (!skip) return 0;
    int v = 0;
    o->be->download(&v, skip, sizeof v);
    return v != 0;
}

/* sqrt of the sum of squares of x as a float (a norm PyTorch holds in a float32 tensor). */
static float norm_of(const Optimizer *o, const float *x, size_t n) {
    double sq = 0.0;
    o->be->sumsq(x, n, o->sums);
    o->be->download(&sq, o->sums, sizeof sq);
    return (float)sqrt(sq);
}

/* ---- sgd ------------------------------------------------------------------------------------ */

/* steps counts calls, skipped or not: it only tells a checkpoint reader whether momentum may be
 * nonzero, and a zero buffer gives the same first update as PyTorch's unset one. The skip flag
 * is read by the backend, so that no step waits for the host. */
static void sgd_step(Optimizer *o, float *params, const float *grads, double lr, const int *skip) {
    OptimGroup whole;
    const OptimGroup *g;
    const int n = slices(o, &g, &whole);
    for (int i = 0; i < n; i++)
        o->be->sgd_step(params + g[i].offset, grads + g[i].offset, o->state[0] + g[i].offset, g[i].n,
                        (float)(lr * g[i].lr_mult), o->momentum, (float)g[i].weight_decay, o->nesterov, skip);
    o->steps++;
}

static int sgd_available(const Backend *be) { return be->sgd_step != NULL; }

/* ---- adamw ---------------------------------------------------------------------------------- */

/* torch.optim.AdamW's _single_tensor_adamw: the step count t, then per group
 * bias_correction1 = 1 - beta1^t, step_size = lr / bias_correction1, sqrt(1 - beta2^t) and
 * 1 - lr * weight_decay as Python floats. */
static void adamw_step(Optimizer *o, float *params, const float *grads, double lr, const int *skip) {
    if (skipped(o, skip)) return;
    const double t = (double)++o->steps;
    const double bc1 = 1.0 - pow(o->beta1, t), bc2 = 1.0 - pow(o->beta2, t);
    OptimGroup whole;
    const OptimGroup *g;
    const int n = slices(o, &g, &whole);
    for (int i = 0; i < n; i++) {
        const double glr = lr * g[i].lr_mult;
        const OptimScalars s = {.decay = (float)(1.0 - glr * g[i].weight_decay), .beta1 = (float)o->beta1,
                                .one_minus_beta1 = (float)(1.0 - o->beta1), .beta2 = (float)o->beta2,
                                .one_minus_beta2 = (float)(1.0 - o->beta2), .step_size = (float)(glr / bc1),
                                .bc2_sqrt = (float)sqrt(bc2), .eps = (float)o->eps};
        const size_t a = g[i].offset;
        o->be->adamw_step(params + a, grads + a, o->state[0] + a, o->state[1] + a, g[i].n, &s);
    }
}

static int adamw_available(const Backend *be) { return be->adamw_step != NULL; }

/* ---- rmsprop -------------------------------------------------------------------------------- */

/* torch.optim.RMSprop's _single_tensor_rmsprop, centered=False; its step count is kept (PyTorch's
 * state['step']) though nothing depends on it. */
static void rmsprop_step(Optimizer *o, float *params, const float *grads, double lr, const int *skip) {
    if (skipped(o, skip)) return;
    o->steps++;
    OptimGroup whole;
    const OptimGroup *g;
    const int n = slices(o, &g, &whole);
    for (int i = 0; i < n; i++) {
        const OptimScalars s = {.lr = (float)(lr * g[i].lr_mult), .weight_decay = (float)g[i].weight_decay,
                                .momentum = o->momentum, .beta2 = (float)o->beta2,
                                .one_minus_beta2 = (float)(1.0 - o->beta2), .eps = (float)o->eps};
        const size_t a = g[i].offset;
        o->be->rmsprop_step(params + a, grads + a, o->state[0] + a, o->state[1] + a, g[i].n, &s);
    }
}

static int rmsprop_available(const Backend *be) { return be->rmsprop_step != NULL; }

/* ---- lamb ----------------------------------------------------------------------------------- */

/* timm's Lamb (timm 1.0): the global norm of all gradients, from each tensor's norm in float32
 * (here from the sum of squares in double); its clip factor max(1, norm / max_grad_norm) in
 * float32; the step count and its bias corrections as Python floats; then per tensor the
 * moments, and where its group decays, the trust ratio |p| / |update| of the update with
 * weight_decay * p added, in float32. */
static void lamb_step(Optimizer *o, float *params, const float *grads, double lr, const int *skip) {
    if (skipped(o, skip)) return;
    float clip = 1.0f;
    if (o->max_grad_norm > 0.0) {
        const float c = norm_of(o, grads, o->n) / (float)o->max_grad_norm;
        clip = c < 1.0f ? 1.0f : c;   /* clamp_(min=1.0), which keeps a NaN */
    }
    const double t = (double)++o->steps;
    const double bc1 = 1.0 - pow(o->beta1, t), bc2 = 1.0 - pow(o->beta2, t);
    OptimGroup whole;
    const OptimGroup *g;
    const int n = slices(o, &g, &whole);
    for (int i = 0; i < n; i++) {
        OptimScalars s = {.lr = (float)(lr * g[i].lr_mult), .weight_decay = (float)g[i].weight_decay,
                          .beta1 = (float)o->beta1, .one_minus_beta1 = (float)(1.0 - o->beta1),
                          .beta2 = (float)o->beta2, .one_minus_beta2 = (float)(1.0 - o->beta2),
                          .eps = (float)o->eps, .bc1 = (float)bc1, .bc2_sqrt = (float)sqrt(bc2), .grad_div = clip,
                          .trust = 1.0f, .adapt = g[i].weight_decay != 0.0};
        const size_t a = g[i].offset;
        float *m = o->state[0] + a, *v = o->state[1] + a;
        o->be->lamb_moments(params + a, grads + a, m, v, g[i].n, &s, s.adapt ? o->sums : NULL);
        if (s.adapt) {
            double sq[2];
            o->be->download(sq, o->sums, sizeof sq);
            const float w_norm = (float)sqrt(sq[0]), u_norm = (float)sqrt(sq[1]);
            s.trust = w_norm > 0.0f && u_norm > 0.0f ? w_norm / u_norm : 1.0f;
        }
        o->be->lamb_apply(params + a, m, v, g[i].n, &s);
    }
}

static int lamb_available(const Backend *be) {
    return be->lamb_moments != NULL && be->lamb_apply != NULL && be->sumsq != NULL;
}

/* ---- lars ----------------------------------------------------------------------------------- */

/* timm's Lars: per tensor whose group decays, the trust ratio
 * trust_coeff * |p| / (|g| + |p| * weight_decay + eps) in float32 (1 where a norm is 0), then
 * SGD's momentum on (g + weight_decay * p) * trust. */
static void lars_step(Optimizer *o, float *params, const float *grads, double lr, const int *skip) {
    if (skipped(o, skip)) return;
    o->steps++;
    OptimGroup whole;
    const OptimGroup *g;
    const int n = slices(o, &g, &whole);
    for (int i = 0; i < n; i++) {
        const size_t a = g[i].offset;
        OptimScalars s = {.lr = (float)(lr * g[i].lr_mult), .weight_decay = (float)g[i].weight_decay,
                          .momentum = o->momentum, .nesterov = o->nesterov, .trust = 1.0f,
                          .adapt = g[i].weight_decay != 0.0};
        if (s.adapt) {
            const float w = norm_of(o, params + a, g[i].n), gn = norm_of(o, grads + a, g[i].n);
            const float num = (float)o->trust_coeff * w;
            const float den = (gn + w * s.weight_decay) + (float)o->eps;
            s.trust = w > 0.0f && gn > 0.0f ? num / den : 1.0f;
        }
        o->be->lars_step(params + a, grads + a, o->state[0] + a, g[i].n, &s);
    }
}

static int lars_available(const Backend *be) { return be->lars_step != NULL && be->sumsq != NULL; }

/* ---- the table ------------------------------------------------------------------------------ */

const OptimKind optim_kinds[] = {
    {"sgd", 1, {"momentum"}, 0, 0.0, sgd_step, sgd_available,
     "torch.optim.SGD(lr, momentum, weight_decay, nesterov)"},
    {"adamw", 2, {"exp_avg", "exp_avg_sq"}, 0, 1e-8, adamw_step, adamw_available,
     "torch.optim.AdamW(lr, betas=(adam_beta1, adam_beta2), eps=opt_eps (1e-8), weight_decay)"},
    {"rmsprop", 2, {"square_avg", "momentum_buffer"}, 0, 0.0316, rmsprop_step, rmsprop_available,
     "torch.optim.RMSprop(lr, alpha=rmsprop_alpha, eps=opt_eps (0.0316, torchvision's), momentum, weight_decay)"},
    {"lamb", 2, {"exp_avg", "exp_avg_sq"}, 1, 1e-6, lamb_step, lamb_available,
     "timm.optim.Lamb(lr, betas=(adam_beta1, adam_beta2), eps=opt_eps (1e-6), weight_decay, "
     "max_grad_norm=lamb_max_grad_norm)"},
    {"lars", 1, {"momentum_buffer"}, 1, 1e-8, lars_step, lars_available,
     "timm.optim.Lars(lr, momentum, weight_decay, nesterov, trust_coeff=lars_trust_coeff, eps=opt_eps (1e-8))"},
};
const int optim_n_kinds = (int)(sizeof optim_kinds / sizeof optim_kinds[0]);
