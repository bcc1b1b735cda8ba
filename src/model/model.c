/* SPDX-License-Identifier: BSD-3-Clause */
/* model.c - a network from its node table: layout, initialisation, forward and backward.
 *
 * model_init_net compiles the table into steps. A batch norm whose only consumer is an add
 * (as its first operand) and whose add's only consumer is a ReLU becomes one step, as does a
 * batch norm followed by a ReLU: bn_apply adds the residual and clamps in the pass that
 * normalises, and backward masks once. Such a step runs where its last node stands, so the
 * residual is ready. Every other node is a step of its own.
 *
 * Backward runs the steps in reverse. The gradient of a step's output lives in a slot from a
 * pool: taken by the first consumer that writes it (the last in forward order), added to by
 * the others, given back once its producer has used it. The pool's size is what one dry run
 * of backward holds at most. A parameter's gradient is final once its step is done; the
 * gradients at offsets >= X are final when every step owning a parameter at or above X is:
 * that watermark is what grad_ready hears, so buckets start during backward. */
#include <math.h>
#include <string.h>

#include "model.h"
#include "base/rng.h"
#include "base/util.h"
#include "zoo.h"

#define BN_EPS 1e-5f
#define BN_MOMENTUM 0.1f

struct ModelStep {
    NodeKind kind;
    int node;                 /* its node in m->net (the last of a fused group) */
    int first;                /* the group's first node (the batch norm), else == node */
    int in, in2;              /* producing steps, or NET_INPUT; in2: add's, or a fused residual */
    int relu;                 /* bn: ReLU fused */
    int C_in, H_in, W_in, C, H, W;
    int act;                  /* y holds activations (act_bytes), else float32 */
    Conv2d conv;
    size_t w_off, b_off;      /* conv weight / bn weight / linear weight; bn or linear bias */
    size_t rmean_off, rvar_off;
    int bn;                   /* its counter in bn_tracked */
    int zero_init;
    int k, stride, pad;       /* maxpool */
    int p_lo, p_hi;           /* its tensors in param_info */
    float *y;                 /* output [max_batch, H, W, C] */
    float *mean, *invstd;     /* bn: statistics used by the last forward */
    double *count;            /* bn: values behind those statistics (all ranks' with sync BN) */
    int32_t *arg;             /* maxpool: the input pixel of each output */
};

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

/* ---- compiling the table ------------------------------------------------------------------ */

/* How many nodes read node i's output, and the last of them. */
static int consumers(const NetSpec *s, int i, int *only) {
    int n = 0;
    for (int j = i + 1; j < s->n; j++) {
        const NetNode *c = &s->node[j];
        if (c->in == i) { n++; *only = j; }
        if (c->kind == NODE_ADD && c->in2 == i) { n++; *only = j; }
    }
    return n;
}

/* The groups: owner[i] is the batch norm whose step computes node i's value (i itself when
 * it is not fused); end[h] the last node of h's group. */
typedef struct {
    int *owner, *end;
    int *step_of;     /* node -> the step that gives its value */
} Plan;

/* The kinds whose operations a backend may lack (backend.h): refused before anything is built. */
static int backend_has(const Backend *be, const NetSpec *s, const char *what, char *err, size_t errlen) {
    for (int i = 0; i < s->n; i++) {
        const NetNode *n = &s->node[i];
        const int missing = (n->kind == NODE_RELU && !be->relu_forward) ||
                            (n->kind == NODE_MAXPOOL && (!be->maxpool_forward || !be->maxpool_backward)) ||
                            (n->kind == NODE_BLUR && !be->blur);
        if (missing) {
            snprintf(err, errlen, "%s: node \"%s\": the %s backend has no %s operation", what, n->name, be->name,
                     node_kind_name(n->kind));
            return -1;
        }
    }
    return 0;
}

/* bn [+ add, the bn its first operand] [+ relu], each the only consumer of the one before. */
static void plan_groups(const NetSpec *s, Plan *p) {
    for (int i = 0; i < s->n; i++) p->owner[i] = p->end[i] = i;
    for (int i = 0; i < s->n; i++) {
        if (s->node[i].kind != NODE_BN) continue;
        int j = -1, k = -1;
        if (consumers(s, i, &j) != 1) continue;
        if (s->node[j].kind == NODE_ADD && s->node[j].in == i && s->node[j].in2 != i) {
            p->owner[j] = i;
            p->end[i] = j;
            if (consumers(s, j, &k) == 1 && s->node[k].kind == NODE_RELU) { p->owner[k] = i; p->end[i] = k; }
        } else if (s->node[j].kind == NODE_RELU) {
            p->owner[j] = i;
            p->end[i] = j;
        }
    }
}

static int value_step(const Plan *p, int node) { return node == NET_INPUT ? NET_INPUT : p->step_of[node]; }

static void alloc_step(const Backend *be, ModelStep *st, int max_batch) {
    const size_t n = (size_t)max_batch * st->H * st->W * st->C;
    st->y = be->alloc(n * (st->act ? be->act_bytes() : sizeof(float)));
    if (st->kind == NODE_BN) {
        st->mean = be->alloc((size_t)st->C * sizeof(float));
        st->invstd = be->alloc((size_t)st->C * sizeof(float));
        st->count = be->alloc(sizeof(double));
    }
    if (st->kind == NODE_MAXPOOL) st->arg = be->alloc(n * sizeof(int32_t));
}

/* Lays out the tensors of node i (table order = state_dict order) into step st. */
static void layout_node(const Backend *be, const NetNode *n, ModelStep *st, Layout *P, Layout *B, Layout *NB) {
    st->p_lo = P->n;
    switch (n->kind) {
    case NODE_CONV:
        be->conv2d_init(&st->conv,
                        &(ConvShape){ .C_in = st->C_in, .C_out = n->C, .k = n->k, .stride = n->stride, .pad = n->pad });
        st->w_off = layout_add(P, n->name, "weight", TENSOR_CONV_WEIGHT, -1, 4, n->C, st->C_in, n->k, n->k);
        break;
    case NODE_BN:
        st->bn = (int)NB->size;
        st->w_off = layout_add(P, n->name, "weight", TENSOR_BN_WEIGHT, st->bn, 1, n->C, 0, 0, 0);
        st->b_off = layout_add(P, n->name, "bias", TENSOR_BN_BIAS, st->bn, 1, n->C, 0, 0, 0);
        st->rmean_off = layout_add(B, n->name, "running_mean", TENSOR_BN_RUNNING_MEAN, st->bn, 1, n->C, 0, 0, 0);
        st->rvar_off = layout_add(B, n->name, "running_var", TENSOR_BN_RUNNING_VAR, st->bn, 1, n->C, 0, 0, 0);
        layout_add(NB, n->name, "num_batches_tracked", TENSOR_BN_COUNTER, st->bn, 0, 0, 0, 0, 0);
        break;
    case NODE_LINEAR:
        st->w_off = layout_add(P, n->name, "weight", TENSOR_LINEAR_WEIGHT, -1, 2, n->C, st->C_in, 0, 0);
        st->b_off = layout_add(P, n->name, "bias", TENSOR_LINEAR_BIAS, -1, 1, n->C, 0, 0, 0);
        break;
    default:
        break;
    }
    st->p_hi = P->n;
}

static void backward_steps(Model *m, int dry);

void model_init(Model *m, int width, int blocks, int num_classes, int image_size, int max_batch) {
    model_init_on(m, &backend_cpu, width, blocks, num_classes, image_size, max_batch);
}

void model_init_on(Model *m, const Backend *be, int width, int blocks, int num_classes, int image_size,
                   int max_batch) {
    NetSpec net;
    zoo_miniresnet(&net, width, blocks);
    char err[512];
    if (model_init_net(m, be, &net, "MiniResNet", num_classes, image_size, max_batch, err, sizeof err) != 0)
        die("%s", err);
    netspec_free(&net);
    m->width = width;
    m->blocks = blocks;
}

int model_init_net(Model *m, const Backend *be, const NetSpec *net, const char *what, int num_classes, int image_size,
                   int max_batch, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    netspec_copy(&m->net, net);
    NetSpec *s = &m->net;
    if (netspec_resolve(s, image_size, num_classes, what, err, errlen) != 0 || backend_has(be, s, what, err, errlen)) {
        netspec_free(s);
        memset(m, 0, sizeof *m);
        return -1;
    }
    m->be = be;
    m->num_classes = num_classes;
    m->image_size = m->input_size = image_size;
    m->max_batch = max_batch;

    Plan p = {callocCheck((size_t)s->n, sizeof(int)), callocCheck((size_t)s->n, sizeof(int)),
              callocCheck((size_t)s->n, sizeof(int))};
    plan_groups(s, &p);
    /* Tensors in table order (= state_dict order), one provisional step per group's first node. */
    ModelStep *proto = callocCheck((size_t)s->n, sizeof *proto);
    Layout P = {0}, B = {0}, NB = {0};
    for (int i = 0; i < s->n; i++) {
        if (p.owner[i] != i) continue;
        const NetNode *n = &s->node[i];
        ModelStep *st = &proto[i];
        st->kind = n->kind;
        st->first = i;
        st->node = p.end[i];
        const NetNode *src = n->in == NET_INPUT ? NULL : &s->node[n->in];
        st->C_in = src ? src->C : 3;
        st->H_in = src ? src->H : image_size;
        st->W_in = src ? src->W : image_size;
        const NetNode *last = &s->node[st->node];
        st->C = last->C; st->H = last->H; st->W = last->W;
        st->zero_init = n->zero_init;
        st->k = n->k; st->stride = n->stride; st->pad = n->pad;
        layout_node(be, n, st, &P, &B, &NB);
    }
    /* Steps in run order: a group runs where its last node stands, when its residual is ready. */
    m->step = callocCheck((size_t)s->n, sizeof *m->step);
    int ns = 0;
    for (int i = 0; i < s->n; i++) {
        const int h = p.owner[i];
        if (p.end[h] != i) continue;
        ModelStep st = proto[h];
        const NetNode *n = &s->node[h];
        st.in = value_step(&p, n->in);
        st.in2 = NET_NONE;
        if (n->kind == NODE_ADD) st.in2 = value_step(&p, n->in2);
        for (int j = h + 1; j <= i; j++) {
            if (p.owner[j] != h) continue;
            if (s->node[j].kind == NODE_ADD) st.in2 = value_step(&p, s->node[j].in2);
            if (s->node[j].kind == NODE_RELU) st.relu = 1;
        }
        /* the pooled features and what follows them are float32 */
        st.act = !(n->kind == NODE_AVGPOOL || n->kind == NODE_LINEAR ||
                   (st.in >= 0 && !m->step[st.in].act));
        m->step[ns] = st;
        for (int j = h; j <= i; j++)
            if (p.owner[j] == h) p.step_of[j] = ns;
        ns++;
    }
    m->n_step = ns;
    free(proto);
    free(p.owner);
    free(p.end);
    free(p.step_of);
    CHECK(m->step[ns - 1].kind == NODE_LINEAR);

    m->param_info = P.info; m->n_param_info = P.n; m->num_params = P.size;
    m->buffer_info = B.info; m->n_buffer_info = B.n; m->num_buffers = B.size;
    m->bn_info = NB.info; m->n_bn = NB.n;
    m->bn_tracked = callocCheck((size_t)(m->n_bn ? m->n_bn : 1), sizeof *m->bn_tracked);
    m->params = be->alloc(m->num_params * sizeof(float));
    m->grads = be->alloc(m->num_params * sizeof(float));
    m->buffers = be->alloc((m->num_buffers ? m->num_buffers : 1) * sizeof(float));

    size_t max_grad = 0;
    int max_c = 1;
    for (int i = 0; i < ns; i++) {
        ModelStep *st = &m->step[i];
        alloc_step(be, st, max_batch);
        const size_t bytes = (size_t)st->H * st->W * st->C * (st->act ? be->act_bytes() : sizeof(float));
        if (bytes > max_grad) max_grad = bytes;
        if (st->kind == NODE_BN && st->C > max_c) max_c = st->C;
    }
    m->logits = m->step[ns - 1].y;
    m->dlogits = be->alloc((size_t)max_batch * num_classes * sizeof(float));
    if (be->act_bytes() != sizeof(float))
        m->input_act = be->alloc((size_t)max_batch * image_size * image_size * 3 * be->act_bytes());
    /* [count, sum[C], sumsq[C]] forward; [sum_g[C], sum_gx[C]] local then global backward */
    m->stat_scratch = be->alloc((size_t)(4 * max_c + 1) * sizeof(double));
    m->loss = be->alloc(sizeof(float));
    m->loss_sum = be->alloc(sizeof(float));
    m->correct = be->alloc(sizeof(int));
    backward_steps(m, 1);   /* counts the slots */
    m->slot = callocCheck((size_t)(m->n_slot ? m->n_slot : 1), sizeof *m->slot);
    for (int i = 0; i < m->n_slot; i++) m->slot[i] = be->alloc((size_t)max_batch * max_grad);
    return 0;
}

void model_free(Model *m) {
    const Backend *be = m->be;
    if (!be) return;
    for (int i = 0; i < m->n_step; i++) {
        ModelStep *st = &m->step[i];
        if (st->kind == NODE_CONV) be->conv2d_free(&st->conv);
        be->release(st->y);
        if (st->mean) { be->release(st->mean); be->release(st->invstd); be->release(st->count); }
        if (st->arg) be->release(st->arg);
    }
    free(m->step);
    for (int i = 0; i < m->n_slot; i++) be->release(m->slot[i]);
    free(m->slot);
    if (m->input_act) be->release(m->input_act);
    be->release(m->dlogits);
    be->release(m->stat_scratch); be->release(m->loss); be->release(m->loss_sum); be->release(m->correct);
    be->release(m->params); be->release(m->grads); be->release(m->buffers);
    free(m->param_info); free(m->buffer_info); free(m->bn_info); free(m->bn_tracked);
    netspec_free(&m->net);
    memset(m, 0, sizeof *m);
}

int model_set_input_size(Model *m, int size, char *err, size_t errlen) {
    if (size == m->input_size) return 0;
    if (size < 1) return errf(err, errlen, "%s: an input of %d pixels is not a size", model_architecture(m), size);
    if (size > m->image_size)
        return errf(err, errlen, "%s: an input of %dx%d, larger than the %dx%d its activations were allocated for",
                    model_architecture(m), size, size, m->image_size, m->image_size);
    /* the same table at the new size: every node's shape again, checked */
    NetSpec *s = &m->net;
    if (netspec_resolve(s, size, m->num_classes, model_architecture(m), err, errlen) != 0) {
        char ignored[256];   /* back to the size it had, which resolved before */
        CHECK(netspec_resolve(s, m->input_size, m->num_classes, "", ignored, sizeof ignored) == 0);
        return -1;
    }
    for (int i = 0; i < m->n_step; i++) {
        ModelStep *st = &m->step[i];
        const NetNode *n = &s->node[st->first], *last = &s->node[st->node];
        const NetNode *src = n->in == NET_INPUT ? NULL : &s->node[n->in];
        st->H_in = src ? src->H : size;
        st->W_in = src ? src->W : size;
        st->H = last->H;
        st->W = last->W;
    }
    m->input_size = size;
    return 0;
}

/* ---- initialisation --------------------------------------------------------------------- */

static void uniform_fill(Rng *r, float *p, size_t n, float bound) {
    for (size_t i = 0; i < n; i++) p[i] = (2.0f * rng_uniform(r) - 1.0f) * bound;
}

static void normal_fill(Rng *r, float *p, size_t n, float std) {
    for (size_t i = 0; i < n; i++) p[i] = rng_normal(r) * std;
}

/* params and buffers are host arrays here: the model's own on the CPU, staging copies on a
 * device backend. Steps in table order, so draws come in state_dict order. */
static void step_init(const Model *m, const ModelStep *st, float *params, float *buffers, Rng *r) {
    switch (st->kind) {
    case NODE_CONV: {
        const size_t fan_in = (size_t)st->C_in * st->conv.shape.k * st->conv.shape.k;
        const size_t n = (size_t)st->C * fan_in;
        if (m->net.init == NET_INIT_RESNET)   /* kaiming_normal_(mode="fan_out", nonlinearity="relu") */
            normal_fill(r, params + st->w_off, n,
                        sqrtf(2.0f / (float)((size_t)st->C * st->conv.shape.k * st->conv.shape.k)));
        else                                  /* kaiming_uniform_(a=sqrt(5)): bound 1/sqrt(fan_in) */
            uniform_fill(r, params + st->w_off, n, 1.0f / sqrtf((float)fan_in));
        break;
    }
    case NODE_BN: {
        const float gamma = m->zero_init_residual && st->zero_init ? 0.0f : 1.0f;
        for (int i = 0; i < st->C; i++) {
            params[st->w_off + i] = gamma;
            params[st->b_off + i] = 0.0f;
            buffers[st->rmean_off + i] = 0.0f;
            buffers[st->rvar_off + i] = 1.0f;
        }
        m->bn_tracked[st->bn] = 0;
        break;
    }
    case NODE_LINEAR: {   /* nn.Linear's default: weight and bias uniform within 1/sqrt(in) */
        const float bound = 1.0f / sqrtf((float)st->C_in);
        uniform_fill(r, params + st->w_off, (size_t)st->C * st->C_in, bound);
        uniform_fill(r, params + st->b_off, (size_t)st->C, bound);
        break;
    }
    default:
        break;
    }
}

void model_init_weights(Model *m, uint64_t seed) {
    const Backend *be = m->be;
    float *params = be->on_device ? mallocCheck(m->num_params * sizeof(float)) : m->params;
    float *buffers = be->on_device ? mallocCheck((m->num_buffers ? m->num_buffers : 1) * sizeof(float)) : m->buffers;
    Rng r;
    rng_init(&r, seed, 0x5eed, 0);
    /* run order puts a fused batch norm after the nodes up to its add: draw in table order */
    for (int node = 0; node < m->net.n; node++)
        for (int i = 0; i < m->n_step; i++)
            if (m->step[i].first == node) step_init(m, &m->step[i], params, buffers, &r);
    if (be->on_device) {
        be->upload(m->params, params, m->num_params * sizeof(float));
        be->upload(m->buffers, buffers, m->num_buffers * sizeof(float));
        free(params);
        free(buffers);
    }
    model_params_changed(m);
}

void model_params_changed(Model *m) {
    for (int i = 0; i < m->n_step; i++)
        if (m->step[i].kind == NODE_CONV) m->be->conv2d_weights_changed(&m->step[i].conv);
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

const char *model_architecture(const Model *m) {
    if (!strcmp(m->net.name, "miniresnet")) return "MiniResNet";
    if (!strcmp(m->net.name, "miniresnet-blurpool")) return "MiniResNet-blurpool";   /* netspec_blurpool */
    return m->net.name;
}

static int has_relu(const ModelStep *st) { return st->kind == NODE_RELU || (st->kind == NODE_BN && st->relu); }

int model_relu_count(const Model *m) {
    int n = 0;
    for (int i = 0; i < m->n_step; i++) n += has_relu(&m->step[i]);
    return n;
}

const float *model_relu_output(const Model *m, int k, int *H, int *W, int *C) {
    CHECK(k >= 0 && k < model_relu_count(m));
    for (int i = 0; i < m->n_step; i++) {
        const ModelStep *st = &m->step[i];
        if (!has_relu(st) || k--) continue;
        *H = st->H;
        *W = st->W;
        *C = st->C;
        return st->y;
    }
    return NULL;
}

int model_maxpool_count(const Model *m) {
    int n = 0;
    for (int i = 0; i < m->n_step; i++) n += m->step[i].kind == NODE_MAXPOOL;
    return n;
}

const int32_t *model_maxpool_arg(const Model *m, int k, int *Ho, int *Wo, int *C) {
    CHECK(k >= 0 && k < model_maxpool_count(m));
    for (int i = 0; i < m->n_step; i++) {
        const ModelStep *st = &m->step[i];
        if (st->kind != NODE_MAXPOOL || k--) continue;
        *Ho = st->H;
        *Wo = st->W;
        *C = st->C;
        return st->arg;
    }
    return NULL;
}

/* ---- forward ------------------------------------------------------------------------------ */

static const float *value(const Model *m, int step) { return step == NET_INPUT ? m->input : m->step[step].y; }

/* Batch norm (batch or running statistics), the fused residual add, the fused ReLU. */
static void bn_forward(Model *m, ModelStep *st, int N, int train) {
    const Backend *be = m->be;
    const float *a = value(m, st->in);
    const size_t M = (size_t)N * st->H * st->W;
    const int C = st->C;
    if (train) {
        double *sums = m->stat_scratch;        /* [count, sum[C], sumsq[C]] */
        be->bn_stats(a, M, C, sums + 1, sums + 1 + C, sums);
        if (m->stats_allreduce) m->stats_allreduce(m->stats_allreduce_ctx, sums, 1 + 2 * (size_t)C);
        be->copy(st->count, sums, sizeof(double));
        be->bn_finalize_stats(sums + 1, sums + 1 + C, sums, C, BN_EPS, BN_MOMENTUM, st->mean, st->invstd,
                              m->buffers + st->rmean_off, m->buffers + st->rvar_off);
        m->bn_tracked[st->bn]++;
    } else {
        be->bn_eval_stats(m->buffers + st->rmean_off, m->buffers + st->rvar_off, C, BN_EPS, st->mean, st->invstd);
    }
    be->bn_apply(a, st->y, M, C, st->mean, st->invstd, m->params + st->w_off, m->params + st->b_off,
                 st->in2 == NET_NONE ? NULL : value(m, st->in2), st->relu);
}

static void step_forward(Model *m, ModelStep *st, int N, int train) {
    const Backend *be = m->be;
    const float *x = value(m, st->in);
    const size_t n = (size_t)N * st->H * st->W * st->C;
    switch (st->kind) {
    case NODE_CONV:
        be->conv2d_forward(&st->conv, N, st->H_in, st->W_in, x, m->params + st->w_off, st->y);
        break;
    case NODE_BN:
        bn_forward(m, st, N, train);
        break;
    case NODE_RELU:
        be->relu_forward(x, st->y, n);
        break;
    case NODE_ADD:
        be->copy(st->y, x, n * (st->act ? be->act_bytes() : sizeof(float)));
        be->add_act_inplace(st->y, value(m, st->in2), n);
        break;
    case NODE_MAXPOOL:
        be->maxpool_forward(x, st->y, st->arg, N, st->H_in, st->W_in, st->C, st->k, st->stride, st->pad);
        break;
    case NODE_AVGPOOL:
        be->avgpool_forward(x, st->y, N, st->H_in * st->W_in, st->C);
        break;
    case NODE_BLUR:
        be->blur(x, st->y, N, st->H, st->W, st->C);
        break;
    case NODE_LINEAR:
        be->linear_forward(x, m->params + st->w_off, m->params + st->b_off, st->y, N, st->C_in, st->C);
        break;
    }
}

/* Everything up to the loss, which stays in backend memory (m->loss, m->correct). */
static void forward_to_loss(Model *m, const float *x, const int *labels, int N, int train, float loss_scale) {
    const Backend *be = m->be;
    CHECK(N >= 1 && N <= m->max_batch);
    m->input = be->act_input(x, (size_t)N * m->input_size * m->input_size * 3, m->input_act);
    m->last_N = N;
    for (int i = 0; i < m->n_step; i++) step_forward(m, &m->step[i], N, train);
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
    const size_t img = (size_t)m->input_size * m->input_size * 3;
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

/* The slots of one backward: which holds each step's output gradient, which are free. In a
 * dry run nothing is computed and the most slots held at once is recorded. */
typedef struct {
    Model *m;
    int dry;
    int *grad;        /* step -> its slot, or -1 */
    int *busy;        /* slot -> in use */
    int cap, held, peak;
} Slots;

static int slot_take(Slots *s) {
    for (int i = 0; i < s->cap; i++)
        if (!s->busy[i]) {
            s->busy[i] = 1;
            if (++s->held > s->peak) s->peak = s->held;
            return i;
        }
    CHECK(!"backward needs more gradient slots than the dry run counted");
    return -1;
}

static void slot_give(Slots *s, int i) {
    CHECK(i >= 0 && s->busy[i]);
    s->busy[i] = 0;
    s->held--;
}

static float *slot_ptr(const Slots *s, int i) { return s->dry ? NULL : s->m->slot[i]; }

static size_t numel(const ModelStep *st, int N) { return (size_t)N * st->H * st->W * st->C; }

/* Where an operation that overwrites writes the gradient of step t's output: its own slot when
 * it has none yet, else a temporary, added into it by grad_done. */
typedef struct { int t, slot, tmp; } GradOut;

static float *grad_begin(Slots *s, int t, GradOut *g) {
    g->t = t;
    g->tmp = s->grad[t] >= 0;
    if (!g->tmp) s->grad[t] = slot_take(s);
    g->slot = g->tmp ? slot_take(s) : s->grad[t];
    return slot_ptr(s, g->slot);
}

static void grad_done(Slots *s, const GradOut *g, int N) {
    if (!g->tmp) return;
    if (!s->dry) s->m->be->add_act_inplace(s->m->slot[s->grad[g->t]], s->m->slot[g->slot], numel(&s->m->step[g->t], N));
    slot_give(s, g->slot);
}

/* The batch norm's backward from dy (masked in place for the ReLU), the residual's gradient
 * first: dy consumed; the gradient of its input into its slot. */
static void bn_backward(Slots *s, ModelStep *st, float *dy, int N) {
    Model *m = s->m;
    const Backend *be = m->be;
    const size_t M = (size_t)N * st->H * st->W;
    const int C = st->C;
    const int fused_relu = st->relu && st->in2 < 0;   /* masked inside the reduction */
    if (st->in2 >= 0) {
        /* The ReLU after the residual add masks the gradient of both branches: mask once, and
         * hand the residual branch its own copy in the same pass. */
        GradOut g;
        float *r = grad_begin(s, st->in2, &g);
        if (!s->dry) {
            if (st->relu) be->relu_mask_copy(dy, st->y, r, M * C);
            else be->copy(r, dy, M * C * be->act_bytes());
        }
        grad_done(s, &g, N);
    }
    if (st->in < 0) return;   /* a batch norm on the image: its parameters' gradients only */
    GradOut g;
    float *dx = grad_begin(s, st->in, &g);
    if (!s->dry) {
        const float *a = value(m, st->in);
        double *loc = m->stat_scratch;               /* [sum_g[C], sum_gx[C]] local */
        double *glob = m->stat_scratch + 2 * C + 1;  /* [sum_g[C], sum_gx[C]] global */
        be->bn_backward_reduce(a, st->y, dy, dy, M, C, st->mean, st->invstd, fused_relu, loc, loc + C);
        be->copy(glob, loc, 2 * (size_t)C * sizeof(double));
        if (m->stats_allreduce) m->stats_allreduce(m->stats_allreduce_ctx, glob, 2 * (size_t)C);
        be->bn_backward_apply(a, dy, dx, M, C, st->mean, st->invstd, m->params + st->w_off, loc, loc + C, glob,
                              glob + C, st->count, m->grads + st->w_off, m->grads + st->b_off);
    }
    grad_done(s, &g, N);
}

static void step_backward(Slots *s, ModelStep *st, float *dy, int N) {
    Model *m = s->m;
    const Backend *be = m->be;
    const float *x = value(m, st->in);
    GradOut g = {-1, 0, 0};   /* g.t >= 0 once a gradient is begun (dx is NULL in a dry run) */
    float *dx = NULL;
    switch (st->kind) {
    case NODE_BN:
        bn_backward(s, st, dy, N);
        return;
    case NODE_CONV:
        dx = st->in >= 0 ? grad_begin(s, st->in, &g) : NULL;
        if (!s->dry)
            be->conv2d_backward(&st->conv, N, st->H_in, st->W_in, x, m->params + st->w_off, dy, dx, m->grads + st->w_off);
        break;
    case NODE_LINEAR:
        /* dx is needed by the linear kernel's contract; the image never feeds a linear layer */
        CHECK(st->in >= 0);
        dx = grad_begin(s, st->in, &g);
        if (!s->dry)
            be->linear_backward(x, m->params + st->w_off, dy, dx, m->grads + st->w_off, m->grads + st->b_off, N,
                                st->C_in, st->C);
        break;
    case NODE_RELU:
        if (st->in < 0) return;
        dx = grad_begin(s, st->in, &g);
        if (!s->dry) be->relu_mask_copy(dy, st->y, dx, numel(st, N));
        break;
    case NODE_MAXPOOL:
        if (st->in < 0) return;
        dx = grad_begin(s, st->in, &g);
        if (!s->dry) be->maxpool_backward(dy, st->arg, dx, N, st->H_in, st->W_in, st->C, st->k, st->stride, st->pad);
        break;
    case NODE_AVGPOOL:
        if (st->in < 0) return;
        dx = grad_begin(s, st->in, &g);
        if (!s->dry) be->avgpool_backward(dy, dx, N, st->H_in * st->W_in, st->C);
        break;
    case NODE_BLUR:
        if (st->in < 0) return;
        dx = grad_begin(s, st->in, &g);
        if (!s->dry) be->blur(dy, dx, N, st->H, st->W, st->C);
        break;
    case NODE_ADD: {
        const int ins[2] = {st->in2, st->in};
        for (int q = 0; q < 2; q++) {
            if (ins[q] < 0) continue;
            float *d = grad_begin(s, ins[q], &g);
            if (!s->dry) be->copy(d, dy, numel(st, N) * (st->act ? be->act_bytes() : sizeof(float)));
            grad_done(s, &g, N);
        }
        return;
    }
    }
    if (g.t >= 0) grad_done(s, &g, N);
}

/* dry: count the slots (model_init); else backward of the last training forward. */
static void backward_steps(Model *m, int dry) {
    const int N = dry ? 1 : m->last_N;
    Slots s = {m, dry, mallocCheck((size_t)m->n_step * sizeof(int)), NULL, dry ? 4 * m->n_step + 4 : m->n_slot, 0, 0};
    s.busy = callocCheck((size_t)(s.cap ? s.cap : 1), sizeof(int));
    for (int i = 0; i < m->n_step; i++) s.grad[i] = -1;
    char *done = callocCheck((size_t)(m->n_param_info ? m->n_param_info : 1), 1);
    int watermark = m->n_param_info;   /* gradients of param_info[watermark..] are final */
    for (int i = m->n_step - 1; i >= 0; i--) {
        ModelStep *st = &m->step[i];
        float *dy;
        if (i == m->n_step - 1) dy = m->dlogits;
        else {
            CHECK(s.grad[i] >= 0);   /* every output reaches the loss (netspec_resolve) */
            dy = slot_ptr(&s, s.grad[i]);
        }
        step_backward(&s, st, dy, N);
        if (i < m->n_step - 1) slot_give(&s, s.grad[i]);
        for (int t = st->p_lo; t < st->p_hi; t++) done[t] = 1;
        const int before = watermark;
        while (watermark > 0 && done[watermark - 1]) watermark--;
        if (!dry && watermark < before && m->grad_ready)
            m->grad_ready(m->grad_ready_ctx, m->param_info[watermark].offset);
    }
    if (dry) m->n_slot = s.peak;
    free(done);
    free(s.grad);
    free(s.busy);
}

void model_backward(Model *m) { backward_steps(m, 0); }

/* ---- work per image ----------------------------------------------------------------------- */

double model_macs_per_image(const Model *m) {
    double macs = 0.0;
    for (int i = 0; i < m->n_step; i++) {
        const ModelStep *st = &m->step[i];
        if (st->kind == NODE_CONV) macs += (double)st->H * st->W * st->C * st->C_in * st->conv.shape.k * st->conv.shape.k;
        if (st->kind == NODE_LINEAR) macs += (double)st->C_in * st->C;
    }
    return macs;
}

double model_train_flops_per_image(const Model *m) { return 2.0 * 3.0 * model_macs_per_image(m); }
