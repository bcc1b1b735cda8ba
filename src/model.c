/* SPDX-License-Identifier: BSD-3-Clause */
/* model.c - MiniResNet layout, initialisation, forward and backward. */
#include <math.h>
#include <string.h>

#include "model.h"
#include "rng.h"
#include "util.h"

#define BN_EPS 1e-5f
#define BN_MOMENTUM 0.1f

/* ---- layout -------------------------------------------------------------------------------- */

typedef struct {
    TensorInfo *info;
    int n, cap;
    size_t size;
} Layout;

static size_t layout_add(Layout *l, const char *prefix, const char *name, TensorRole role, int bn, int ndim, int d0,
                         int d1, int d2, int d3) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->info = realloc(l->info, (size_t)l->cap * sizeof *l->info);
        CHECK(l->info != NULL);
    }
    TensorInfo *t = &l->info[l->n++];
    memset(t, 0, sizeof *t);
    snprintf_check(t->name, sizeof t->name, "%s%s%s", prefix, *prefix ? "." : "", name);
    int dims[4] = {d0, d1, d2, d3};
    t->ndim = ndim;
    t->numel = 1;
    for (int i = 0; i < ndim; i++) { t->shape[i] = dims[i]; t->numel *= (size_t)dims[i]; }
    t->role = role;
    t->bn = bn;
    t->offset = l->size;
    l->size += t->numel;
    return t->offset;
}

/* Declares a conv + BN pair: parameters in state_dict order (conv weight, bn weight, bn bias),
 * its running statistics in B, its counter in N (whose size counts the BN layers). */
static void convbn_layout(const Backend *be, ConvBN *c, Layout *P, Layout *B, Layout *N, const char *conv_prefix,
                          const char *bn_prefix, int cin, int cout, int k, int stride, int H, int W) {
    memset(c, 0, sizeof *c);
    c->C_in = cin; c->C_out = cout; c->H_in = H; c->W_in = W;
    be->conv2d_init(&c->conv, cin, cout, k, stride, k / 2);
    c->H_out = conv2d_out_size(&c->conv, H);
    c->W_out = conv2d_out_size(&c->conv, W);
    c->bn = (int)N->size;
    c->w_off = layout_add(P, conv_prefix, "weight", TENSOR_CONV_WEIGHT, -1, 4, cout, cin, k, k);
    c->gamma_off = layout_add(P, bn_prefix, "weight", TENSOR_BN_WEIGHT, c->bn, 1, cout, 0, 0, 0);
    c->beta_off = layout_add(P, bn_prefix, "bias", TENSOR_BN_BIAS, c->bn, 1, cout, 0, 0, 0);
    c->rmean_off = layout_add(B, bn_prefix, "running_mean", TENSOR_BN_RUNNING_MEAN, c->bn, 1, cout, 0, 0, 0);
    c->rvar_off = layout_add(B, bn_prefix, "running_var", TENSOR_BN_RUNNING_VAR, c->bn, 1, cout, 0, 0, 0);
    layout_add(N, bn_prefix, "num_batches_tracked", TENSOR_BN_COUNTER, c->bn, 0, 0, 0, 0, 0);
}

static void convbn_alloc(const Backend *be, ConvBN *c, int max_batch) {
    size_t n = (size_t)max_batch * c->H_out * c->W_out * c->C_out;
    c->a = be->alloc(n * be->act_bytes());
    c->y = be->alloc(n * be->act_bytes());
    c->mean = be->alloc((size_t)c->C_out * sizeof(float));
    c->invstd = be->alloc((size_t)c->C_out * sizeof(float));
    c->count = be->alloc(sizeof(double));
}

static void convbn_free(const Backend *be, ConvBN *c) {
    be->conv2d_free(&c->conv);
    be->release(c->a); be->release(c->y); be->release(c->mean); be->release(c->invstd);
    be->release(c->count);
}

static size_t convbn_act_size(const ConvBN *c) { return (size_t)c->H_out * c->W_out * c->C_out; }

void model_init(Model *m, int width, int blocks, int num_classes, int image_size, int max_batch) {
    model_init_on(m, &backend_cpu, width, blocks, num_classes, image_size, max_batch);
}

void model_init_on(Model *m, const Backend *be, int width, int blocks, int num_classes, int image_size,
                   int max_batch) {
    memset(m, 0, sizeof *m);
    m->be = be;
    m->width = width; m->blocks = blocks; m->num_classes = num_classes;
    m->image_size = image_size; m->max_batch = max_batch;
    m->feat = 4 * width;
    Layout P = {0}, B = {0}, NB = {0};
    char cp[64], bp[64];

    int H = image_size;
    convbn_layout(be, &m->stem, &P, &B, &NB, "conv1", "bn1", 3, width, 3, 1, H, H);
    m->n_block = 3 * blocks;
    m->block = callocCheck((size_t)m->n_block, sizeof *m->block);
    int cin = width;
    for (int s = 0; s < 3; s++) {
        int cout = width << s;
        for (int b = 0; b < blocks; b++) {
            BasicBlock *blk = &m->block[s * blocks + b];
            int stride = (s > 0 && b == 0) ? 2 : 1;
            char pre[32];
            snprintf_check(pre, sizeof pre, "layer%d.%d", s + 1, b);
            snprintf_check(cp, sizeof cp, "%s.conv1", pre);
            snprintf_check(bp, sizeof bp, "%s.bn1", pre);
            convbn_layout(be, &blk->c1, &P, &B, &NB, cp, bp, cin, cout, 3, stride, H, H);
            int Ho = blk->c1.H_out;
            snprintf_check(cp, sizeof cp, "%s.conv2", pre);
            snprintf_check(bp, sizeof bp, "%s.bn2", pre);
            convbn_layout(be, &blk->c2, &P, &B, &NB, cp, bp, cout, cout, 3, 1, Ho, Ho);
            blk->has_shortcut = (stride != 1 || cin != cout);
            if (blk->has_shortcut) {
                snprintf_check(cp, sizeof cp, "%s.shortcut.0", pre);
                snprintf_check(bp, sizeof bp, "%s.shortcut.1", pre);
                convbn_layout(be, &blk->sc, &P, &B, &NB, cp, bp, cin, cout, 1, stride, H, H);
            }
            cin = cout;
            H = Ho;
        }
    }
    m->fc_w_off = layout_add(&P, "fc", "weight", TENSOR_LINEAR_WEIGHT, -1, 2, num_classes, m->feat, 0, 0);
    m->fc_b_off = layout_add(&P, "fc", "bias", TENSOR_LINEAR_BIAS, -1, 1, num_classes, 0, 0, 0);

    m->param_info = P.info; m->n_param_info = P.n; m->num_params = P.size;
    m->buffer_info = B.info; m->n_buffer_info = B.n; m->num_buffers = B.size;
    m->bn_info = NB.info; m->n_bn = NB.n;
    m->bn_tracked = callocCheck((size_t)m->n_bn, sizeof *m->bn_tracked);
    m->params = be->alloc(m->num_params * sizeof(float));
    m->grads = be->alloc(m->num_params * sizeof(float));
    m->buffers = be->alloc(m->num_buffers * sizeof(float));

    size_t max_act = convbn_act_size(&m->stem);
    convbn_alloc(be, &m->stem, max_batch);
    for (int i = 0; i < m->n_block; i++) {
        BasicBlock *blk = &m->block[i];
        convbn_alloc(be, &blk->c1, max_batch);
        convbn_alloc(be, &blk->c2, max_batch);
        if (blk->has_shortcut) convbn_alloc(be, &blk->sc, max_batch);
        if (convbn_act_size(&blk->c1) > max_act) max_act = convbn_act_size(&blk->c1);
    }
    for (int i = 0; i < 4; i++) m->gbuf[i] = be->alloc((size_t)max_batch * max_act * be->act_bytes());
    if (be->act_bytes() != sizeof(float))
        m->input_act = be->alloc((size_t)max_batch * image_size * image_size * 3 * be->act_bytes());
    m->pooled = be->alloc((size_t)max_batch * m->feat * sizeof(float));
    m->dpooled = be->alloc((size_t)max_batch * m->feat * sizeof(float));
    m->logits = be->alloc((size_t)max_batch * num_classes * sizeof(float));
    m->dlogits = be->alloc((size_t)max_batch * num_classes * sizeof(float));
    m->stat_scratch = be->alloc((size_t)(8 * 4 * width + 8) * sizeof(double));
    m->loss = be->alloc(sizeof(float));
    m->loss_sum = be->alloc(sizeof(float));
    m->correct = be->alloc(sizeof(int));
}

void model_free(Model *m) {
    const Backend *be = m->be;
    convbn_free(be, &m->stem);
    for (int i = 0; i < m->n_block; i++) {
        convbn_free(be, &m->block[i].c1);
        convbn_free(be, &m->block[i].c2);
        if (m->block[i].has_shortcut) convbn_free(be, &m->block[i].sc);
    }
    free(m->block);
    for (int i = 0; i < 4; i++) be->release(m->gbuf[i]);
    if (m->input_act) be->release(m->input_act);
    be->release(m->pooled); be->release(m->dpooled); be->release(m->logits); be->release(m->dlogits);
    be->release(m->stat_scratch); be->release(m->loss); be->release(m->loss_sum); be->release(m->correct);
    be->release(m->params); be->release(m->grads); be->release(m->buffers);
    free(m->param_info); free(m->buffer_info); free(m->bn_info); free(m->bn_tracked);
    memset(m, 0, sizeof *m);
}

/* ---- initialisation --------------------------------------------------------------------- */

static void uniform_fill(Rng *r, float *p, size_t n, float bound) {
    for (size_t i = 0; i < n; i++) p[i] = (2.0f * rng_uniform(r) - 1.0f) * bound;
}

/* params and buffers are host arrays here: the model's own on the CPU, staging copies on a
 * device backend. */
static void convbn_init(ConvBN *c, float *params, float *buffers, int64_t *tracked, Rng *r) {
    size_t fan_in = (size_t)c->C_in * c->conv.k * c->conv.k;
    /* kaiming_uniform_(a=sqrt(5)) as nn.Conv2d.reset_parameters: bound = 1/sqrt(fan_in) */
    uniform_fill(r, params + c->w_off, (size_t)c->C_out * fan_in, 1.0f / sqrtf((float)fan_in));
    for (int i = 0; i < c->C_out; i++) {
        params[c->gamma_off + i] = 1.0f;
        params[c->beta_off + i] = 0.0f;
        buffers[c->rmean_off + i] = 0.0f;
        buffers[c->rvar_off + i] = 1.0f;
    }
    tracked[c->bn] = 0;
}

void model_init_weights(Model *m, uint64_t seed) {
    const Backend *be = m->be;
    float *params = be->on_device ? mallocCheck(m->num_params * sizeof(float)) : m->params;
    float *buffers = be->on_device ? mallocCheck(m->num_buffers * sizeof(float)) : m->buffers;
    Rng r;
    rng_init(&r, seed, 0x5eed, 0);
    convbn_init(&m->stem, params, buffers, m->bn_tracked, &r);
    for (int i = 0; i < m->n_block; i++) {
        convbn_init(&m->block[i].c1, params, buffers, m->bn_tracked, &r);
        convbn_init(&m->block[i].c2, params, buffers, m->bn_tracked, &r);
        if (m->block[i].has_shortcut) convbn_init(&m->block[i].sc, params, buffers, m->bn_tracked, &r);
    }
    float bound = 1.0f / sqrtf((float)m->feat);
    uniform_fill(&r, params + m->fc_w_off, (size_t)m->num_classes * m->feat, bound);
    uniform_fill(&r, params + m->fc_b_off, (size_t)m->num_classes, bound);
    if (be->on_device) {
        be->upload(m->params, params, m->num_params * sizeof(float));
        be->upload(m->buffers, buffers, m->num_buffers * sizeof(float));
        free(params);
        free(buffers);
    }
    model_params_changed(m);
}

void model_params_changed(Model *m) {
    const Backend *be = m->be;
    be->conv2d_weights_changed(&m->stem.conv);
    for (int i = 0; i < m->n_block; i++) {
        be->conv2d_weights_changed(&m->block[i].c1.conv);
        be->conv2d_weights_changed(&m->block[i].c2.conv);
        if (m->block[i].has_shortcut) be->conv2d_weights_changed(&m->block[i].sc.conv);
    }
}

void model_zero_grad(Model *m) { m->be->zero(m->grads, m->num_params * sizeof(float)); }

long model_find_param(const Model *m, const char *name) {
    for (int i = 0; i < m->n_param_info; i++)
        if (!strcmp(m->param_info[i].name, name)) return (long)m->param_info[i].offset;
    return -1;
}

long model_find_buffer(const Model *m, const char *name) {
    for (int i = 0; i < m->n_buffer_info; i++)
        if (!strcmp(m->buffer_info[i].name, name)) return (long)m->buffer_info[i].offset;
    return -1;
}

int model_bn_count(const Model *m) { return m->n_bn; }

int model_relu_count(const Model *m) { return 1 + 2 * m->n_block; }

const float *model_relu_output(const Model *m, int k, int *H, int *W, int *C) {
    CHECK(k >= 0 && k < model_relu_count(m));
    const ConvBN *c = k == 0 ? &m->stem : (k - 1) % 2 == 0 ? &m->block[(k - 1) / 2].c1 : &m->block[(k - 1) / 2].c2;
    *H = c->H_out;
    *W = c->W_out;
    *C = c->C_out;
    return c->y;
}

/* ---- forward ------------------------------------------------------------------------------ */

/* conv, then BN (batch or running statistics), optional residual add, optional ReLU. */
static void convbn_forward(Model *m, ConvBN *c, const float *x, int N, int train,
                           const float *residual, int relu) {
    const Backend *be = m->be;
    be->conv2d_forward(&c->conv, N, c->H_in, c->W_in, x, m->params + c->w_off, c->a);
    size_t M = (size_t)N * c->H_out * c->W_out;
    int C = c->C_out;
    if (train) {
        double *sums = m->stat_scratch;        /* [count, sum[C], sumsq[C]] */
        be->bn_stats(c->a, M, C, sums + 1, sums + 1 + C, sums);
        if (m->stats_allreduce) m->stats_allreduce(m->stats_allreduce_ctx, sums, 1 + 2 * (size_t)C);
        be->copy(c->count, sums, sizeof(double));
        be->bn_finalize_stats(sums + 1, sums + 1 + C, sums, C, BN_EPS, BN_MOMENTUM, c->mean, c->invstd,
                              m->buffers + c->rmean_off, m->buffers + c->rvar_off);
        m->bn_tracked[c->bn]++;
    } else {
        be->bn_eval_stats(m->buffers + c->rmean_off, m->buffers + c->rvar_off, C, BN_EPS, c->mean, c->invstd);
    }
    be->bn_apply(c->a, c->y, M, C, c->mean, c->invstd, m->params + c->gamma_off, m->params + c->beta_off,
                 residual, relu);
}

/* Everything up to the loss, which stays in backend memory (m->loss, m->correct). */
static void forward_to_loss(Model *m, const float *x, const int *labels, int N, int train, float loss_scale) {
    const Backend *be = m->be;
    CHECK(N >= 1 && N <= m->max_batch);
    m->input = be->act_input(x, (size_t)N * m->image_size * m->image_size * 3, m->input_act);
    m->last_N = N;
    convbn_forward(m, &m->stem, m->input, N, train, NULL, 1);
    const float *h = m->stem.y;
    for (int i = 0; i < m->n_block; i++) {
        BasicBlock *b = &m->block[i];
        convbn_forward(m, &b->c1, h, N, train, NULL, 1);
        const float *res = h;
        if (b->has_shortcut) {
            convbn_forward(m, &b->sc, h, N, train, NULL, 0);
            res = b->sc.y;
        }
        convbn_forward(m, &b->c2, b->c1.y, N, train, res, 1);
        h = b->c2.y;
    }
    const ConvBN *last = &m->block[m->n_block - 1].c2;
    be->avgpool_forward(h, m->pooled, N, last->H_out * last->W_out, m->feat);
    be->linear_forward(m->pooled, m->params + m->fc_w_off, m->params + m->fc_b_off, m->logits, N, m->feat,
                       m->num_classes);
    be->softmax_xent(m->logits, labels, N, m->num_classes, loss_scale, train ? m->label_smoothing : 0.0f,
                     train ? m->dlogits : NULL, m->loss, m->correct);
    if (train && m->grad_scale) be->scale_inplace(m->dlogits, (size_t)N * m->num_classes, m->grad_scale);
}

float model_forward(Model *m, const float *x, const int *labels, int N, int train, float loss_scale,
                    int *correct) {
    forward_to_loss(m, x, labels, N, train, loss_scale);
    /* The loss (and the hit count) come back to the host here: free on the CPU, a wait for the
     * queued work on a device backend. */
    float loss;
    m->be->download(&loss, m->loss, sizeof loss);
    if (correct) m->be->download(correct, m->correct, sizeof *correct);
    return loss;
}

/* Chunks of the training capacity: no buffer is ever sized for an evaluation batch. */
void model_evaluate(Model *m, const float *x, const int *labels, int N, long *correct, double *loss_sum) {
    const size_t img = (size_t)m->image_size * m->image_size * 3;
    long hits = 0;
    double sum = 0.0;
    for (int off = 0; off < N; off += m->max_batch) {
        const int n = N - off < m->max_batch ? N - off : m->max_batch;
        int c = 0;
        const float loss = model_forward(m, x + (size_t)off * img, labels + off, n, 0, 1.0f, &c);
        hits += c;
        sum += (double)loss * n;
    }
    *correct = hits;
    *loss_sum = sum;
}

void model_forward_train(Model *m, const float *x, const int *labels, int N, float loss_scale) {
    forward_to_loss(m, x, labels, N, 1, loss_scale);
    m->be->add_inplace(m->loss_sum, m->loss, 1);
}

double model_take_loss_sum(Model *m) {
    float sum;
    m->be->download(&sum, m->loss_sum, sizeof sum);
    m->be->zero(m->loss_sum, sizeof(float));
    return sum;
}

/* ---- backward ----------------------------------------------------------------------------- */

/* BN (+ReLU) backward from dy (masked in place when relu), then conv backward. dy is consumed;
 * dx (may be NULL) receives the gradient of the conv input; tmp is scratch of the same size. */
static void convbn_backward(Model *m, ConvBN *c, const float *x, float *dy, float *tmp, float *dx,
                            int relu, int N) {
    const Backend *be = m->be;
    size_t M = (size_t)N * c->H_out * c->W_out;
    int C = c->C_out;
    double *loc = m->stat_scratch;               /* [sum_g[C], sum_gx[C]] local */
    double *glob = m->stat_scratch + 2 * C + 1;  /* [sum_g[C], sum_gx[C]] global */
    be->bn_backward_reduce(c->a, c->y, dy, dy, M, C, c->mean, c->invstd, relu, loc, loc + C);
    be->copy(glob, loc, 2 * (size_t)C * sizeof(double));
    if (m->stats_allreduce) m->stats_allreduce(m->stats_allreduce_ctx, glob, 2 * (size_t)C);
    be->bn_backward_apply(c->a, dy, tmp, M, C, c->mean, c->invstd, m->params + c->gamma_off, loc, loc + C,
                          glob, glob + C, c->count, m->grads + c->gamma_off, m->grads + c->beta_off);
    be->conv2d_backward(&c->conv, N, c->H_in, c->W_in, x, m->params + c->w_off, tmp, dx,
                        m->grads + c->w_off);
    if (m->grad_ready) m->grad_ready(m->grad_ready_ctx, c->w_off);
}

void model_backward(Model *m) {
    int N = m->last_N;
    /* head */
    const Backend *be = m->be;
    be->linear_backward(m->pooled, m->params + m->fc_w_off, m->dlogits, m->dpooled, m->grads + m->fc_w_off,
                        m->grads + m->fc_b_off, N, m->feat, m->num_classes);
    if (m->grad_ready) m->grad_ready(m->grad_ready_ctx, m->fc_w_off);
    const ConvBN *last = &m->block[m->n_block - 1].c2;
    float *G = m->gbuf[0], *T1 = m->gbuf[1], *T2 = m->gbuf[2], *D = m->gbuf[3];
    be->avgpool_backward(m->dpooled, G, N, last->H_out * last->W_out, m->feat);

    for (int i = m->n_block - 1; i >= 0; i--) {
        BasicBlock *b = &m->block[i];
        const float *in = i > 0 ? m->block[i - 1].c2.y : m->stem.y;
        ConvBN *c2 = &b->c2;
        size_t n_out = (size_t)N * convbn_act_size(c2);
        size_t n_in = (size_t)N * b->c1.H_in * b->c1.W_in * b->c1.C_in;
        /* The ReLU after the residual add masks the gradient of both branches: mask once, and
         * hand the shortcut branch its own copy in the same pass. Shortcut first: its
         * parameters come last in the block, so gradients complete from the end of the flat
         * buffer towards the start. */
        if (b->has_shortcut) {
            be->relu_mask_copy(G, c2->y, T2, n_out);
            convbn_backward(m, &b->sc, in, T2, T1, D, 0, N);
        } else {
            be->relu_mask_copy(G, c2->y, D, n_in);
        }
        convbn_backward(m, c2, b->c1.y, G, T1, T2, 0, N);        /* T2 = d(c1.y) */
        convbn_backward(m, &b->c1, in, T2, T1, G, 1, N);         /* G = d(in) via main path */
        be->add_act_inplace(D, G, n_in);
        float *t = G; G = D; D = t;                             /* G = gradient of block input */
    }
    convbn_backward(m, &m->stem, m->input, G, T1, NULL, 1, N);
}

/* ---- work per image ----------------------------------------------------------------------- */

static double convbn_macs(const ConvBN *c) {
    return (double)c->H_out * c->W_out * c->C_out * c->C_in * c->conv.k * c->conv.k;
}

double model_macs_per_image(const Model *m) {
    double macs = convbn_macs(&m->stem);
    for (int i = 0; i < m->n_block; i++) {
        const BasicBlock *b = &m->block[i];
        macs += convbn_macs(&b->c1) + convbn_macs(&b->c2);
        if (b->has_shortcut) macs += convbn_macs(&b->sc);
    }
    return macs + (double)m->feat * m->num_classes;
}

double model_train_flops_per_image(const Model *m) { return 2.0 * 3.0 * model_macs_per_image(m); }
