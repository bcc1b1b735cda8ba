/* SPDX-License-Identifier: BSD-3-Clause */
/* kind_channels.c - the nodes that join, part or reorder channels and hold no parameter:
 * "concat" (torch.cat along the channels: DenseNet's features, the branches of GoogLeNet's,
 * Inception's and SqueezeNet's modules, ShuffleNet's halves), "split" (a part of x.chunk),
 * "channel_shuffle" (ShuffleNet's) and "flatten" (torch.flatten(x, 1) before a classifier of
 * linear layers, in PyTorch's (C, H, W) order, so that torchvision's weights read the same
 * values). */
#include "base/util.h"
#include "model_step.h"
#include "onnx.h"

static const char *channels_backend_lacks(const Backend *be, const NetNode *n) {
    (void)n;
    return be->channel_copy && be->zero ? NULL : "channel copies (concat, split)";
}

/* ---- concat ------------------------------------------------------------------------------- */

static int concat_shape(NetNode *n, const NetNode *const *ins, const NetCheck *c) {
    long C = 0;
    for (int q = 0; q < n->n_ins; q++) {
        if (ins[q]->H != n->H || ins[q]->W != n->W)
            return node_err(c, n, "in", "input %d (\"%s\") is %dx%d, the first %dx%d: a concatenation joins maps of one "
                            "size", q + 1, ins[q]->name, ins[q]->H, ins[q]->W, n->H, n->W);
        C += ins[q]->C;
    }
    if (C > NET_MAX_CHANNELS) return node_err(c, n, "in", "%ld channels joined, above %d", C, NET_MAX_CHANNELS);
    n->C = (int)C;
    return 0;
}

static void concat_node_forward(Model *m, ModelStep *st, int N, int train) {
    (void)train;
    const size_t M = (size_t)N * st->H * st->W;
    int off = 0;
    for (int q = 0; q < st->n_ins; q++) {
        const int Cq = st->ins[q] == NET_INPUT ? 3 : m->step[st->ins[q]].C;
        m->be->channel_copy(model_value(m, st->ins[q]), Cq, 0, st->y, st->C, off, Cq, M);
        off += Cq;
    }
}

/* Each input's gradient is its slice of dy; an input read twice gets both slices added (the
 * slots' rule). */
static void concat_node_backward(Slots *s, ModelStep *st, float *dy, int N) {
    Model *m = s->m;
    const size_t M = (size_t)N * st->H * st->W;
    int off = 0;
    for (int q = 0; q < st->n_ins; q++) {
        const int t = st->ins[q];
        const int Cq = t == NET_INPUT ? 3 : m->step[t].C;
        if (t >= 0) {
            GradOut g;
            float *dx = grad_begin(s, t, &g);
            if (!s->dry) m->be->channel_copy(dy, st->C, off, dx, Cq, 0, Cq, M);
            grad_done(s, &g, N);
        }
        off += Cq;
    }
}

static int concat_onnx(OnnxGraph *g, const NetNode *n) {
    const char **in = mallocCheck((size_t)n->n_ins * sizeof *in);
    for (int q = 0; q < n->n_ins; q++) in[q] = onnx_in(g, n, q);
    onnx_op_list(g, "Concat", onnx_out(g, n, 4), n->n_ins, in);
    onnx_attr_int(g, "axis", 1);
    free(in);
    return 0;
}

const NodeKindDef node_kind_concat = {
    .name = "concat",
    .doc = "`torch.cat` of its inputs along the channels, in the order of `in` (a list of names)",
    .tensors = "",
    .inputs = NODE_INPUT_LIST,
    .shape = concat_shape,
    .backend_lacks = channels_backend_lacks,
    .forward = concat_node_forward,
    .backward = concat_node_backward,
    .onnx = concat_onnx,
};

/* ---- split -------------------------------------------------------------------------------- */

static int split_shape(NetNode *n, const NetNode *const *ins, const NetCheck *c) {
    (void)ins;
    if (n->chunks < 1 || n->C % n->chunks)
        return node_err(c, n, "chunks", "%d does not divide the %d channels", n->chunks, n->C);
    if (n->index < 0 || n->index >= n->chunks)
        return node_err(c, n, "index", "%d is not in 0..%d", n->index, n->chunks - 1);
    n->C /= n->chunks;
    return 0;
}

static void split_node_forward(Model *m, ModelStep *st, int N, int train) {
    (void)train;
    m->be->channel_copy(model_value(m, st->in), st->C_in, step_node(m, st)->index * st->C, st->y, st->C, 0, st->C,
                        (size_t)N * st->H * st->W);
}

/* The other chunks' gradients are zero here; the split that takes them adds its own. */
static void split_grad(const Model *m, const ModelStep *st, float *dy, float *dx, int N) {
    const size_t M = (size_t)N * st->H * st->W;
    m->be->zero(dx, M * st->C_in * sizeof(float));
    m->be->channel_copy(dy, st->C, 0, dx, st->C_in, step_node(m, st)->index * st->C, st->C, M);
}

static void split_node_backward(Slots *s, ModelStep *st, float *dy, int N) { backward_to_input(s, st, dy, N, split_grad); }

static int split_onnx(OnnxGraph *g, const NetNode *n) {
    const char *x = onnx_in(g, n, 0);
    onnx_slice(g, x, 1, n->index * n->C, (n->index + 1) * n->C, onnx_out(g, n, 4));
    return 0;
}

const NodeKindDef node_kind_split = {
    .name = "split",
    .doc = "part `index` of `x.chunk(chunks, dim=1)`: channels index * C/chunks and on",
    .tensors = "",
    .inputs = 1,
    .fields = {{F_CHUNKS, .need = 1, .min = 1, .write_always = 1}, {F_INDEX, .need = 1, .write_always = 1}},
    .n_fields = 2,
    .shape = split_shape,
    .backend_lacks = channels_backend_lacks,
    .forward = split_node_forward,
    .backward = split_node_backward,
    .onnx = split_onnx,
};

/* ---- channel_shuffle ---------------------------------------------------------------------- */

static int shuffle_shape(NetNode *n, const NetNode *const *ins, const NetCheck *c) {
    (void)ins;
    if (n->groups < 1 || n->C % n->groups)
        return node_err(c, n, "groups", "%d does not divide the %d channels", n->groups, n->C);
    return 0;
}

static const char *shuffle_backend_lacks(const Backend *be, const NetNode *n) {
    (void)n;
    return be->channel_shuffle ? NULL : "channel shuffle";
}

static void shuffle_node_forward(Model *m, ModelStep *st, int N, int train) {
    (void)train;
    m->be->channel_shuffle(model_value(m, st->in), st->y, (size_t)N * st->H * st->W, st->C, step_node(m, st)->groups);
}

/* The inverse permutation: a shuffle of C / groups groups. */
static void shuffle_grad(const Model *m, const ModelStep *st, float *dy, float *dx, int N) {
    m->be->channel_shuffle(dy, dx, (size_t)N * st->H * st->W, st->C, st->C / step_node(m, st)->groups);
}

static void shuffle_node_backward(Slots *s, ModelStep *st, float *dy, int N) { backward_to_input(s, st, dy, N, shuffle_grad); }

/* torchvision's channel_shuffle: view(N, groups, C / groups, H, W), transpose(1, 2), and back
 * (a Reshape's 0 keeps the batch). */
static int shuffle_onnx(OnnxGraph *g, const NetNode *n) {
    const char *x = onnx_in(g, n, 0);
    const char *y = onnx_out(g, n, 4), *a = onnx_tmp(g, n, "groups"), *b = onnx_tmp(g, n, "transposed");
    onnx_op(g, "Reshape", a, x,
            onnx_const_ints(g, n, "groups_shape", 5, (const int64_t[]){0, n->groups, n->C / n->groups, n->H, n->W}),
            NULL);
    onnx_op(g, "Transpose", b, a, NULL);
    onnx_attr_ints(g, "perm", 5, (const int64_t[]){0, 2, 1, 3, 4});
    onnx_op(g, "Reshape", y, b, onnx_const_ints(g, n, "shape", 4, (const int64_t[]){0, n->C, n->H, n->W}), NULL);
    return 0;
}

const NodeKindDef node_kind_channel_shuffle = {
    .name = "channel_shuffle",
    .doc = "ShuffleNet v2's `channel_shuffle(x, groups)`: the channels as a groups x C/groups matrix, transposed",
    .tensors = "",
    .inputs = 1,
    .fields = {{F_GROUPS, .need = 1, .min = 1, .write_always = 1}},
    .n_fields = 1,
    .shape = shuffle_shape,
    .backend_lacks = shuffle_backend_lacks,
    .forward = shuffle_node_forward,
    .backward = shuffle_node_backward,
    .onnx = shuffle_onnx,
};

/* ---- flatten ------------------------------------------------------------------------------ */

static int flatten_shape(NetNode *n, const NetNode *const *ins, const NetCheck *c) {
    (void)ins;
    const long v = (long)n->C * n->H * n->W;
    if (v > NET_MAX_FEATURES) return node_err(c, n, NULL, "%ld values per image, above %d", v, NET_MAX_FEATURES);
    n->C = (int)v;
    n->H = n->W = 1;
    return 0;
}

static const char *flatten_backend_lacks(const Backend *be, const NetNode *n) {
    (void)n;
    return be->transpose ? NULL : "flatten (a transpose)";
}

static void flatten_node_forward(Model *m, ModelStep *st, int N, int train) {
    (void)train;
    m->be->transpose(model_value(m, st->in), st->y, N, st->H_in * st->W_in, st->C_in);
}

static void flatten_grad(const Model *m, const ModelStep *st, float *dy, float *dx, int N) {
    m->be->transpose(dy, dx, N, st->C_in, st->H_in * st->W_in);
}

static void flatten_node_backward(Slots *s, ModelStep *st, float *dy, int N) { backward_to_input(s, st, dy, N, flatten_grad); }

/* Flatten(axis 1) of a map: NCHW's order is PyTorch's (C, H, W). */
static int flatten_onnx(OnnxGraph *g, const NetNode *n) {
    int rank;
    const char *x = onnx_in_any(g, n, 0, &rank);
    if (rank == 2) {
        onnx_pass(g, n, 0);
        return 0;
    }
    onnx_op(g, "Flatten", onnx_out(g, n, 2), x, NULL);
    onnx_attr_int(g, "axis", 1);
    return 0;
}

const NodeKindDef node_kind_flatten = {
    .name = "flatten",
    .doc = "`torch.flatten(x, 1)`: the C x H x W values of an image in PyTorch's (C, H, W) order, as a 1x1 map of "
           "C*H*W channels",
    .tensors = "",
    .inputs = 1,
    .shape = flatten_shape,
    .backend_lacks = flatten_backend_lacks,
    .forward = flatten_node_forward,
    .backward = flatten_node_backward,
    .onnx = flatten_onnx,
};
