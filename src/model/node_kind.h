/* SPDX-License-Identifier: BSD-3-Clause */
/* node_kind.h - the table of node kinds: one record per kind, holding everything that a kind
 * is to the rest of the house, so that a new kind is one record and one line of NODE_KINDS.
 *
 * A record says, in one place:
 *   - its name in network files and --print_model, and its line in docs/networks.md;
 *   - its file fields, which are required, their defaults, and which are written back;
 *   - its inputs (one, or two: the second is the file's "residual");
 *   - its shape rule and the checks only shapes tell (netspec_resolve calls it);
 *   - the Backend operations it needs, when a backend may lack them;
 *   - its parameters and buffers (their state_dict names and roles), and their initialisation;
 *   - its forward and its backward over the Backend, and the work it counts per image;
 *   - its ONNX nodes, for ddptrain-export (onnx.h).
 * netspec.c, netfile.c and model.c loop over the table; none of them switches on a kind, except
 * where the executor fuses a batch norm with the add and ReLU after it (model.c: a plan over
 * kinds, not a kind).
 *
 * The records live beside their functions, a family of kinds a file (kind_conv.c, kind_bn.c,
 * kind_linear.c, kind_pool.c, kind_elementwise.c); node_kind.c holds the table of them, in the
 * manner of NCCL's table of transports. */
#ifndef DDP_NODE_KIND_H
#define DDP_NODE_KIND_H

#include <stddef.h>
#include <stdio.h>

/* X(ENUM, record): the kinds, in the order of the "kind" list in messages and docs. */
#define NODE_KINDS(X)              \
    X(NODE_CONV, node_kind_conv)       \
    X(NODE_BN, node_kind_bn)           \
    X(NODE_RELU, node_kind_relu)       \
    X(NODE_ADD, node_kind_add)         \
    X(NODE_MAXPOOL, node_kind_maxpool) \
    X(NODE_AVGPOOL, node_kind_avgpool) \
    X(NODE_LINEAR, node_kind_linear)   \
    X(NODE_BLUR, node_kind_blur)       \
    X(NODE_ACT, node_kind_act)         \
    X(NODE_MUL, node_kind_mul)         \
    X(NODE_DROPOUT, node_kind_dropout) \
    X(NODE_STOCHASTIC_DEPTH, node_kind_stochastic_depth) \
    X(NODE_CONCAT, node_kind_concat)   \
    X(NODE_SPLIT, node_kind_split)     \
    X(NODE_CHANNEL_SHUFFLE, node_kind_channel_shuffle) \
    X(NODE_ADAPTIVE_AVGPOOL, node_kind_adaptive_avgpool) \
    X(NODE_FLATTEN, node_kind_flatten) \
    X(NODE_LAYERNORM, node_kind_layernorm) \
    X(NODE_LAYER_SCALE, node_kind_layer_scale) \
    X(NODE_AUX_LOSS, node_kind_aux_loss) \
    X(NODE_TRANSFORM_INPUT, node_kind_transform_input)

#define NODE_KIND_ENUM(e, rec) e,
typedef enum { NODE_KINDS(NODE_KIND_ENUM) NODE_KIND_COUNT } NodeKind;
#undef NODE_KIND_ENUM

/* X(ENUM, file key, JSON type, NetNode member, second member): the fields of a node in a
 * network file beyond "name", "kind" and "in", in the order of the "fields" list in messages.
 * Two keys may fill one member (a convolution's out_channels and a linear layer's out_features
 * are both `out`; an add's residual and a mul's scale are both `in2`). A NET_FIELD_REAL member
 * is a float, a NET_FIELD_CHOICE one an int holding the index of its name (net_field_choices).
 * A NET_FIELD_PAIR is a number, or a list of two for the height and the width (nn.Conv2d's
 * kernel_size=(1, 7)): the first fills `member`, the second `second` (the others name their
 * member twice). */
#define NET_FIELDS(X)                                                                  \
    X(F_OUT_CHANNELS, "out_channels", NET_FIELD_NUMBER, out, out)                      \
    X(F_KERNEL, "kernel", NET_FIELD_PAIR, k, kw)                                       \
    X(F_STRIDE, "stride", NET_FIELD_NUMBER, stride, stride)                            \
    X(F_PADDING, "padding", NET_FIELD_PAIR, pad, padw)                                 \
    X(F_GROUPS, "groups", NET_FIELD_NUMBER, groups, groups)                            \
    X(F_DILATION, "dilation", NET_FIELD_NUMBER, dilation, dilation)                    \
    X(F_BIAS, "bias", NET_FIELD_BOOL, bias, bias)                                      \
    X(F_ZERO_INIT, "zero_init_residual", NET_FIELD_BOOL, zero_init, zero_init)         \
    X(F_EPS, "eps", NET_FIELD_REAL, eps, eps)                                          \
    X(F_MOMENTUM, "momentum", NET_FIELD_REAL, momentum, momentum)                      \
    X(F_RESIDUAL, "residual", NET_FIELD_INPUT, in2, in2)                               \
    X(F_SCALE, "scale", NET_FIELD_INPUT, in2, in2)                                     \
    X(F_FUNCTION, "function", NET_FIELD_CHOICE, fn, fn)                                \
    X(F_SLOPE, "negative_slope", NET_FIELD_REAL, slope, slope)                         \
    X(F_P, "p", NET_FIELD_REAL, p, p)                                                  \
    X(F_OUT_FEATURES, "out_features", NET_FIELD_NUMBER, out, out)                      \
    X(F_CEIL_MODE, "ceil_mode", NET_FIELD_BOOL, ceil_mode, ceil_mode)                  \
    X(F_COUNT_INCLUDE_PAD, "count_include_pad", NET_FIELD_BOOL, count_pad, count_pad)  \
    X(F_OUTPUT_SIZE, "output_size", NET_FIELD_NUMBER, out_size, out_size)              \
    X(F_CHUNKS, "chunks", NET_FIELD_NUMBER, chunks, chunks)                            \
    X(F_INDEX, "index", NET_FIELD_NUMBER, index, index)                                \
    X(F_VALUE, "value", NET_FIELD_REAL, value, value)                                  \
    X(F_WEIGHT, "weight", NET_FIELD_REAL, value, value)                                \
    X(F_INIT_STD, "init_std", NET_FIELD_REAL, init_std, init_std)                      \
    X(F_WHITEN, "whiten", NET_FIELD_BOOL, whiten, whiten)                              \
    X(F_DIRAC, "dirac", NET_FIELD_BOOL, dirac, dirac)                                  \
    X(F_AFFINE_WEIGHT, "affine_weight", NET_FIELD_BOOL, affine_weight, affine_weight)  \
    X(F_OUTPUT_SCALE, "output_scale", NET_FIELD_REAL, output_scale, output_scale)

#define NET_FIELD_ENUM(e, key, type, member, second) e,
typedef enum { F_NONE = -1, NET_FIELDS(NET_FIELD_ENUM) NET_FIELD_COUNT } NetField;
#undef NET_FIELD_ENUM

typedef enum {
    NET_FIELD_NUMBER,
    NET_FIELD_BOOL,
    NET_FIELD_INPUT,
    NET_FIELD_REAL,
    NET_FIELD_CHOICE,
    NET_FIELD_PAIR
} NetFieldType;

/* A field a kind takes. A number's default is `def`, or the kernel / def_kernel_div when that is
 * nonzero (a convolution's padding is kernel/2), a real's `rdef`; `min` (numbers) and
 * rmin..rmax (reals) are checked when the file gives them. */
typedef struct {
    NetField field;
    int need;              /* the file must give it */
    int def;
    int def_kernel_div;
    int min;
    float rdef, rmin, rmax;
    int write_always;      /* --print_model writes it even at its default (else only when it differs) */
    const char *def_doc;   /* the default as docs/networks.md says it ("kernel/2"); NULL: none */
} NetFieldSpec;

#define NODE_MAX_FIELDS 10

/* A kind of inputs == NODE_INPUT_LIST takes "in" as a list of 1 to NET_MAX_INPUTS names (a
 * concatenation of branches: DenseNet's longest is 49). */
#define NODE_INPUT_LIST (-1)
#define NET_MAX_INPUTS 64

/* Sizes past these are refused: every buffer is sized from them, in size_t, and C*H*W must
 * stay far below 2^31 per image for the kernels' int arithmetic. */
#define NET_MAX_CHANNELS 65536
#define NET_MAX_KERNEL 64
#define NET_MAX_FEATURES (1 << 24)

struct NetNode;
struct Backend;
struct Model;
struct ModelStep;
struct Slots;
struct Layout;
struct Rng;
struct OnnxGraph;

/* Where netspec_resolve reports: `what` (the file, or "--model NAME") and err. */
typedef struct {
    const char *what;
    char *err;
    size_t errlen;
    int num_classes;
} NetCheck;

typedef struct NodeKindDef {
    const char *name;                   /* the file's "kind" */
    const char *doc;                    /* docs/networks.md: what it computes */
    const char *tensors;                /* docs/networks.md: its state_dict tensors ("" for none) */
    int inputs;                         /* 1, 2 ("in" and the field of type NET_FIELD_INPUT), or
                                         * NODE_INPUT_LIST ("in" a list) */
    /* Its output is float32 even when activations are 16-bit (the pooled features and what
     * follows them). NULL: never. */
    int (*float_out)(const struct NetNode *n);
    /* A sink: its output feeds no node but the training loss (an auxiliary classifier's loss,
     * aux_loss); it and the nodes that only feed it run in training forwards only. */
    int sink;
    NetFieldSpec fields[NODE_MAX_FIELDS];
    int n_fields;

    /* The output's shape into n->C, H, W, which hold the first input's on entry; in2 is the
     * second input (inputs == 2) with its shape; a list's inputs are ins[0..n->n_ins) (ins[0]
     * the first: its shape on entry). Returns 0, or -1 through node_err. */
    int (*shape)(struct NetNode *n, const struct NetNode *const *ins, const NetCheck *c);
    /* NULL when the backend has the operations this node needs (its fields may matter: a
     * convolution's groups), else what it lacks, for the one line that refuses the network
     * ("grouped convolution"); NULL function: every backend has them */
    const char *(*backend_lacks)(const struct Backend *be, const struct NetNode *n);
    /* Its tensors into the layouts (table order = state_dict order), and any Backend state of
     * the step (a convolution's primitives). NULL: none. */
    void (*layout)(const struct Backend *be, const struct NetNode *n, struct ModelStep *st, struct Layout *params,
                   struct Layout *buffers, struct Layout *counters);
    /* Scratch the step keeps beyond its output (batch norm's statistics, max pool's choices),
     * for max_batch images; and its release with the Backend state. NULL: none. */
    void (*alloc)(const struct Backend *be, struct ModelStep *st, int max_batch);
    void (*release)(const struct Backend *be, struct ModelStep *st);
    /* Initial values into host arrays, drawn from r in table order. NULL: nothing to draw. */
    void (*init)(const struct Model *m, const struct ModelStep *st, float *params, float *buffers, struct Rng *r);
    void (*forward)(struct Model *m, struct ModelStep *st, int N, int train);
    /* From dy, the gradient of its output: its parameters' gradients (accumulated) and its
     * inputs' (through the slots of model_slots.h). A sink's dy is NULL: it holds its own. */
    void (*backward)(struct Slots *s, struct ModelStep *st, float *dy, int N);
    /* A sink's part of the training loss, once the logits' is in m->loss: added there. */
    void (*add_loss)(struct Model *m, struct ModelStep *st, int N);
    /* The parameters changed (the kernels' weight caches). NULL: nothing cached. */
    void (*params_changed)(const struct Backend *be, struct ModelStep *st);
    /* Multiply-adds of one image's forward, as model_macs_per_image counts them. NULL: 0. */
    double (*macs)(const struct ModelStep *st);
    /* Its nodes in an ONNX model (onnx.h, ddptrain-export): its value at evaluation from its
     * inputs' values, in NCHW. Returns 0, or -1 through onnx_err where this node has no ONNX
     * form. NULL: none (a sink: the export leaves it out with the nodes that only feed it). */
    int (*onnx)(struct OnnxGraph *g, const struct NetNode *n);
} NodeKindDef;

#define NODE_KIND_DECL(e, rec) extern const NodeKindDef rec;
NODE_KINDS(NODE_KIND_DECL)
#undef NODE_KIND_DECL

/* The record of kind k (k < NODE_KIND_COUNT). */
const NodeKindDef *node_kind(int k);
/* "conv", ...; "?" for no kind. And back: -1 for an unknown name. */
const char *node_kind_name(int k);
int node_kind_parse(const char *name);
/* The field's file key, its type; and the field spec of kind k for f, or NULL. */
const char *net_field_key(NetField f);
NetFieldType net_field_type(NetField f);
const NetFieldSpec *node_kind_field(int k, NetField f);
/* The member of n that field f fills: an int, or a float for a NET_FIELD_REAL field. */
int *net_field_member(struct NetNode *n, NetField f);
const int *net_field_member_const(const struct NetNode *n, NetField f);
/* A NET_FIELD_PAIR's second member (the width's). */
int *net_field_member2(struct NetNode *n, NetField f);
const int *net_field_member2_const(const struct NetNode *n, NetField f);
float *net_field_real(struct NetNode *n, NetField f);
float net_field_real_const(const struct NetNode *n, NetField f);
/* The names a NET_FIELD_CHOICE field takes, in the order of their indices, and how many; the
 * index of `name`, or -1; the list for messages ("relu6, hardswish, ..."). */
const char *const *net_field_choices(NetField f, int *n);
int net_field_choice_parse(NetField f, const char *name);
const char *net_field_choice_list(NetField f);
/* Every field kind k takes set to its default in n (netspec_node does it for a new node). */
void node_kind_defaults(int k, struct NetNode *n);

/* "conv, bn, relu, ..." and "name, kind, in, out_channels, ...": the lists messages give. */
const char *node_kind_list(void);
const char *net_field_list(void);

/* docs/networks.md's table of kinds, one row per record, as tests/test_node_kinds.sh compares
 * it with the page. */
void node_kinds_write_doc(FILE *f);

/* One line in c->err: `what: node "NAME", field "FIELD": message` (field may be NULL).
 * Returns -1. */
int node_err(const NetCheck *c, const struct NetNode *n, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A k x k window at a stride, with padding, over an H x W map (a convolution's or a max
 * pool's): kernel and stride in range, n->H and n->W its output, which keeps a pixel. */
int node_window(struct NetNode *n, int H, int W, const NetCheck *c);
/* The inputs of n, whatever its kind (1, 2, or a list), into ins (NET_MAX_INPUTS); how many. */
int node_inputs(const struct NetNode *n, int *ins);
/* The same with each input replaced by map[input] (inputs that are nodes; NET_INPUT stays). */
void node_remap_inputs(struct NetNode *n, const int *map);

#endif
