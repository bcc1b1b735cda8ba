/* SPDX-License-Identifier: BSD-3-Clause */
/* netfile.c - see netfile.h. The text is read by config_file.c's reader (json_records_read);
 * this file says what the keys mean. Input names are resolved once every node is read, so
 * that a name defined further down is told apart from one defined nowhere. */
#include "netfile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/config_file.h"
#include "base/util.h"
#include "zoo.h"

enum { F_NAME, F_KIND, F_IN, F_OUT_CHANNELS, F_KERNEL, F_STRIDE, F_PADDING, F_ZERO_INIT, F_RESIDUAL, F_OUT_FEATURES,
       F_COUNT };
static const char *const k_field[F_COUNT] = {"name", "kind", "in", "out_channels", "kernel", "stride", "padding",
                                             "zero_init_residual", "residual", "out_features"};
/* Which fields each kind takes, beyond name, kind and in (bit per field). */
#define BIT(f) (1u << (f))
static const unsigned k_takes[NODE_KIND_COUNT] = {
    [NODE_CONV] = BIT(F_OUT_CHANNELS) | BIT(F_KERNEL) | BIT(F_STRIDE) | BIT(F_PADDING),
    [NODE_BN] = BIT(F_ZERO_INIT),
    [NODE_RELU] = 0,
    [NODE_ADD] = BIT(F_RESIDUAL),
    [NODE_MAXPOOL] = BIT(F_KERNEL) | BIT(F_STRIDE) | BIT(F_PADDING),
    [NODE_AVGPOOL] = 0,
    [NODE_LINEAR] = BIT(F_OUT_FEATURES),
    [NODE_BLUR] = 0,
};
static const unsigned k_needs[NODE_KIND_COUNT] = {
    [NODE_CONV] = BIT(F_OUT_CHANNELS) | BIT(F_KERNEL),
    [NODE_ADD] = BIT(F_RESIDUAL),
    [NODE_MAXPOOL] = BIT(F_KERNEL),
};

typedef struct {
    unsigned have;
    char name[48], kind[16], in[48], residual[48];
    long num[F_COUNT];
    int zero_init;
    size_t line;
} Rec;

typedef struct {
    NetSpec *s;
    Rec cur;
    Rec *recs;
    size_t n, cap;
    int have_network, have_init;
} Reader;

static int head_pair(void *vctx, const char *key, JsonKind kind, const char *value, size_t line, size_t column,
                     char *err, size_t errlen) {
    Reader *r = vctx;
    (void)column;
    if (!strcmp(key, "network") || !strcmp(key, "init")) {
        if (kind != JSON_FLAT_STRING) {
            snprintf(err, errlen, "line %zu: \"%s\" must be a string, not %s", line, key, json_kind_name(kind));
            return -1;
        }
        if (key[0] == 'n') {
            if (!*value || strlen(value) >= sizeof r->s->name) {
                snprintf(err, errlen, "line %zu: \"network\" must be a name of 1 to %zu characters", line,
                         sizeof r->s->name - 1);
                return -1;
            }
            snprintf_check(r->s->name, sizeof r->s->name, "%s", value);
        } else if (!strcmp(value, "pytorch")) {
            r->s->init = NET_INIT_PYTORCH;
        } else if (!strcmp(value, "resnet")) {
            r->s->init = NET_INIT_RESNET;
        } else {
            snprintf(err, errlen, "line %zu: \"init\" is \"pytorch\" or \"resnet\", not \"%.40s\"", line, value);
            return -1;
        }
        return 0;
    }
    snprintf(err, errlen, "line %zu: unknown key \"%.60s\" (keys: network, init, nodes)", line, key);
    return -1;
}

static int copy_name(char *dst, size_t cap, const char *v, const char *field, size_t node, size_t line, char *err,
                     size_t errlen) {
    const size_t n = strlen(v);
    int ok = n > 0 && n < cap;
    for (size_t i = 0; ok && i < n; i++) {
        const char ch = v[i];
        ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
             ch == '.' || ch == '-';
    }
    if (!ok) {
        snprintf(err, errlen, "line %zu, node %zu: field \"%s\" must be 1 to %zu letters, digits, '_', '.' or '-'",
                 line, node, field, cap - 1);
        return -1;
    }
    memcpy(dst, v, n + 1);
    return 0;
}

static int rec_pair(void *vctx, const char *key, JsonKind kind, const char *value, size_t line, size_t column,
                    char *err, size_t errlen) {
    Reader *r = vctx;
    Rec *c = &r->cur;
    (void)column;
    if (!c->line) c->line = line;
    int f = -1;
    for (int i = 0; i < F_COUNT; i++)
        if (!strcmp(key, k_field[i])) f = i;
    const size_t node = r->n;
    if (f < 0) {
        snprintf(err, errlen, "line %zu, node %zu: unknown field \"%.60s\" (fields: name, kind, in, out_channels, "
                 "kernel, stride, padding, zero_init_residual, residual, out_features)", line, node, key);
        return -1;
    }
    const int is_str = f == F_NAME || f == F_KIND || f == F_IN || f == F_RESIDUAL;
    const JsonKind want = is_str ? JSON_FLAT_STRING : f == F_ZERO_INIT ? JSON_FLAT_BOOL : JSON_FLAT_NUMBER;
    if (kind != want) {
        snprintf(err, errlen, "line %zu, node %zu: field \"%s\" must be %s, not %s", line, node, key,
                 json_kind_name(want), json_kind_name(kind));
        return -1;
    }
    c->have |= BIT(f);
    switch (f) {
    case F_NAME: return copy_name(c->name, sizeof c->name, value, key, node, line, err, errlen);
    case F_IN: return copy_name(c->in, sizeof c->in, value, key, node, line, err, errlen);
    case F_RESIDUAL: return copy_name(c->residual, sizeof c->residual, value, key, node, line, err, errlen);
    case F_KIND:
        snprintf(c->kind, sizeof c->kind, "%.15s", value);
        if (node_kind_parse(value) < 0) {
            snprintf(err, errlen, "line %zu, node %zu: field \"kind\": unknown kind \"%.40s\" (conv, bn, relu, add, "
                     "maxpool, avgpool, linear, blur)", line, node, value);
            return -1;
        }
        return 0;
    case F_ZERO_INIT:
        c->zero_init = !strcmp(value, "true");
        return 0;
    default: {
        errno = 0;
        char *end;
        const long v = strtol(value, &end, 10);
        if (*end || errno || v < 0 || v > (1L << 24)) {
            snprintf(err, errlen, "line %zu, node %zu: field \"%s\" must be a whole number from 0 to %ld, not %.40s",
                     line, node, key, 1L << 24, value);
            return -1;
        }
        c->num[f] = v;
        return 0;
    }
    }
}

static int rec_end(void *vctx, size_t index, size_t line, size_t column, char *err, size_t errlen) {
    Reader *r = vctx;
    Rec *c = &r->cur;
    (void)column;
    c->line = line;
    const char *nm = c->have & BIT(F_NAME) ? c->name : "?";
    if (!(c->have & BIT(F_NAME))) {
        snprintf(err, errlen, "line %zu, node %zu: no field \"name\"", line, index);
        return -1;
    }
    if (!strcmp(c->name, "input")) {
        snprintf(err, errlen, "line %zu, node \"input\": field \"name\": \"input\" is the image's name", line);
        return -1;
    }
    if (!(c->have & BIT(F_KIND))) {
        snprintf(err, errlen, "line %zu, node \"%s\": no field \"kind\"", line, nm);
        return -1;
    }
    const int k = node_kind_parse(c->kind);
    const unsigned extra = c->have & ~(BIT(F_NAME) | BIT(F_KIND) | BIT(F_IN));
    for (int f = 0; f < F_COUNT; f++) {
        if ((extra & BIT(f)) && !(k_takes[k] & BIT(f))) {
            snprintf(err, errlen, "line %zu, node \"%s\": field \"%s\" does not apply to a %s node", line, nm, k_field[f],
                     c->kind);
            return -1;
        }
        if ((k_needs[k] & BIT(f)) && !(c->have & BIT(f))) {
            snprintf(err, errlen, "line %zu, node \"%s\": a %s node needs the field \"%s\"", line, nm, c->kind,
                     k_field[f]);
            return -1;
        }
    }
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        r->recs = realloc(r->recs, r->cap * sizeof *r->recs);
        CHECK(r->recs != NULL);
    }
    r->recs[r->n++] = *c;
    memset(c, 0, sizeof *c);
    return 0;
}

/* The index of the node named `name` among the first `below` records, NET_INPUT, or -3 with
 * the reason in err. */
static int find_input(const Reader *r, size_t below, const char *name, const char *what, const Rec *c,
                      const char *field, char *err, size_t errlen) {
    if (!strcmp(name, "input")) return NET_INPUT;
    for (size_t j = 0; j < below; j++)
        if (!strcmp(r->recs[j].name, name)) return (int)j;
    int later = 0;
    for (size_t j = below; j < r->n; j++) later |= !strcmp(r->recs[j].name, name);
    snprintf(err, errlen, "%s: line %zu, node \"%s\", field \"%s\": \"%s\" %s", QUOTED(what), c->line, c->name, field, name,
             later ? "is not a node above this one (nodes run in the order of the file: no cycles)"
                   : "names no node");
    return -3;
}

int netfile_parse(const char *text, size_t len, const char *what, NetSpec *s, char *err, size_t errlen) {
    netspec_init(s, "network", NET_INIT_PYTORCH);
    Reader r = {.s = s};
    int rc = json_records_read(text, len, what, head_pair, "nodes", rec_pair, rec_end, &r, err, errlen);
    if (rc == 0 && r.n == 0) {
        snprintf(err, errlen, "%s: no nodes (the key \"nodes\" holds a list of them)", QUOTED(what));
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < r.n; i++) {
        const Rec *c = &r.recs[i];
        const int k = node_kind_parse(c->kind);
        int in = i == 0 ? NET_INPUT : (int)i - 1;
        if (c->have & BIT(F_IN)) in = find_input(&r, i, c->in, what, c, "in", err, errlen);
        int in2 = NET_NONE;
        if (k == NODE_ADD) in2 = find_input(&r, i, c->residual, what, c, "residual", err, errlen);
        if (in == -3 || in2 == -3) { rc = -1; break; }
        const long *v = c->num;
        switch (k) {
        case NODE_CONV:
            netspec_conv(s, in, (int)v[F_OUT_CHANNELS], (int)v[F_KERNEL], c->have & BIT(F_STRIDE) ? (int)v[F_STRIDE] : 1,
                         c->have & BIT(F_PADDING) ? (int)v[F_PADDING] : (int)v[F_KERNEL] / 2, "%s", c->name);
            break;
        case NODE_BN: netspec_bn(s, in, c->zero_init, "%s", c->name); break;
        case NODE_RELU: netspec_relu(s, in, "%s", c->name); break;
        case NODE_ADD: netspec_add(s, in, in2, "%s", c->name); break;
        case NODE_MAXPOOL:
            netspec_maxpool(s, in, (int)v[F_KERNEL], c->have & BIT(F_STRIDE) ? (int)v[F_STRIDE] : (int)v[F_KERNEL],
                            c->have & BIT(F_PADDING) ? (int)v[F_PADDING] : 0, "%s", c->name);
            break;
        case NODE_AVGPOOL: netspec_avgpool(s, in, "%s", c->name); break;
        case NODE_BLUR: netspec_blur(s, in, "%s", c->name); break;
        case NODE_LINEAR:
            if ((c->have & BIT(F_OUT_FEATURES)) && v[F_OUT_FEATURES] < 1) {
                snprintf(err, errlen, "%s: line %zu, node \"%s\", field \"out_features\": must be at least 1", QUOTED(what),
                         c->line, c->name);
                rc = -1;
                break;
            }
            netspec_linear(s, in, (int)v[F_OUT_FEATURES], "%s", c->name);
            break;
        }
    }
    free(r.recs);
    if (rc != 0) netspec_free(s);
    return rc;
}

int netfile_read(const char *path, NetSpec *s, char *err, size_t errlen) {
    size_t len;
    char *text = json_read_text(path, &len, err, errlen);
    if (!text) {
        memset(s, 0, sizeof *s);
        return -1;
    }
    const int rc = netfile_parse(text, len, path, s, err, errlen);
    free(text);
    return rc;
}

int netfile_load(const char *model, int width, int blocks, NetSpec *s, char *err, size_t errlen) {
    if (zoo_has(model)) return zoo_build(s, model, width, blocks, err, errlen);
    if (!strchr(model, '/') && !strstr(model, ".json")) {
        snprintf(err, errlen, "--model %s: not a built-in network (%s) nor a file (a path with '/' or ending in "
                 ".json)", QUOTED(model), ZOO_NAMES);
        return -1;
    }
    return netfile_read(model, s, err, errlen);
}

static const char *in_name(const NetSpec *s, int i) { return i == NET_INPUT ? "input" : s->node[i].name; }

void netfile_write(FILE *f, const NetSpec *s) {
    fprintf(f, "{\n  \"network\": \"%s\",\n  \"init\": \"%s\",\n  \"nodes\": [\n", s->name,
            s->init == NET_INIT_RESNET ? "resnet" : "pytorch");
    for (int i = 0; i < s->n; i++) {
        const NetNode *n = &s->node[i];
        fprintf(f, "    {\"name\": \"%s\", \"kind\": \"%s\", \"in\": \"%s\"", n->name, node_kind_name(n->kind),
                in_name(s, n->in));
        switch (n->kind) {
        case NODE_CONV:
            fprintf(f, ", \"out_channels\": %d, \"kernel\": %d, \"stride\": %d, \"padding\": %d", n->out, n->k,
                    n->stride, n->pad);
            break;
        case NODE_BN:
            if (n->zero_init) fprintf(f, ", \"zero_init_residual\": true");
            break;
        case NODE_ADD: fprintf(f, ", \"residual\": \"%s\"", in_name(s, n->in2)); break;
        case NODE_MAXPOOL:
            fprintf(f, ", \"kernel\": %d, \"stride\": %d, \"padding\": %d", n->k, n->stride, n->pad);
            break;
        case NODE_LINEAR:
            if (n->out) fprintf(f, ", \"out_features\": %d", n->out);
            break;
        default: break;
        }
        fprintf(f, "}%s\n", i + 1 < s->n ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
}
