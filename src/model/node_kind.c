/* SPDX-License-Identifier: BSD-3-Clause */
/* node_kind.c - the table of node kinds (node_kind.h): the records of kind_*.c in the order of
 * NODE_KINDS, the file fields' keys and types, and what every kind shares: the lists messages
 * give, the error line, the window rule, the documentation's rows. */
#include "node_kind.h"

#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include "base/util.h"
#include "netspec.h"
#include "ops/backend.h"   /* window_out_size: the kernels' rule for windows */

#define NODE_KIND_PTR(e, rec) &rec,
static const NodeKindDef *const k_kinds[NODE_KIND_COUNT] = {NODE_KINDS(NODE_KIND_PTR)};
#undef NODE_KIND_PTR

#define NET_FIELD_KEY(e, key, type, member, second) key,
static const char *const k_key[NET_FIELD_COUNT] = {NET_FIELDS(NET_FIELD_KEY)};
#undef NET_FIELD_KEY
#define NET_FIELD_TYPE(e, key, type, member, second) type,
static const NetFieldType k_type[NET_FIELD_COUNT] = {NET_FIELDS(NET_FIELD_TYPE)};
#undef NET_FIELD_TYPE
#define NET_FIELD_OFFSET(e, key, type, member, second) offsetof(NetNode, member),
static const size_t k_offset[NET_FIELD_COUNT] = {NET_FIELDS(NET_FIELD_OFFSET)};
#undef NET_FIELD_OFFSET
#define NET_FIELD_OFFSET2(e, key, type, member, second) offsetof(NetNode, second),
static const size_t k_offset2[NET_FIELD_COUNT] = {NET_FIELDS(NET_FIELD_OFFSET2)};
#undef NET_FIELD_OFFSET2

const NodeKindDef *node_kind(int k) {
    CHECK(k >= 0 && k < NODE_KIND_COUNT);
    return k_kinds[k];
}

const char *node_kind_name(int k) { return k >= 0 && k < NODE_KIND_COUNT ? k_kinds[k]->name : "?"; }

int node_kind_parse(const char *name) {
    for (int k = 0; k < NODE_KIND_COUNT; k++)
        if (!strcmp(name, k_kinds[k]->name)) return k;
    return -1;
}

const char *net_field_key(NetField f) { return k_key[f]; }
NetFieldType net_field_type(NetField f) { return k_type[f]; }

const NetFieldSpec *node_kind_field(int k, NetField f) {
    const NodeKindDef *d = node_kind(k);
    for (int i = 0; i < d->n_fields; i++)
        if (d->fields[i].field == f) return &d->fields[i];
    return NULL;
}

/* Built once from the tables; the lists are short (a few hundred bytes). */
static const char *join(char *buf, size_t cap, const char *first, int n, const char *(*name)(int)) {
    if (buf[0]) return buf;
    size_t at = (size_t)snprintf(buf, cap, "%s", first);
    for (int i = 0; i < n; i++) at += (size_t)snprintf(buf + at, cap - at, "%s%s", at ? ", " : "", name(i));
    CHECK(at < cap);
    return buf;
}

int *net_field_member(NetNode *n, NetField f) {
    CHECK(k_type[f] != NET_FIELD_REAL);
    return (int *)((char *)n + k_offset[f]);
}
const int *net_field_member_const(const NetNode *n, NetField f) {
    CHECK(k_type[f] != NET_FIELD_REAL);
    return (const int *)((const char *)n + k_offset[f]);
}
int *net_field_member2(NetNode *n, NetField f) {
    CHECK(k_type[f] == NET_FIELD_PAIR);
    return (int *)((char *)n + k_offset2[f]);
}
const int *net_field_member2_const(const NetNode *n, NetField f) {
    CHECK(k_type[f] == NET_FIELD_PAIR);
    return (const int *)((const char *)n + k_offset2[f]);
}
float *net_field_real(NetNode *n, NetField f) {
    CHECK(k_type[f] == NET_FIELD_REAL);
    return (float *)((char *)n + k_offset[f]);
}
float net_field_real_const(const NetNode *n, NetField f) {
    CHECK(k_type[f] == NET_FIELD_REAL);
    return *(const float *)((const char *)n + k_offset[f]);
}

/* The one field of names: an "act" node's function (backend.h's ACT_FNS). */
#define ACT_FN_NAME(e, name) name,
static const char *const k_act_fns[ACT_FN_COUNT] = {ACT_FNS(ACT_FN_NAME)};
#undef ACT_FN_NAME

const char *const *net_field_choices(NetField f, int *n) {
    CHECK(f == F_FUNCTION);
    *n = ACT_FN_COUNT;
    return k_act_fns;
}

int net_field_choice_parse(NetField f, const char *name) {
    int n;
    const char *const *c = net_field_choices(f, &n);
    for (int i = 0; i < n; i++)
        if (!strcmp(name, c[i])) return i;
    return -1;
}

static const char *act_fn_at(int i) { return k_act_fns[i]; }

const char *net_field_choice_list(NetField f) {
    static char buf[256];
    CHECK(f == F_FUNCTION);
    return join(buf, sizeof buf, "", ACT_FN_COUNT, act_fn_at);
}

void node_kind_defaults(int k, NetNode *n) {
    const NodeKindDef *d = node_kind(k);
    for (int i = 0; i < d->n_fields; i++) {
        const NetFieldSpec *s = &d->fields[i];
        switch (k_type[s->field]) {
        case NET_FIELD_REAL: *net_field_real(n, s->field) = s->rdef; break;
        case NET_FIELD_INPUT: break;
        case NET_FIELD_PAIR:
            if (!s->def_kernel_div) *net_field_member(n, s->field) = *net_field_member2(n, s->field) = s->def;
            break;
        default:
            if (!s->def_kernel_div) *net_field_member(n, s->field) = s->def;
        }
    }
}

static const char *field_key_at(int i) { return k_key[i]; }

const char *node_kind_list(void) {
    static char buf[512];
    return join(buf, sizeof buf, "", NODE_KIND_COUNT, node_kind_name);
}

const char *net_field_list(void) {
    static char buf[512];
    return join(buf, sizeof buf, "name, kind, in", NET_FIELD_COUNT, field_key_at);
}

void node_kinds_write_doc(FILE *f) {
    fprintf(f, "| kind | fields (default) | tensors | computes |\n|---|---|---|---|\n");
    for (int k = 0; k < NODE_KIND_COUNT; k++) {
        const NodeKindDef *d = k_kinds[k];
        fprintf(f, "| `%s` | ", d->name);
        if (!d->n_fields) fprintf(f, "none");
        for (int i = 0; i < d->n_fields; i++) {
            const NetFieldSpec *s = &d->fields[i];
            fprintf(f, "%s`%s`", i ? ", " : "", k_key[s->field]);
            if (s->def_doc) fprintf(f, " (%s)", s->def_doc);
        }
        fprintf(f, " | %s | %s |\n", d->tensors[0] ? d->tensors : "none", d->doc);
    }
}

int node_err(const NetCheck *c, const NetNode *n, const char *field, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "%s: node \"%s\"%s%s%s: %s", QUOTED(c->what), n->name, field ? ", field \"" : "",
             field ? field : "", field ? "\"" : "", msg);
    return -1;
}

int node_window(NetNode *n, int H, int W, const NetCheck *c) {
    if (n->k < 1 || n->k > NET_MAX_KERNEL) return node_err(c, n, "kernel", "%d is not in 1..%d", n->k, NET_MAX_KERNEL);
    if (n->kw < 1 || n->kw > NET_MAX_KERNEL)
        return node_err(c, n, "kernel", "a width of %d is not in 1..%d", n->kw, NET_MAX_KERNEL);
    if (n->stride < 1 || n->stride > NET_MAX_KERNEL)
        return node_err(c, n, "stride", "%d is not in 1..%d", n->stride, NET_MAX_KERNEL);
    n->H = pool_out_size(H, n->k, n->stride, n->pad, n->ceil_mode);
    n->W = pool_out_size(W, n->kw, n->stride, n->padw, n->ceil_mode);
    if (n->H < 1 || n->W < 1) {
        if (n->k == n->kw && n->pad == n->padw)
            return node_err(c, n, "stride", "a %dx%d window at stride %d with padding %d leaves no pixels of the "
                            "%dx%d input", n->k, n->k, n->stride, n->pad, H, W);
        return node_err(c, n, "stride", "a %dx%d window at stride %d with padding %dx%d leaves no pixels of the "
                        "%dx%d input", n->k, n->kw, n->stride, n->pad, n->padw, H, W);
    }
    return 0;
}

int node_inputs(const NetNode *n, int *ins) {
    const int many = node_kind(n->kind)->inputs;
    if (many == NODE_INPUT_LIST) {
        for (int i = 0; i < n->n_ins; i++) ins[i] = n->ins[i];
        return n->n_ins;
    }
    ins[0] = n->in;
    if (many == 2) ins[1] = n->in2;
    return many;
}

void node_remap_inputs(NetNode *n, const int *map) {
    if (n->in >= 0) n->in = map[n->in];
    if (node_kind(n->kind)->inputs == 2 && n->in2 >= 0) n->in2 = map[n->in2];
    if (node_kind(n->kind)->inputs == NODE_INPUT_LIST)
        for (int i = 0; i < n->n_ins; i++)
            if (n->ins[i] >= 0) n->ins[i] = map[n->ins[i]];
}
