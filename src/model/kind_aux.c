/* SPDX-License-Identifier: BSD-3-Clause */
/* kind_aux.c - what GoogLeNet and Inception v3 add around their trunks: "aux_loss" (an
 * auxiliary classifier's cross-entropy, times its weight, added to the training loss: the
 * papers' 0.3 for each of GoogLeNet's two, 0.4 for Inception v3's) and "transform_input"
 * (torchvision's transform_input=True, for the weights ported from Google's, which were
 * trained on images normalised to [-1, 1]).
 *
 * An aux_loss is a sink (node_kind.h): no node reads it, and it and the nodes that only feed
 * it run in training forwards alone, as torchvision's modules run their auxiliary heads only
 * when self.training. */
#include "model_step.h"
#include "onnx.h"

/* ---- aux_loss ------------------------------------------------------------------------------ */

static int aux_shape(NetNode *n, const NetNode *const *ins, const NetCheck *c) {
    (void)ins;
    if (n->H != 1 || n->W != 1 || n->C != c->num_classes)
        return node_err(c, n, "in", "an auxiliary loss takes logits, %d values on a 1x1 map, not %dx%dx%d",
                        c->num_classes, n->C, n->H, n->W);
    if (!(n->value >= 0.0f && n->value <= 1e3f)) return node_err(c, n, "weight", "%g is not in 0..1000", (double)n->value);
    return 0;
}

static int aux_float_out(const NetNode *n) {
    (void)n;
    return 1;
}

static void aux_alloc(const Backend *be, ModelStep *st, int max_batch) {
    st->dlogits = be->alloc((size_t)max_batch * st->C * sizeof(float));
    st->aux_loss = be->alloc(sizeof(float));
    st->aux_weight = be->alloc(sizeof(float));
    st->aux_correct = be->alloc(sizeof(int));
}

static void aux_release(const Backend *be, ModelStep *st) {
    be->release(st->dlogits);
    be->release(st->aux_loss);
    be->release(st->aux_weight);
    be->release(st->aux_correct);
}

/* Its loss and its gradient, d(weight * loss * loss_scale)/dlogits, as the logits' own
 * (label smoothing and the mixed-precision scale included). */
static void aux_node_forward(Model *m, ModelStep *st, int N, int train) {
    if (!train) return;
    const Backend *be = m->be;
    const float w = step_node(m, st)->value;
    if (!st->aux_ready) {   /* the weight into backend memory, where add_loss multiplies by it */
        be->upload(st->aux_weight, &w, sizeof w);
        st->aux_ready = 1;
    }
    be->softmax_xent(model_value(m, st->in), m->labels, N, st->C, m->loss_scale * w, m->label_smoothing, m->mix, st->dlogits,
                     st->aux_loss, st->aux_correct);
    if (m->grad_scale) be->scale_inplace(st->dlogits, (size_t)N * st->C, m->grad_scale);
}

static void aux_add_loss(Model *m, ModelStep *st, int N) {
    (void)N;
    m->be->scale_inplace(st->aux_loss, 1, st->aux_weight);
    m->be->add_inplace(m->loss, st->aux_loss, 1);
}

static void aux_node_backward(Slots *s, ModelStep *st, float *dy, int N) {
    (void)dy;
    Model *m = s->m;
    GradOut g;
    float *dx = grad_begin(s, st->in, &g);
    if (!s->dry) m->be->copy(dx, st->dlogits, (size_t)N * st->C * sizeof(float));
    grad_done(s, &g, N);
}

const NodeKindDef node_kind_aux_loss = {
    .name = "aux_loss",
    .doc = "an auxiliary classifier's cross-entropy on its input's logits, times `weight`, added to the training loss "
           "(it and the nodes that only feed it run in training alone; `--aux_logits false` leaves them out)",
    .tensors = "",
    .inputs = 1,
    .float_out = aux_float_out,
    .sink = 1,
    .fields = {{F_WEIGHT, .need = 1, .rmin = 0.0f, .rmax = 1e3f, .write_always = 1}},
    .n_fields = 1,
    .shape = aux_shape,
    .alloc = aux_alloc,
    .release = aux_release,
    .forward = aux_node_forward,
    .add_loss = aux_add_loss,
    .backward = aux_node_backward,
    /* no .onnx: a sink has no value at evaluation, and the export leaves it out with the nodes
     * that only feed it */
};

/* ---- transform_input ----------------------------------------------------------------------- */

/* torchvision's GoogLeNet._transform_input: channel c becomes x * (std[c] / 0.5) +
 * (mean[c] - 0.5) / 0.5 with ImageNet's mean and std, the constants computed in double and
 * rounded to float as PyTorch's scalar arithmetic on a float tensor rounds them. */
static const double k_mean[3] = {0.485, 0.456, 0.406}, k_std[3] = {0.229, 0.224, 0.225};

static int transform_shape(NetNode *n, const NetNode *const *ins, const NetCheck *c) {
    (void)ins;
    if (n->C != 3) return node_err(c, n, "in", "transform_input takes the 3-channel image, not %d channels", n->C);
    return 0;
}

static const char *transform_backend_lacks(const Backend *be, const NetNode *n) {
    (void)n;
    return be->channel_affine ? NULL : "transform_input";
}

/* Its two constants per channel, kept where the step's statistics would be, and zeros for the
 * backward's shift. */
static void transform_alloc(const Backend *be, ModelStep *st, int max_batch) {
    (void)max_batch;
    float a[3], b[3];
    for (int c = 0; c < 3; c++) {
        a[c] = (float)(k_std[c] / 0.5);
        b[c] = (float)((k_mean[c] - 0.5) / 0.5);
    }
    st->mean = be->alloc(sizeof a);
    st->invstd = be->alloc(sizeof b);
    st->scale = be->alloc(sizeof b);
    be->upload(st->mean, a, sizeof a);
    be->upload(st->invstd, b, sizeof b);
}

static void transform_release(const Backend *be, ModelStep *st) {
    be->release(st->mean);
    be->release(st->invstd);
    be->release(st->scale);
}

static void transform_node_forward(Model *m, ModelStep *st, int N, int train) {
    (void)train;
    m->be->channel_affine(model_value(m, st->in), st->y, (size_t)N * st->H * st->W, 3, st->mean, st->invstd);
}

static void transform_grad(const Model *m, const ModelStep *st, float *dy, float *dx, int N) {
    m->be->channel_affine(dy, dx, (size_t)N * st->H * st->W, 3, st->mean, st->scale);
}

static void transform_node_backward(Slots *s, ModelStep *st, float *dy, int N) {
    backward_to_input(s, st, dy, N, transform_grad);
}

/* x * a + b per channel, a and b [1, 3, 1, 1] constants of the same floats as the forward's. */
static int transform_onnx(OnnxGraph *g, const NetNode *n) {
    float a[3], b[3];
    for (int c = 0; c < 3; c++) {
        a[c] = (float)(k_std[c] / 0.5);
        b[c] = (float)((k_mean[c] - 0.5) / 0.5);
    }
    const int64_t dims[4] = {1, 3, 1, 1};
    const char *x = onnx_in(g, n, 0), *scaled = onnx_tmp(g, n, "scaled");
    onnx_op(g, "Mul", scaled, x, onnx_const(g, n, "scale", 4, dims, a), NULL);
    onnx_op(g, "Add", onnx_out(g, n, 4), scaled, onnx_const(g, n, "shift", 4, dims, b), NULL);
    return 0;
}

const NodeKindDef node_kind_transform_input = {
    .name = "transform_input",
    .doc = "torchvision's `transform_input` of GoogLeNet and Inception v3: ImageNet-normalised channels renormalised "
           "to Google's [-1, 1] (`--transform_input`)",
    .tensors = "",
    .inputs = 1,
    .shape = transform_shape,
    .backend_lacks = transform_backend_lacks,
    .alloc = transform_alloc,
    .release = transform_release,
    .forward = transform_node_forward,
    .backward = transform_node_backward,
    .onnx = transform_onnx,
};
