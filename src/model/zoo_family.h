/* SPDX-License-Identifier: BSD-3-Clause */
/* zoo_family.h - what the zoo's family files share, private to src/model/: the record of a
 * built-in network (zoo.c holds the table of them), each family's parameters, and the blocks
 * torchvision builds its networks from (torchvision/ops/misc.py, models/_utils.py), so that
 * every family names and orders their nodes the same way.
 *
 * A block's nodes follow torchvision's module: table order = __init__ order = state_dict order,
 * and, for the modules of these families, the order of the forward's calls too. Nodes without
 * tensors are named by their module's path ("features.0.2" for an activation), or by the
 * block's path and ".add" for a residual add, which no module does. */
#ifndef DDP_ZOO_FAMILY_H
#define DDP_ZOO_FAMILY_H

#include "ops/backend.h"
#include "netspec.h"

/* ---- the record of a built-in --------------------------------------------------------------- */

/* torchvision's ResNet (models/resnet.py): BasicBlock or Bottleneck stages; ResNeXt and wide
 * ResNets are Bottleneck ResNets with other groups and width_per_group. */
typedef struct {
    int bottleneck;
    int layers[4];
    int groups, width_per_group;
} ZooResNet;

/* MobileNetV2 (version 2), or MobileNetV3 (version 3, large or small). */
typedef struct {
    int version, large;
} ZooMobileNet;

/* EfficientNet v1 (width and depth multipliers of B0's stages) or v2 (the s, m or l table). */
typedef struct {
    char v2;                  /* 0: v1; 's', 'm' or 'l' */
    double width_mult, depth_mult;
    float dropout;
    float bn_eps, bn_momentum;
} ZooEfficientNet;

/* RegNet's BlockParams.from_init_params: the quantised linear widths. */
typedef struct {
    int depth, w_0;
    double w_a, w_m;
    int group_width;
    double se_ratio;          /* 0: RegNetX, no squeeze-excitation */
} ZooRegNet;

typedef struct {
    double alpha;
} ZooMnasNet;

/* DenseNet-BC: growth rate, layers per dense block, the stem's channels (bn_size 4). */
typedef struct {
    int growth;
    int layers[4];
    int init_features;
} ZooDenseNet;

/* VGG's configuration ('A', 'B', 'D', 'E': 11, 13, 16, 19 layers), with batch norms or not. */
typedef struct {
    char cfg;
    int bn;
} ZooVgg;

/* SqueezeNet 1.0 (10) or 1.1 (11). */
typedef struct {
    int version;
} ZooSqueezeNet;
/* ShuffleNetV2(stages_repeats, stages_out_channels) */
typedef struct {
    int repeats[3];
    int out[5];
} ZooShuffleNet;

/* ConvNeXt's block_setting (the stages' widths and depths) and stochastic_depth_prob */
typedef struct {
    int dims[4], depths[4];
    double stochastic_depth_prob;
} ZooConvNeXt;

typedef struct ZooNet ZooNet;
/* Builds z into s (netspec_init'd here); width and blocks shape MiniResNet only. */
typedef void (*ZooBuildFn)(NetSpec *s, const ZooNet *z, int width, int blocks);

struct ZooNet {
    const char *name;         /* --model's name, torchvision's builder's */
    const char *family;       /* the prefix messages group the names by ("resnet", "regnet_x_") */
    ZooBuildFn build;
    union {
        ZooResNet resnet;
        ZooMobileNet mobilenet;
        ZooEfficientNet efficientnet;
        ZooRegNet regnet;
        ZooMnasNet mnasnet;
        ZooDenseNet densenet;
        ZooVgg vgg;
        ZooSqueezeNet squeezenet;
        ZooShuffleNet shufflenet;
        ZooConvNeXt convnext;
    } p;
};

/* The builders, one family a file. */
void zoo_build_miniresnet(NetSpec *s, const ZooNet *z, int width, int blocks);   /* zoo.c */
void zoo_build_resnet(NetSpec *s, const ZooNet *z, int width, int blocks);       /* zoo_resnet.c */
void zoo_build_mobilenet(NetSpec *s, const ZooNet *z, int width, int blocks);    /* zoo_mobilenet.c */
void zoo_build_efficientnet(NetSpec *s, const ZooNet *z, int width, int blocks); /* zoo_efficientnet.c */
void zoo_build_regnet(NetSpec *s, const ZooNet *z, int width, int blocks);       /* zoo_regnet.c */
void zoo_build_mnasnet(NetSpec *s, const ZooNet *z, int width, int blocks);      /* zoo_mnasnet.c */
void zoo_build_densenet(NetSpec *s, const ZooNet *z, int width, int blocks);     /* zoo_densenet.c */
void zoo_build_vgg(NetSpec *s, const ZooNet *z, int width, int blocks);          /* zoo_vgg.c */
void zoo_build_alexnet(NetSpec *s, const ZooNet *z, int width, int blocks);      /* zoo_vgg.c */
void zoo_build_squeezenet(NetSpec *s, const ZooNet *z, int width, int blocks);   /* zoo_squeezenet.c */
void zoo_build_googlenet(NetSpec *s, const ZooNet *z, int width, int blocks);    /* zoo_inception.c */
void zoo_build_inception(NetSpec *s, const ZooNet *z, int width, int blocks);    /* zoo_inception.c */
void zoo_build_shufflenet(NetSpec *s, const ZooNet *z, int width, int blocks);   /* zoo_shufflenet.c */
void zoo_build_convnext(NetSpec *s, const ZooNet *z, int width, int blocks);     /* zoo_convnext.c */

/* ---- the blocks (zoo.c) ----------------------------------------------------------------------- */

/* An activation module: none, nn.ReLU (the "relu" kind, which the executor fuses into a batch
 * norm before it), or an ActFn of the "act" kind. */
#define ZOO_NO_ACT (-2)
#define ZOO_RELU (-1)

/* The norm_layer a family passes: nn.BatchNorm2d's eps and momentum. */
typedef struct {
    float eps, momentum;
} ZooNorm;
extern const ZooNorm ZOO_BN_DEFAULT;   /* nn.BatchNorm2d's own: 1e-5, 0.1 */

/* torchvision's _make_divisible(v, divisor, min_value; 0: the divisor): v rounded to the nearest
 * multiple of divisor, at least min_value, and not below 90% of v. */
int zoo_make_divisible(double v, int divisor, int min_value);

/* The activation `act` (ZOO_NO_ACT: none, `in` returned) on in, named by fmt. */
int zoo_act(NetSpec *s, int in, int act, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Conv2dNormActivation(in, out, k, stride, groups, dilation): PRE.0 a convolution without bias
 * and with torchvision's padding, (k - 1) / 2 * dilation; PRE.1 the batch norm; PRE.2 the
 * activation (act as zoo_act's). Returns the last node. */
int zoo_conv_norm_act(NetSpec *s, int in, int out, int k, int stride, int groups, ZooNorm norm, int act,
                      const char *pre);

/* SqueezeExcitation(channels, squeeze, activation, scale_activation) on in (channels wide):
 * PRE.avgpool, PRE.fc1 (1x1 convolution with bias), PRE.activation, PRE.fc2, PRE.scale_activation,
 * and the product of in and the gate, named PRE (the module's output). Returns the product. */
int zoo_squeeze_excitation(NetSpec *s, int in, int channels, int squeeze, int act, int scale_act, const char *pre);

/* The end of a residual block without an activation after it: the add of the branch `main`
 * (first: a batch norm there fuses the add) and `skip`, named PRE.add. */
int zoo_residual(NetSpec *s, int main, int skip, const char *pre);

#endif
