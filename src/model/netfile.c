/* SPDX-License-Identifier: BSD-3-Clause */
/* netfile.c - see netfile.h. The text is read by config_file.c's reader (json_records_read);
 * the keys a node takes, their types and defaults are its kind's record (node_kind.h), so this
 * file knows no kind. Input names are resolved once every node is read, so
 * that a name defined further down is told apart from one defined nowhere. */
#include "netfile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/config_file.h"
#include "base/util.h"
#include "zoo.h"

/* The record of one node as read: which fields it gave (bit per NetField, and the three that
 * every node has), and their values. */
#define BIT(f) (1u << (f))
enum { HAVE_NAME = NET_FIELD_COUNT, HAVE_KIND, HAVE_IN };

typedef struct {
    unsigned have;
    char name[NET_NAME_MAX], kind[24], in[NET_NAME_MAX], residual[NET_NAME_MAX];
    char *in_list;               /* "in" as a list (JSON_FLAT_LIST's text, malloc'd), or NULL */
    long num[NET_FIELD_COUNT];   /* numbers, booleans as 0 or 1, a choice's index; a pair's first */
    long num2[NET_FIELD_COUNT];  /* a pair's second */
    double real[NET_FIELD_COUNT];
    size_t line;
} Rec;

typedef struct {
    NetSpec *s;
    Rec cur;
    Rec *recs;
    size_t n, cap;
    int have_network, have_init;
} Reader;

/* A string of the file (a key, a value, a name) for a one-line message: in double quotes, cut
 * near 40 characters, and escaped as quote_name escapes it when it holds a control character or
 * bytes that are not UTF-8, so that a "\n" or "\u001b" in the file cannot break the message's
 * line or reach the terminal. */
static const char *shown(char *buf, size_t n, const char *v) {
    char q[48];
    quote_name(q, sizeof q, v);
    snprintf(buf, n, name_needs_quoting(v) ? "%s" : "\"%s\"", q);
    return buf;
}
#define SHOWN(v) shown((char[64]){0}, 64, (v))

/* 1 when v is 1 to cap - 1 letters, digits, '_', '.' or '-': the characters of torchvision's
 * module paths, and none that needs escaping in JSON, a log line or an HDF5 path. */
static int name_ok(const char *v, size_t cap) {
    const size_t n = strlen(v);
    int ok = n > 0 && n < cap;
    for (size_t i = 0; ok && i < n; i++) {
        const char ch = v[i];
        ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
             ch == '.' || ch == '-';
    }
    return ok;
}

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
            /* The name reaches the log, --print_model's JSON and the checkpoint's architecture
             * unescaped: a quote, backslash or control character would forge a log line or
             * write JSON that does not read back. Node names keep to the same characters. */
            if (!name_ok(value, sizeof r->s->name)) {
                snprintf(err, errlen, "line %zu: \"network\" must be 1 to %zu letters, digits, '_', '.' or '-'", line,
                         sizeof r->s->name - 1);
                return -1;
            }
            snprintf_check(r->s->name, sizeof r->s->name, "%s", value);
        } else if (net_init_parse(value) >= 0) {
            r->s->init = (NetInit)net_init_parse(value);
        } else {
            snprintf(err, errlen, "line %zu: \"init\" is one of %s, not %s", line, net_init_list(), SHOWN(value));
            return -1;
        }
        return 0;
    }
    snprintf(err, errlen, "line %zu: unknown key %s (keys: network, init, nodes)", line, SHOWN(key));
    return -1;
}

static int copy_name(char *dst, size_t cap, const char *v, const char *field, size_t node, size_t line, char *err,
                     size_t errlen) {
    const size_t n = strlen(v);
    if (!name_ok(v, cap)) {
        snprintf(err, errlen, "line %zu, node %zu: field \"%s\" must be 1 to %zu letters, digits, '_', '.' or '-'",
                 line, node, field, cap - 1);
        return -1;
    }
    memcpy(dst, v, n + 1);
    return 0;
}

/* A key of a node: "name", "kind", "in", or a field of node_kind.h's NET_FIELDS. */
static int field_of(const char *key) {
    if (!strcmp(key, "name")) return HAVE_NAME;
    if (!strcmp(key, "kind")) return HAVE_KIND;
    if (!strcmp(key, "in")) return HAVE_IN;
    for (int f = 0; f < NET_FIELD_COUNT; f++)
        if (!strcmp(key, net_field_key(f))) return f;
    return -1;
}

/* A pair field given as a list: two whole numbers, the height's and the width's. */
static int read_pair(Rec *c, int f, const char *key, const char *value, size_t node, size_t line, char *err,
                     size_t errlen) {
    long v[2];
    int n = 0;
    for (const char *p = value; *p && n <= 2; n++) {
        const char *nl = strchr(p, '\n');
        const size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char text[72];
        char *end;
        errno = 0;
        if (n < 2) {
            snprintf(text, sizeof text, "%.*s", (int)(len < 70 ? len : 70), p);
            v[n] = text[0] == 'n' ? strtol(text + 1, &end, 10) : -1;
            if (text[0] != 'n' || *end || errno || v[n] < 0 || v[n] > (1L << 24)) {
                snprintf(err, errlen, "line %zu, node %zu: field \"%s\" must be a whole number from 0 to %ld or a list "
                         "of two, the height's and the width's", line, node, key, 1L << 24);
                return -1;
            }
        }
        p = nl ? nl + 1 : p + len;
    }
    if (n != 2) {
        snprintf(err, errlen, "line %zu, node %zu: field \"%s\" must be a whole number or a list of two (height, "
                 "width), not a list of %d", line, node, key, n);
        return -1;
    }
    c->have |= BIT(f);
    c->num[f] = v[0];
    c->num2[f] = v[1];
    return 0;
}

static int rec_pair(void *vctx, const char *key, JsonKind kind, const char *value, size_t line, size_t column,
                    char *err, size_t errlen) {
    Reader *r = vctx;
    Rec *c = &r->cur;
    (void)column;
    if (!c->line) c->line = line;
    const int f = field_of(key);
    const size_t node = r->n;
    if (f < 0) {
        snprintf(err, errlen, "line %zu, node %zu: unknown field %s (fields: %s)", line, node, SHOWN(key),
                 net_field_list());
        return -1;
    }
    const NetFieldType type = f >= NET_FIELD_COUNT ? NET_FIELD_INPUT : net_field_type(f);
    const JsonKind want = type == NET_FIELD_INPUT || type == NET_FIELD_CHOICE ? JSON_FLAT_STRING
                          : type == NET_FIELD_BOOL                          ? JSON_FLAT_BOOL
                                                                            : JSON_FLAT_NUMBER;
    if (f == HAVE_IN && kind == JSON_FLAT_LIST) {   /* a concatenation's inputs: checked at the record's end */
        c->have |= BIT(f);
        free(c->in_list);
        c->in_list = strdup(value);
        CHECK(c->in_list != NULL);
        return 0;
    }
    if (type == NET_FIELD_PAIR && kind == JSON_FLAT_LIST) return read_pair(c, f, key, value, node, line, err, errlen);
    if (kind != want) {
        snprintf(err, errlen, "line %zu, node %zu: field \"%s\" must be %s, not %s", line, node, key,
                 json_kind_name(want), json_kind_name(kind));
        return -1;
    }
    c->have |= BIT(f);
    if (f == HAVE_NAME) return copy_name(c->name, sizeof c->name, value, key, node, line, err, errlen);
    if (f == HAVE_IN) return copy_name(c->in, sizeof c->in, value, key, node, line, err, errlen);
    if (f == HAVE_KIND) {
        snprintf(c->kind, sizeof c->kind, "%.23s", value);
        if (node_kind_parse(value) < 0) {
            snprintf(err, errlen, "line %zu, node %zu: field \"kind\": unknown kind %s (%s)", line, node, SHOWN(value),
                     node_kind_list());
            return -1;
        }
        return 0;
    }
    if (type == NET_FIELD_INPUT) return copy_name(c->residual, sizeof c->residual, value, key, node, line, err, errlen);
    if (type == NET_FIELD_BOOL) {
        c->num[f] = !strcmp(value, "true");
        return 0;
    }
    if (type == NET_FIELD_CHOICE) {
        c->num[f] = net_field_choice_parse(f, value);
        if (c->num[f] < 0) {
            snprintf(err, errlen, "line %zu, node %zu: field \"%s\" is one of %s, not %s", line, node, key,
                     net_field_choice_list(f), SHOWN(value));
            return -1;
        }
        return 0;
    }
    errno = 0;
    char *end;
    if (type == NET_FIELD_REAL) {
        const double v = strtod(value, &end);
        if (*end || errno || !(v >= -1e30 && v <= 1e30)) {
            snprintf(err, errlen, "line %zu, node %zu: field \"%s\" must be a finite number, not %.40s", line, node,
                     key, value);
            return -1;
        }
        c->real[f] = v;
        return 0;
    }
    const long v = strtol(value, &end, 10);
    if (*end || errno || v < 0 || v > (1L << 24)) {
        snprintf(err, errlen, "line %zu, node %zu: field \"%s\" must be a whole number from 0 to %ld, not %.40s", line,
                 node, key, 1L << 24, value);
        return -1;
    }
    c->num[f] = c->num2[f] = v;
    return 0;
}

static int rec_end(void *vctx, size_t index, size_t line, size_t column, char *err, size_t errlen) {
    Reader *r = vctx;
    Rec *c = &r->cur;
    (void)column;
    c->line = line;
    const char *nm = c->have & BIT(HAVE_NAME) ? c->name : "?";
    if (!(c->have & BIT(HAVE_NAME))) {
        snprintf(err, errlen, "line %zu, node %zu: no field \"name\"", line, index);
        return -1;
    }
    if (!strcmp(c->name, "input")) {
        snprintf(err, errlen, "line %zu, node \"input\": field \"name\": \"input\" is the image's name", line);
        return -1;
    }
    if (!(c->have & BIT(HAVE_KIND))) {
        snprintf(err, errlen, "line %zu, node \"%s\": no field \"kind\"", line, nm);
        return -1;
    }
    const int k = node_kind_parse(c->kind);
    const int list = node_kind(k)->inputs == NODE_INPUT_LIST;
    if (list && !c->in_list) {
        snprintf(err, errlen, "line %zu, node \"%s\": a %s node's \"in\" is a list of the names of its inputs", line,
                 nm, c->kind);
        return -1;
    }
    if (!list && c->in_list) {
        snprintf(err, errlen, "line %zu, node \"%s\": field \"in\" must be a string (one name) for a %s node, not a "
                 "list", line, nm, c->kind);
        return -1;
    }
    for (int f = 0; f < NET_FIELD_COUNT; f++) {
        const NetFieldSpec *spec = node_kind_field(k, f);
        if ((c->have & BIT(f)) && !spec) {
            snprintf(err, errlen, "line %zu, node \"%s\": field \"%s\" does not apply to a %s node", line, nm,
                     net_field_key(f), c->kind);
            return -1;
        }
        if (spec && spec->need && !(c->have & BIT(f))) {
            snprintf(err, errlen, "line %zu, node \"%s\": a %s node needs the field \"%s\"", line, nm, c->kind,
                     net_field_key(f));
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
    snprintf(err, errlen, "%s: line %zu, node \"%s\", field \"%s\": %s %s", QUOTED(what), c->line, c->name, field, SHOWN(name),
             later ? "is not a node above this one (nodes run in the order of the file: no cycles)"
                   : "names no node");
    return -3;
}

/* The names of a list "in" into ins: 1 to NET_MAX_INPUTS of them, each a node above. Returns
 * how many, or -1 with the reason in err. */
static int input_list(const Reader *r, size_t below, const Rec *c, const char *what, int *ins, char *err,
                      size_t errlen) {
    int n = 0;
    for (const char *p = c->in_list; *p;) {
        const char *nl = strchr(p, '\n');
        const size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char name[NET_NAME_MAX + 2];
        snprintf(name, sizeof name, "%.*s", (int)(len < NET_NAME_MAX + 1 ? len : NET_NAME_MAX + 1), p);
        if (name[0] != 's' || len > NET_NAME_MAX) {
            snprintf(err, errlen, "%s: line %zu, node \"%s\", field \"in\": element %d must be the name of a node",
                     QUOTED(what), c->line, c->name, n + 1);
            return -1;
        }
        if (n == NET_MAX_INPUTS) {
            snprintf(err, errlen, "%s: line %zu, node \"%s\", field \"in\": more than %d inputs", QUOTED(what), c->line,
                     c->name, NET_MAX_INPUTS);
            return -1;
        }
        ins[n] = find_input(r, below, name + 1, what, c, "in", err, errlen);
        if (ins[n] == -3) return -1;
        n++;
        p = nl ? nl + 1 : p + len;
    }
    if (n == 0) {
        snprintf(err, errlen, "%s: line %zu, node \"%s\", field \"in\": an empty list", QUOTED(what), c->line, c->name);
        return -1;
    }
    return n;
}

/* The field of kind k that names its second input ("residual", "scale"). */
static NetField input_field(NodeKind k) {
    const NodeKindDef *d = node_kind(k);
    for (int i = 0; i < d->n_fields; i++)
        if (net_field_type(d->fields[i].field) == NET_FIELD_INPUT) return d->fields[i].field;
    CHECK(0);
    return F_NONE;
}

/* The node of record c: each field its kind takes from the file, else its default; defaults
 * that are a fraction of the kernel in a second pass, once the kernel is known. */
static int node_from_rec(NetSpec *s, NodeKind k, int in, int in2, const Rec *c, const char *what, char *err,
                         size_t errlen) {
    const NodeKindDef *d = node_kind(k);
    for (int i = 0; i < d->n_fields; i++) {
        const NetFieldSpec *spec = &d->fields[i];
        if (!(c->have & BIT(spec->field))) continue;
        if (net_field_type(spec->field) == NET_FIELD_REAL) {
            const double v = c->real[spec->field];
            if (v < spec->rmin || v > spec->rmax) {
                snprintf(err, errlen, "%s: line %zu, node \"%s\", field \"%s\": %g is not in %g..%g", QUOTED(what),
                         c->line, c->name, net_field_key(spec->field), v, (double)spec->rmin, (double)spec->rmax);
                return -1;
            }
        } else if (c->num[spec->field] < spec->min || c->num2[spec->field] < spec->min) {
            snprintf(err, errlen, "%s: line %zu, node \"%s\", field \"%s\": must be at least %d", QUOTED(what),
                     c->line, c->name, net_field_key(spec->field), spec->min);
            return -1;
        }
    }
    const int j = netspec_node(s, k, in, in2, c->name);   /* may move s->node */
    NetNode *n = &s->node[j];
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < d->n_fields; i++) {
            const NetFieldSpec *spec = &d->fields[i];
            const NetField f = spec->field;
            if (net_field_type(f) == NET_FIELD_INPUT) continue;   /* resolved by name above */
            if (net_field_type(f) == NET_FIELD_REAL) {   /* netspec_node set the default */
                if (pass == 0 && (c->have & BIT(f))) *net_field_real(n, f) = (float)c->real[f];
                continue;
            }
            int *v = net_field_member(n, f);
            int *v2 = net_field_type(f) == NET_FIELD_PAIR ? net_field_member2(n, f) : NULL;
            if (c->have & BIT(f)) {
                if (pass == 0) {
                    *v = (int)c->num[f];
                    if (v2) *v2 = (int)c->num2[f];
                }
            } else if ((spec->def_kernel_div != 0) == pass) {
                *v = spec->def_kernel_div ? n->k / spec->def_kernel_div : spec->def;
                if (v2) *v2 = spec->def_kernel_div ? n->kw / spec->def_kernel_div : spec->def;
            }
        }
    return 0;
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
        const NodeKind k = (NodeKind)node_kind_parse(c->kind);
        /* Refused here, not only when the table is resolved: the node before a node without
         * "in" is its input by position, and a file written back names it, which would then
         * find the first node of that name (found by fuzz_netfile: found_duplicate_name). */
        for (size_t j = 0; j < i; j++)
            if (!strcmp(r.recs[j].name, c->name)) {
                snprintf(err, errlen, "%s: line %zu, node \"%s\", field \"name\": a second node of this name (node %zu, "
                         "line %zu, is the first)", QUOTED(what), c->line, c->name, j, r.recs[j].line);
                rc = -1;
            }
        if (rc != 0) break;
        int in = i == 0 ? NET_INPUT : (int)i - 1;
        int ins[NET_MAX_INPUTS], n_ins = 0;
        if (c->in_list) {
            n_ins = input_list(&r, i, c, what, ins, err, errlen);
            if (n_ins < 0) { rc = -1; break; }
            in = ins[0];
        } else if (c->have & BIT(HAVE_IN)) {
            in = find_input(&r, i, c->in, what, c, "in", err, errlen);
        }
        int in2 = NET_NONE;
        if (node_kind(k)->inputs == 2)
            in2 = find_input(&r, i, c->residual, what, c, net_field_key(input_field(k)), err, errlen);
        if (in == -3 || in2 == -3) { rc = -1; break; }
        rc = node_from_rec(s, k, in, in2, c, what, err, errlen);
        if (rc == 0 && c->in_list) {
            s->node[s->n - 1].n_ins = n_ins;
            memcpy(s->node[s->n - 1].ins, ins, (size_t)n_ins * sizeof *ins);
        }
    }
    for (size_t i = 0; i < r.n; i++) free(r.recs[i].in_list);
    free(r.recs);
    free(r.cur.in_list);
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
        char names[1024];
        zoo_list(names, sizeof names);
        snprintf(err, errlen, "--model %s: not a built-in network (%s) nor a file (a path with '/' or ending in "
                 ".json)", QUOTED(model), names);
        return -1;
    }
    return netfile_read(model, s, err, errlen);
}

/* The shortest decimal that reads back as the same float (0.001, not 0.00100000005). */
static const char *real_text(float v) {
    static char buf[32];
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    return buf;
}

static const char *in_name(const NetSpec *s, int i) { return i == NET_INPUT ? "input" : s->node[i].name; }

void netfile_write(FILE *f, const NetSpec *s) {
    fprintf(f, "{\n  \"network\": \"%s\",\n  \"init\": \"%s\",\n  \"nodes\": [\n", s->name, net_init_name(s->init));
    for (int i = 0; i < s->n; i++) {
        const NetNode *n = &s->node[i];
        const NodeKindDef *d = node_kind(n->kind);
        if (d->inputs == NODE_INPUT_LIST) {
            fprintf(f, "    {\"name\": \"%s\", \"kind\": \"%s\", \"in\": [", n->name, d->name);
            for (int q = 0; q < n->n_ins; q++) fprintf(f, "%s\"%s\"", q ? ", " : "", in_name(s, n->ins[q]));
            fprintf(f, "]");
        } else {
            fprintf(f, "    {\"name\": \"%s\", \"kind\": \"%s\", \"in\": \"%s\"", n->name, d->name, in_name(s, n->in));
        }
        for (int j = 0; j < d->n_fields; j++) {
            const NetFieldSpec *spec = &d->fields[j];
            const char *key = net_field_key(spec->field);
            const NetFieldType type = net_field_type(spec->field);
            if (type == NET_FIELD_REAL) {
                const float v = net_field_real_const(n, spec->field);
                if (spec->write_always || v != spec->rdef) fprintf(f, ", \"%s\": %s", key, real_text(v));
                continue;
            }
            const int v = *net_field_member_const(n, spec->field);
            const int def = spec->def_kernel_div ? n->k / spec->def_kernel_div : spec->def;
            if (type == NET_FIELD_PAIR) {
                const int v2 = *net_field_member2_const(n, spec->field);
                const int def2 = spec->def_kernel_div ? n->kw / spec->def_kernel_div : spec->def;
                if (!spec->write_always && v == def && v2 == def2) continue;
                if (v == v2) fprintf(f, ", \"%s\": %d", key, v);
                else fprintf(f, ", \"%s\": [%d, %d]", key, v, v2);
                continue;
            }
            if (!spec->write_always && type != NET_FIELD_INPUT && v == def) continue;
            switch (type) {
            case NET_FIELD_NUMBER: fprintf(f, ", \"%s\": %d", key, v); break;
            case NET_FIELD_BOOL: fprintf(f, ", \"%s\": %s", key, v ? "true" : "false"); break;
            case NET_FIELD_INPUT: fprintf(f, ", \"%s\": \"%s\"", key, in_name(s, v)); break;
            case NET_FIELD_CHOICE: {
                int nc;
                fprintf(f, ", \"%s\": \"%s\"", key, net_field_choices(spec->field, &nc)[v]);
                break;
            }
            case NET_FIELD_REAL:
            case NET_FIELD_PAIR: break;
            }
        }
        fprintf(f, "}%s\n", i + 1 < s->n ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
}
