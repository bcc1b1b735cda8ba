/* SPDX-License-Identifier: BSD-3-Clause */
/* kind_pool.c - the nodes that slide a fixed window and hold no parameter: "maxpool"
 * (nn.MaxPool2d), "avgpool" (the global average pool, nn.AdaptiveAvgPool2d(1)) and "blur"
 * (FFCV's BlurPool filter, netspec_blurpool). */
#include "model_step.h"

/* ---- maxpool ------------------------------------------------------------------------------ */

static int maxpool_shape(NetNode *n, const NetNode *in2, const NetCheck *c) {
    (void)in2;
    if (n->pad < 0 || 2 * n->pad > n->k)
        return node_err(c, n, "padding", "%d is not in 0..%d (at most half the kernel, as nn.MaxPool2d)", n->pad,
                        n->k / 2);
    return node_window(n, n->H, n->W, c);
}

static const char *maxpool_backend_lacks(const Backend *be, const NetNode *n) {
    (void)n;
    return be->maxpool_forward && be->maxpool_backward ? NULL : "max pooling";
}

/* The input pixel each output took, for the backward (and for comparisons that replay it). */
static void maxpool_alloc(const Backend *be, ModelStep *st, int max_batch) {
    st->arg = be->alloc((size_t)max_batch * st->H * st->W * st->C * sizeof(int32_t));
}

static void maxpool_release(const Backend *be, ModelStep *st) { be->release(st->arg); }

static void maxpool_node_forward(Model *m, ModelStep *st, int N, int train) {
    (void)train;
    m->be->maxpool_forward(model_value(m, st->in), st->y, st->arg, N, st->H_in, st->W_in, st->C, st->k, st->stride,
                           st->pad);
}

static void maxpool_grad(const Model *m, const ModelStep *st, float *dy, float *dx, int N) {
    m->be->maxpool_backward(dy, st->arg, dx, N, st->H_in, st->W_in, st->C, st->k, st->stride, st->pad);
}

static void maxpool_node_backward(Slots *s, ModelStep *st, float *dy, int N) { backward_to_input(s, st, dy, N, maxpool_grad); }

const NodeKindDef node_kind_maxpool = {
    .name = "maxpool",
    .doc = "as `nn.MaxPool2d` (ceil_mode False); PyTorch's choice among ties",
    .tensors = "",
    .inputs = 1,
    .fields = {{F_KERNEL, .need = 1, .write_always = 1},
               {F_STRIDE, .def_kernel_div = 1, .write_always = 1, .def_doc = "kernel"},
               {F_PADDING, .def = 0, .write_always = 1, .def_doc = "0"}},
    .n_fields = 3,
    .shape = maxpool_shape,
    .backend_lacks = maxpool_backend_lacks,
    .alloc = maxpool_alloc,
    .release = maxpool_release,
    .forward = maxpool_node_forward,
    .backward = maxpool_node_backward,
};

/* ---- avgpool ------------------------------------------------------------------------------ */

static int avgpool_shape(NetNode *n, const NetNode *in2, const NetCheck *c) {
    (void)in2; (void)c;
    n->H = n->W = 1;
    return 0;
}

static void avgpool_node_forward(Model *m, ModelStep *st, int N, int train) {
    (void)train;
    m->be->avgpool_forward(model_value(m, st->in), st->y, N, st->H_in * st->W_in, st->C);
}

static void avgpool_grad(const Model *m, const ModelStep *st, float *dy, float *dx, int N) {
    m->be->avgpool_backward(dy, dx, N, st->H_in * st->W_in, st->C);
}

static void avgpool_node_backward(Slots *s, ModelStep *st, float *dy, int N) { backward_to_input(s, st, dy, N, avgpool_grad); }

const NodeKindDef node_kind_avgpool = {
    .name = "avgpool",
    .doc = "the global average pool to 1x1, `nn.AdaptiveAvgPool2d(1)`",
    .tensors = "",
    .inputs = 1,
    .float_out = 1,
    .shape = avgpool_shape,
    .forward = avgpool_node_forward,
    .backward = avgpool_node_backward,
};

/* ---- blur --------------------------------------------------------------------------------- */

static const char *blur_backend_lacks(const Backend *be, const NetNode *n) {
    (void)n;
    return be->blur ? NULL : "blur";
}

/* Stride 1 and padding 1 keep the input's shape: no shape rule. */
static void blur_node_forward(Model *m, ModelStep *st, int N, int train) {
    (void)train;
    m->be->blur(model_value(m, st->in), st->y, N, st->H, st->W, st->C);
}

/* The kernel is symmetric and keeps the shape: the blur is its own adjoint. */
static void blur_grad(const Model *m, const ModelStep *st, float *dy, float *dx, int N) {
    m->be->blur(dy, dx, N, st->H, st->W, st->C);
}

static void blur_node_backward(Slots *s, ModelStep *st, float *dy, int N) { backward_to_input(s, st, dy, N, blur_grad); }

const NodeKindDef node_kind_blur = {
    .name = "blur",
    .doc = "[1 2 1]^T [1 2 1] / 16 per channel, stride 1, zero padding 1 ([BlurPool](#blurpool))",
    .tensors = "",
    .inputs = 1,
    .backend_lacks = blur_backend_lacks,
    .forward = blur_node_forward,
    .backward = blur_node_backward,
};
