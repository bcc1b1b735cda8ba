/* SPDX-License-Identifier: BSD-3-Clause */
/* zoo.h - the built-in networks as node tables (netspec.h): the article's MiniResNet and
 * torchvision's ResNet-18/34/50 (torchvision/models/resnet.py: v1.5, the stride on the 3x3
 * convolution of a bottleneck), with torchvision's state_dict names. */
#ifndef DDP_ZOO_H
#define DDP_ZOO_H

#include <stddef.h>

#include "netspec.h"

/* The names --model takes besides a file: "miniresnet, resnet18, resnet34, resnet50". */
extern const char ZOO_NAMES[];

/* 1 when `name` is a built-in network. */
int zoo_has(const char *name);

/* The built-in network `name` into s (initialised here); width and blocks shape MiniResNet
 * only. Returns 0, or -1 with one line in err for a name that is not built in. */
int zoo_build(NetSpec *s, const char *name, int width, int blocks, char *err, size_t errlen);

/* MiniResNet: conv3x3(3->w)+BN+ReLU; three stages of w, 2w, 4w channels with `blocks` basic
 * blocks each (the first block of stages 2 and 3 has stride 2 and a 1x1 conv+BN shortcut,
 * named "shortcut"); global average pool; Linear(4w -> classes). PyTorch's default init. */
void zoo_miniresnet(NetSpec *s, int width, int blocks);

/* torchvision's resnet18/34 (BasicBlock) and resnet50 (Bottleneck); depth 18, 34 or 50. */
void zoo_resnet(NetSpec *s, int depth);

#endif
