/* SPDX-License-Identifier: BSD-3-Clause */
/* model_testutil.h - shared by the test programs that build a MiniResNet by hand. */
#ifndef DDP_MODEL_TESTUTIL_H
#define DDP_MODEL_TESTUTIL_H

#include <string.h>

#include "model/model.h"
#include "base/rng.h"

/* BN affine parameters and running statistics away from their defaults (gamma in [0.5, 1.5),
 * beta in [-0.2, 0.2), running var in [0.5, 1.5), running mean in [-0.1, 0.1)), so that a
 * comparison or a load that dropped or swapped any of them shows. Draws from stream `stream`
 * of `seed`. */
static inline void model_randomize_bn(Model *m, uint64_t seed, uint64_t stream) {
    Rng r;
    rng_init(&r, seed, stream, 0);
    for (int i = 0; i < m->n_param_info; i++) {
        const TensorInfo *t = &m->param_info[i];
        if (t->ndim != 1 || strncmp(t->name, "fc.", 3) == 0) continue;
        int is_gamma = strstr(t->name, ".weight") != NULL;
        for (size_t j = 0; j < t->numel; j++)
            m->params[t->offset + j] = is_gamma ? 0.5f + rng_uniform(&r) : 0.4f * (rng_uniform(&r) - 0.5f);
    }
    for (int i = 0; i < m->n_buffer_info; i++) {
        const TensorInfo *t = &m->buffer_info[i];
        int is_var = strstr(t->name, "running_var") != NULL;
        for (size_t j = 0; j < t->numel; j++)
            m->buffers[t->offset + j] = is_var ? 0.5f + rng_uniform(&r) : 0.2f * (rng_uniform(&r) - 0.5f);
    }
    model_params_changed(m);
}

#endif
