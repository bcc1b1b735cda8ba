/* SPDX-License-Identifier: BSD-3-Clause */
/* kind_pool.c - the nodes that slide a window and hold no parameter: "maxpool"
 * (nn.MaxPool2d), "avgpool" (the global average pool, nn.AdaptiveAvgPool2d(1), or with a kernel
 * nn.AvgPool2d), "adaptive_avgpool" (nn.AdaptiveAvgPool2d to a size) and "blur" (FFCV's
 * BlurPool filter, netspec_blurpool). */
#include "model_step.h"

/* ---- maxpool ------------------------------------------------------------------------------ */

/* A pool's window: square, its padding at most half of it (as nn.MaxPool2d and nn.AvgPool2d
 * require), and at least one pixel out. */
static int pool_window(NetNode *n, const NetCheck *c) {
    if (n->k != n->kw) return node_err(c, n, "kernel", "a pool's window is square, not %dx%d", n->k, n->kw);
    if (n->pad != n->padw) return node_err(c, n, "padding", "a pool's padding is the same on both axes");
    if (n->pad < 0 || 2 * n->pad > n->k)
        return node_err(c, n, "padding", "%d is not in 0..%d (at most half the kernel, as nn.MaxPool2d)", n->pad,
                        n->k / 2);
    return node_window(n, n->H, n->W, c);
}

static int maxpool_shape(NetNode *n, const NetNode *const *ins, const NetCheck *c) {
    (void)ins;
    return pool_window(n, c);
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
                           st->pad, step_node(m, st)->ceil_mode);
}

static void maxpool_grad(const Model *m, const ModelStep *st, float *dy, float *dx, int N) {
    m->be->maxpool_backward(dy, st->arg, dx, N, st->H_in, st->W_in, st->C, st->k, st->stride, st->pad,
                            step_node(m, st)->ceil_mode);
}

static void maxpool_node_backward(Slots *s, ModelStep *st, float *dy, int N) { backward_to_input(s, st, dy, N, maxpool_grad); }

const NodeKindDef node_kind_maxpool = {
    .name = "maxpool",
    .doc = "as `nn.MaxPool2d`; PyTorch's choice among ties",
    .tensors = "",
    .inputs = 1,
    .fields = {{F_KERNEL, .need = 1, .write_always = 1},
               {F_STRIDE, .def_kernel_div = 1, .write_always = 1, .def_doc = "kernel"},
               {F_PADDING, .def = 0, .write_always = 1, .def_doc = "0"},
               {F_CEIL_MODE, .def_doc = "false"}},
    .n_fields = 4,
    .shape = maxpool_shape,
    .backend_lacks = maxpool_backend_lacks,
    .alloc = maxpool_alloc,
    .release = maxpool_release,
    .forward = maxpool_node_forward,
    .backward = maxpool_node_backward,
};

/* ---- avgpool ------------------------------------------------------------------------------ */

/* No kernel: the global pool, whose output (the pooled features) is float32. */
static int avgpool_shape(NetNode *n, const NetNode *const *ins, const NetCheck *c) {
    (void)ins;
    if (n->k == 0 && n->kw == 0) {
        n->H = n->W = 1;
        return 0;
    }
    return pool_window(n, c);
}

static int avgpool_global(const NetNode *n) { return n->k == 0; }

static const char *avgpool_backend_lacks(const Backend *be, const NetNode *n) {
    if (avgpool_global(n)) return NULL;
    return be->avgpool2d_forward && be->avgpool2d_backward ? NULL : "windowed average pooling";
}

static void avgpool_node_forward(Model *m, ModelStep *st, int N, int train) {
    (void)train;
    const NetNode *n = step_node(m, st);
    if (avgpool_global(n))
        m->be->avgpool_forward(model_value(m, st->in), st->y, N, st->H_in * st->W_in, st->C);
    else
        m->be->avgpool2d_forward(model_value(m, st->in), st->y, N, st->H_in, st->W_in, st->C, st->H, st->W, n->k,
                                 n->stride, n->pad, n->count_pad);
}

static void avgpool_grad(const Model *m, const ModelStep *st, float *dy, float *dx, int N) {
    const NetNode *n = step_node(m, st);
    if (avgpool_global(n))
        m->be->avgpool_backward(dy, dx, N, st->H_in * st->W_in, st->C);
    else
        m->be->avgpool2d_backward(dy, dx, N, st->H_in, st->W_in, st->C, st->H, st->W, n->k, n->stride, n->pad,
                                  n->count_pad);
}

static void avgpool_node_backward(Slots *s, ModelStep *st, float *dy, int N) { backward_to_input(s, st, dy, N, avgpool_grad); }

const NodeKindDef node_kind_avgpool = {
    .name = "avgpool",
    .doc = "without a kernel, the global average pool to 1x1, `nn.AdaptiveAvgPool2d(1)`; with one, `nn.AvgPool2d`",
    .tensors = "",
    .inputs = 1,
    .float_out = avgpool_global,
    .fields = {{F_KERNEL, .def = 0, .def_doc = "none: global"},
               {F_STRIDE, .def_kernel_div = 1, .def_doc = "kernel"},
               {F_PADDING, .def = 0, .def_doc = "0"},
               {F_CEIL_MODE, .def_doc = "false"},
               {F_COUNT_INCLUDE_PAD, .def = 1, .def_doc = "true"}},
    .n_fields = 5,
    .shape = avgpool_shape,
    .backend_lacks = avgpool_backend_lacks,
    .forward = avgpool_node_forward,
    .backward = avgpool_node_backward,
};

/* ---- adaptive_avgpool --------------------------------------------------------------------- */

static int adaptive_shape(NetNode *n, const NetNode *const *ins, const NetCheck *c) {
    (void)ins;
    if (n->out_size < 1 || n->out_size > 4096)
        return node_err(c, n, "output_size", "%d is not in 1..4096", n->out_size);
    n->H = n->W = n->out_size;
    return 0;
}

static const char *adaptive_backend_lacks(const Backend *be, const NetNode *n) {
    (void)n;
    return be->adaptive_avgpool_forward && be->adaptive_avgpool_backward ? NULL : "adaptive average pooling";
}

static void adaptive_node_forward(Model *m, ModelStep *st, int N, int train) {
    (void)train;
    m->be->adaptive_avgpool_forward(model_value(m, st->in), st->y, N, st->H_in, st->W_in, st->C, st->H, st->W);
}

static void adaptive_grad(const Model *m, const ModelStep *st, float *dy, float *dx, int N) {
    m->be->adaptive_avgpool_backward(dy, dx, N, st->H_in, st->W_in, st->C, st->H, st->W);
}

static void adaptive_node_backward(Slots *s, ModelStep *st, float *dy, int N) {
    backward_to_input(s, st, dy, N, adaptive_grad);
}

const NodeKindDef node_kind_adaptive_avgpool = {
    .name = "adaptive_avgpool",
    .doc = "`nn.AdaptiveAvgPool2d(output_size)`: PyTorch's windows, which overlap or repeat pixels where the sizes do "
           "not divide",
    .tensors = "",
    .inputs = 1,
    .fields = {{F_OUTPUT_SIZE, .need = 1, .min = 1, .write_always = 1}},
    .n_fields = 1,
    .shape = adaptive_shape,
    .backend_lacks = adaptive_backend_lacks,
    .forward = adaptive_node_forward,
    .backward = adaptive_node_backward,
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
