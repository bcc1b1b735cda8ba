/* SPDX-License-Identifier: BSD-3-Clause */
/* zoo.h - the built-in networks as node tables (netspec.h): the article's MiniResNet and
 * torchvision 0.14's classification builders of the ResNet, ResNeXt, wide ResNet, MobileNetV2/V3,
 * EfficientNet v1/v2, RegNet, MNASNet, DenseNet, VGG, AlexNet and SqueezeNet families,
 * GoogLeNet and Inception v3, by torchvision's names, with its definitions, state_dict names,
 * default dropout and stochastic depth, batch-norm settings and initialisation (NetInit). One
 * table in zoo.c lists them; the families live one per file (zoo_resnet.c, zoo_mobilenet.c,
 * zoo_efficientnet.c, zoo_regnet.c, zoo_mnasnet.c, zoo_densenet.c, zoo_vgg.c with AlexNet,
 * zoo_squeezenet.c, zoo_inception.c), over the blocks of zoo_family.h. */
#ifndef DDP_ZOO_H
#define DDP_ZOO_H

#include <stddef.h>

#include "netspec.h"

/* 1 when `name` is a built-in network. */
int zoo_has(const char *name);

/* The built-in network `name` into s (initialised here); width and blocks shape MiniResNet
 * only. Returns 0, or -1 with one line in err for a name that is not built in. */
int zoo_build(NetSpec *s, const char *name, int width, int blocks, char *err, size_t errlen);

/* The built-ins, in table order: how many, and the i-th's name. */
int zoo_count(void);
const char *zoo_name(int i);

/* The names for a message, a family's names after its prefix in braces
 * ("miniresnet, resnet{18,34,50,101,152}, ..."), into buf (truncated to cap). */
void zoo_list(char *buf, size_t cap);

/* MiniResNet: conv3x3(3->w)+BN+ReLU; three stages of w, 2w, 4w channels with `blocks` basic
 * blocks each (the first block of stages 2 and 3 has stride 2 and a 1x1 conv+BN shortcut,
 * named "shortcut"); global average pool; Linear(4w -> classes). PyTorch's default init. */
void zoo_miniresnet(NetSpec *s, int width, int blocks);

#endif
