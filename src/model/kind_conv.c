/* SPDX-License-Identifier: BSD-3-Clause */
/* kind_conv.c - the "conv" node: a convolution without bias (a batch norm follows it), as
 * nn.Conv2d(bias=False), its weight OIHW in the flat parameter buffer (node_kind.h). */
#include <math.h>

#include "base/rng.h"
#include "model_step.h"

static int conv_shape(NetNode *n, const NetNode *in2, const NetCheck *c) {
    (void)in2;
    if (n->out < 1 || n->out > NET_MAX_CHANNELS)
        return node_err(c, n, "out_channels", "%d is not in 1..%d", n->out, NET_MAX_CHANNELS);
    if (n->pad < 0 || n->pad >= n->k)
        return node_err(c, n, "padding", "%d is not in 0..%d (below the kernel size)", n->pad, n->k - 1);
    if (node_window(n, n->H, n->W, c)) return -1;
    n->C = n->out;
    return 0;
}

static void conv_layout(const Backend *be, const NetNode *n, ModelStep *st, Layout *P, Layout *B, Layout *NB) {
    (void)B; (void)NB;
    const ConvShape shape = {.C_in = st->C_in, .C_out = n->C, .k = n->k, .stride = n->stride, .pad = n->pad};
    be->conv2d_init(&st->conv, &shape);
    st->w_off = layout_add(P, n->name, "weight", TENSOR_CONV_WEIGHT, -1, 4, n->C, st->C_in, n->k, n->k);
}

static void conv_release(const Backend *be, ModelStep *st) { be->conv2d_free(&st->conv); }

static void conv_init(const Model *m, const ModelStep *st, float *params, float *buffers, Rng *r) {
    (void)buffers;
    const size_t fan_in = (size_t)st->C_in * st->k * st->k;
    const size_t n = (size_t)st->C * fan_in;
    if (m->net.init == NET_INIT_RESNET)   /* kaiming_normal_(mode="fan_out", nonlinearity="relu") */
        rng_fill_normal(r, params + st->w_off, n, sqrtf(2.0f / (float)((size_t)st->C * st->k * st->k)));
    else                                  /* kaiming_uniform_(a=sqrt(5)): bound 1/sqrt(fan_in) */
        rng_fill_uniform(r, params + st->w_off, n, 1.0f / sqrtf((float)fan_in));
}

static void conv_node_forward(Model *m, ModelStep *st, int N, int train) {
    (void)train;
    m->be->conv2d_forward(&st->conv, N, st->H_in, st->W_in, model_value(m, st->in), m->params + st->w_off, st->y);
}

/* The image needs no gradient: dx is NULL there, and the kernel skips backward-data. */
static void conv_node_backward(Slots *s, ModelStep *st, float *dy, int N) {
    Model *m = s->m;
    GradOut g = {-1, 0, 0};
    float *dx = st->in >= 0 ? grad_begin(s, st->in, &g) : NULL;
    if (!s->dry)
        m->be->conv2d_backward(&st->conv, N, st->H_in, st->W_in, model_value(m, st->in), m->params + st->w_off, dy, dx,
                               m->grads + st->w_off);
    if (g.t >= 0) grad_done(s, &g, N);
}

static void conv_params_changed(const Backend *be, ModelStep *st) { be->conv2d_weights_changed(&st->conv); }

/* As a direct convolution, whichever algorithm the backend picks. */
static double conv_macs(const ModelStep *st) { return (double)st->H * st->W * st->C * st->C_in * st->k * st->k; }

const NodeKindDef node_kind_conv = {
    .name = "conv",
    .doc = "a convolution without bias (a batch norm follows), as `nn.Conv2d(bias=False)`",
    .tensors = "`NAME.weight`",
    .inputs = 1,
    .fields = {{F_OUT_CHANNELS, .need = 1, .write_always = 1},
               {F_KERNEL, .need = 1, .write_always = 1},
               {F_STRIDE, .def = 1, .write_always = 1, .def_doc = "1"},
               {F_PADDING, .def_kernel_div = 2, .write_always = 1, .def_doc = "kernel/2"}},
    .n_fields = 4,
    .shape = conv_shape,
    .layout = conv_layout,
    .release = conv_release,
    .init = conv_init,
    .forward = conv_node_forward,
    .backward = conv_node_backward,
    .params_changed = conv_params_changed,
    .macs = conv_macs,
};
