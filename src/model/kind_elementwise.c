/* SPDX-License-Identifier: BSD-3-Clause */
/* kind_elementwise.c - the nodes that work value by value: "relu" (one that follows no batch
 * norm: after one, the executor fuses it into the batch norm's step), "add" (a residual join
 * of two maps of one shape) and "mul" (a map times a per-image, per-channel scale: the gate of
 * squeeze-excitation). The other activation functions are kind_act.c's. */
#include "model_step.h"
#include "onnx.h"

/* ---- relu --------------------------------------------------------------------------------- */

static const char *relu_backend_lacks(const Backend *be, const NetNode *n) {
    (void)n;
    return be->relu_forward ? NULL : "ReLU outside a batch norm";
}

static void relu_node_forward(Model *m, ModelStep *st, int N, int train) {
    (void)train;
    m->be->relu_forward(model_value(m, st->in), st->y, step_numel(st, N));
}

static void relu_grad(const Model *m, const ModelStep *st, float *dy, float *dx, int N) {
    m->be->relu_mask_copy(dy, st->y, dx, step_numel(st, N));
}

static void relu_node_backward(Slots *s, ModelStep *st, float *dy, int N) { backward_to_input(s, st, dy, N, relu_grad); }

static int relu_onnx(OnnxGraph *g, const NetNode *n) {
    int rank;
    const char *x = onnx_in_any(g, n, 0, &rank);
    onnx_op(g, "Relu", onnx_out(g, n, rank), x, NULL);
    return 0;
}

const NodeKindDef node_kind_relu = {
    .name = "relu",
    .doc = "max(x, 0)",
    .tensors = "",
    .inputs = 1,
    .backend_lacks = relu_backend_lacks,
    .forward = relu_node_forward,
    .backward = relu_node_backward,
    .onnx = relu_onnx,
};

/* ---- add ---------------------------------------------------------------------------------- */

static int add_shape(NetNode *n, const NetNode *const *ins, const NetCheck *c) {
    const NetNode *b = ins[1];
    if (b->C != n->C) return node_err(c, n, "residual", "%d channels added to %d", b->C, n->C);
    if (b->H != n->H || b->W != n->W)
        return node_err(c, n, "residual", "a %dx%d map added to a %dx%d one", b->H, b->W, n->H, n->W);
    return 0;
}

static void add_node_forward(Model *m, ModelStep *st, int N, int train) {
    (void)train;
    const size_t n = step_numel(st, N);
    m->be->copy(st->y, model_value(m, st->in), n * step_elem_bytes(m, st));
    m->be->add_act_inplace(st->y, model_value(m, st->in2), n);
}

/* Both operands get dy as it is: the residual's first, as the fused step hands it. */
static void add_node_backward(Slots *s, ModelStep *st, float *dy, int N) {
    const int ins[2] = {st->in2, st->in};
    for (int q = 0; q < 2; q++) {
        if (ins[q] < 0) continue;
        GradOut g;
        float *d = grad_begin(s, ins[q], &g);
        if (!s->dry) s->m->be->copy(d, dy, step_numel(st, N) * step_elem_bytes(s->m, st));
        grad_done(s, &g, N);
    }
}

/* Two matrices stay matrices; otherwise both as maps. */
static int add_onnx(OnnxGraph *g, const NetNode *n) {
    int ra, rb;
    const char *a = onnx_in_any(g, n, 0, &ra), *b = onnx_in_any(g, n, 1, &rb);
    if (ra != rb) {
        a = onnx_in(g, n, 0);
        b = onnx_in(g, n, 1);
    }
    onnx_op(g, "Add", onnx_out(g, n, ra == rb ? ra : 4), a, b, NULL);
    return 0;
}

const NodeKindDef node_kind_add = {
    .name = "add",
    .doc = "in + residual, of the same shape",
    .tensors = "",
    .inputs = 2,
    .fields = {{F_RESIDUAL, .need = 1, .write_always = 1}},
    .n_fields = 1,
    .shape = add_shape,
    .forward = add_node_forward,
    .backward = add_node_backward,
    .onnx = add_onnx,
};

/* ---- mul ---------------------------------------------------------------------------------- */

static int mul_shape(NetNode *n, const NetNode *const *ins, const NetCheck *c) {
    const NetNode *b = ins[1];
    if (b->C != n->C) return node_err(c, n, "scale", "%d channels scale %d", b->C, n->C);
    if (b->H != 1 || b->W != 1)
        return node_err(c, n, "scale", "a scale is one value per channel (a 1x1 map, after a global average pool), "
                        "not %dx%d", b->H, b->W);
    return 0;
}

static const char *mul_backend_lacks(const Backend *be, const NetNode *n) {
    (void)n;
    return be->mul_forward && be->mul_backward ? NULL : "squeeze-excitation multiply (mul)";
}

static void mul_node_forward(Model *m, ModelStep *st, int N, int train) {
    (void)train;
    m->be->mul_forward(model_value(m, st->in), model_value(m, st->in2), st->y, N, st->H * st->W, st->C);
}

/* Both gradients at once: the map's dy * scale and the scale's sum over pixels of dy * x. An
 * operand that is the image needs no gradient, but the kernel writes both: a scratch slot
 * takes it (in the dry run too, which counts the slots). */
static void mul_node_backward(Slots *s, ModelStep *st, float *dy, int N) {
    Model *m = s->m;
    if (st->in < 0 && st->in2 < 0) return;
    GradOut gx = {-1, 0, 0}, gs = {-1, 0, 0};
    float *dx = st->in >= 0 ? grad_begin(s, st->in, &gx) : NULL;
    float *ds = st->in2 >= 0 ? grad_begin(s, st->in2, &gs) : NULL;
    const int t = st->in < 0 || st->in2 < 0 ? slot_take(s, st->grad_bytes) : -1;
    if (!s->dry)
        m->be->mul_backward(model_value(m, st->in), model_value(m, st->in2), dy, st->in >= 0 ? dx : slot_ptr(s, t),
                            st->in2 >= 0 ? ds : slot_ptr(s, t), N, st->H * st->W, st->C);
    if (t >= 0) slot_give(s, t);
    if (gx.t >= 0) grad_done(s, &gx, N);
    if (gs.t >= 0) grad_done(s, &gs, N);
}

/* [N, C, 1, 1] times [N, C, H, W], by ONNX's broadcasting: the scale first, as torchvision's
 * `scale * input` exports, for OpenCV's reader (4.6) gives the product of a map by a
 * HardSigmoid's gate the gate's shape in the other order. */
static int mul_onnx(OnnxGraph *g, const NetNode *n) {
    const char *x = onnx_in(g, n, 0), *scale = onnx_in(g, n, 1);
    onnx_op(g, "Mul", onnx_out(g, n, 4), scale, x, NULL);
    return 0;
}

const NodeKindDef node_kind_mul = {
    .name = "mul",
    .doc = "in times scale, a 1x1 map of as many channels, per image and channel (squeeze-excitation's "
           "`input * scale`)",
    .tensors = "",
    .inputs = 2,
    .fields = {{F_SCALE, .need = 1, .write_always = 1}},
    .n_fields = 1,
    .shape = mul_shape,
    .backend_lacks = mul_backend_lacks,
    .forward = mul_node_forward,
    .backward = mul_node_backward,
    .onnx = mul_onnx,
};
