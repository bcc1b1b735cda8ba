/* SPDX-License-Identifier: BSD-3-Clause */
/* netspec.c - see netspec.h. */
#include "netspec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "ops/backend.h"   /* ACT_FN_COUNT */

void netspec_init(NetSpec *s, const char *name, NetInit init) {
    memset(s, 0, sizeof *s);
    snprintf_check(s->name, sizeof s->name, "%s", name);
    s->init = init;
}

void netspec_free(NetSpec *s) {
    free(s->node);
    memset(s, 0, sizeof *s);
}

void netspec_copy(NetSpec *dst, const NetSpec *src) {
    *dst = *src;
    dst->cap = src->n;
    dst->node = src->n ? mallocCheck((size_t)src->n * sizeof *dst->node) : NULL;
    if (src->n) memcpy(dst->node, src->node, (size_t)src->n * sizeof *dst->node);
}

/* Appends a copy of node n (its inputs as they are: the caller remaps them). */
static int push_copy(NetSpec *s, const NetNode *n) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->node = realloc(s->node, (size_t)s->cap * sizeof *s->node);
        CHECK(s->node != NULL);
    }
    s->node[s->n] = *n;
    return s->n++;
}

int netspec_node(NetSpec *s, NodeKind kind, int in, int in2, const char *name) {
    NetNode n;
    memset(&n, 0, sizeof n);
    n.kind = kind;
    n.in = in;
    n.in2 = in2;
    node_kind_defaults(kind, &n);
    snprintf_check(n.name, sizeof n.name, "%s", name);
    return push_copy(s, &n);
}

static int push(NetSpec *s, NodeKind kind, int in, int in2, const char *fmt, va_list ap) {
    char name[sizeof ((NetNode *)0)->name];
    const int len = vsnprintf(name, sizeof name, fmt, ap);
    CHECK(len >= 0 && (size_t)len < sizeof name);
    return netspec_node(s, kind, in, in2, name);
}

#define PUSH(kind, in, in2)                   \
    va_list ap;                               \
    va_start(ap, fmt);                        \
    const int i = push(s, kind, in, in2, fmt, ap); \
    va_end(ap)

int netspec_conv(NetSpec *s, int in, int out, int k, int stride, int pad, const char *fmt, ...) {
    PUSH(NODE_CONV, in, NET_NONE);
    s->node[i].out = out; s->node[i].k = s->node[i].kw = k; s->node[i].stride = stride;
    s->node[i].pad = s->node[i].padw = pad;
    return i;
}

int netspec_bn(NetSpec *s, int in, int zero_init, const char *fmt, ...) {
    PUSH(NODE_BN, in, NET_NONE);
    s->node[i].zero_init = zero_init;
    return i;
}

int netspec_relu(NetSpec *s, int in, const char *fmt, ...) {
    PUSH(NODE_RELU, in, NET_NONE);
    return i;
}

int netspec_add(NetSpec *s, int in, int in2, const char *fmt, ...) {
    PUSH(NODE_ADD, in, in2);
    return i;
}

int netspec_maxpool(NetSpec *s, int in, int k, int stride, int pad, const char *fmt, ...) {
    PUSH(NODE_MAXPOOL, in, NET_NONE);
    s->node[i].k = s->node[i].kw = k; s->node[i].stride = stride; s->node[i].pad = s->node[i].padw = pad;
    return i;
}

int netspec_avgpool(NetSpec *s, int in, const char *fmt, ...) {
    PUSH(NODE_AVGPOOL, in, NET_NONE);
    return i;
}

int netspec_linear(NetSpec *s, int in, int out, const char *fmt, ...) {
    PUSH(NODE_LINEAR, in, NET_NONE);
    s->node[i].out = out;
    return i;
}

int netspec_blur(NetSpec *s, int in, const char *fmt, ...) {
    PUSH(NODE_BLUR, in, NET_NONE);
    return i;
}

int netspec_conv_ex(NetSpec *s, int in, ConvArgs a, const char *fmt, ...) {
    PUSH(NODE_CONV, in, NET_NONE);
    NetNode *n = &s->node[i];
    n->out = a.out; n->k = a.k; n->stride = a.stride; n->pad = a.pad;
    n->kw = a.kw ? a.kw : a.k;
    n->padw = a.kw ? a.padw : a.pad;
    n->init_std = a.init_std;
    n->groups = a.groups ? a.groups : 1;
    n->dilation = a.dilation ? a.dilation : 1;
    n->bias = a.bias != 0;
    return i;
}

int netspec_bn_ex(NetSpec *s, int in, float eps, float momentum, int zero_init, const char *fmt, ...) {
    PUSH(NODE_BN, in, NET_NONE);
    s->node[i].eps = eps;
    s->node[i].momentum = momentum;
    s->node[i].zero_init = zero_init;
    return i;
}

int netspec_act(NetSpec *s, int in, int fn, const char *fmt, ...) {
    CHECK(fn >= 0 && fn < ACT_FN_COUNT);
    PUSH(NODE_ACT, in, NET_NONE);
    s->node[i].fn = fn;
    return i;
}

int netspec_mul(NetSpec *s, int in, int scale, const char *fmt, ...) {
    PUSH(NODE_MUL, in, scale);
    return i;
}

int netspec_dropout(NetSpec *s, int in, float p, const char *fmt, ...) {
    PUSH(NODE_DROPOUT, in, NET_NONE);
    s->node[i].p = p;
    return i;
}

int netspec_stochastic_depth(NetSpec *s, int in, float p, const char *fmt, ...) {
    PUSH(NODE_STOCHASTIC_DEPTH, in, NET_NONE);
    s->node[i].p = p;
    return i;
}

int netspec_concat(NetSpec *s, const int *ins, int n, const char *fmt, ...) {
    CHECK(n >= 1 && n <= NET_MAX_INPUTS);
    PUSH(NODE_CONCAT, ins[0], NET_NONE);
    s->node[i].n_ins = n;
    memcpy(s->node[i].ins, ins, (size_t)n * sizeof *ins);
    return i;
}

int netspec_split(NetSpec *s, int in, int chunks, int index, const char *fmt, ...) {
    PUSH(NODE_SPLIT, in, NET_NONE);
    s->node[i].chunks = chunks;
    s->node[i].index = index;
    return i;
}

int netspec_channel_shuffle(NetSpec *s, int in, int groups, const char *fmt, ...) {
    PUSH(NODE_CHANNEL_SHUFFLE, in, NET_NONE);
    s->node[i].groups = groups;
    return i;
}

static void pool_args(NetNode *n, PoolArgs a) {
    n->k = n->kw = a.k;
    n->stride = a.stride ? a.stride : a.k;
    n->pad = n->padw = a.pad;
    n->ceil_mode = a.ceil_mode != 0;
    n->count_pad = !a.exclude_pad;
}

int netspec_maxpool_ex(NetSpec *s, int in, PoolArgs a, const char *fmt, ...) {
    PUSH(NODE_MAXPOOL, in, NET_NONE);
    pool_args(&s->node[i], a);
    return i;
}

int netspec_avgpool_ex(NetSpec *s, int in, PoolArgs a, const char *fmt, ...) {
    CHECK(a.k >= 1);
    PUSH(NODE_AVGPOOL, in, NET_NONE);
    pool_args(&s->node[i], a);
    return i;
}

int netspec_adaptive_avgpool(NetSpec *s, int in, int size, const char *fmt, ...) {
    PUSH(NODE_ADAPTIVE_AVGPOOL, in, NET_NONE);
    s->node[i].out_size = size;
    return i;
}

int netspec_flatten(NetSpec *s, int in, const char *fmt, ...) {
    PUSH(NODE_FLATTEN, in, NET_NONE);
    return i;
}

int netspec_layernorm(NetSpec *s, int in, float eps, const char *fmt, ...) {
    PUSH(NODE_LAYERNORM, in, NET_NONE);
    s->node[i].eps = eps;
    return i;
}

int netspec_layer_scale(NetSpec *s, int in, float value, const char *fmt, ...) {
    PUSH(NODE_LAYER_SCALE, in, NET_NONE);
    s->node[i].value = value;
    return i;
}

int netspec_aux_loss(NetSpec *s, int in, float weight, const char *fmt, ...) {
    PUSH(NODE_AUX_LOSS, in, NET_NONE);
    s->node[i].value = weight;
    return i;
}

int netspec_transform_input(NetSpec *s, int in, const char *fmt, ...) {
    PUSH(NODE_TRANSFORM_INPUT, in, NET_NONE);
    return i;
}

#define NET_INIT_NAME(e, name) name,
static const char *const k_init_names[NET_INIT_COUNT] = {NET_INITS(NET_INIT_NAME)};
#undef NET_INIT_NAME

const char *net_init_name(NetInit i) { return i >= 0 && i < NET_INIT_COUNT ? k_init_names[i] : "?"; }

int net_init_parse(const char *name) {
    for (int i = 0; i < NET_INIT_COUNT; i++)
        if (!strcmp(name, k_init_names[i])) return i;
    return -1;
}

const char *net_init_list(void) {
    /* Twelve names once outgrew 128 bytes, and the first unknown "init" of a network file
     * stopped the run with an internal error: the check stays inside the loop, so a list
     * that grows again fails here, before a write past the end. */
    static char buf[320];
    if (!buf[0]) {
        size_t at = 0;
        for (int i = 0; i < NET_INIT_COUNT; i++) {
            at += (size_t)snprintf(buf + at, sizeof buf - at, "%s\"%s\"", i ? ", " : "", k_init_names[i]);
            CHECK(at < sizeof buf);
        }
    }
    return buf;
}

/* A kind whose field sets the output's channels (a convolution's out_channels, a linear layer's
 * out_features: both fill `out`). */
static int sets_channels(NodeKind k) { return node_kind_field(k, F_OUT_CHANNELS) || node_kind_field(k, F_OUT_FEATURES); }

/* Channels of every node's output without an image size: those of its input, but for the
 * layers that set them (a linear layer's 0, the class count, is not needed here). */
static int *channels(const NetSpec *s) {
    int *c = mallocCheck((size_t)(s->n ? s->n : 1) * sizeof *c);
    for (int i = 0; i < s->n; i++) {
        const NetNode *n = &s->node[i];
        const int in = n->in == NET_INPUT ? 3 : (n->in >= 0 && n->in < i ? c[n->in] : 0);
        c[i] = sets_channels(n->kind) ? n->out : in;
        if (n->kind == NODE_CONCAT) {   /* the sum of its inputs' */
            c[i] = 0;
            for (int q = 0; q < n->n_ins; q++)
                c[i] += n->ins[q] == NET_INPUT ? 3 : n->ins[q] >= 0 && n->ins[q] < i ? c[n->ins[q]] : 0;
        }
        if (n->kind == NODE_SPLIT && n->chunks > 0) c[i] = in / n->chunks;
    }
    return c;
}

int netspec_blurpool(NetSpec *s) {
    enum { MIN_CHANNELS = 16 };   /* FFCV's rule: not the stem, which sees the 3-channel image */
    int *ch = channels(s);
    int *map = mallocCheck((size_t)(s->n ? s->n : 1) * sizeof *map);     /* old node -> new */
    int *blur = mallocCheck((size_t)(s->n + 1) * sizeof *blur);         /* producer + 1 -> its blur */
    for (int i = 0; i <= s->n; i++) blur[i] = -1;
    NetSpec d;
    netspec_init(&d, s->name, s->init);
    int added = 0;
    for (int i = 0; i < s->n; i++) {
        const NetNode *n = &s->node[i];
        int in = n->in >= 0 ? map[n->in] : n->in;
        const int c_in = n->in == NET_INPUT ? 3 : n->in >= 0 && n->in < i ? ch[n->in] : 0;
        if (n->kind == NODE_CONV && n->stride > 1 && c_in >= MIN_CHANNELS && n->in >= NET_INPUT) {
            int *b = &blur[n->in + 1];
            if (*b < 0) { *b = netspec_blur(&d, in, "%.42s.blur", n->name); added++; }
            in = *b;
        }
        const int j = push_copy(&d, n);
        node_remap_inputs(&d.node[j], map);
        d.node[j].in = in;
        if (d.node[j].n_ins) d.node[j].ins[0] = in;
        map[i] = j;
    }
    if (added) {
        char name[sizeof s->name];
        snprintf(name, sizeof name, "%.38s-blurpool", s->name);
        snprintf_check(d.name, sizeof d.name, "%s", name);
    }
    free(ch);
    free(map);
    free(blur);
    netspec_free(s);
    *s = d;
    return added;
}

void netspec_layout_order(const NetSpec *s, int *order) {
    for (int i = 0; i < s->n; i++) order[i] = i;
    for (int i = 0; i < s->n; i++) {
        const char *name = s->node[i].name, *dot = strrchr(name, '.');
        if (s->node[i].kind != NODE_LAYER_SCALE || !dot) continue;
        const size_t len = (size_t)(dot - name) + 1;   /* "PRE." */
        int k = 0;
        while (k < i && strncmp(s->node[order[k]].name, name, len)) k++;
        /* nodes above i are still in their places: i is at order[i] */
        memmove(order + k + 1, order + k, (size_t)(i - k) * sizeof *order);
        order[k] = i;
    }
}

int netspec_drop_aux(NetSpec *s) {
    /* keep[i]: node i reaches the last node (the logits); walked from the end, a node is kept
     * when a kept node reads it */
    char *keep = callocCheck((size_t)(s->n ? s->n : 1), 1);
    int *map = mallocCheck((size_t)(s->n ? s->n : 1) * sizeof *map);
    if (s->n) keep[s->n - 1] = 1;
    for (int i = s->n - 1; i >= 0; i--) {
        if (!keep[i]) continue;
        int ins[NET_MAX_INPUTS];
        const int n_in = node_inputs(&s->node[i], ins);
        for (int q = 0; q < n_in; q++)
            if (ins[q] >= 0) keep[ins[q]] = 1;
    }
    int j = 0;
    for (int i = 0; i < s->n; i++) {
        map[i] = keep[i] ? j : -3;
        if (!keep[i]) continue;
        s->node[j] = s->node[i];
        node_remap_inputs(&s->node[j], map);
        j++;
    }
    const int dropped = s->n - j;
    s->n = j;
    free(keep);
    free(map);
    return dropped;
}

int netspec_add_transform_input(NetSpec *s) {
    for (int i = 0; i < s->n; i++)
        if (s->node[i].kind == NODE_TRANSFORM_INPUT) return 0;
    NetSpec d;
    netspec_init(&d, s->name, s->init);
    const int t = netspec_transform_input(&d, NET_INPUT, "transform_input");
    int *map = mallocCheck((size_t)(s->n ? s->n : 1) * sizeof *map);
    for (int i = 0; i < s->n; i++) {
        const int j = push_copy(&d, &s->node[i]);
        NetNode *n = &d.node[j];
        node_remap_inputs(n, map);
        if (n->in == NET_INPUT) n->in = t;
        if (node_kind(n->kind)->inputs == 2 && n->in2 == NET_INPUT) n->in2 = t;
        for (int q = 0; q < n->n_ins; q++)
            if (n->ins[q] == NET_INPUT) n->ins[q] = t;
        map[i] = j;
    }
    free(map);
    netspec_free(s);
    *s = d;
    return 1;
}

/* The image as a node, for a second input that reads it. */
static NetNode image_node(int image_size) {
    NetNode img;
    memset(&img, 0, sizeof img);
    snprintf_check(img.name, sizeof img.name, "input");
    img.C = 3;
    img.H = img.W = image_size;
    return img;
}

int netspec_resolve(NetSpec *s, int image_size, int num_classes, const char *what, char *err, size_t errlen) {
    const NetCheck c = {what, err, errlen, num_classes};
    if (s->n == 0) {
        snprintf(err, errlen, "%s: the network has no nodes", QUOTED(what));
        return -1;
    }
    const NetNode img = image_node(image_size);
    for (int i = 0; i < s->n; i++) {
        NetNode *n = &s->node[i];
        const NodeKindDef *d = node_kind(n->kind);
        for (int j = 0; j < i; j++)
            if (!strcmp(s->node[j].name, n->name))
                return node_err(&c, n, "name", "a second node of this name (node %d is the first)", j);
        if (d->inputs == NODE_INPUT_LIST && (n->n_ins < 1 || n->n_ins > NET_MAX_INPUTS || n->ins[0] != n->in))
            return node_err(&c, n, "in", "a list of 1 to %d inputs", NET_MAX_INPUTS);
        int ins[NET_MAX_INPUTS];
        const int n_in = node_inputs(n, ins);
        const NetNode *src[NET_MAX_INPUTS];
        for (int q = 0; q < n_in; q++) {
            if (ins[q] != NET_INPUT && (ins[q] < 0 || ins[q] >= i))
                return node_err(&c, n, q && d->inputs == 2 ? "residual" : "in",
                                "its input must be the image or a node above it (nodes run in order; no cycles)");
            src[q] = ins[q] == NET_INPUT ? &img : &s->node[ins[q]];
            if (ins[q] >= 0 && node_kind(src[q]->kind)->sink)
                return node_err(&c, n, "in", "\"%s\" is a %s: its output feeds the loss alone", src[q]->name,
                                node_kind_name(src[q]->kind));
        }
        n->C = src[0]->C; n->H = src[0]->H; n->W = src[0]->W;
        if (d->shape && d->shape(n, src, &c) != 0) return -1;
        if ((double)n->C * n->H * n->W > (double)(1 << 30))
            return node_err(&c, n, NULL, "its output of %dx%dx%d values per image is too large", n->C, n->H, n->W);
    }
    /* The logits: a linear layer's on a 1x1 map, or SqueezeNet's, a global average pool of a
     * convolution's class maps */
    const NetNode *last = &s->node[s->n - 1];
    if (last->kind != NODE_LINEAR && !(last->kind == NODE_AVGPOOL && last->k == 0))
        return node_err(&c, last, "kind", "the last node gives the logits: it must be a linear layer or a global "
                        "average pool, not %s", node_kind_name(last->kind));
    if (last->H != 1 || last->W != 1)
        return node_err(&c, last, "in", "the last node gives the logits: a linear layer on a 1x1 map (after a global "
                        "average pool or a flatten), not %dx%d", last->H, last->W);
    if (last->C != num_classes)
        return node_err(&c, last, last->kind == NODE_LINEAR ? "out_features" : "in",
                        "the last node gives the logits: %d outputs but --num_classes is %d", last->C, num_classes);
    char *used = callocCheck((size_t)s->n, 1);
    for (int j = 0; j < s->n; j++) {
        int ins[NET_MAX_INPUTS];
        const int n_in = node_inputs(&s->node[j], ins);
        for (int q = 0; q < n_in; q++)
            if (ins[q] >= 0) used[ins[q]] = 1;
    }
    for (int i = 0; i < s->n - 1; i++)
        if (!used[i] && !node_kind(s->node[i].kind)->sink) {
            free(used);
            return node_err(&c, &s->node[i], NULL, "its output is used by no node");
        }
    free(used);
    return 0;
}
