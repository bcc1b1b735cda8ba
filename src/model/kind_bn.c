/* SPDX-License-Identifier: BSD-3-Clause */
/* kind_bn.c - the "bn" node: batch norm over channels (eps and momentum per node, by default
 * nn.BatchNorm2d's 1e-5 and 0.1), in training
 * from the batch's statistics (all ranks' under sync BN, through the model's stats_allreduce
 * between the phases of the Backend's batch norm), in evaluation from the running ones.
 *
 * The executor may fuse into its step the add that takes it as first operand and the ReLU
 * after either (model.c): bn_apply then adds the residual and clamps in the pass that
 * normalises, and backward masks once. Or the act node after it: bn_apply_act applies the
 * function in the pass that normalises, and bn_backward_reduce_act its derivative in the pass
 * that reduces, at the pre-activation it recomputes. */
#include "base/rng.h"
#include "model_step.h"
#include "onnx.h"

static void bn_layout(const Backend *be, const NetNode *n, ModelStep *st, Layout *P, Layout *B, Layout *NB) {
    (void)be;
    st->bn = (int)NB->size;
    st->w_off = layout_add(P, n->name, "weight", TENSOR_BN_WEIGHT, st->bn, 1, n->C, 0, 0, 0);
    /* "affine_weight": false, airbench's weight.requires_grad = False: the weight stays at its 1 */
    if (!n->affine_weight) P->info[P->n - 1].frozen = 1;
    st->b_off = layout_add(P, n->name, "bias", TENSOR_BN_BIAS, st->bn, 1, n->C, 0, 0, 0);
    st->rmean_off = layout_add(B, n->name, "running_mean", TENSOR_BN_RUNNING_MEAN, st->bn, 1, n->C, 0, 0, 0);
    st->rvar_off = layout_add(B, n->name, "running_var", TENSOR_BN_RUNNING_VAR, st->bn, 1, n->C, 0, 0, 0);
    layout_add(NB, n->name, "num_batches_tracked", TENSOR_BN_COUNTER, st->bn, 0, 0, 0, 0, 0);
}

static void bn_alloc(const Backend *be, ModelStep *st, int max_batch) {
    (void)max_batch;
    st->mean = be->alloc((size_t)st->C * sizeof(float));
    st->invstd = be->alloc((size_t)st->C * sizeof(float));
    st->count = be->alloc(sizeof(double));
}

static void bn_release(const Backend *be, ModelStep *st) {
    be->release(st->mean);
    be->release(st->invstd);
    be->release(st->count);
}

/* gamma 1 (0 for a residual branch's end under --zero_init_residual), beta 0, running mean 0,
 * running variance 1: nothing is drawn. */
static void bn_init(const Model *m, const ModelStep *st, float *params, float *buffers, Rng *r) {
    (void)r;
    const float gamma = m->zero_init_residual && st->zero_init ? 0.0f : 1.0f;
    for (int i = 0; i < st->C; i++) {
        params[st->w_off + i] = gamma;
        params[st->b_off + i] = 0.0f;
        buffers[st->rmean_off + i] = 0.0f;
        buffers[st->rvar_off + i] = 1.0f;
    }
    m->bn_tracked[st->bn] = 0;
}

/* The batch norm's input in float32: a bf16-stored convolution output (ModelStep.y_bf16)
 * widened, exactly, into the model's buffer for it; anything else as it is. */
static const float *bn_input(Model *m, const ModelStep *st, int N) {
    if (st->in < 0 || !m->step[st->in].y_bf16) return model_value(m, st->in);
    m->be->widen_bf16(m->step[st->in].y, m->bf16_in, step_numel(&m->step[st->in], N));
    return m->bf16_in;
}

/* bn_apply's output, float32: st->y, or for a bf16-stored one (convolutions alone read it) the
 * model's buffer, which bn_store then rounds into st->y. */
static float *bn_out(Model *m, ModelStep *st) { return st->y_bf16 ? m->bf16_out : st->y; }

static void bn_store(Model *m, ModelStep *st, size_t n) {
    if (st->y_bf16) m->be->narrow_bf16(m->bf16_out, st->y, n);
}

/* Batch or running statistics, the fused residual add, the fused ReLU or activation. */
static void bn_node_forward(Model *m, ModelStep *st, int N, int train) {
    const Backend *be = m->be;
    const float *a = bn_input(m, st, N);
    const size_t M = (size_t)N * st->H * st->W;
    const int C = st->C;
    if (train) {
        double *sums = m->stat_scratch;        /* [count, sum[C], sumsq[C]] */
        be->bn_stats(a, M, C, sums + 1, sums + 1 + C, sums);
        if (m->stats_allreduce) m->stats_allreduce(m->stats_allreduce_ctx, sums, 1 + 2 * (size_t)C);
        be->copy(st->count, sums, sizeof(double));
        be->bn_finalize_stats(sums + 1, sums + 1 + C, sums, C, st->eps, st->momentum, st->mean, st->invstd,
                              m->buffers + st->rmean_off, m->buffers + st->rvar_off);
        m->bn_tracked[st->bn]++;
    } else {
        be->bn_eval_stats(m->buffers + st->rmean_off, m->buffers + st->rvar_off, C, st->eps, st->mean, st->invstd);
    }
    if (st->fused_act)
        be->bn_apply_act(a, bn_out(m, st), M, C, st->mean, st->invstd, m->params + st->w_off, m->params + st->b_off,
                         st->fn, st->slope);
    else
        be->bn_apply(a, bn_out(m, st), M, C, st->mean, st->invstd, m->params + st->w_off, m->params + st->b_off,
                     st->in2 == NET_NONE ? NULL : model_value(m, st->in2), st->relu);
    bn_store(m, st, M * C);
}

/* From dy (masked in place for the ReLU, or times the fused activation's derivative), the
 * residual's gradient first: dy consumed; the gradient of its input into its slot. */
static void bn_node_backward(Slots *s, ModelStep *st, float *dy, int N) {
    Model *m = s->m;
    const Backend *be = m->be;
    const size_t M = (size_t)N * st->H * st->W;
    const int C = st->C;
    const int fused_relu = st->relu && st->in2 < 0;   /* masked inside the reduction */
    const float *y = st->y;
    if (st->y_bf16 && st->relu && !s->dry) {
        /* kept in bf16: the float32 output the ReLU's mask reads, made again as the forward made
         * it (the same input, statistics, parameters and residual: the same bits) */
        y = bn_out(m, st);
        be->bn_apply(bn_input(m, st, N), bn_out(m, st), M, C, st->mean, st->invstd, m->params + st->w_off,
                     m->params + st->b_off, st->in2 == NET_NONE ? NULL : model_value(m, st->in2), 1);
    }
    if (st->in2 >= 0) {
        /* The ReLU after the residual add masks the gradient of both branches: mask once, and
         * hand the residual branch its own copy in the same pass. */
        GradOut g;
        float *r = grad_begin(s, st->in2, &g);
        if (!s->dry) {
            if (st->relu) be->relu_mask_copy(dy, y, r, M * C);
            else be->copy(r, dy, M * C * be->act_bytes());
        }
        grad_done(s, &g, N);
    }
    if (st->in < 0) return;   /* a batch norm on the image: its parameters' gradients only */
    GradOut g;
    float *dx = grad_begin(s, st->in, &g);
    if (!s->dry) {
        const float *a = bn_input(m, st, N);
        double *loc = m->stat_scratch;               /* [sum_g[C], sum_gx[C]] local */
        double *glob = m->stat_scratch + 2 * C + 1;  /* [sum_g[C], sum_gx[C]] global */
        if (st->fused_act)
            be->bn_backward_reduce_act(a, dy, dy, M, C, st->mean, st->invstd, m->params + st->w_off,
                                       m->params + st->b_off, st->fn, st->slope, loc, loc + C);
        else
            be->bn_backward_reduce(a, y, dy, dy, M, C, st->mean, st->invstd, fused_relu, loc, loc + C);
        be->copy(glob, loc, 2 * (size_t)C * sizeof(double));
        if (m->stats_allreduce) m->stats_allreduce(m->stats_allreduce_ctx, glob, 2 * (size_t)C);
        be->bn_backward_apply(a, dy, dx, M, C, st->mean, st->invstd, m->params + st->w_off, loc, loc + C, glob,
                              glob + C, st->count, m->grads + st->w_off, m->grads + st->b_off);
    }
    grad_done(s, &g, N);
}

/* BatchNormalization in its inference form, over the running statistics. */
static int bn_onnx(OnnxGraph *g, const NetNode *n) {
    const char *x = onnx_in(g, n, 0);
    onnx_op(g, "BatchNormalization", onnx_out(g, n, 4), x, onnx_param(g, n, "weight", 0, NULL),
            onnx_param(g, n, "bias", 0, NULL), onnx_param(g, n, "running_mean", 0, NULL),
            onnx_param(g, n, "running_var", 0, NULL), NULL);
    onnx_attr_float(g, "epsilon", n->eps);
    return 0;
}

const NodeKindDef node_kind_bn = {
    .name = "bn",
    .doc = "batch norm over channels, as `nn.BatchNorm2d(eps, momentum)`; with the add and ReLU after it, or an `act`, one fused step",
    .tensors = "`NAME.weight`, `.bias`, `.running_mean`, `.running_var`, `.num_batches_tracked`",
    .inputs = 1,
    /* eps above 0 and at most 1; momentum in 0..1 (PyTorch's: the weight of the batch) */
    .fields = {{F_ZERO_INIT, .def_doc = "false"},
               {F_EPS, .rdef = 1e-5f, .rmin = 1e-12f, .rmax = 1.0f, .def_doc = "1e-5"},
               {F_MOMENTUM, .rdef = 0.1f, .rmin = 0.0f, .rmax = 1.0f, .def_doc = "0.1"},
               {F_AFFINE_WEIGHT, .def = 1, .def_doc = "true; false: the weight is held at 1, not trained"}},
    .n_fields = 4,
    .layout = bn_layout,
    .alloc = bn_alloc,
    .release = bn_release,
    .init = bn_init,
    .forward = bn_node_forward,
    .backward = bn_node_backward,
    .onnx = bn_onnx,
};
