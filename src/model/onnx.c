/* SPDX-License-Identifier: BSD-3-Clause */
/* onnx.c - see onnx.h. The field numbers are onnx.proto's (onnx/onnx.proto, IR version 7 and 8). */
#include "onnx.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

/* onnx.proto's field numbers and enums, by message */
enum { MODEL_IR_VERSION = 1, MODEL_PRODUCER_NAME = 2, MODEL_PRODUCER_VERSION = 3, MODEL_DOC = 6, MODEL_GRAPH = 7,
       MODEL_OPSET_IMPORT = 8, MODEL_METADATA = 14 };
enum { OPSET_VERSION = 2 };
enum { ENTRY_KEY = 1, ENTRY_VALUE = 2 };
enum { GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INITIALIZER = 5, GRAPH_INPUT = 11, GRAPH_OUTPUT = 12 };
enum { NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_NAME = 3, NODE_OP_TYPE = 4, NODE_ATTRIBUTE = 5 };
enum { ATTR_NAME = 1, ATTR_F = 2, ATTR_I = 3, ATTR_INTS = 8, ATTR_TYPE = 20 };
enum { ATTR_TYPE_FLOAT = 1, ATTR_TYPE_INT = 2, ATTR_TYPE_INTS = 7 };
enum { TENSOR_DIMS = 1, TENSOR_DATA_TYPE = 2, TENSOR_INT64_DATA = 7, TENSOR_NAME = 8, TENSOR_RAW_DATA = 9 };
enum { DTYPE_FLOAT = 1, DTYPE_INT64 = 7 };
enum { VALUE_NAME = 1, VALUE_TYPE = 2 };
enum { TYPE_TENSOR = 1 };
enum { TTYPE_ELEM = 1, TTYPE_SHAPE = 2 };
enum { SHAPE_DIM = 1 };
enum { DIM_VALUE = 1, DIM_PARAM = 2 };

/* A value of the graph: its name and rank (4: a map [N, C, H, W]; 2: a matrix [N, C]), and its
 * conversions to the other rank once made. */
typedef struct {
    const char *name, *as4, *as2;
    int rank;
} Value;

struct OnnxGraph {
    const Model *m;
    const NetSpec *s;
    int opset;
    PbBuf nodes;          /* the finished NodeProtos, as GraphProto fields */
    PbBuf node;           /* the last one added, open for its attributes */
    int open;
    PbBuf inits;          /* the initializers, as GraphProto fields */
    char **init_names;
    int n_inits, cap_inits;
    Value *val;           /* [s->n + 1]: val[0] the image, val[i + 1] node i's */
    int last;             /* the node whose value is the logits */
    char **strs;          /* every name handed out, freed with the graph */
    int n_strs, cap_strs;
    char *err;
    size_t errlen;
};

/* ---- names ------------------------------------------------------------------------------- */

static const char *keep(OnnxGraph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *keep(OnnxGraph *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    CHECK(vasprintf(&s, fmt, ap) >= 0);
    va_end(ap);
    if (g->n_strs == g->cap_strs) {
        g->cap_strs = g->cap_strs ? 2 * g->cap_strs : 256;
        g->strs = realloc(g->strs, (size_t)g->cap_strs * sizeof *g->strs);
        CHECK(g->strs != NULL);
    }
    g->strs[g->n_strs++] = s;
    return s;
}

static int node_index(const OnnxGraph *g, const NetNode *n) {
    const long i = n - g->s->node;
    CHECK(i >= 0 && i < g->s->n);
    return (int)i;
}

/* Input q of n: a node's index, or NET_INPUT. */
static int input_of(const OnnxGraph *g, const NetNode *n, int q) {
    int ins[NET_MAX_INPUTS];
    const int k = node_inputs(n, ins);
    CHECK(q >= 0 && q < k);
    (void)g;
    return ins[q];
}

static Value *value_of(OnnxGraph *g, int producer) { return &g->val[producer + 1]; }

int onnx_err(OnnxGraph *g, const NetNode *n, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return errf(g->err, g->errlen, "node \"%s\" (%s): %s", n->name, node_kind_name(n->kind), msg);
}

int onnx_opset(const OnnxGraph *g) { return g->opset; }

const char *onnx_tmp(OnnxGraph *g, const NetNode *n, const char *what) { return keep(g, "%s/%s", n->name, what); }

/* ---- nodes ------------------------------------------------------------------------------- */

static void close_node(OnnxGraph *g) {
    if (!g->open) return;
    pb_message(&g->nodes, GRAPH_NODE, &g->node);
    pb_reset(&g->node);
    g->open = 0;
}

/* Named as its output: one producer per value, so the names are unique. */
void onnx_op_list(OnnxGraph *g, const char *op, const char *out, int n_in, const char *const *in) {
    close_node(g);
    for (int i = 0; i < n_in; i++) pb_string(&g->node, NODE_INPUT, in[i]);
    pb_string(&g->node, NODE_OUTPUT, out);
    pb_string(&g->node, NODE_NAME, out);
    pb_string(&g->node, NODE_OP_TYPE, op);
    g->open = 1;
}

void onnx_op(OnnxGraph *g, const char *op, const char *out, ...) {
    const char *in[NET_MAX_INPUTS + 8];
    int n_in = 0;
    va_list ap;
    va_start(ap, out);
    for (const char *x; (x = va_arg(ap, const char *)) != NULL;) {
        CHECK(n_in < (int)(sizeof in / sizeof in[0]));
        in[n_in++] = x;
    }
    va_end(ap);
    onnx_op_list(g, op, out, n_in, in);
}

static void attr(OnnxGraph *g, const PbBuf *a) {
    CHECK(g->open);
    pb_message(&g->node, NODE_ATTRIBUTE, a);
}

void onnx_attr_int(OnnxGraph *g, const char *name, int64_t v) {
    PbBuf a;
    pb_init(&a);
    pb_string(&a, ATTR_NAME, name);
    pb_int64(&a, ATTR_I, v);
    pb_int64(&a, ATTR_TYPE, ATTR_TYPE_INT);
    attr(g, &a);
    pb_free(&a);
}

void onnx_attr_float(OnnxGraph *g, const char *name, float v) {
    PbBuf a;
    pb_init(&a);
    pb_string(&a, ATTR_NAME, name);
    pb_float(&a, ATTR_F, v);
    pb_int64(&a, ATTR_TYPE, ATTR_TYPE_FLOAT);
    attr(g, &a);
    pb_free(&a);
}

void onnx_attr_ints(OnnxGraph *g, const char *name, int n, const int64_t *v) {
    PbBuf a;
    pb_init(&a);
    pb_string(&a, ATTR_NAME, name);
    pb_packed_int64(&a, ATTR_INTS, v, (size_t)n);
    pb_int64(&a, ATTR_TYPE, ATTR_TYPE_INTS);
    attr(g, &a);
    pb_free(&a);
}

/* ---- initializers ------------------------------------------------------------------------ */

/* The TensorProto's head: dims, type, name (its data follows). */
static void tensor_head(PbBuf *t, const char *name, int ndim, const int64_t *dims, int dtype) {
    for (int i = 0; i < ndim; i++) pb_int64(t, TENSOR_DIMS, dims[i]);
    pb_int64(t, TENSOR_DATA_TYPE, dtype);
    pb_string(t, TENSOR_NAME, name);
}

void onnx_tensor(PbBuf *out, const char *name, int ndim, const int64_t *dims, const float *data) {
    pb_init(out);
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= (size_t)dims[i];
    tensor_head(out, name, ndim, dims, DTYPE_FLOAT);
    pb_packed_float(out, TENSOR_RAW_DATA, data, numel);   /* little-endian float32 bytes: raw_data */
}

/* 1 when the graph already holds an initializer of that name. */
static int have_init(const OnnxGraph *g, const char *name) {
    for (int i = 0; i < g->n_inits; i++)
        if (!strcmp(g->init_names[i], name)) return 1;
    return 0;
}

static void add_init(OnnxGraph *g, const char *name, const PbBuf *t) {
    pb_message(&g->inits, GRAPH_INITIALIZER, t);
    if (g->n_inits == g->cap_inits) {
        g->cap_inits = g->cap_inits ? 2 * g->cap_inits : 256;
        g->init_names = realloc(g->init_names, (size_t)g->cap_inits * sizeof *g->init_names);
        CHECK(g->init_names != NULL);
    }
    g->init_names[g->n_inits++] = (char *)name;   /* a kept name */
}

static const TensorInfo *find_tensor(const Model *m, const char *name, const float **data) {
    for (int i = 0; i < m->n_param_info; i++)
        if (!strcmp(m->param_info[i].name, name)) {
            *data = m->params + m->param_info[i].offset;
            return &m->param_info[i];
        }
    for (int i = 0; i < m->n_buffer_info; i++)
        if (!strcmp(m->buffer_info[i].name, name)) {
            *data = m->buffers + m->buffer_info[i].offset;
            return &m->buffer_info[i];
        }
    return NULL;
}

const char *onnx_param(OnnxGraph *g, const NetNode *n, const char *tensor, int ndim, const int64_t *dims) {
    const char *name = keep(g, "%s%s%s", n->name, *tensor ? "." : "", tensor);
    if (have_init(g, name)) return name;
    const float *data = NULL;
    const TensorInfo *t = find_tensor(g->m, name, &data);
    CHECK(t != NULL);   /* the kinds ask for the tensors their layout made */
    int64_t own[4];
    if (ndim == 0) {
        ndim = t->ndim;
        for (int i = 0; i < ndim; i++) own[i] = t->shape[i];
        dims = own;
    }
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= (size_t)dims[i];
    CHECK(numel == t->numel);
    PbBuf p;
    onnx_tensor(&p, name, ndim, dims, data);
    add_init(g, name, &p);
    pb_free(&p);
    return name;
}

const char *onnx_const(OnnxGraph *g, const NetNode *n, const char *what, int ndim, const int64_t *dims,
                       const float *v) {
    const char *name = onnx_tmp(g, n, what);
    CHECK(!have_init(g, name));
    PbBuf p;
    onnx_tensor(&p, name, ndim, dims, v);
    add_init(g, name, &p);
    pb_free(&p);
    return name;
}

static const char *const_ints(OnnxGraph *g, const char *name, int count, const int64_t *v) {
    PbBuf p;
    pb_init(&p);
    const int64_t dims[1] = {count};
    tensor_head(&p, name, 1, dims, DTYPE_INT64);
    pb_packed_int64(&p, TENSOR_INT64_DATA, v, (size_t)count);
    add_init(g, name, &p);
    pb_free(&p);
    return name;
}

const char *onnx_const_ints(OnnxGraph *g, const NetNode *n, const char *what, int count, const int64_t *v) {
    const char *name = onnx_tmp(g, n, what);
    CHECK(!have_init(g, name));
    return const_ints(g, name, count, v);
}

const char *onnx_slice(OnnxGraph *g, const char *x, int axis, int start, int end, const char *out) {
    const int64_t s = start, e = end, a = axis;
    onnx_op(g, "Slice", out, x, const_ints(g, keep(g, "%s/starts", out), 1, &s),
            const_ints(g, keep(g, "%s/ends", out), 1, &e), const_ints(g, keep(g, "%s/axes", out), 1, &a), NULL);
    return out;
}

/* ---- values ------------------------------------------------------------------------------ */

const char *onnx_in_any(OnnxGraph *g, const NetNode *n, int q, int *rank) {
    const Value *v = value_of(g, input_of(g, n, q));
    CHECK(v->name != NULL);   /* table order is topological */
    *rank = v->rank;
    return v->name;
}

/* A matrix [N, C] back to a map [N, C, 1, 1]. */
const char *onnx_in(OnnxGraph *g, const NetNode *n, int q) {
    Value *v = value_of(g, input_of(g, n, q));
    CHECK(v->name != NULL);
    if (v->rank == 4) return v->name;
    if (!v->as4) {
        const char *out = keep(g, "%s/map", v->name);
        const int64_t axes[2] = {2, 3};
        onnx_op(g, "Unsqueeze", out, v->name, const_ints(g, keep(g, "%s/axes", out), 2, axes), NULL);
        v->as4 = out;
    }
    return v->as4;
}

/* torch.flatten(x, 1): a map [N, C, H, W] as [N, C*H*W], (C, H, W) order. */
const char *onnx_in_flat(OnnxGraph *g, const NetNode *n, int q) {
    Value *v = value_of(g, input_of(g, n, q));
    CHECK(v->name != NULL);
    if (v->rank == 2) return v->name;
    if (!v->as2) {
        const char *out = keep(g, "%s/flat", v->name);
        onnx_op(g, "Flatten", out, v->name, NULL);
        onnx_attr_int(g, "axis", 1);
        v->as2 = out;
    }
    return v->as2;
}

void onnx_in_shape(const OnnxGraph *g, const NetNode *n, int q, int *C, int *H, int *W) {
    const int p = input_of(g, n, q);
    if (p == NET_INPUT) {
        *C = 3;
        *H = *W = g->m->input_size;
    } else {
        const NetNode *src = &g->s->node[p];
        *C = src->C;
        *H = src->H;
        *W = src->W;
    }
}

const char *onnx_out(OnnxGraph *g, const NetNode *n, int rank) {
    const int i = node_index(g, n);
    Value *v = value_of(g, i);
    CHECK(rank == 2 || rank == 4);
    v->rank = rank;
    v->name = i == g->last && rank == 2 ? "logits" : keep(g, "%s/y", n->name);
    return v->name;
}

void onnx_pass(OnnxGraph *g, const NetNode *n, int q) {
    const Value *src = value_of(g, input_of(g, n, q));
    Value *v = value_of(g, node_index(g, n));
    v->name = src->name;
    v->rank = src->rank;
}

/* ---- the graph --------------------------------------------------------------------------- */

/* A float32 tensor's ValueInfoProto: a dimension below 0 is the symbolic "batch". */
static void value_info(PbBuf *b, int field, const char *name, int ndim, const int64_t *dims) {
    PbBuf shape, tt, type, vi;
    pb_init(&shape);
    pb_init(&tt);
    pb_init(&type);
    pb_init(&vi);
    for (int i = 0; i < ndim; i++) {
        PbBuf d;
        pb_init(&d);
        if (dims[i] < 0) pb_string(&d, DIM_PARAM, "batch");
        else pb_int64(&d, DIM_VALUE, dims[i]);
        pb_message(&shape, SHAPE_DIM, &d);
        pb_free(&d);
    }
    pb_int64(&tt, TTYPE_ELEM, DTYPE_FLOAT);
    pb_message(&tt, TTYPE_SHAPE, &shape);
    pb_message(&type, TYPE_TENSOR, &tt);
    pb_string(&vi, VALUE_NAME, name);
    pb_message(&vi, VALUE_TYPE, &type);
    pb_message(b, field, &vi);
    pb_free(&shape);
    pb_free(&tt);
    pb_free(&type);
    pb_free(&vi);
}

/* keep[i]: node i reaches the logits through nodes that read it (never a sink's). */
static char *reaching(const NetSpec *s) {
    char *reach = callocCheck((size_t)s->n, 1);
    reach[s->n - 1] = 1;
    for (int i = s->n - 1; i >= 0; i--) {
        if (!reach[i]) continue;
        int ins[NET_MAX_INPUTS];
        const int k = node_inputs(&s->node[i], ins);
        for (int q = 0; q < k; q++)
            if (ins[q] >= 0) reach[ins[q]] = 1;
    }
    return reach;
}

/* Every node that reaches the logits, in table order, by its kind's record. */
static int build(OnnxGraph *g) {
    const NetSpec *s = g->s;
    char *reach = reaching(s);
    int rc = 0;
    for (int i = 0; i < s->n && rc == 0; i++) {
        if (!reach[i]) continue;
        const NetNode *n = &s->node[i];
        const NodeKindDef *d = node_kind(n->kind);
        if (!d->onnx) rc = onnx_err(g, n, "this kind has no ONNX form");
        else if ((rc = d->onnx(g, n)) == 0) CHECK(value_of(g, i)->name != NULL);
    }
    free(reach);
    if (rc) return rc;
    /* the logits as [N, classes]: SqueezeNet's pooled class maps flattened */
    const Value *v = value_of(g, g->last);
    if (strcmp(v->name, "logits") != 0) {
        onnx_op(g, v->rank == 4 ? "Flatten" : "Identity", "logits", v->name, NULL);
        if (v->rank == 4) onnx_attr_int(g, "axis", 1);
    }
    close_node(g);
    return 0;
}

static void graph_free(OnnxGraph *g) {
    pb_free(&g->nodes);
    pb_free(&g->node);
    pb_free(&g->inits);
    for (int i = 0; i < g->n_strs; i++) free(g->strs[i]);
    free(g->strs);
    free(g->init_names);
    free(g->val);
}

static void meta_entry(PbBuf *b, const char *key, const char *value) {
    PbBuf e;
    pb_init(&e);
    pb_string(&e, ENTRY_KEY, key);
    pb_string(&e, ENTRY_VALUE, value);
    pb_message(b, MODEL_METADATA, &e);
    pb_free(&e);
}

int onnx_model(const Model *m, const OnnxOptions *o, PbBuf *out, char *err, size_t errlen) {
    pb_init(out);
    CHECK(o->opset >= ONNX_OPSET_MIN && o->opset <= ONNX_OPSET_MAX && !m->be->on_device);
    OnnxGraph g = {.m = m, .s = &m->net, .opset = o->opset, .err = err, .errlen = errlen};
    pb_init(&g.nodes);
    pb_init(&g.node);
    pb_init(&g.inits);
    g.val = callocCheck((size_t)g.s->n + 1, sizeof *g.val);
    g.val[0] = (Value){.name = "input", .rank = 4};
    g.last = g.s->n - 1;
    if (build(&g) != 0) {
        graph_free(&g);
        return -1;
    }

    /* The graph: its nodes, name, initializers, input and output. The weights are copied
     * twice on the way (the initializers into the graph, the graph into the model): a
     * ResNet-50's 100 MB take 200 MB more for a moment, far below what training took. */
    PbBuf graph;
    pb_init(&graph);
    pb_raw(&graph, g.nodes.data, g.nodes.len);
    pb_string(&graph, GRAPH_NAME, model_architecture(m));
    pb_raw(&graph, g.inits.data, g.inits.len);
    graph_free(&g);
    const int64_t in_dims[4] = {-1, 3, m->input_size, m->input_size}, out_dims[2] = {-1, m->num_classes};
    value_info(&graph, GRAPH_INPUT, "input", 4, in_dims);
    value_info(&graph, GRAPH_OUTPUT, "logits", 2, out_dims);

    /* IR version 7 came with opset 13 and 14 (onnx 1.8, 1.9), 8 with 15 to 17 */
    pb_int64(out, MODEL_IR_VERSION, o->opset <= 14 ? 7 : 8);
    pb_string(out, MODEL_PRODUCER_NAME, "ddptrain");
    if (o->producer_version) pb_string(out, MODEL_PRODUCER_VERSION, o->producer_version);
    pb_string(out, MODEL_DOC, "input: float32 [batch, 3, S, S], RGB, NCHW, each channel normalised as "
              "(pixel / 255 - mean) / std; output: logits [batch, classes]");
    pb_message(out, MODEL_GRAPH, &graph);
    pb_free(&graph);
    PbBuf opset;
    pb_init(&opset);
    pb_int64(&opset, OPSET_VERSION, o->opset);   /* the default domain, ai.onnx: no domain field */
    pb_message(out, MODEL_OPSET_IMPORT, &opset);
    pb_free(&opset);
    for (int i = 0; i < o->n_meta; i++) meta_entry(out, o->meta[i].key, o->meta[i].value);
    /* A message is at most 2 GiB to protobuf's parsers; ONNX's external data, which lifts that,
     * is not written. */
    if (out->len > INT32_MAX) {
        errf(err, errlen, "%s: the model takes %zu bytes, above the 2 GiB of one protobuf message (ONNX's external "
             "data files are not written)", model_architecture(m), out->len);
        pb_free(out);
        return -1;
    }
    return 0;
}
