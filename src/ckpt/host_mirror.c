/* SPDX-License-Identifier: BSD-3-Clause */
/* host_mirror.c - see host_mirror.h. */
#include "host_mirror.h"

#include <string.h>

#include "base/util.h"

/* The batch-norm counters, from src's into dst's (same layout; host memory on any backend). */
static void copy_counters(Model *dst, const Model *src) {
    CHECK(dst->n_bn == src->n_bn);
    memcpy(dst->bn_tracked, src->bn_tracked, (size_t)src->n_bn * sizeof *src->bn_tracked);
}

void host_mirror_open(HostMirror *h, Model *live, Optimizer *opt) {
    memset(h, 0, sizeof *h);
    h->copies = live->be->on_device;
    if (!h->copies) {
        h->model = live;
        h->opt = opt;
        return;
    }
    /* The layout by value; the state in arrays of the mirror's own. */
    h->m = *live;
    h->m.bn_tracked = mallocCheck((size_t)live->n_bn * sizeof *live->bn_tracked);
    memcpy(h->m.bn_tracked, live->bn_tracked, (size_t)live->n_bn * sizeof *live->bn_tracked);
    h->m.params = mallocCheck(live->num_params * sizeof(float));
    h->m.buffers = mallocCheck(live->num_buffers * sizeof(float));
    h->m.grads = NULL;
    h->o = *opt;   /* its kind, groups and settings; the state its own */
    for (int k = 0; k < opt->kind->n_state; k++) h->o.state[k] = mallocCheck(opt->n * sizeof(float));
    h->model = &h->m;
    h->opt = &h->o;
}

void host_mirror_pull(HostMirror *h, const Model *live, const Optimizer *opt) {
    if (!h->copies) return;
    const Backend *be = live->be;
    be->download(h->m.params, live->params, live->num_params * sizeof(float));
    be->download(h->m.buffers, live->buffers, live->num_buffers * sizeof(float));
    for (int k = 0; k < opt->kind->n_state; k++) be->download(h->o.state[k], opt->state[k], opt->n * sizeof(float));
    h->o.steps = opt->steps;
    copy_counters(&h->m, live);
}

void host_mirror_push(const HostMirror *h, Model *live, Optimizer *opt) {
    if (!h->copies) return;
    const Backend *be = live->be;
    be->upload(live->params, h->m.params, live->num_params * sizeof(float));
    be->upload(live->buffers, h->m.buffers, live->num_buffers * sizeof(float));
    for (int k = 0; k < opt->kind->n_state; k++) be->upload(opt->state[k], h->o.state[k], opt->n * sizeof(float));
    opt->steps = h->o.steps;
    copy_counters(live, &h->m);
    model_params_changed(live);
}

void host_mirror_close(HostMirror *h) {
    if (h->copies) {
        free(h->m.bn_tracked);
        free(h->m.params);
        free(h->m.buffers);
        for (int k = 0; k < h->o.kind->n_state; k++) free(h->o.state[k]);
    }
    memset(h, 0, sizeof *h);
}
