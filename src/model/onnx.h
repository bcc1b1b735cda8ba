/* SPDX-License-Identifier: BSD-3-Clause */
/* onnx.h - a network as an ONNX model (onnx.proto's ModelProto, written with base/protobuf.h),
 * for ddptrain-export: what other runtimes (OpenCV's dnn, ONNX Runtime, TensorRT) run.
 *
 * The model computes what model_evaluate computes, in NCHW as PyTorch does (the executor's
 * activations are NHWC inside, which no reader sees): the graph input "input" is a float32
 * [batch, 3, S, S] image already normalised, the output "logits" [batch, classes], batch
 * symbolic. The weights are initializers named as their state_dict tensors, float32 raw data,
 * batch norm in its inference form over the running statistics.
 *
 * Each kind's record (node_kind.h's `onnx`) adds the ONNX nodes of one node of the table from
 * its inputs' values, through the functions below; this file walks the table, keeps the values'
 * names and ranks, and writes the protobuf. Only the nodes that reach the logits are exported:
 * an auxiliary classifier (a sink, and what only feeds it) is left out, as evaluation skips it.
 *
 * The operators are those of opset 13, whose meaning is the same up to 17 for every one used
 * here, so that ONNX_OPSET_MIN..ONNX_OPSET_MAX all declare the same graph; only hardswish
 * takes opset 14's HardSwish when the opset allows it (x * HardSigmoid(x) before). */
#ifndef DDP_ONNX_H
#define DDP_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "base/protobuf.h"
#include "model.h"

#define ONNX_OPSET_MIN 13
#define ONNX_OPSET_MAX 17

/* One entry of the model's metadata_props. */
typedef struct {
    const char *key, *value;
} OnnxMeta;

typedef struct {
    int opset;                  /* ONNX_OPSET_MIN..ONNX_OPSET_MAX */
    const char *producer_version;
    const OnnxMeta *meta;       /* metadata_props, n_meta of them */
    int n_meta;
} OnnxOptions;

/* The ModelProto of m, with its weights as they are now and its shapes at m->input_size, into
 * out (initialised here; pb_free it). Returns 0, or -1 with one line in err naming the node
 * that has no ONNX form (or saying that the model passes protobuf's 2 GiB). m is on a host
 * backend (its tensors readable in place). */
int onnx_model(const Model *m, const OnnxOptions *o, PbBuf *out, char *err, size_t errlen);

/* A TensorProto named `name` of float32 values with ndim dims (the ONNX model zoo's
 * test_data_set_N/input_0.pb and output_0.pb are one each), into out. */
void onnx_tensor(PbBuf *out, const char *name, int ndim, const int64_t *dims, const float *data);

/* ---- the kinds' side: a node's ONNX nodes ----------------------------------------------------
 * Names handed out live as long as the graph. A node's inputs are numbered as node_inputs
 * lists them: 0 is "in" (the first of a list), 1 the second input (an add's residual, a mul's
 * scale) or the list's next. */
typedef struct OnnxGraph OnnxGraph;

int onnx_opset(const OnnxGraph *g);
/* Input q's value as a map [N, C, H, W]; as a matrix [N, C] (of a 1x1 map); or as it is, with
 * its rank (2 or 4) in *rank. A conversion (Flatten, Unsqueeze) is added the first time. */
const char *onnx_in(OnnxGraph *g, const struct NetNode *n, int q);
const char *onnx_in_flat(OnnxGraph *g, const struct NetNode *n, int q);
const char *onnx_in_any(OnnxGraph *g, const struct NetNode *n, int q, int *rank);
/* The shape of input q (the image's for NET_INPUT). */
void onnx_in_shape(const OnnxGraph *g, const struct NetNode *n, int q, int *C, int *H, int *W);
/* The name of n's value, of rank 2 or 4, which the last ONNX node it adds writes ("logits" for
 * the network's output); or n's value is input q's as it is (identity at evaluation). */
const char *onnx_out(OnnxGraph *g, const struct NetNode *n, int rank);
void onnx_pass(OnnxGraph *g, const struct NetNode *n, int q);
/* A name for one of n's intermediate values: "NAME/what". */
const char *onnx_tmp(OnnxGraph *g, const struct NetNode *n, const char *what);

/* Adds the ONNX node `op` writing `out` from the inputs after it, up to a NULL (an optional
 * input left out is a NULL that ends the list). The onnx_attr_* calls that follow it give its
 * attributes. */
void onnx_op(OnnxGraph *g, const char *op, const char *out, ...) __attribute__((sentinel));
/* The same with the inputs in an array (a Concat's many). */
void onnx_op_list(OnnxGraph *g, const char *op, const char *out, int n_in, const char *const *in);
void onnx_attr_int(OnnxGraph *g, const char *name, int64_t v);
void onnx_attr_float(OnnxGraph *g, const char *name, float v);
void onnx_attr_ints(OnnxGraph *g, const char *name, int n, const int64_t *v);

/* n's state_dict tensor "NAME.tensor" ("NAME" for tensor "") as an initializer, under that name;
 * with ndim > 0 its dims are given (the same values, unit dimensions added: a linear layer's
 * [out, in] as a 1x1 convolution's [out, in, 1, 1]), else the tensor's own. Returns its name. */
const char *onnx_param(OnnxGraph *g, const struct NetNode *n, const char *tensor, int ndim, const int64_t *dims);
/* A constant of n's, "NAME/what": float32 values of the given dims (ndim 0: a scalar), or a 1-D
 * int64 list (a Slice's starts, a Reshape's shape). Returns its name. */
const char *onnx_const(OnnxGraph *g, const struct NetNode *n, const char *what, int ndim, const int64_t *dims,
                       const float *v);
const char *onnx_const_ints(OnnxGraph *g, const struct NetNode *n, const char *what, int count, const int64_t *v);
/* Indices [start, end) of x along axis (a Slice) into out (a name handed out above); returns out. */
const char *onnx_slice(OnnxGraph *g, const char *x, int axis, int start, int end, const char *out);

/* One line naming the node and its kind: "node \"NAME\" (KIND): message". Returns -1. */
int onnx_err(OnnxGraph *g, const struct NetNode *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
