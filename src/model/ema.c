/* SPDX-License-Identifier: BSD-3-Clause */
/* ema.c - the moving average of the weights and buffers (ema.h). */
#include "ema.h"

#include <string.h>

#include "base/util.h"

void ema_init(Ema *e, const Model *m, double decay) {
    CHECK(decay >= 0.0 && decay < 1.0);   /* 0: --ema_adjust's clamp, a copy */
    memset(e, 0, sizeof *e);
    const Backend *be = m->be;
    e->be = be;
    e->decay = decay;
    e->num_params = m->num_params;
    e->num_buffers = m->num_buffers;
    e->params = be->alloc(m->num_params * sizeof(float));
    e->buffers = be->alloc(m->num_buffers * sizeof(float));
    const size_t nt = m->num_params > m->num_buffers ? m->num_params : m->num_buffers;
    e->tmp = be->alloc(nt * sizeof(float));
    e->saved_params = be->alloc(m->num_params * sizeof(float));
    e->saved_buffers = be->alloc(m->num_buffers * sizeof(float));
    e->n_bn = model_bn_count(m);
    e->nbt = callocCheck((size_t)e->n_bn, sizeof *e->nbt);
    e->saved_nbt = callocCheck((size_t)e->n_bn, sizeof *e->saved_nbt);
    /* As PyTorch multiplies a float32 tensor by a Python float: the scalar rounded to float32;
     * 1 - D is computed in double first, as Python does. */
    e->d_decay = be->alloc(sizeof(float));
    e->d_rest = be->alloc(sizeof(float));
    e->d_minus1 = be->alloc(sizeof(float));
    const float minus1 = -1.0f;
    be->upload(e->d_minus1, &minus1, sizeof minus1);
    ema_set_decay(e, decay);
}

void ema_set_decay(Ema *e, double decay) {
    CHECK(decay >= 0.0 && decay < 1.0);
    e->decay = decay;
    const float d = (float)decay, rest = (float)(1.0 - decay);
    e->be->upload(e->d_decay, &d, sizeof d);
    e->be->upload(e->d_rest, &rest, sizeof rest);
}

void ema_free(Ema *e) {
    if (!e->be) return;
    const Backend *be = e->be;
    be->release(e->params); be->release(e->buffers); be->release(e->tmp);
    be->release(e->saved_params); be->release(e->saved_buffers);
    be->release(e->d_decay); be->release(e->d_rest); be->release(e->d_minus1);
    free(e->nbt); free(e->saved_nbt);
    memset(e, 0, sizeof *e);
}

/* e = D * e + (1 - D) * p over n floats of backend memory. */
static void average(Ema *e, float *avg, const float *p, size_t n) {
    const Backend *be = e->be;
    be->scale_inplace(avg, n, e->d_decay);
    be->copy(e->tmp, p, n * sizeof(float));
    be->scale_inplace(e->tmp, n, e->d_rest);
    be->add_inplace(avg, e->tmp, n);
}

/* avg = lerp(avg, p, w) over n floats: d_decay holds w, d_rest 1 - w (float32's). */
static void lerp(Ema *e, float *avg, const float *p, size_t n, int low) {
    const Backend *be = e->be;
    be->copy(e->tmp, avg, n * sizeof(float));
    be->scale_inplace(e->tmp, n, e->d_minus1);
    be->add_inplace(e->tmp, p, n);                    /* p - avg */
    if (low) {
        be->scale_inplace(e->tmp, n, e->d_decay);     /* w (p - avg) */
        be->add_inplace(avg, e->tmp, n);
    } else {
        be->scale_inplace(e->tmp, n, e->d_rest);      /* (p - avg)(1 - w) */
        be->scale_inplace(e->tmp, n, e->d_minus1);
        be->copy(avg, p, n * sizeof(float));
        be->add_inplace(avg, e->tmp, n);
    }
}

void ema_lerp(Ema *e, const Model *m, double weight) {
    CHECK(!e->swapped && m->num_params == e->num_params && m->num_buffers == e->num_buffers);
    const float w = (float)weight, rest = 1.0f - w;   /* PyTorch's scalar, and 1 - it, in float32 */
    e->be->upload(e->d_decay, &w, sizeof w);
    e->be->upload(e->d_rest, &rest, sizeof rest);
    lerp(e, e->params, m->params, e->num_params, w < 0.5f);
    lerp(e, e->buffers, m->buffers, e->num_buffers, w < 0.5f);
    e->n_averaged++;
}

void ema_update(Ema *e, const Model *m) {
    CHECK(!e->swapped && m->num_params == e->num_params && m->num_buffers == e->num_buffers);
    const Backend *be = e->be;
    if (e->n_averaged == 0) {
        be->copy(e->params, m->params, e->num_params * sizeof(float));
        be->copy(e->buffers, m->buffers, e->num_buffers * sizeof(float));
        memcpy(e->nbt, m->bn_tracked, (size_t)e->n_bn * sizeof *e->nbt);
    } else {
        average(e, e->params, m->params, e->num_params);
        average(e, e->buffers, m->buffers, e->num_buffers);
        const float d = (float)e->decay, rest = (float)(1.0 - e->decay);
        for (int k = 0; k < e->n_bn; k++) {
            volatile float a = d * (float)e->nbt[k];   /* each product rounded to float32 */
            volatile float b = rest * (float)m->bn_tracked[k];
            e->nbt[k] = (int64_t)(a + b);
        }
    }
    e->n_averaged++;
}

void ema_swap_in(Ema *e, Model *m) {
    CHECK(!e->swapped);
    const Backend *be = e->be;
    be->copy(e->saved_params, m->params, e->num_params * sizeof(float));
    be->copy(e->saved_buffers, m->buffers, e->num_buffers * sizeof(float));
    be->copy(m->params, e->params, e->num_params * sizeof(float));
    be->copy(m->buffers, e->buffers, e->num_buffers * sizeof(float));
    memcpy(e->saved_nbt, m->bn_tracked, (size_t)e->n_bn * sizeof *e->saved_nbt);
    memcpy(m->bn_tracked, e->nbt, (size_t)e->n_bn * sizeof *e->nbt);
    model_params_changed(m);
    e->swapped = 1;
}

void ema_swap_out(Ema *e, Model *m) {
    CHECK(e->swapped);
    const Backend *be = e->be;
    be->copy(m->params, e->saved_params, e->num_params * sizeof(float));
    be->copy(m->buffers, e->saved_buffers, e->num_buffers * sizeof(float));
    memcpy(m->bn_tracked, e->saved_nbt, (size_t)e->n_bn * sizeof *e->saved_nbt);
    model_params_changed(m);
    e->swapped = 0;
}

void ema_download(const Ema *e, float *params, float *buffers, int64_t *nbt) {
    e->be->download(params, e->params, e->num_params * sizeof(float));
    e->be->download(buffers, e->buffers, e->num_buffers * sizeof(float));
    memcpy(nbt, e->nbt, (size_t)e->n_bn * sizeof *nbt);
}

void ema_upload(Ema *e, const float *params, const float *buffers, const int64_t *nbt, long n_averaged) {
    e->be->upload(e->params, params, e->num_params * sizeof(float));
    e->be->upload(e->buffers, buffers, e->num_buffers * sizeof(float));
    memcpy(e->nbt, nbt, (size_t)e->n_bn * sizeof *nbt);
    e->n_averaged = n_averaged;
}
