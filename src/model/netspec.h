/* SPDX-License-Identifier: BSD-3-Clause */
/* netspec.h - a network as data: a table of nodes, each with its inputs and the state_dict
 * prefix of its tensors, that model.c runs with one forward and one backward.
 *
 * A node reads the outputs of earlier nodes (or the input image, NET_INPUT), so the table is
 * in topological order by construction: nodes run in table order, their backward in reverse.
 * The order of the table is also the order of the parameters in the flat buffers (a
 * convolution's weight, a batch norm's weight and bias, a linear layer's weight and bias), so
 * a table written in the order of a PyTorch module's __init__ gives its state_dict order.
 * One exception follows PyTorch's rule that a module's own tensors come before its submodules'
 * (netspec_layout_order): a layer_scale, a parameter of the block that holds the branch it
 * scales, is laid out before that branch's tensors although it runs after them.
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
    int n_ins;            /* a kind of a list of inputs (concat): how many, and which; ins[0] == in */
    int ins[NET_MAX_INPUTS];
    int out;              /* conv: output channels; linear: output features (0: the number of classes) */
    int k, stride, pad;   /* conv, maxpool, avgpool: the window's height (or side), stride, padding */
    int kw, padw;         /* conv: the window's width and padding along it (== k, pad but for (1, 7) kernels) */
    int groups, dilation; /* conv: 1 for a dense convolution; groups == input channels: depthwise; channel_shuffle */
    int bias;             /* conv: a bias is added */
    int zero_init;        /* bn: its weight starts at 0 under --zero_init_residual (a residual branch's end) */
    float eps, momentum;  /* bn: nn.BatchNorm2d's; layernorm: eps */
    int fn;               /* act: its function (backend.h's ActFn) */
    float slope;          /* act: leaky_relu's negative slope */
    float p;              /* dropout, stochastic_depth: the probability of dropping */
    int ceil_mode;        /* maxpool, avgpool: nn.MaxPool2d's ceil_mode */
    int count_pad;        /* avgpool: count_include_pad */
    int out_size;         /* adaptive_avgpool: the output's side */
    int chunks, index;    /* split: the input's channels in `chunks` parts, and which one */
    float value;          /* layer_scale: the initial scale; aux_loss: its weight in the training loss */
    float init_std;       /* conv, linear: the standard deviation of its weights' draw, 0: its family's
                           * (Inception v3's auxiliary fc: 0.001) */
    int whiten;           /* conv: its weight is the whitening of the training images' patches (whiten.h), never
                           * trained; its bias trained for --whiten_bias_epochs only */
    int dirac;            /* conv: after the family's draw, the first in-channels filters are the identity
                           * (torch.nn.init.dirac_ of weight[:in], airbench's) */
    int affine_weight;    /* bn: its weight is trained (else held at 1, requires_grad=False) */
    float output_scale;   /* linear: its output times this constant (airbench's Mul(1/9)) */
    /* worked out by netspec_resolve: the output's shape */
    int C, H, W;
} NetNode;

/* How the weights are drawn (model_init_weights): each family's as torchvision's __init__
 * writes it, X(ENUM, name in network files). The convolutions' and linear layers' records hold
 * the formulas. */
#define NET_INITS(X)                           \
    X(NET_INIT_PYTORCH, "pytorch")             \
    X(NET_INIT_RESNET, "resnet")               \
    X(NET_INIT_MOBILENET, "mobilenet")         \
    X(NET_INIT_EFFICIENTNET, "efficientnet")   \
    X(NET_INIT_REGNET, "regnet")               \
    X(NET_INIT_MNASNET, "mnasnet")             \
    X(NET_INIT_VGG, "vgg")                     \
    X(NET_INIT_SQUEEZENET, "squeezenet")       \
    X(NET_INIT_DENSENET, "densenet")           \
    X(NET_INIT_GOOGLENET, "googlenet")         \
    X(NET_INIT_INCEPTION, "inception")         \
    X(NET_INIT_CONVNEXT, "convnext")
#define NET_INIT_ENUM(e, name) e,
typedef enum { NET_INITS(NET_INIT_ENUM) NET_INIT_COUNT } NetInit;
#undef NET_INIT_ENUM
/* "pytorch", ...; and back, -1 for an unknown name; the list for messages. */
const char *net_init_name(NetInit i);
int net_init_parse(const char *name);
const char *net_init_list(void);

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
/* A convolution with every field; groups and dilation 0 mean 1; kw 0 means a square kernel
 * (kw = k, padw = pad), else the kernel is k x kw with padding pad x padw (Inception's (1, 7)). */
typedef struct { int out, k, stride, pad, groups, dilation, bias, kw, padw; float init_std; } ConvArgs;
int netspec_conv_ex(NetSpec *s, int in, ConvArgs a, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int netspec_bn_ex(NetSpec *s, int in, float eps, float momentum, int zero_init, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* An "act" node of function fn (backend.h's ActFn; leaky_relu's slope at its default 0.01). */
int netspec_act(NetSpec *s, int in, int fn, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* in (N, C, H, W) times scale (N, C, 1, 1): squeeze-excitation's gate. */
int netspec_mul(NetSpec *s, int in, int scale, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int netspec_dropout(NetSpec *s, int in, float p, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int netspec_stochastic_depth(NetSpec *s, int in, float p, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* torch.cat of n (1..NET_MAX_INPUTS) maps along the channels, in the order given. */
int netspec_concat(NetSpec *s, const int *ins, int n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Part `index` of x.chunk(chunks, dim=1). */
int netspec_split(NetSpec *s, int in, int chunks, int index, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* ShuffleNet's channel_shuffle(x, groups). */
int netspec_channel_shuffle(NetSpec *s, int in, int groups, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A windowed pool, nn.MaxPool2d / nn.AvgPool2d(k, stride, pad, ceil_mode, count_include_pad):
 * stride 0 means k; exclude_pad 1 is count_include_pad=False (0, PyTorch's default, counts the
 * padding). */
typedef struct { int k, stride, pad, ceil_mode, exclude_pad; } PoolArgs;
int netspec_maxpool_ex(NetSpec *s, int in, PoolArgs a, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int netspec_avgpool_ex(NetSpec *s, int in, PoolArgs a, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* nn.AdaptiveAvgPool2d(size): a size x size output. */
int netspec_adaptive_avgpool(NetSpec *s, int in, int size, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* torch.flatten(x, 1): C x H x W values in PyTorch's (C, H, W) order, as a 1x1 map. */
int netspec_flatten(NetSpec *s, int in, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* nn.LayerNorm over the channels of every pixel (ConvNeXt's LayerNorm2d and its blocks'). */
int netspec_layernorm(NetSpec *s, int in, float eps, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* A learned per-channel scale, the tensor named as the node ("features.1.0.layer_scale"),
 * starting at value. */
int netspec_layer_scale(NetSpec *s, int in, float value, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* An auxiliary classifier's loss: the cross-entropy of its input's logits, times weight, added
 * to the training loss (GoogLeNet's 0.3, Inception v3's 0.4). */
int netspec_aux_loss(NetSpec *s, int in, float weight, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* torchvision's transform_input: the ImageNet-normalised image renormalised as Google's
 * ported weights expect ((x * std + mean - 0.5) / 0.5 per channel). */
int netspec_transform_input(NetSpec *s, int in, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* FFCV's use_blurpool (ffcv-imagenet's BlurPoolConv2d, after Zhang's "Making convolutional
 * networks shift-invariant again", 2019): every convolution with a stride above 1 and at least
 * 16 input channels reads its input through a blur node ([1 2 1]^T [1 2 1] / 16 per channel,
 * stride 1, zero padding 1) instead, so that it subsamples a low-passed map. Convolutions that
 * read one input share its blur (FFCV blurs it once per convolution: the same values). The
 * parameters, their names and their order are unchanged: torchvision's weights still load.
 * The network is renamed "<name>-blurpool", which checkpoints record as its architecture.
 * Returns the number of blur nodes added. */
int netspec_blurpool(NetSpec *s);

/* The order in which the nodes' tensors are laid out (order[0..s->n-1], a permutation of the
 * nodes): table order, but each layer_scale named PRE.NAME moved before the first node named
 * PRE.something, as PyTorch's state_dict lists the block PRE's own parameter ("features.1.0.
 * layer_scale", ConvNeXt's) before those of its submodules ("features.1.0.block.0.weight"). */
void netspec_layout_order(const NetSpec *s, int *order);

/* torchvision's aux_logits=False: the nodes that only feed an auxiliary loss (a sink, aux_loss)
 * removed, the network's name kept. Returns the number of nodes removed. */
int netspec_drop_aux(NetSpec *s);
/* torchvision's transform_input=True: a transform_input node between the image and the nodes
 * that read it. Returns 1 when one was added, 0 when the network had one already. */
int netspec_add_transform_input(NetSpec *s);

/* Works out every node's output shape for a 3-channel image_size x image_size input and
 * num_classes classes, and checks what only shapes tell: an input that is not an earlier node,
 * channels or sizes that differ at an add, a window that leaves no pixels, a linear layer on
 * a map larger than 1x1, a last node that is not a linear layer with num_classes outputs, two
 * nodes with one name. Returns 0, or -1 with one line in err naming `what` (the file or
 * "built-in resnet50"), the node and the field. */
int netspec_resolve(NetSpec *s, int image_size, int num_classes, const char *what, char *err, size_t errlen);

#endif
