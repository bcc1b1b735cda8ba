/* SPDX-License-Identifier: BSD-3-Clause */
/* optim.c - see optim.h: an optimizer's state, its groups and tensors, and the step that hands
 * them to its kind (optim_kinds.c). */
#include <string.h>

#include "optim.h"
#include "base/util.h"

const OptimKind *optim_kind(const char *name) {
    for (int k = 0; k < optim_n_kinds; k++)
        if (!strcmp(optim_kinds[k].name, name)) return &optim_kinds[k];
    return NULL;
}

void optim_init(Optimizer *o, const OptimKind *kind, const Backend *be, size_t n, const OptimSettings *set) {
    CHECK(kind && kind->available(be));
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->be = be;
    o->n = n;
    o->momentum = set->momentum;
    o->weight_decay = set->weight_decay;
    o->nesterov = set->nesterov;
    o->beta1 = set->beta1;
    o->beta2 = set->beta2;
    o->eps = set->eps;
    o->trust_coeff = set->trust_coeff;
    o->max_grad_norm = set->max_grad_norm;
    for (int k = 0; k < kind->n_state; k++) o->state[k] = be->alloc(n * sizeof(float));   /* zeroed */
    o->sums = be->alloc(2 * sizeof(double));
}

void sgd_init(Optimizer *o, size_t n, float momentum, float weight_decay) {
    sgd_init_on(o, &backend_cpu, n, momentum, weight_decay);
}

void sgd_init_on(Optimizer *o, const Backend *be, size_t n, float momentum, float weight_decay) {
    const OptimSettings set = {.momentum = momentum, .weight_decay = weight_decay};
    optim_init(o, optim_kind("sgd"), be, n, &set);
}

/* A copy of n slices that tile [0, total) in order. */
static OptimGroup *copy_tiling(const OptimGroup *g, int n, size_t total) {
    size_t next = 0;
    for (int i = 0; i < n; i++) {
        CHECK(g[i].offset == next && g[i].n > 0);
        next += g[i].n;
    }
    CHECK(next == total);
    OptimGroup *c = mallocCheck((size_t)n * sizeof *c);
    memcpy(c, g, (size_t)n * sizeof *c);
    return c;
}

void optim_set_groups(Optimizer *o, const OptimGroup *group, int n_group) {
    free(o->group);
    o->group = copy_tiling(group, n_group, o->n);
    o->n_group = n_group;
    free(o->tensor);
    o->tensor = NULL;
    o->n_tensor = 0;
}

static int norm_role(int role) {
    return role == TENSOR_BN_WEIGHT || role == TENSOR_BN_BIAS || role == TENSOR_NORM_WEIGHT || role == TENSOR_NORM_BIAS;
}

int optim_set_tensor_groups(Optimizer *o, const TensorInfo *t, int n, const OptimGroupRules *r) {
    OptimGroup *per = mallocCheck((size_t)(n > 0 ? n : 1) * sizeof *per);
    OptimGroup *g = mallocCheck((size_t)(n > 0 ? n : 1) * sizeof *g);
    int ng = 0;
    for (int i = 0; i < n; i++) {
        double wd = r->no_decay_1d && t[i].ndim == 1 ? 0.0 : o->weight_decay;
        if (r->norm_weight_decay >= 0.0 && norm_role(t[i].role)) wd = r->norm_weight_decay;
        double mult = t[i].role == TENSOR_BN_BIAS ? r->bn_bias_lr_mult : 1.0;
        if (t[i].role == TENSOR_BN_BIAS) wd *= r->bn_bias_wd_mult;
        /* requires_grad=False: PyTorch's optimizer never sees it; a step of learning rate 0 leaves
         * it as it is (its gradient is finite: the network's others are computed from it) */
        if (t[i].frozen) wd = mult = 0.0;
        per[i] = (OptimGroup){.offset = t[i].offset, .n = t[i].numel, .weight_decay = wd, .lr_mult = mult};
        if (ng > 0 && g[ng - 1].weight_decay == wd && g[ng - 1].lr_mult == mult) g[ng - 1].n += t[i].numel;
        else g[ng++] = per[i];
    }
    /* the default settings: the one group of before, no groups installed */
    if (!(ng == 1 && g[0].weight_decay == o->weight_decay && g[0].lr_mult == 1.0)) optim_set_groups(o, g, ng);
    if (o->kind->layerwise) {
        free(o->tensor);
        o->tensor = copy_tiling(per, n, o->n);
        o->n_tensor = n;
    }
    free(per);
    free(g);
    return ng;
}

int optim_set_model_groups(Optimizer *o, const Model *m, const OptimGroupRules *r) {
    CHECK(o->n == m->num_params);
    return optim_set_tensor_groups(o, m->param_info, m->n_param_info, r);
}

void optim_step(Optimizer *o, float *params, const float *grads, double lr) {
    optim_step_unless(o, params, grads, lr, NULL);
}

void optim_step_unless(Optimizer *o, float *params, const float *grads, double lr, const int *skip) {
    o->kind->step(o, params, grads, lr, skip);
}

void optim_free(Optimizer *o) {
    for (int k = 0; k < OPTIM_MAX_STATE; k++) {
        if (o->state[k]) o->be->release(o->state[k]);
        o->state[k] = NULL;
    }
    if (o->sums) o->be->release(o->sums);
    o->sums = NULL;
    free(o->group);
    free(o->tensor);
    o->group = o->tensor = NULL;
    o->n_group = o->n_tensor = 0;
}
