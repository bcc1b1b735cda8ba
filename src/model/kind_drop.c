/* SPDX-License-Identifier: BSD-3-Clause */
/* kind_drop.c - the nodes that drop values in training and pass them in evaluation: "dropout"
 * (nn.Dropout: each value kept with probability 1 - p and scaled by 1 / (1 - p)) and
 * "stochastic_depth" (torchvision.ops.StochasticDepth(p, "row"): each image's whole branch kept
 * or dropped at once, the same scale).
 *
 * Their draws are a function of the model's noise key (model_set_noise: the seed, the step,
 * the rank, the micro-batch) and of the step's place, and of nothing else: a run resumed from
 * a checkpoint draws the same masks, whatever the threads. The mask of the last training
 * forward stays with the step for the backward, and for tests that replay it in PyTorch. */
#include "base/rng.h"
#include "model_step.h"
#include "onnx.h"

/* p in 0..1, as PyTorch takes it. */
static int drop_shape(NetNode *n, const NetNode *const *ins, const NetCheck *c) {
    (void)ins;
    if (!(n->p >= 0.0f && n->p <= 1.0f)) return node_err(c, n, "p", "%g is not in 0..1", (double)n->p);
    return 0;
}

/* Evaluation, or nothing to drop: the input as it is. */
static void pass_through(Model *m, ModelStep *st, int N) {
    m->be->copy(st->y, model_value(m, st->in), step_numel(st, N) * step_elem_bytes(m, st));
    st->noisy = 0;
}

static void pass_grad(const Model *m, const ModelStep *st, float *dy, float *dx, int N) {
    m->be->copy(dx, dy, step_numel(st, N) * step_elem_bytes(m, st));
}

/* Evaluation's identity: the input's value, no node. */
static int drop_onnx(OnnxGraph *g, const NetNode *n) {
    onnx_pass(g, n, 0);
    return 0;
}

/* ---- dropout ------------------------------------------------------------------------------ */

static const char *dropout_backend_lacks(const Backend *be, const NetNode *n) {
    (void)n;
    return be->dropout_mask && be->dropout_apply ? NULL : "dropout";
}

static void dropout_alloc(const Backend *be, ModelStep *st, int max_batch) {
    st->keep = be->alloc((size_t)max_batch * st->H * st->W * st->C);
}

static void dropout_release(const Backend *be, ModelStep *st) { be->release(st->keep); }

static void dropout_node_forward(Model *m, ModelStep *st, int N, int train) {
    if (!train || st->p == 0.0f) {
        pass_through(m, st, N);
        return;
    }
    const size_t n = step_numel(st, N);
    m->be->dropout_mask(st->keep, n, st->p, step_noise_key(m, st));
    m->be->dropout_apply(model_value(m, st->in), st->keep, st->y, n, st->p);
    st->noisy = 1;
}

static void dropout_grad(const Model *m, const ModelStep *st, float *dy, float *dx, int N) {
    if (!st->noisy) pass_grad(m, st, dy, dx, N);
    else m->be->dropout_apply(dy, st->keep, dx, step_numel(st, N), st->p);
}

static void dropout_node_backward(Slots *s, ModelStep *st, float *dy, int N) {
    backward_to_input(s, st, dy, N, dropout_grad);
}

const NodeKindDef node_kind_dropout = {
    .name = "dropout",
    .doc = "`nn.Dropout(p)`: in training each value zeroed with probability p, the others scaled by 1/(1-p); "
           "the input itself in evaluation",
    .tensors = "",
    .inputs = 1,
    .fields = {{F_P, .rdef = 0.5f, .rmin = 0.0f, .rmax = 1.0f, .write_always = 1, .def_doc = "0.5"}},
    .n_fields = 1,
    .shape = drop_shape,
    .backend_lacks = dropout_backend_lacks,
    .alloc = dropout_alloc,
    .release = dropout_release,
    .forward = dropout_node_forward,
    .backward = dropout_node_backward,
    .onnx = drop_onnx,
};

/* ---- stochastic depth --------------------------------------------------------------------- */

static const char *sd_backend_lacks(const Backend *be, const NetNode *n) {
    (void)n;
    return be->sample_scale ? NULL : "stochastic depth";
}

static void sd_alloc(const Backend *be, ModelStep *st, int max_batch) {
    st->scale = be->alloc((size_t)max_batch * sizeof(float));
}

static void sd_release(const Backend *be, ModelStep *st) { be->release(st->scale); }

/* Image i is kept when its draw is below 1 - p, as torch.bernoulli(1 - p); a kept image is
 * scaled by 1 / (1 - p) (torchvision divides the noise by the survival rate when it is above
 * 0), a dropped one by 0. */
static void sd_node_forward(Model *m, ModelStep *st, int N, int train) {
    if (!train || st->p == 0.0f) {
        pass_through(m, st, N);
        return;
    }
    const float survival = 1.0f - st->p;
    const float kept = survival > 0.0f ? 1.0f / survival : 0.0f;
    const uint64_t key = step_noise_key(m, st);
    float host[256];
    for (int i0 = 0; i0 < N; i0 += 256) {
        const int n = N - i0 < 256 ? N - i0 : 256;
        for (int i = 0; i < n; i++) host[i] = rng_hash_uniform(key, (uint64_t)(i0 + i)) < survival ? kept : 0.0f;
        m->be->upload(st->scale + i0, host, (size_t)n * sizeof(float));
    }
    m->be->sample_scale(model_value(m, st->in), st->scale, st->y, N, (size_t)st->H * st->W * st->C);
    st->noisy = 1;
}

static void sd_grad(const Model *m, const ModelStep *st, float *dy, float *dx, int N) {
    if (!st->noisy) pass_grad(m, st, dy, dx, N);
    else m->be->sample_scale(dy, st->scale, dx, N, (size_t)st->H * st->W * st->C);
}

static void sd_node_backward(Slots *s, ModelStep *st, float *dy, int N) { backward_to_input(s, st, dy, N, sd_grad); }

const NodeKindDef node_kind_stochastic_depth = {
    .name = "stochastic_depth",
    .doc = "torchvision's `StochasticDepth(p, \"row\")`: in training each image's input zeroed with probability p, "
           "the others scaled by 1/(1-p); the input itself in evaluation",
    .tensors = "",
    .inputs = 1,
    .fields = {{F_P, .need = 1, .rmin = 0.0f, .rmax = 1.0f, .write_always = 1}},
    .n_fields = 1,
    .shape = drop_shape,
    .backend_lacks = sd_backend_lacks,
    .alloc = sd_alloc,
    .release = sd_release,
    .forward = sd_node_forward,
    .backward = sd_node_backward,
    .onnx = drop_onnx,
};
