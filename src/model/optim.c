/* SPDX-License-Identifier: BSD-3-Clause */
/* optim.c - see optim.h. */
#include <string.h>

#include "model.h"
#include "optim.h"
#include "base/util.h"

void sgd_init(SGD *o, size_t n, float momentum, float weight_decay) {
    sgd_init_on(o, &backend_cpu, n, momentum, weight_decay);
}

void sgd_init_on(SGD *o, const Backend *be, size_t n, float momentum, float weight_decay) {
    o->be = be;
    o->n = n;
    o->momentum = momentum;
    o->weight_decay = weight_decay;
    o->nesterov = 0;
    o->group = NULL;
    o->n_group = 0;
    o->buf = be->alloc(n * sizeof(float));
    o->steps = 0;
}

void sgd_set_groups(SGD *o, const SgdGroup *group, int n_group) {
    size_t next = 0;
    for (int i = 0; i < n_group; i++) {
        CHECK(group[i].offset == next && group[i].n > 0);
        next += group[i].n;
    }
    CHECK(next == o->n);
    free(o->group);
    o->group = mallocCheck((size_t)n_group * sizeof *group);
    memcpy(o->group, group, (size_t)n_group * sizeof *group);
    o->n_group = n_group;
}

int sgd_set_model_groups(SGD *o, const Model *m, int no_decay_1d, double bn_bias_lr_mult) {
    CHECK(o->n == m->num_params);
    SgdGroup *g = mallocCheck((size_t)(m->n_param_info > 0 ? m->n_param_info : 1) * sizeof *g);
    int n = 0;
    size_t next = 0;
    for (int i = 0; i < m->n_param_info; i++) {
        const TensorInfo *t = &m->param_info[i];
        CHECK(t->offset == next);   /* the tensors tile the flat buffer in order */
        next += t->numel;
        const float wd = no_decay_1d && t->ndim == 1 ? 0.0f : o->weight_decay;
        const double mult = t->role == TENSOR_BN_BIAS ? bn_bias_lr_mult : 1.0;
        if (n > 0 && g[n - 1].weight_decay == wd && g[n - 1].lr_mult == mult) {
            g[n - 1].n += t->numel;
        } else {
            g[n] = (SgdGroup){ .offset = t->offset, .n = t->numel, .weight_decay = wd, .lr_mult = mult };
            n++;
        }
    }
    CHECK(next == o->n);
    if (!(n == 1 && g[0].weight_decay == o->weight_decay && g[0].lr_mult == 1.0)) sgd_set_groups(o, g, n);
    free(g);
    return n;
}

void sgd_step(SGD *o, float *params, const float *grads, double lr) {
    sgd_step_unless(o, params, grads, lr, NULL);
}

/* steps counts calls, skipped or not: it only tells a checkpoint reader whether momentum may
 * be nonzero, and a zero buffer gives the same first update as PyTorch's unset one. */
void sgd_step_unless(SGD *o, float *params, const float *grads, double lr, const int *skip) {
    if (!o->group) {
        o->be->sgd_step(params, grads, o->buf, o->n, (float)lr, o->momentum, o->weight_decay, o->nesterov, skip);
    } else {
        for (int i = 0; i < o->n_group; i++) {
            const SgdGroup *g = &o->group[i];
            o->be->sgd_step(params + g->offset, grads + g->offset, o->buf + g->offset, g->n, (float)(lr * g->lr_mult),
                            o->momentum, g->weight_decay, o->nesterov, skip);
        }
    }
    o->steps++;
}

void sgd_free(SGD *o) {
    o->be->release(o->buf);
    o->buf = NULL;
    free(o->group);
    o->group = NULL;
    o->n_group = 0;
}
