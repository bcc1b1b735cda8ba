/* SPDX-License-Identifier: BSD-3-Clause */
/* netspec.h - a network as data: a table of nodes, each with its inputs and the state_dict
 * prefix of its tensors, that model.c runs with one forward and one backward.
 *
 * A node reads the outputs of earlier nodes (or the input image, NET_INPUT), so the table is
 * in topological order by construction: nodes run in table order, their backward in reverse.
 * The order of the table is also the order of the parameters in the flat buffers (a
 * convolution's weight, a batch norm's weight and bias, a linear layer's weight and bias), so
 * a table written in the order of a PyTorch module's __init__ gives its state_dict order.
 *
 * The zoo (zoo.h) builds tables in C; netfile.h reads and writes them as JSON files. Shapes
 * depend on the image size and the number of classes, so they are worked out (and checked)
 * by netspec_resolve when a model is built from a table. */
#ifndef DDP_NETSPEC_H
#define DDP_NETSPEC_H

#include <stddef.h>

#include "node_kind.h"

#define NET_INPUT (-1)    /* the image, as an input of a node */
#define NET_NONE (-2)     /* no second input */
/* The longest name of a node, with its NUL: torchvision's module paths run to 51 characters
 * ("trunk_output.block3.block3-10.f.se.scale_activation" in a RegNetY). */
#define NET_NAME_MAX 64

/* A node: its kind (node_kind.h) and the members its kind's file fields fill. */
typedef struct NetNode {
    NodeKind kind;
    char name[NET_NAME_MAX]; /* state_dict prefix of its tensors ("layer1.0.conv1"); a label for the others */
    int in, in2;          /* producers: node indices below this one, or NET_INPUT; in2 for a kind of two inputs */
    int out;              /* conv: output channels; linear: output features (0: the number of classes) */
    int k, stride, pad;   /* conv, maxpool */
    int zero_init;        /* bn: its weight starts at 0 under --zero_init_residual (a residual branch's end) */
    /* worked out by netspec_resolve: the output's shape */
    int C, H, W;
} NetNode;

/* How the weights are drawn (model_init_weights). */
typedef enum {
    NET_INIT_PYTORCH,     /* PyTorch's defaults: kaiming-uniform(a=sqrt(5)) convolutions and linear */
    NET_INIT_RESNET,      /* torchvision's ResNet: kaiming-normal fan_out for convolutions, the linear layer's default */
} NetInit;

typedef struct {
    char name[48];        /* "miniresnet", "resnet50", or the name a file gives */
    NetInit init;
    int n, cap;
    NetNode *node;
} NetSpec;

void netspec_init(NetSpec *s, const char *name, NetInit init);
void netspec_free(NetSpec *s);
/* A copy of src into dst (initialised here). */
void netspec_copy(NetSpec *dst, const NetSpec *src);

/* Appends a node of any kind with its inputs (in2: NET_NONE for a kind of one) and returns its
 * index; the caller sets the members its kind's fields fill. */
int netspec_node(NetSpec *s, NodeKind kind, int in, int in2, const char *name);
/* The same for each kind the zoo builds with: name may be a printf format. */
int netspec_conv(NetSpec *s, int in, int out, int k, int stride, int pad, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
int netspec_bn(NetSpec *s, int in, int zero_init, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int netspec_relu(NetSpec *s, int in, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int netspec_add(NetSpec *s, int in, int in2, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int netspec_maxpool(NetSpec *s, int in, int k, int stride, int pad, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
int netspec_avgpool(NetSpec *s, int in, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int netspec_linear(NetSpec *s, int in, int out, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int netspec_blur(NetSpec *s, int in, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* FFCV's use_blurpool (ffcv-imagenet's BlurPoolConv2d, after Zhang's "Making convolutional
 * networks shift-invariant again", 2019): every convolution with a stride above 1 and at least
 * 16 input channels reads its input through a blur node ([1 2 1]^T [1 2 1] / 16 per channel,
 * stride 1, zero padding 1) instead, so that it subsamples a low-passed map. Convolutions that
 * read one input share its blur (FFCV blurs it once per convolution: the same values). The
 * parameters, their names and their order are unchanged: torchvision's weights still load.
 * The network is renamed "<name>-blurpool", which checkpoints record as its architecture.
 * Returns the number of blur nodes added. */
int netspec_blurpool(NetSpec *s);

/* Works out every node's output shape for a 3-channel image_size x image_size input and
 * num_classes classes, and checks what only shapes tell: an input that is not an earlier node,
 * channels or sizes that differ at an add, a window that leaves no pixels, a linear layer on
 * a map larger than 1x1, a last node that is not a linear layer with num_classes outputs, two
 * nodes with one name. Returns 0, or -1 with one line in err naming `what` (the file or
 * "built-in resnet50"), the node and the field. */
int netspec_resolve(NetSpec *s, int image_size, int num_classes, const char *what, char *err, size_t errlen);

#endif
