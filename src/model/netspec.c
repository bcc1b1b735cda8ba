/* SPDX-License-Identifier: BSD-3-Clause */
/* netspec.c - see netspec.h. */
#include "netspec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_cpu.h"   /* maxpool_out_size */
#include "base/util.h"

static const char *const k_kind[NODE_KIND_COUNT] = {"conv", "bn", "relu", "add", "maxpool", "avgpool", "linear", "blur"};

const char *node_kind_name(NodeKind k) { return (unsigned)k < NODE_KIND_COUNT ? k_kind[k] : "?"; }

int node_kind_parse(const char *name) {
    for (int k = 0; k < NODE_KIND_COUNT; k++)
        if (!strcmp(name, k_kind[k])) return k;
    return -1;
}

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

static int push(NetSpec *s, NodeKind kind, int in, int in2, const char *fmt, va_list ap) {
    NetNode n;
    memset(&n, 0, sizeof n);
    n.kind = kind;
    n.in = in;
    n.in2 = in2;
    const int len = vsnprintf(n.name, sizeof n.name, fmt, ap);
    CHECK(len >= 0 && (size_t)len < sizeof n.name);
    return push_copy(s, &n);
}

#define PUSH(kind, in, in2)                   \
    va_list ap;                               \
    va_start(ap, fmt);                        \
    const int i = push(s, kind, in, in2, fmt, ap); \
    va_end(ap)

int netspec_conv(NetSpec *s, int in, int out, int k, int stride, int pad, const char *fmt, ...) {
    PUSH(NODE_CONV, in, NET_NONE);
    s->node[i].out = out; s->node[i].k = k; s->node[i].stride = stride; s->node[i].pad = pad;
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
    s->node[i].k = k; s->node[i].stride = stride; s->node[i].pad = pad;
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

/* Channels of every node's output without an image size: those of its input, but for the
 * layers that set them (a linear layer's 0, the class count, is not needed here). */
static int *channels(const NetSpec *s) {
    int *c = mallocCheck((size_t)(s->n ? s->n : 1) * sizeof *c);
    for (int i = 0; i < s->n; i++) {
        const NetNode *n = &s->node[i];
        const int in = n->in == NET_INPUT ? 3 : (n->in >= 0 && n->in < i ? c[n->in] : 0);
        c[i] = n->kind == NODE_CONV || n->kind == NODE_LINEAR ? n->out : in;
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
        const int in2 = n->in2 >= 0 ? map[n->in2] : n->in2;
        const int c_in = n->in == NET_INPUT ? 3 : n->in >= 0 && n->in < i ? ch[n->in] : 0;
        if (n->kind == NODE_CONV && n->stride > 1 && c_in >= MIN_CHANNELS && n->in >= NET_INPUT) {
            int *b = &blur[n->in + 1];
            if (*b < 0) { *b = netspec_blur(&d, in, "%.42s.blur", n->name); added++; }
            in = *b;
        }
        const int j = push_copy(&d, n);
        d.node[j].in = in;
        d.node[j].in2 = in2;
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

/* Sizes past this are refused: every buffer is sized from them, in size_t, and C*H*W must
 * stay far below 2^31 per image for the kernels' int arithmetic. */
#define NET_MAX_CHANNELS 65536
#define NET_MAX_KERNEL 64

static int node_err(char *err, size_t errlen, const char *what, const NetNode *n, const char *field, const char *fmt,
                    ...) __attribute__((format(printf, 6, 7)));
static int node_err(char *err, size_t errlen, const char *what, const NetNode *n, const char *field, const char *fmt,
                    ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "%s: node \"%s\"%s%s%s: %s", QUOTED(what), n->name, field ? ", field \"" : "", field ? field : "",
             field ? "\"" : "", msg);
    return -1;
}

/* A convolution's or max pool's window over an H x W input: kernel and stride in range, and
 * the output size (maxpool_out_size: the same rule for both), which must keep a pixel. */
static int window(NetNode *n, int H, int W, const char *what, char *err, size_t errlen) {
    if (n->k < 1 || n->k > NET_MAX_KERNEL)
        return node_err(err, errlen, what, n, "kernel", "%d is not in 1..%d", n->k, NET_MAX_KERNEL);
    if (n->stride < 1 || n->stride > NET_MAX_KERNEL)
        return node_err(err, errlen, what, n, "stride", "%d is not in 1..%d", n->stride, NET_MAX_KERNEL);
    n->H = maxpool_out_size(H, n->k, n->stride, n->pad);
    n->W = maxpool_out_size(W, n->k, n->stride, n->pad);
    if (n->H < 1 || n->W < 1)
        return node_err(err, errlen, what, n, "stride", "a %dx%d window at stride %d with padding %d leaves no "
                        "pixels of the %dx%d input", n->k, n->k, n->stride, n->pad, H, W);
    return 0;
}

int netspec_resolve(NetSpec *s, int image_size, int num_classes, const char *what, char *err, size_t errlen) {
    if (s->n == 0) {
        snprintf(err, errlen, "%s: the network has no nodes", QUOTED(what));
        return -1;
    }
    for (int i = 0; i < s->n; i++) {
        NetNode *n = &s->node[i];
        for (int j = 0; j < i; j++)
            if (!strcmp(s->node[j].name, n->name))
                return node_err(err, errlen, what, n, "name", "a second node of this name (node %d is the first)", j);
        const int ins[2] = {n->in, n->in2};
        for (int q = 0; q < 2; q++) {
            if (q == 1 && n->kind != NODE_ADD) break;
            if (ins[q] != NET_INPUT && (ins[q] < 0 || ins[q] >= i))
                return node_err(err, errlen, what, n, q ? "residual" : "in",
                                "its input must be the image or a node above it (nodes run in order; no cycles)");
        }
        const NetNode *a = n->in == NET_INPUT ? NULL : &s->node[n->in];
        const int C = a ? a->C : 3, H = a ? a->H : image_size, W = a ? a->W : image_size;
        n->C = C; n->H = H; n->W = W;
        switch (n->kind) {
        case NODE_CONV:
            if (n->out < 1 || n->out > NET_MAX_CHANNELS)
                return node_err(err, errlen, what, n, "out_channels", "%d is not in 1..%d", n->out, NET_MAX_CHANNELS);
            if (n->pad < 0 || n->pad >= n->k)
                return node_err(err, errlen, what, n, "padding", "%d is not in 0..%d (below the kernel size)", n->pad,
                                n->k - 1);
            if (window(n, H, W, what, err, errlen)) return -1;
            n->C = n->out;
            break;
        case NODE_MAXPOOL:
            if (n->pad < 0 || 2 * n->pad > n->k)
                return node_err(err, errlen, what, n, "padding", "%d is not in 0..%d (at most half the kernel, as "
                                "nn.MaxPool2d)", n->pad, n->k / 2);
            if (window(n, H, W, what, err, errlen)) return -1;
            break;
        case NODE_ADD: {
            const NetNode *b = n->in2 == NET_INPUT ? NULL : &s->node[n->in2];
            const int C2 = b ? b->C : 3, H2 = b ? b->H : image_size, W2 = b ? b->W : image_size;
            if (C2 != C)
                return node_err(err, errlen, what, n, "residual", "%d channels added to %d", C2, C);
            if (H2 != H || W2 != W)
                return node_err(err, errlen, what, n, "residual", "a %dx%d map added to a %dx%d one", H2, W2, H, W);
            break;
        }
        case NODE_AVGPOOL:
            n->H = n->W = 1;
            break;
        case NODE_LINEAR:
            if (H != 1 || W != 1)
                return node_err(err, errlen, what, n, "in", "a linear layer takes a 1x1 map (after a global average "
                                "pool), not %dx%d", H, W);
            if (n->out < 0 || n->out > (1 << 24))
                return node_err(err, errlen, what, n, "out_features", "%d is not in 1..%d", n->out, 1 << 24);
            n->C = n->out ? n->out : num_classes;
            break;
        case NODE_BN:
        case NODE_RELU:
        case NODE_BLUR:   /* stride 1, padding 1: the input's shape */
            break;
        }
        if ((double)n->C * n->H * n->W > (double)(1 << 30))
            return node_err(err, errlen, what, n, NULL, "its output of %dx%dx%d values per image is too large", n->C,
                            n->H, n->W);
    }
    const NetNode *last = &s->node[s->n - 1];
    if (last->kind != NODE_LINEAR)
        return node_err(err, errlen, what, last, "kind", "the last node gives the logits: it must be a linear layer, "
                        "not %s", node_kind_name(last->kind));
    if (last->C != num_classes)
        return node_err(err, errlen, what, last, "out_features", "%d outputs but --num_classes is %d", last->C,
                        num_classes);
    for (int i = 0; i < s->n - 1; i++) {
        int used = 0;
        for (int j = i + 1; j < s->n && !used; j++)
            used = s->node[j].in == i || (s->node[j].kind == NODE_ADD && s->node[j].in2 == i);
        if (!used) return node_err(err, errlen, what, &s->node[i], NULL, "its output is used by no node");
    }
    return 0;
}
