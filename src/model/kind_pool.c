/* SPDX-License-Identifier: BSD-3-Clause */
/* kind_pool.c - the nodes that slide a window and hold no parameter: "maxpool"
 * (nn.MaxPool2d), "avgpool" (the global average pool, nn.AdaptiveAvgPool2d(1), or with a kernel
 * nn.AvgPool2d), "adaptive_avgpool" (nn.AdaptiveAvgPool2d to a size) and "blur" (FFCV's
 * BlurPool filter, netspec_blurpool). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "model_step.h"
#include "onnx.h"

/* ---- maxpool ------------------------------------------------------------------------------ */

/* ceil(a / b) for any sign of a, b > 0. */
static int ceil_div(int a, int b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

/* A windowed pool as MaxPool or AveragePool. Under ceil_mode ONNX counts every window that
 * starts before the end of the padded input (ceil((H + 2 pad - k) / stride) + 1), PyTorch drops
 * one that would start in the right padding: the export needs the two counts equal. And an
 * average that counts the padding divides a window running past the padded input by the part
 * inside it in PyTorch, by runtimes' own rules elsewhere: refused. An average that counts the
 * padding (Inception's 3x3 pools) is an AveragePool of the zero-padded map, the same numbers:
 * OpenCV's reader (4.6) takes count_include_pad for 0. */
static int pool_onnx(OnnxGraph *g, const NetNode *n, const char *op, int count_pad) {
    int C, H, W;
    onnx_in_shape(g, n, 0, &C, &H, &W);
    if (n->ceil_mode) {
        const int oh = ceil_div(H + 2 * n->pad - n->k, n->stride) + 1, ow = ceil_div(W + 2 * n->pad - n->k, n->stride) + 1;
        if (oh != n->H || ow != n->W)
            return onnx_err(g, n, "ceil_mode: ONNX's %s gives %dx%d windows on the %dx%d input, PyTorch's %dx%d (its "
                            "last window would start in the padding)", op, oh, ow, H, W, n->H, n->W);
        if (count_pad && ((n->H - 1) * n->stride + n->k > H + 2 * n->pad || (n->W - 1) * n->stride + n->k > W + 2 * n->pad))
            return onnx_err(g, n, "ceil_mode with count_include_pad: the last window runs past the padded %dx%d input, "
                            "whose average ONNX runtimes divide otherwise than PyTorch", H, W);
    }
    const char *x = onnx_in(g, n, 0);
    const int pad_first = count_pad && n->pad > 0;
    if (pad_first) {
        const char *padded = onnx_tmp(g, n, "padded");
        const int64_t p = n->pad, pads[8] = {0, 0, p, p, 0, 0, p, p};   /* begins of N, C, H, W, then ends */
        onnx_op(g, "Pad", padded, x, onnx_const_ints(g, n, "pads", 8, pads), NULL);
        x = padded;
    }
    onnx_op(g, op, onnx_out(g, n, 4), x, NULL);
    onnx_attr_ints(g, "kernel_shape", 2, (const int64_t[]){n->k, n->k});
    onnx_attr_ints(g, "strides", 2, (const int64_t[]){n->stride, n->stride});
    if (!pad_first) onnx_attr_ints(g, "pads", 4, (const int64_t[]){n->pad, n->pad, n->pad, n->pad});
    onnx_attr_int(g, "ceil_mode", n->ceil_mode);
    if (!strcmp(op, "AveragePool")) onnx_attr_int(g, "count_include_pad", count_pad);
    return 0;
}

static int maxpool_onnx(OnnxGraph *g, const NetNode *n) { return pool_onnx(g, n, "MaxPool", 0); }

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
    .onnx = maxpool_onnx,
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

static int avgpool_onnx(OnnxGraph *g, const NetNode *n) {
    if (!avgpool_global(n)) return pool_onnx(g, n, "AveragePool", n->count_pad);
    const char *x = onnx_in(g, n, 0);
    onnx_op(g, "GlobalAveragePool", onnx_out(g, n, 4), x, NULL);
    return 0;
}

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
    .onnx = avgpool_onnx,
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

/* PyTorch's windows along one axis (2: rows, 3: columns) of x, `in` pixels to `out`: window i
 * is [floor(i in / out), ceil((i + 1) in / out)), each a Slice averaged by an AveragePool over
 * its length, the windows joined by a Concat into y. */
static void adaptive_axis(OnnxGraph *g, const NetNode *n, const char *x, int axis, int in, int out, const char *y) {
    const char **parts = mallocCheck((size_t)out * sizeof *parts);
    for (int i = 0; i < out; i++) {
        const int s = (int)((long)i * in / out), e = (int)(((long)(i + 1) * in + out - 1) / out);
        char what[64];
        snprintf(what, sizeof what, "%s%d", axis == 2 ? "row" : "column", i);
        parts[i] = onnx_slice(g, x, axis, s, e, onnx_tmp(g, n, what));
        if (e - s > 1) {
            snprintf(what, sizeof what, "%s%d_mean", axis == 2 ? "row" : "column", i);
            const char *mean = onnx_tmp(g, n, what);
            onnx_op(g, "AveragePool", mean, parts[i], NULL);
            onnx_attr_ints(g, "kernel_shape", 2, axis == 2 ? (const int64_t[]){e - s, 1} : (const int64_t[]){1, e - s});
            parts[i] = mean;
        }
    }
    onnx_op_list(g, "Concat", y, out, parts);
    onnx_attr_int(g, "axis", axis);
    free(parts);
}

/* One AveragePool where the output's side divides the input's (the windows do not overlap),
 * else the mean over rows, then over columns: an average over a box is one of its rows'. */
static int adaptive_onnx(OnnxGraph *g, const NetNode *n) {
    int C, H, W;
    onnx_in_shape(g, n, 0, &C, &H, &W);
    const int o = n->out_size;
    if (H == o && W == o) {
        onnx_pass(g, n, 0);
        return 0;
    }
    const char *x = onnx_in(g, n, 0), *y = onnx_out(g, n, 4);
    if (H % o == 0 && W % o == 0) {
        onnx_op(g, "AveragePool", y, x, NULL);
        onnx_attr_ints(g, "kernel_shape", 2, (const int64_t[]){H / o, W / o});
        onnx_attr_ints(g, "strides", 2, (const int64_t[]){H / o, W / o});
        return 0;
    }
    const char *rows = H == o ? x : W == o ? y : onnx_tmp(g, n, "rows");
    if (H != o) adaptive_axis(g, n, x, 2, H, o, rows);
    if (W != o) adaptive_axis(g, n, rows, 3, W, o, y);
    return 0;
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
    .onnx = adaptive_onnx,
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

/* A depthwise Conv of the fixed kernel, a constant of the graph's. */
static int blur_onnx(OnnxGraph *g, const NetNode *n) {
    static const float tap[3] = {1.0f, 2.0f, 1.0f};
    float *k = mallocCheck((size_t)n->C * 9 * sizeof(float));
    for (int c = 0; c < n->C; c++)
        for (int i = 0; i < 9; i++) k[c * 9 + i] = tap[i / 3] * tap[i % 3] / 16.0f;
    const char *x = onnx_in(g, n, 0);
    const char *w = onnx_const(g, n, "kernel", 4, (const int64_t[]){n->C, 1, 3, 3}, k);
    free(k);
    onnx_op(g, "Conv", onnx_out(g, n, 4), x, w, NULL);
    onnx_attr_ints(g, "kernel_shape", 2, (const int64_t[]){3, 3});
    onnx_attr_ints(g, "pads", 4, (const int64_t[]){1, 1, 1, 1});
    onnx_attr_int(g, "group", n->C);
    return 0;
}

const NodeKindDef node_kind_blur = {
    .name = "blur",
    .doc = "[1 2 1]^T [1 2 1] / 16 per channel, stride 1, zero padding 1 ([BlurPool](#blurpool))",
    .tensors = "",
    .inputs = 1,
    .backend_lacks = blur_backend_lacks,
    .forward = blur_node_forward,
    .backward = blur_node_backward,
    .onnx = blur_onnx,
};
