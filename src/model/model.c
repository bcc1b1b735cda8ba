/* SPDX-License-Identifier: BSD-3-Clause */
/* model.c - a network from its node table: layout, initialisation, forward and backward,
 * each step's part of them done by its kind's record (node_kind.h).
 *
 * model_init_net compiles the table into steps. A batch norm whose only consumer is an add
 * (as its first operand) and whose add's only consumer is a ReLU becomes one step, as does a
 * batch norm followed by a ReLU: bn_apply adds the residual and clamps in the pass that
 * normalises, and backward masks once. Such a step runs where its last node stands, so the
 * residual is ready. Every other node is a step of its own.
 *
 * Backward runs the steps in reverse. The gradient of a step's output lives in a slot from a
 * pool (model_slots.c), whose size is what one dry run of backward holds at most. A parameter's gradient is final once its step is done; the
 * gradients at offsets >= X are final when every step owning a parameter at or above X is:
 * that watermark is what grad_ready hears, so buckets start during backward. */
#include <string.h>

#include "base/rng.h"
#include "base/util.h"
#include "model_step.h"
#include "zoo.h"

/* ---- layout -------------------------------------------------------------------------------- */

size_t layout_add(Layout *l, const char *prefix, const char *name, TensorRole role, int bn, int ndim, int d0, int d1,
                  int d2, int d3) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->info = realloc(l->info, (size_t)l->cap * sizeof *l->info);
        CHECK(l->info != NULL);
    }
    TensorInfo *t = &l->info[l->n++];
    memset(t, 0, sizeof *t);
    snprintf_check(t->name, sizeof t->name, "%s%s%s", prefix, *prefix && *name ? "." : "", name);
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
        int ins[NET_MAX_INPUTS];
        const int n_in = node_inputs(&s->node[j], ins);
        for (int q = 0; q < n_in; q++)
            if (ins[q] == i) { n++; *only = j; }
    }
    return n;
}

static int float_out(const NetNode *n) {
    const NodeKindDef *d = node_kind(n->kind);
    return d->float_out && d->float_out(n);
}

/* The groups: owner[i] is the batch norm whose step computes node i's value (i itself when
 * it is not fused); end[h] the last node of h's group. */
typedef struct {
    int *owner, *end;
    int *step_of;     /* node -> the step that gives its value */
} Plan;

/* The kinds whose operations a backend may lack (backend.h): refused before anything is built.
 * A node fused into a batch norm's step (owner[i] != i: a ReLU, a residual add, an activation
 * the backend fuses) runs in that step's operation, not its own: its record is not asked. */
static int backend_has(const Backend *be, const NetSpec *s, const int *owner, const char *what, char *err,
                       size_t errlen) {
    for (int i = 0; i < s->n; i++) {
        const NetNode *n = &s->node[i];
        const NodeKindDef *d = node_kind(n->kind);
        const char *lacks = d->backend_lacks && owner[i] == i ? d->backend_lacks(be, n) : NULL;
        if (lacks) {
            snprintf(err, errlen, "%s: node \"%s\": the %s backend has no %s (the %s node)", what, n->name, be->name,
                     lacks, d->name);
            return -1;
        }
        /* A device keeps activations in 16 bits under mixed precision but the pooled features
         * in float32: only linear layers there take those. */
        if (be->on_device && n->kind != NODE_LINEAR && n->in >= 0 && float_out(&s->node[n->in])) {
            snprintf(err, errlen, "%s: node \"%s\": the %s backend runs nothing but linear layers after a global "
                     "average pool", what, n->name, be->name);
            return -1;
        }
    }
    return 0;
}

/* bn [+ add, the bn its first operand] [+ relu], or bn + act where the backend has the fused
 * operations (backend.h's bn_apply_act), each the only consumer of the one before.
 *
 * bn + act is one step because a MobileNet's or an EfficientNet's batch norms and activations
 * are bound by memory: the fused step reads the map once where the two read and write it
 * again, and keeps no pre-activation for the backward. tests/test_ops --bench-bn-act, conv 1x1
 * -> bn -> hardswish at N=32, 2 threads (x86-64-v2 build, 2 cores shared with other work): the
 * batch norm and hardswish forward + backward take 24-30% less time fused (16->96 64x64:
 * 96-114 ms -> 72-76; 80->480 16x16: 16-44 -> 11-27; 160->960 8x8: 8.5 -> 6.6), the chain with
 * its convolution 14-18% less; in CPU time, less noisy there, 185 -> 133 ms over the four
 * shapes. */
static void plan_groups(const Backend *be, const NetSpec *s, Plan *p) {
    for (int i = 0; i < s->n; i++) p->owner[i] = p->end[i] = i;
    for (int i = 0; i < s->n; i++) {
        if (s->node[i].kind != NODE_BN) continue;
        int j = -1, k = -1;
        if (consumers(s, i, &j) != 1) continue;
        if (s->node[j].kind == NODE_ADD && s->node[j].in == i && s->node[j].in2 != i) {
            p->owner[j] = i;
            p->end[i] = j;
            if (consumers(s, j, &k) == 1 && s->node[k].kind == NODE_RELU) { p->owner[k] = i; p->end[i] = k; }
        } else if (s->node[j].kind == NODE_RELU ||
                   (s->node[j].kind == NODE_ACT && be->bn_apply_act && be->bn_backward_reduce_act)) {
            p->owner[j] = i;
            p->end[i] = j;
        }
    }
}

static int value_step(const Plan *p, int node) { return node == NET_INPUT ? NET_INPUT : p->step_of[node]; }

static void alloc_step(const Backend *be, ModelStep *st, int max_batch) {
    const size_t n = (size_t)max_batch * st->H * st->W * st->C;
    st->y = be->alloc(n * (st->y_bf16 ? sizeof(uint16_t) : st->act ? be->act_bytes() : sizeof(float)));
    const NodeKindDef *d = node_kind(st->kind);
    if (d->alloc) d->alloc(be, st, max_batch);
}

/* Lays out the tensors of node n (table order = state_dict order) into step st. */
static void layout_node(const Backend *be, const NetNode *n, ModelStep *st, Layout *P, Layout *B, Layout *NB) {
    st->p_lo = P->n;
    const NodeKindDef *d = node_kind(n->kind);
    if (d->layout) d->layout(be, n, st, P, B, NB);
    st->p_hi = P->n;
}

static void backward_steps(Model *m, int dry);

/* Whether step i has readers, all of kind `kind` and reading it as their input (`in`), and
 * for convolutions all computing in bf16 at the largest batch. */
static int read_only_by(Model *m, int i, NodeKind kind, int max_batch) {
    int readers = 0;
    for (int j = i + 1; j < m->n_step; j++) {
        ModelStep *u = &m->step[j];
        int other = u->in2 == i;
        for (int q = 0; q < u->n_ins; q++) other |= u->ins[q] == i;
        if (other) return 0;
        if (u->in != i) continue;
        if (u->kind != kind) return 0;
        if (kind == NODE_CONV && !m->be->conv2d_is_bf16(&u->conv, max_batch, u->H_in, u->W_in)) return 0;
        readers++;
    }
    return readers > 0;
}

/* --use_amp on the CPU stores two kinds of output in 16 bits (ModelStep.y_bf16), where the
 * backend can (Backend.conv2d_is_bf16 and the three after it), without changing a number:
 *  - a bf16 convolution's output that batch norms alone read: it holds bf16 values already
 *    (oneDNN rounds its dst, as autocast's convolution returns bf16), so 16 bits keep all of
 *    it; each batch norm widens it, exactly, into m->bf16_in and computes on the same float32
 *    numbers as before;
 *  - a batch norm's output (with its fused add, ReLU or activation) that bf16 convolutions
 *    alone read: they round it to bf16 on the way in, so it is kept as they read it (rounded
 *    by narrow_bf16, their own conversion) rather than in float32 beside that copy. The batch
 *    norm computes it in float32 into m->bf16_out first; its backward recomputes it there, bit
 *    for bit, where a fused ReLU needs its sign.
 * A convolution with a bias (added in float32) keeps a float32 output. ResNet-50 at batch 32,
 * 128 px: 443 and 187 of its 903 MiB of outputs are of these kinds. Sets the elements of the
 * two buffers. */
static void choose_bf16_storage(Model *m, int max_batch, size_t *wide_in, size_t *wide_out) {
    const Backend *be = m->be;
    *wide_in = *wide_out = 0;
    if (!be->conv2d_is_bf16 || !be->conv2d_bf16_io || !be->widen_bf16 || !be->narrow_bf16) return;
    for (int i = 0; i < m->n_step; i++) {
        ModelStep *st = &m->step[i];
        const size_t n = step_numel(st, max_batch);
        if (st->kind == NODE_CONV && !m->net.node[st->node].bias &&
            be->conv2d_is_bf16(&st->conv, max_batch, st->H_in, st->W_in) && read_only_by(m, i, NODE_BN, max_batch)) {
            st->y_bf16 = 1;
            be->conv2d_bf16_io(&st->conv, 0, 1);
            if (n > *wide_in) *wide_in = n;
        } else if (st->kind == NODE_BN && read_only_by(m, i, NODE_CONV, max_batch)) {
            st->y_bf16 = 1;
            for (int j = i + 1; j < m->n_step; j++)
                if (m->step[j].in == i) be->conv2d_bf16_io(&m->step[j].conv, 1, 0);
            if (n > *wide_out) *wide_out = n;
        }
    }
}

/* The steps whose outputs reach the logits (the last step) through no sink: the others, the
 * auxiliary classifiers and their losses, run in training forwards only. */
static void mark_train_only(Model *m) {
    char *reach = callocCheck((size_t)m->n_step, 1);
    reach[m->n_step - 1] = 1;
    for (int i = m->n_step - 1; i >= 0; i--) {
        const ModelStep *st = &m->step[i];
        if (!reach[i]) continue;
        if (st->in >= 0) reach[st->in] = 1;
        if (st->in2 >= 0) reach[st->in2] = 1;
        for (int q = 0; q < st->n_ins; q++)
            if (st->ins[q] >= 0) reach[st->ins[q]] = 1;
    }
    for (int i = 0; i < m->n_step; i++) m->step[i].train_only = !reach[i];
    free(reach);
}

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
    if (netspec_resolve(s, image_size, num_classes, what, err, errlen) != 0) {
        netspec_free(s);
        memset(m, 0, sizeof *m);
        return -1;
    }
    Plan p = {callocCheck((size_t)s->n, sizeof(int)), callocCheck((size_t)s->n, sizeof(int)),
              callocCheck((size_t)s->n, sizeof(int))};
    plan_groups(be, s, &p);
    if (backend_has(be, s, p.owner, what, err, errlen) != 0) {
        free(p.owner);
        free(p.end);
        free(p.step_of);
        netspec_free(s);
        memset(m, 0, sizeof *m);
        return -1;
    }
    m->be = be;
    m->mix = 1.0f;
    m->num_classes = num_classes;
    m->image_size = m->input_size = image_size;
    m->max_batch = max_batch;

    /* Tensors in state_dict order (table order but for layer scales: netspec_layout_order), one
     * provisional step per group's first node. */
    ModelStep *proto = callocCheck((size_t)s->n, sizeof *proto);
    Layout P = {0}, B = {0}, NB = {0};
    int *order = callocCheck((size_t)s->n, sizeof(int));
    netspec_layout_order(s, order);
    for (int k = 0; k < s->n; k++) {
        const int i = order[k];
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
        st->k = n->k; st->stride = n->stride; st->pad = n->pad; st->groups = n->groups;
        st->eps = n->eps; st->momentum = n->momentum;
        st->fn = n->fn; st->slope = n->slope; st->p = n->p;
        layout_node(be, n, st, &P, &B, &NB);
    }
    free(order);
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
        if (node_kind(n->kind)->inputs == 2) st.in2 = value_step(&p, n->in2);
        for (int j = h + 1; j <= i; j++) {
            if (p.owner[j] != h) continue;
            if (s->node[j].kind == NODE_ADD) st.in2 = value_step(&p, s->node[j].in2);
            if (s->node[j].kind == NODE_RELU) st.relu = 1;
            if (s->node[j].kind == NODE_ACT) {
                st.fused_act = 1;
                st.fn = s->node[j].fn;
                st.slope = s->node[j].slope;
            }
        }
        /* the pooled features and what follows them are float32 */
        if (node_kind(n->kind)->inputs == NODE_INPUT_LIST) {
            st.n_ins = n->n_ins;
            st.ins = mallocCheck((size_t)n->n_ins * sizeof *st.ins);
            for (int q = 0; q < n->n_ins; q++) st.ins[q] = value_step(&p, n->ins[q]);
        }
        st.act = !(float_out(n) || (st.in >= 0 && !m->step[st.in].act));
        m->step[ns] = st;
        for (int j = h; j <= i; j++)
            if (p.owner[j] == h) p.step_of[j] = ns;
        ns++;
    }
    m->n_step = ns;
    mark_train_only(m);
    free(proto);
    free(p.owner);
    free(p.end);
    free(p.step_of);
    CHECK(m->step[ns - 1].kind == NODE_LINEAR || m->step[ns - 1].kind == NODE_AVGPOOL);

    m->param_info = P.info; m->n_param_info = P.n; m->num_params = P.size;
    m->buffer_info = B.info; m->n_buffer_info = B.n; m->num_buffers = B.size;
    m->bn_info = NB.info; m->n_bn = NB.n;
    m->bn_tracked = callocCheck((size_t)(m->n_bn ? m->n_bn : 1), sizeof *m->bn_tracked);
    m->params = be->alloc(m->num_params * sizeof(float));
    m->grads = be->alloc(m->num_params * sizeof(float));
    m->buffers = be->alloc((m->num_buffers ? m->num_buffers : 1) * sizeof(float));

    size_t wide_in, wide_out;
    choose_bf16_storage(m, max_batch, &wide_in, &wide_out);
    if (wide_in) m->bf16_in = be->alloc(wide_in * sizeof(float));
    if (wide_out) m->bf16_out = be->alloc(wide_out * sizeof(float));
    int max_c = 1;
    for (int i = 0; i < ns; i++) {
        ModelStep *st = &m->step[i];
        alloc_step(be, st, max_batch);
        /* the gradient of a bf16-stored output stays float32 */
        st->grad_bytes = (size_t)max_batch * st->H * st->W * st->C * (st->act ? be->act_bytes() : sizeof(float));
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
    backward_steps(m, 1);   /* makes the slots: m->n_slot, and their sizes in m->slot_bytes */
    m->slot = callocCheck((size_t)(m->n_slot ? m->n_slot : 1), sizeof *m->slot);
    for (int i = 0; i < m->n_slot; i++) m->slot[i] = be->alloc(m->slot_bytes[i]);
    return 0;
}

void model_free(Model *m) {
    const Backend *be = m->be;
    if (!be) return;
    for (int i = 0; i < m->n_step; i++) {
        ModelStep *st = &m->step[i];
        const NodeKindDef *d = node_kind(st->kind);
        if (d->release) d->release(be, st);
        be->release(st->y);
        free(st->ins);
    }
    free(m->step);
    for (int i = 0; i < m->n_slot; i++) be->release(m->slot[i]);
    free(m->slot);
    free(m->slot_bytes);
    free(m->slot_script);
    if (m->input_act) be->release(m->input_act);
    if (m->bf16_in) be->release(m->bf16_in);
    if (m->bf16_out) be->release(m->bf16_out);
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

void model_init_weights(Model *m, uint64_t seed) {
    const Backend *be = m->be;
    float *params = be->on_device ? mallocCheck(m->num_params * sizeof(float)) : m->params;
    float *buffers = be->on_device ? mallocCheck((m->num_buffers ? m->num_buffers : 1) * sizeof(float)) : m->buffers;
    Rng r;
    rng_init(&r, seed, 0x5eed, 0);
    /* run order puts a fused batch norm after the nodes up to its add: draw in table order */
    for (int node = 0; node < m->net.n; node++)
        for (int i = 0; i < m->n_step; i++)
            if (m->step[i].first == node && node_kind(m->step[i].kind)->init)
                node_kind(m->step[i].kind)->init(m, &m->step[i], params, buffers, &r);
    if (be->on_device) {
        be->upload(m->params, params, m->num_params * sizeof(float));
        be->upload(m->buffers, buffers, m->num_buffers * sizeof(float));
        free(params);
        free(buffers);
    }
    model_params_changed(m);
}

void model_params_changed(Model *m) {
    for (int i = 0; i < m->n_step; i++) {
        const NodeKindDef *d = node_kind(m->step[i].kind);
        if (d->params_changed) d->params_changed(m->be, &m->step[i]);
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

const char *model_architecture(const Model *m) {
    if (!strcmp(m->net.name, "miniresnet")) return "MiniResNet";
    if (!strcmp(m->net.name, "miniresnet-blurpool")) return "MiniResNet-blurpool";   /* netspec_blurpool */
    return m->net.name;
}

int model_bf16_outputs(const Model *m, size_t *saved) {
    int n = 0;
    size_t half = 0, wide[2] = {0, 0};   /* the float32 buffers: convolutions', batch norms' */
    for (int i = 0; i < m->n_step; i++) {
        const ModelStep *st = &m->step[i];
        if (!st->y_bf16) continue;
        n++;
        const size_t e = step_numel(st, m->max_batch);
        half += e * sizeof(uint16_t);
        size_t *w = &wide[st->kind == NODE_BN];
        if (e * sizeof(float) > *w) *w = e * sizeof(float);
    }
    *saved = half > wide[0] + wide[1] ? half - wide[0] - wide[1] : 0;
    return n;
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
        if (!st->y_bf16) return st->y;
        /* kept in bf16: its widened copy (the float32 values but where bf16 rounds to zero) */
        m->be->widen_bf16(st->y, m->bf16_out, step_numel(st, m->last_N));
        return m->bf16_out;
    }
    return NULL;
}

const char *model_relu_name(const Model *m, int k) {
    CHECK(k >= 0 && k < model_relu_count(m));
    for (int i = 0; i < m->n_step; i++) {
        const ModelStep *st = &m->step[i];
        if (has_relu(st) && !k--) return m->net.node[st->node].name;
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

static int is_noise(const ModelStep *st) { return st->kind == NODE_DROPOUT || st->kind == NODE_STOCHASTIC_DEPTH; }

int model_noise_count(const Model *m) {
    int n = 0;
    for (int i = 0; i < m->n_step; i++) n += is_noise(&m->step[i]);
    return n;
}

const void *model_noise_mask(const Model *m, int k, NodeKind *kind, int *H, int *W, int *C) {
    CHECK(k >= 0 && k < model_noise_count(m));
    for (int i = 0; i < m->n_step; i++) {
        const ModelStep *st = &m->step[i];
        if (!is_noise(st) || k--) continue;
        *kind = st->kind;
        *H = st->H;
        *W = st->W;
        *C = st->C;
        if (!st->noisy) return NULL;
        return st->kind == NODE_DROPOUT ? (const void *)st->keep : (const void *)st->scale;
    }
    return NULL;
}

void model_set_noise(Model *m, uint64_t seed, uint64_t step, int rank, int micro) {
    Rng r;
    rng_init(&r, seed ^ 0x64726f706f7574ULL, step, ((uint64_t)(uint32_t)rank << 32) | (uint32_t)micro);
    m->noise_key = rng_u64(&r);
}

uint64_t step_noise_key(const Model *m, const ModelStep *st) {
    return rng_mix64(m->noise_key + 0x9e3779b97f4a7c15ULL * (uint64_t)(st->node + 1));
}

/* ---- forward ------------------------------------------------------------------------------ */

/* Everything up to the loss, which stays in backend memory (m->loss, m->correct). */
static void forward_to_loss(Model *m, const float *x, const int *labels, int N, int train, float loss_scale) {
    const Backend *be = m->be;
    CHECK(N >= 1 && N <= m->max_batch);
    m->input = be->act_input(x, (size_t)N * m->input_size * m->input_size * 3, m->input_act);
    m->last_N = N;
    m->labels = labels;
    m->loss_scale = loss_scale;
    for (int i = 0; i < m->n_step; i++)
        if (train || !m->step[i].train_only) node_kind(m->step[i].kind)->forward(m, &m->step[i], N, train);
    be->softmax_xent(m->logits, labels, N, m->num_classes, loss_scale, train ? m->label_smoothing : 0.0f,
                     train ? m->mix : 1.0f,
                     train ? m->dlogits : NULL, m->loss, m->correct);
    if (train && m->grad_scale) be->scale_inplace(m->dlogits, (size_t)N * m->num_classes, m->grad_scale);
    for (int i = 0; train && i < m->n_step; i++) {
        const NodeKindDef *d = node_kind(m->step[i].kind);
        if (d->add_loss) d->add_loss(m, &m->step[i], N);
    }
    m->labels = NULL;
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
void model_evaluate_each(Model *m, const float *x, const int *labels, int N, long *correct, double *loss_sum,
                         ModelChunkFn fn, void *ctx) {
    const size_t img = (size_t)m->input_size * m->input_size * 3;
    long hits = 0;
    double sum = 0.0;
    for (int off = 0; off < N; off += m->max_batch) {
        const int n = N - off < m->max_batch ? N - off : m->max_batch;
        int c = 0;
        const float loss = model_forward(m, x + (size_t)off * img, labels + off, n, 0, 1.0f, &c);
        if (fn) fn(ctx, m, labels + off, off, n);
        hits += c;
        sum += (double)loss * n;
    }
    if (correct) *correct = hits;
    if (loss_sum) *loss_sum = sum;
}

void model_evaluate(Model *m, const float *x, const int *labels, int N, long *correct, double *loss_sum) {
    model_evaluate_each(m, x, labels, N, correct, loss_sum, NULL, NULL);
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

/* dry: count the slots (model_init); else backward of the last training forward. */
static void backward_steps(Model *m, int dry) {
    const int N = dry ? 1 : m->last_N;
    Slots s = {.m = m, .dry = dry, .grad = mallocCheck((size_t)m->n_step * sizeof(int))};
    if (!dry) {   /* the slots the dry run made */
        s.n = s.cap = m->n_slot;
        s.busy = callocCheck((size_t)(s.cap ? s.cap : 1), sizeof(int));
        s.bytes = mallocCheck((size_t)(s.cap ? s.cap : 1) * sizeof(size_t));
        if (s.n) memcpy(s.bytes, m->slot_bytes, (size_t)s.n * sizeof(size_t));
        s.script = m->slot_script;
        s.n_script = m->n_slot_script;
    }
    for (int i = 0; i < m->n_step; i++) s.grad[i] = -1;
    char *done = callocCheck((size_t)(m->n_param_info ? m->n_param_info : 1), 1);
    int watermark = m->n_param_info;   /* gradients of param_info[watermark..] are final */
    for (int i = m->n_step - 1; i >= 0; i--) {
        ModelStep *st = &m->step[i];
        const int sink = node_kind(st->kind)->sink;
        float *dy = NULL;
        if (i == m->n_step - 1) dy = m->dlogits;
        else if (!sink) {
            CHECK(s.grad[i] >= 0);   /* every output reaches the loss (netspec_resolve) */
            dy = slot_ptr(&s, s.grad[i]);
        }
        node_kind(st->kind)->backward(&s, st, dy, N);
        if (i < m->n_step - 1 && !sink) slot_give(&s, s.grad[i]);
        for (int t = st->p_lo; t < st->p_hi; t++) done[t] = 1;
        const int before = watermark;
        while (watermark > 0 && done[watermark - 1]) watermark--;
        if (!dry && watermark < before && m->grad_ready)
            m->grad_ready(m->grad_ready_ctx, m->param_info[watermark].offset);
    }
    if (dry) {
        m->n_slot = s.n;
        m->slot_bytes = s.bytes;
        m->slot_script = s.script;
        m->n_slot_script = s.n_script;
    } else {
        free(s.bytes);
    }
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
        const NodeKindDef *d = node_kind(st->kind);
        if (d->macs) macs += d->macs(st);
    }
    return macs;
}

double model_train_flops_per_image(const Model *m) { return 2.0 * 3.0 * model_macs_per_image(m); }

void model_each_conv(Model *m, void (*fn)(void *ctx, const char *node, Conv2d *conv, int H, int W), void *ctx) {
    for (int i = 0; i < m->n_step; i++) {
        ModelStep *st = &m->step[i];
        if (st->kind == NODE_CONV) fn(ctx, m->net.node[st->node].name, &st->conv, st->H_in, st->W_in);
    }
}
