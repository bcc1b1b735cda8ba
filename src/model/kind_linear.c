/* SPDX-License-Identifier: BSD-3-Clause */
/* kind_linear.c - the "linear" node: nn.Linear on a 1x1 map (after a global average pool, or
 * another linear layer: a classifier of several), weight [out, in] and bias; out_features 0
 * means the number of classes. */
#include <math.h>

#include "base/rng.h"
#include "base/util.h"
#include "model_step.h"

static int linear_shape(NetNode *n, const NetNode *in2, const NetCheck *c) {
    (void)in2;
    if (n->H != 1 || n->W != 1)
        return node_err(c, n, "in", "a linear layer takes a 1x1 map (after a global average pool), not %dx%d", n->H,
                        n->W);
    if (n->out < 0 || n->out > NET_MAX_FEATURES)
        return node_err(c, n, "out_features", "%d is not in 1..%d", n->out, NET_MAX_FEATURES);
    n->C = n->out ? n->out : c->num_classes;
    return 0;
}

static void linear_layout(const Backend *be, const NetNode *n, ModelStep *st, Layout *P, Layout *B, Layout *NB) {
    (void)be; (void)B; (void)NB;
    st->w_off = layout_add(P, n->name, "weight", TENSOR_LINEAR_WEIGHT, -1, 2, n->C, st->C_in, 0, 0);
    st->b_off = layout_add(P, n->name, "bias", TENSOR_LINEAR_BIAS, -1, 1, n->C, 0, 0, 0);
}

/* nn.Linear's default (PyTorch's and ResNet's init): weight and bias uniform within
 * 1/sqrt(in). The other families' __init__ draw the weight and zero the bias: MobileNet and
 * RegNet normal(0, 0.01); EfficientNet uniform within 1/sqrt(out); MNASNet
 * kaiming_uniform_(mode="fan_out", nonlinearity="sigmoid"), within sqrt(3/out). */
static void linear_init(const Model *m, const ModelStep *st, float *params, float *buffers, Rng *r) {
    (void)buffers;
    const size_t nw = (size_t)st->C * st->C_in;
    float *w = params + st->w_off, *b = params + st->b_off;
    switch (m->net.init) {
    case NET_INIT_MOBILENET:
    case NET_INIT_REGNET: rng_fill_normal(r, w, nw, 0.01f); break;
    case NET_INIT_EFFICIENTNET: rng_fill_uniform(r, w, nw, 1.0f / sqrtf((float)st->C)); break;
    case NET_INIT_MNASNET: rng_fill_uniform(r, w, nw, sqrtf(3.0f / (float)st->C)); break;
    default: {
        const float bound = 1.0f / sqrtf((float)st->C_in);
        rng_fill_uniform(r, w, nw, bound);
        rng_fill_uniform(r, b, (size_t)st->C, bound);
        return;
    }
    }
    for (int i = 0; i < st->C; i++) b[i] = 0.0f;
}

static void linear_node_forward(Model *m, ModelStep *st, int N, int train) {
    (void)train;
    m->be->linear_forward(model_value(m, st->in), m->params + st->w_off, m->params + st->b_off, st->y, N, st->C_in,
                          st->C);
}

static void linear_node_backward(Slots *s, ModelStep *st, float *dy, int N) {
    Model *m = s->m;
    /* dx is needed by the linear kernel's contract; the image never feeds a linear layer */
    CHECK(st->in >= 0);
    GradOut g;
    float *dx = grad_begin(s, st->in, &g);
    if (!s->dry)
        m->be->linear_backward(model_value(m, st->in), m->params + st->w_off, dy, dx, m->grads + st->w_off,
                               m->grads + st->b_off, N, st->C_in, st->C);
    grad_done(s, &g, N);
}

static double linear_macs(const ModelStep *st) { return (double)st->C_in * st->C; }

const NodeKindDef node_kind_linear = {
    .name = "linear",
    .doc = "`nn.Linear` on a 1x1 map; the last node gives the logits",
    .tensors = "`NAME.weight`, `NAME.bias`",
    .inputs = 1,
    .float_out = 1,
    .fields = {{F_OUT_FEATURES, .min = 1, .def_doc = "`--num_classes`"}},
    .n_fields = 1,
    .shape = linear_shape,
    .layout = linear_layout,
    .init = linear_init,
    .forward = linear_node_forward,
    .backward = linear_node_backward,
    .macs = linear_macs,
};
