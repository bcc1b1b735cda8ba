/* SPDX-License-Identifier: BSD-3-Clause */
/* kind_linear.c - the "linear" node: nn.Linear over the channels, weight [out, in] and bias;
 * out_features 0 means the number of classes. On a 1x1 map it is a classifier's layer (after a
 * global average pool, a flatten, or another linear layer); on a larger one it applies at
 * every pixel, as nn.Linear on a channels-last tensor does (ConvNeXt's blocks). */
#include <math.h>

#include "base/rng.h"
#include "base/util.h"
#include "model_step.h"
#include "onnx.h"

static int linear_shape(NetNode *n, const NetNode *const *ins, const NetCheck *c) {
    (void)ins;
    if (n->out < 0 || n->out > NET_MAX_FEATURES)
        return node_err(c, n, "out_features", "%d is not in 1..%d", n->out, NET_MAX_FEATURES);
    n->C = n->out ? n->out : c->num_classes;
    return 0;
}

/* The GPU backend's kernels add a bias always and have no scalar scale after them yet. */
static const char *linear_backend_lacks(const Backend *be, const NetNode *n) {
    return be->on_device && (!n->bias || n->output_scale != 1.0f) ? "linear layer without bias or with an output_scale"
                                                                   : NULL;
}

static void linear_layout(const Backend *be, const NetNode *n, ModelStep *st, Layout *P, Layout *B, Layout *NB) {
    (void)be; (void)B; (void)NB;
    st->w_off = layout_add(P, n->name, "weight", TENSOR_LINEAR_WEIGHT, -1, 2, n->C, st->C_in, 0, 0);
    if (n->bias) st->b_off = layout_add(P, n->name, "bias", TENSOR_LINEAR_BIAS, -1, 1, n->C, 0, 0, 0);
}

/* "output_scale" other than 1: the constant on the backend, for scale_inplace */
static void linear_alloc(const Backend *be, ModelStep *st, int max_batch) {
    (void)max_batch;
    st->scale = be->alloc(sizeof(float));
}

static void linear_release(const Backend *be, ModelStep *st) { be->release(st->scale); }

/* nn.Linear's default (PyTorch's, ResNet's, AlexNet's, ShuffleNet's init): weight and bias
 * uniform within 1/sqrt(in). The other families' __init__: MobileNet, RegNet and VGG draw the
 * weight normal(0, 0.01) and zero the bias; EfficientNet uniform within 1/sqrt(out); MNASNet
 * kaiming_uniform_(mode="fan_out", nonlinearity="sigmoid"), within sqrt(3/out); DenseNet keeps
 * the default weight and zeroes the bias; GoogLeNet and Inception v3 draw the weight from
 * trunc_normal_ (std 0.01; Inception 0.1 or the module's stddev: init_std; a normal, the bounds
 * 20 deviations out) and keep the default bias; ConvNeXt trunc_normal_(std=0.02), zero bias. */
static void linear_init(const Model *m, const ModelStep *st, float *params, float *buffers, Rng *r) {
    (void)buffers;
    const NetNode *node = step_node(m, st);
    const size_t nw = (size_t)st->C * st->C_in;
    float *w = params + st->w_off, *b = node->bias ? params + st->b_off : NULL;
    m->be->upload(st->scale, &node->output_scale, sizeof(float));
    switch (m->net.init) {
    case NET_INIT_MOBILENET:
    case NET_INIT_REGNET: rng_fill_normal(r, w, nw, 0.01f); break;
    case NET_INIT_EFFICIENTNET: rng_fill_uniform(r, w, nw, 1.0f / sqrtf((float)st->C)); break;
    case NET_INIT_MNASNET: rng_fill_uniform(r, w, nw, sqrtf(3.0f / (float)st->C)); break;
    case NET_INIT_VGG: rng_fill_normal(r, w, nw, node->init_std > 0 ? node->init_std : 0.01f); break;
    case NET_INIT_CONVNEXT: rng_fill_normal(r, w, nw, node->init_std > 0 ? node->init_std : 0.02f); break;
    case NET_INIT_DENSENET: rng_fill_uniform(r, w, nw, 1.0f / sqrtf((float)st->C_in)); break;
    case NET_INIT_GOOGLENET:
    case NET_INIT_INCEPTION:
        rng_fill_normal(r, w, nw, node->init_std > 0 ? node->init_std : m->net.init == NET_INIT_GOOGLENET ? 0.01f : 0.1f);
        if (b) rng_fill_uniform(r, b, (size_t)st->C, 1.0f / sqrtf((float)st->C_in));
        return;
    default: {
        const float bound = 1.0f / sqrtf((float)st->C_in);
        rng_fill_uniform(r, w, nw, bound);
        if (b) rng_fill_uniform(r, b, (size_t)st->C, bound);
        return;
    }
    }
    for (int i = 0; b && i < st->C; i++) b[i] = 0.0f;
}

/* Without a bias the kernels take NULL for it (linear_cpu.h); the output scale after the sum, as
 * airbench's Mul follows its nn.Linear(bias=False), and on dy first in the backward. */
static void linear_node_forward(Model *m, ModelStep *st, int N, int train) {
    (void)train;
    const NetNode *n = step_node(m, st);
    m->be->linear_forward(model_value(m, st->in), m->params + st->w_off, n->bias ? m->params + st->b_off : NULL, st->y,
                          N * st->H * st->W, st->C_in, st->C);
    if (n->output_scale != 1.0f) m->be->scale_inplace(st->y, (size_t)N * st->H * st->W * st->C, st->scale);
}

static void linear_node_backward(Slots *s, ModelStep *st, float *dy, int N) {
    Model *m = s->m;
    /* dx is needed by the linear kernel's contract; the image never feeds a linear layer */
    CHECK(st->in >= 0);
    const NetNode *n = step_node(m, st);
    GradOut g;
    float *dx = grad_begin(s, st->in, &g);
    if (!s->dry) {
        if (n->output_scale != 1.0f) m->be->scale_inplace(dy, (size_t)N * st->H * st->W * st->C, st->scale);
        m->be->linear_backward(model_value(m, st->in), m->params + st->w_off, dy, dx, m->grads + st->w_off,
                               n->bias ? m->grads + st->b_off : NULL, N * st->H * st->W, st->C_in, st->C);
    }
    grad_done(s, &g, N);
}

static double linear_macs(const ModelStep *st) { return (double)st->H * st->W * st->C_in * st->C; }

static int linear_float_out(const NetNode *n) { return n->H == 1 && n->W == 1; }

/* On a 1x1 map, Gemm of the flattened input and the [out, in] weight, transposed (transB); at
 * every pixel of a larger map, a 1x1 Conv whose weight is the same tensor as [out, in, 1, 1]. */
static int linear_onnx(OnnxGraph *g, const NetNode *n) {
    if (n->H == 1 && n->W == 1) {
        const char *x = onnx_in_flat(g, n, 0);
        /* without a bias the scale is Gemm's alpha; with one a scale is refused (not needed yet) */
        if (n->bias && n->output_scale != 1.0f) return onnx_err(g, n, "an output_scale with a bias has no ONNX form here");
        onnx_op(g, "Gemm", onnx_out(g, n, 2), x, onnx_param(g, n, "weight", 0, NULL),
                n->bias ? onnx_param(g, n, "bias", 0, NULL) : NULL, NULL);
        onnx_attr_int(g, "transB", 1);
        if (n->output_scale != 1.0f) onnx_attr_float(g, "alpha", n->output_scale);
        return 0;
    }
    if (!n->bias || n->output_scale != 1.0f) return onnx_err(g, n, "a per-pixel linear layer without bias or with an "
                                                             "output_scale has no ONNX form here");
    int C, H, W;
    onnx_in_shape(g, n, 0, &C, &H, &W);
    const char *x = onnx_in(g, n, 0);
    onnx_op(g, "Conv", onnx_out(g, n, 4), x, onnx_param(g, n, "weight", 4, (const int64_t[]){n->C, C, 1, 1}),
            onnx_param(g, n, "bias", 0, NULL), NULL);
    onnx_attr_ints(g, "kernel_shape", 2, (const int64_t[]){1, 1});
    return 0;
}

const NodeKindDef node_kind_linear = {
    .name = "linear",
    .doc = "`nn.Linear` over the channels: a classifier's layer on a 1x1 map, at every pixel on a larger one; the last "
           "node gives the logits",
    .tensors = "`NAME.weight`, `NAME.bias` (with a bias)",
    .inputs = 1,
    .float_out = linear_float_out,
    .fields = {{F_OUT_FEATURES, .min = 1, .def_doc = "`--num_classes`"},
               {F_INIT_STD, .rmin = 0, .rmax = 10, .def_doc = "the family's"},
               {F_BIAS, .def = 1, .def_doc = "true"},
               {F_OUTPUT_SCALE, .rdef = 1.0f, .rmin = -1e6f, .rmax = 1e6f,
                .def_doc = "1; the output times this constant (airbench's `Mul(1/9)`)"}},
    .n_fields = 4,
    .shape = linear_shape,
    .backend_lacks = linear_backend_lacks,
    .layout = linear_layout,
    .alloc = linear_alloc,
    .release = linear_release,
    .init = linear_init,
    .forward = linear_node_forward,
    .backward = linear_node_backward,
    .macs = linear_macs,
    .onnx = linear_onnx,
};
