/* SPDX-License-Identifier: BSD-3-Clause */
/* zoo_shufflenet.c - torchvision's ShuffleNet V2 (models/shufflenetv2.py) at its four widths:
 * conv1 (3x3/2, batch norm, ReLU), a 3x3/2 max pool, stages 2 to 4 of InvertedResidual blocks,
 * conv5 (1x1, batch norm, ReLU), the mean over the map and fc. PyTorch's default initialisation
 * (ShuffleNetV2's __init__ draws nothing of its own). */
#include <stdio.h>

#include "base/util.h"
#include "zoo_family.h"

/* A convolution without bias (groups 0: dense; padding (k - 1) / 2) named PRE.I and its batch
 * norm PRE.I+1. */
static int conv_bn(NetSpec *s, int in, int out, int k, int stride, int groups, const char *pre, int i) {
    const ConvArgs a = {.out = out, .k = k, .stride = stride, .pad = (k - 1) / 2, .groups = groups};
    int x = netspec_conv_ex(s, in, a, "%s.%d", pre, i);
    return netspec_bn_ex(s, x, ZOO_BN_DEFAULT.eps, ZOO_BN_DEFAULT.momentum, 0, "%s.%d", pre, i + 1);
}

/* InvertedResidual(inp, oup, stride). At stride 2 both branches read the block's input:
 * branch1 is a depthwise 3x3/2 and its batch norm, then a 1x1, batch norm and ReLU; at stride 1
 * x.chunk(2, dim=1) gives PRE.x1, passed as it is, and PRE.x2, which branch2 reads. branch2: 1x1,
 * batch norm, ReLU, depthwise 3x3 (the block's stride), batch norm, 1x1, batch norm, ReLU. The
 * two halves are joined (PRE.cat, torch.cat((x1 or branch1, branch2), dim=1)) and shuffled in 2
 * groups (PRE.channel_shuffle). */
static int block(NetSpec *s, int h, int inp, int oup, int stride, const char *pre) {
    const int half = oup / 2;
    char seq[40];
    int left, right;
    if (stride > 1) {
        snprintf_check(seq, sizeof seq, "%s.branch1", pre);
        left = conv_bn(s, h, inp, 3, stride, inp, seq, 0);
        left = conv_bn(s, left, half, 1, 1, 0, seq, 2);
        left = netspec_relu(s, left, "%s.4", seq);
        right = h;
    } else {
        CHECK(inp == oup);
        left = netspec_split(s, h, 2, 0, "%s.x1", pre);
        right = netspec_split(s, h, 2, 1, "%s.x2", pre);
    }
    snprintf_check(seq, sizeof seq, "%s.branch2", pre);
    right = conv_bn(s, right, half, 1, 1, 0, seq, 0);
    right = netspec_relu(s, right, "%s.2", seq);
    right = conv_bn(s, right, half, 3, stride, half, seq, 3);
    right = conv_bn(s, right, half, 1, 1, 0, seq, 5);
    right = netspec_relu(s, right, "%s.7", seq);
    const int halves[2] = {left, right};
    const int cat = netspec_concat(s, halves, 2, "%s.cat", pre);
    return netspec_channel_shuffle(s, cat, 2, "%s.channel_shuffle", pre);
}

void zoo_build_shufflenet(NetSpec *s, const ZooNet *z, int width, int blocks) {
    (void)width; (void)blocks;
    const ZooShuffleNet *p = &z->p.shufflenet;
    netspec_init(s, z->name, NET_INIT_PYTORCH);
    int h = conv_bn(s, NET_INPUT, p->out[0], 3, 2, 0, "conv1", 0);
    h = netspec_relu(s, h, "conv1.2");
    h = netspec_maxpool(s, h, 3, 2, 1, "maxpool");
    int in = p->out[0];
    for (int st = 0; st < 3; st++)
        for (int b = 0; b < p->repeats[st]; b++) {
            char pre[24];
            snprintf_check(pre, sizeof pre, "stage%d.%d", st + 2, b);
            h = block(s, h, in, p->out[st + 1], b == 0 ? 2 : 1, pre);
            in = p->out[st + 1];
        }
    h = conv_bn(s, h, p->out[4], 1, 1, 0, "conv5", 0);
    h = netspec_relu(s, h, "conv5.2");
    h = netspec_avgpool(s, h, "avgpool");   /* x.mean([2, 3]) in torchvision's forward, not a module */
    netspec_linear(s, h, 0, "fc");
}
