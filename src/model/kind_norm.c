/* SPDX-License-Identifier: BSD-3-Clause */
/* kind_norm.c - ConvNeXt's per-pixel nodes with parameters: "layernorm" (nn.LayerNorm over the
 * channels of each pixel: its LayerNorm2d, and the nn.LayerNorm its blocks apply after their
 * permute to channels-last, which NHWC maps already are) and "layer_scale" (its blocks' learned
 * per-channel factor, a parameter [C, 1, 1] named as the node, "features.1.0.layer_scale"). */
#include "base/rng.h"
#include "model_step.h"
#include "onnx.h"

/* ---- layernorm ---------------------------------------------------------------------------- */

static int layernorm_shape(NetNode *n, const NetNode *const *ins, const NetCheck *c) {
    (void)ins;
    if (!(n->eps > 0.0f && n->eps <= 1.0f)) return node_err(c, n, "eps", "%g is not in (0, 1]", (double)n->eps);
    return 0;
}

static const char *layernorm_backend_lacks(const Backend *be, const NetNode *n) {
    (void)n;
    return be->layernorm_forward && be->layernorm_backward ? NULL : "layer norm";
}

static void layernorm_layout(const Backend *be, const NetNode *n, ModelStep *st, Layout *P, Layout *B, Layout *NB) {
    (void)be; (void)B; (void)NB;
    st->w_off = layout_add(P, n->name, "weight", TENSOR_NORM_WEIGHT, -1, 1, n->C, 0, 0, 0);
    st->b_off = layout_add(P, n->name, "bias", TENSOR_NORM_BIAS, -1, 1, n->C, 0, 0, 0);
}

/* The statistics of every pixel of the last forward (max_batch images' worth). */
static void layernorm_alloc(const Backend *be, ModelStep *st, int max_batch) {
    const size_t M = (size_t)max_batch * st->H * st->W;
    st->mean = be->alloc(M * sizeof(float));
    st->invstd = be->alloc(M * sizeof(float));
}

static void layernorm_release(const Backend *be, ModelStep *st) {
    be->release(st->mean);
    be->release(st->invstd);
}

/* nn.LayerNorm's: weight 1, bias 0. */
static void layernorm_init(const Model *m, const ModelStep *st, float *params, float *buffers, Rng *r) {
    (void)m; (void)buffers; (void)r;
    for (int i = 0; i < st->C; i++) {
        params[st->w_off + i] = 1.0f;
        params[st->b_off + i] = 0.0f;
    }
}

static void layernorm_node_forward(Model *m, ModelStep *st, int N, int train) {
    (void)train;
    m->be->layernorm_forward(model_value(m, st->in), st->y, st->mean, st->invstd, m->params + st->w_off,
                             m->params + st->b_off, (size_t)N * st->H * st->W, st->C, st->eps);
}

static void layernorm_node_backward(Slots *s, ModelStep *st, float *dy, int N) {
    Model *m = s->m;
    const size_t M = (size_t)N * st->H * st->W;
    GradOut g = {-1, 0, 0};
    /* on the image (a network that normalises its input), the parameters' gradients only: dx
     * goes to dy's own slot, which is not read again */
    float *dx = st->in >= 0 ? grad_begin(s, st->in, &g) : dy;
    if (!s->dry)
        m->be->layernorm_backward(model_value(m, st->in), dy, st->mean, st->invstd, m->params + st->w_off, dx,
                                  m->grads + st->w_off, m->grads + st->b_off, M, st->C);
    if (g.t >= 0) grad_done(s, &g, N);
}

/* nn.LayerNorm over the channels of each pixel (the biased variance), in opset 13's operators:
 * LayerNormalization (opset 17) normalises over trailing axes, and NCHW's channels are axis 1.
 * The weight and bias as [C, 1, 1], to broadcast over the pixels. */
static int layernorm_onnx(OnnxGraph *g, const NetNode *n) {
    const char *x = onnx_in(g, n, 0), *y = onnx_out(g, n, 4);
    const char *mean = onnx_tmp(g, n, "mean"), *d = onnx_tmp(g, n, "centred"), *sq = onnx_tmp(g, n, "squared"),
               *var = onnx_tmp(g, n, "var"), *ve = onnx_tmp(g, n, "var_eps"), *sd = onnx_tmp(g, n, "std"),
               *nrm = onnx_tmp(g, n, "normalised"), *sc = onnx_tmp(g, n, "scaled");
    const int64_t axis1[1] = {1}, chw[3] = {n->C, 1, 1};
    onnx_op(g, "ReduceMean", mean, x, NULL);
    onnx_attr_ints(g, "axes", 1, axis1);
    onnx_op(g, "Sub", d, x, mean, NULL);
    onnx_op(g, "Mul", sq, d, d, NULL);
    onnx_op(g, "ReduceMean", var, sq, NULL);
    onnx_attr_ints(g, "axes", 1, axis1);
    onnx_op(g, "Add", ve, var, onnx_const(g, n, "eps", 0, NULL, &n->eps), NULL);
    onnx_op(g, "Sqrt", sd, ve, NULL);
    onnx_op(g, "Div", nrm, d, sd, NULL);
    onnx_op(g, "Mul", sc, nrm, onnx_param(g, n, "weight", 3, chw), NULL);
    onnx_op(g, "Add", y, sc, onnx_param(g, n, "bias", 3, chw), NULL);
    return 0;
}

const NodeKindDef node_kind_layernorm = {
    .name = "layernorm",
    .doc = "`nn.LayerNorm` over the channels of each pixel (ConvNeXt's `LayerNorm2d`)",
    .tensors = "`NAME.weight`, `NAME.bias`",
    .inputs = 1,
    .fields = {{F_EPS, .rdef = 1e-5f, .rmin = 1e-12f, .rmax = 1.0f, .def_doc = "1e-5"}},
    .n_fields = 1,
    .shape = layernorm_shape,
    .backend_lacks = layernorm_backend_lacks,
    .layout = layernorm_layout,
    .alloc = layernorm_alloc,
    .release = layernorm_release,
    .init = layernorm_init,
    .forward = layernorm_node_forward,
    .backward = layernorm_node_backward,
    .onnx = layernorm_onnx,
};

/* ---- layer_scale -------------------------------------------------------------------------- */

static const char *layer_scale_backend_lacks(const Backend *be, const NetNode *n) {
    (void)n;
    return be->channel_scale_forward && be->channel_scale_backward ? NULL : "layer scale";
}

static void layer_scale_layout(const Backend *be, const NetNode *n, ModelStep *st, Layout *P, Layout *B, Layout *NB) {
    (void)be; (void)B; (void)NB;
    st->w_off = layout_add(P, n->name, "", TENSOR_LAYER_SCALE, -1, 3, n->C, 1, 1, 0);
}

/* torch.ones(dim, 1, 1) * layer_scale */
static void layer_scale_init(const Model *m, const ModelStep *st, float *params, float *buffers, Rng *r) {
    (void)buffers; (void)r;
    const float v = step_node(m, st)->value;
    for (int i = 0; i < st->C; i++) params[st->w_off + i] = v;
}

static void layer_scale_node_forward(Model *m, ModelStep *st, int N, int train) {
    (void)train;
    m->be->channel_scale_forward(model_value(m, st->in), m->params + st->w_off, st->y, (size_t)N * st->H * st->W,
                                 st->C);
}

static void layer_scale_node_backward(Slots *s, ModelStep *st, float *dy, int N) {
    Model *m = s->m;
    GradOut g = {-1, 0, 0};
    float *dx = st->in >= 0 ? grad_begin(s, st->in, &g) : dy;
    if (!s->dry)
        m->be->channel_scale_backward(model_value(m, st->in), m->params + st->w_off, dy, dx, m->grads + st->w_off,
                                      (size_t)N * st->H * st->W, st->C);
    if (g.t >= 0) grad_done(s, &g, N);
}

/* Its [C, 1, 1] tensor broadcasts over an NCHW map as it is. */
static int layer_scale_onnx(OnnxGraph *g, const NetNode *n) {
    const char *x = onnx_in(g, n, 0);
    onnx_op(g, "Mul", onnx_out(g, n, 4), x, onnx_param(g, n, "", 0, NULL), NULL);
    return 0;
}

const NodeKindDef node_kind_layer_scale = {
    .name = "layer_scale",
    .doc = "a learned factor per channel, starting at `value` (ConvNeXt's `layer_scale`)",
    .tensors = "`NAME` [C, 1, 1]",
    .inputs = 1,
    .fields = {{F_VALUE, .rdef = 1e-6f, .rmin = -1e6f, .rmax = 1e6f, .def_doc = "1e-6"}},
    .n_fields = 1,
    .backend_lacks = layer_scale_backend_lacks,
    .layout = layer_scale_layout,
    .init = layer_scale_init,
    .forward = layer_scale_node_forward,
    .backward = layer_scale_node_backward,
    .onnx = layer_scale_onnx,
};
