/* SPDX-License-Identifier: BSD-3-Clause */
/* zoo_squeezenet.c - torchvision's SqueezeNet 1.0 and 1.1 (models/squeezenet.py): a "features"
 * nn.Sequential of a convolution with bias, its ReLU, max pools of 3x3/2 with ceil_mode=True and
 * Fire modules, then the classifier: Dropout(0.5), a 1x1 convolution with bias to one map per
 * class, ReLU, and nn.AdaptiveAvgPool2d((1, 1)), whose average of each class's map is the logits
 * (the network's last node: a global average pool).
 *
 * A Fire module ("features.I"): squeeze (1x1 convolution with bias) and squeeze_activation, then
 * expand1x1 (1x1) and expand3x3 (3x3, padding 1), each with its ReLU, their outputs concatenated
 * in that order (the concatenation named by the module's path). Init (NET_INIT_SQUEEZENET):
 * kaiming_uniform_ convolutions, but the final one normal(0, 0.01); biases 0. */
#include <stdio.h>

#include "base/util.h"
#include "zoo_family.h"

static int conv_relu(NetSpec *s, int in, int out, int k, const char *pre, const char *conv, const char *act) {
    const ConvArgs a = {.out = out, .k = k, .stride = 1, .pad = k / 2, .bias = 1};
    const int x = netspec_conv_ex(s, in, a, "%s.%s", pre, conv);
    return netspec_relu(s, x, "%s.%s", pre, act);
}

static int fire(NetSpec *s, int in, int squeeze, int expand, int i) {
    char pre[24];
    snprintf_check(pre, sizeof pre, "features.%d", i);
    const int x = conv_relu(s, in, squeeze, 1, pre, "squeeze", "squeeze_activation");
    const int ins[2] = {conv_relu(s, x, expand, 1, pre, "expand1x1", "expand1x1_activation"),
                        conv_relu(s, x, expand, 3, pre, "expand3x3", "expand3x3_activation")};
    return netspec_concat(s, ins, 2, "%s", pre);
}

static int pool(NetSpec *s, int in, int i) {
    return netspec_maxpool_ex(s, in, (PoolArgs){.k = 3, .stride = 2, .ceil_mode = 1}, "features.%d", i);
}

void zoo_build_squeezenet(NetSpec *s, const ZooNet *z, int width, int blocks) {
    (void)width; (void)blocks;
    const int v10 = z->p.squeezenet.version == 10;
    CHECK(v10 || z->p.squeezenet.version == 11);
    netspec_init(s, z->name, NET_INIT_SQUEEZENET);
    const ConvArgs stem = {.out = v10 ? 96 : 64, .k = v10 ? 7 : 3, .stride = 2, .bias = 1};
    int h = netspec_conv_ex(s, NET_INPUT, stem, "features.0");
    h = netspec_relu(s, h, "features.1");
    h = pool(s, h, 2);
    /* the Fire modules' (squeeze, expand) after the stem; 0 a max pool */
    static const int f10[10][2] = {{16, 64}, {16, 64}, {32, 128}, {0, 0}, {32, 128}, {48, 192}, {48, 192}, {64, 256},
                                   {0, 0}, {64, 256}};
    static const int f11[10][2] = {{16, 64}, {16, 64}, {0, 0}, {32, 128}, {32, 128}, {0, 0}, {48, 192}, {48, 192},
                                   {64, 256}, {64, 256}};
    const int (*f)[2] = v10 ? f10 : f11;
    for (int i = 0; i < 10; i++) h = f[i][0] ? fire(s, h, f[i][0], f[i][1], 3 + i) : pool(s, h, 3 + i);
    h = netspec_dropout(s, h, 0.5f, "classifier.0");
    h = netspec_conv_ex(s, h, (ConvArgs){.out = 0, .k = 1, .stride = 1, .bias = 1, .init_std = 0.01f}, "classifier.1");
    h = netspec_relu(s, h, "classifier.2");
    netspec_avgpool(s, h, "classifier.3");
}
