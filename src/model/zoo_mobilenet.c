/* SPDX-License-Identifier: BSD-3-Clause */
/* zoo_mobilenet.c - torchvision's MobileNetV2 (models/mobilenetv2.py) and MobileNetV3 large and
 * small (models/mobilenetv3.py) at width multiplier 1: inverted residual blocks, "features.N"
 * with N counting the stem, the blocks and the last convolution, then the classifier. */
#include <stdio.h>

#include "base/util.h"
#include "zoo_family.h"

/* ---- MobileNetV2 ----------------------------------------------------------------------------- */

/* InvertedResidual(inp, oup, stride, t): the 1x1 expansion when t != 1, the depthwise 3x3, each
 * with ReLU6, then a plain 1x1 projection and its batch norm ("conv.K", "conv.K+1"); x + that
 * when the shapes allow. */
static int v2_block(NetSpec *s, int in, int inp, int oup, int stride, int t, const char *pre) {
    const int hidden = inp * t;   /* int(round(inp * expand_ratio)), t an integer */
    const ZooNorm bn = ZOO_BN_DEFAULT;
    char name[48];
    int x = in, k = 0;
    if (t != 1) {
        snprintf_check(name, sizeof name, "%s.conv.%d", pre, k++);
        x = zoo_conv_norm_act(s, x, hidden, 1, 1, 1, bn, ACT_RELU6, name);
    }
    snprintf_check(name, sizeof name, "%s.conv.%d", pre, k++);
    x = zoo_conv_norm_act(s, x, hidden, 3, stride, hidden, bn, ACT_RELU6, name);
    x = netspec_conv_ex(s, x, (ConvArgs){.out = oup, .k = 1, .stride = 1}, "%s.conv.%d", pre, k);
    x = netspec_bn_ex(s, x, bn.eps, bn.momentum, 0, "%s.conv.%d", pre, k + 1);
    return stride == 1 && inp == oup ? zoo_residual(s, x, in, pre) : x;
}

static void mobilenet_v2(NetSpec *s, const ZooNet *z) {
    /* t, c, n, s */
    static const int setting[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                                      {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
    const int last_channel = 1280;
    netspec_init(s, z->name, NET_INIT_MOBILENET);
    int in_ch = 32, f = 0;
    char pre[32];
    snprintf_check(pre, sizeof pre, "features.%d", f++);
    int h = zoo_conv_norm_act(s, NET_INPUT, in_ch, 3, 2, 1, ZOO_BN_DEFAULT, ACT_RELU6, pre);
    for (int i = 0; i < 7; i++) {
        const int out = zoo_make_divisible(setting[i][1], 8, 0);
        for (int j = 0; j < setting[i][2]; j++) {
            snprintf_check(pre, sizeof pre, "features.%d", f++);
            h = v2_block(s, h, in_ch, out, j == 0 ? setting[i][3] : 1, setting[i][0], pre);
            in_ch = out;
        }
    }
    snprintf_check(pre, sizeof pre, "features.%d", f);
    h = zoo_conv_norm_act(s, h, last_channel, 1, 1, 1, ZOO_BN_DEFAULT, ACT_RELU6, pre);
    h = netspec_avgpool(s, h, "avgpool");   /* a function in torchvision's forward, not a module */
    h = netspec_dropout(s, h, 0.2f, "classifier.0");
    netspec_linear(s, h, 0, "classifier.1");
}

/* ---- MobileNetV3 ----------------------------------------------------------------------------- */

/* A row of _mobilenet_v3_conf's bneck_conf: InvertedResidualConfig before adjust_channels. */
typedef struct {
    int in, kernel, expanded, out, use_se, hardswish, stride;
} V3Conf;

static const V3Conf v3_large[] = {
    {16, 3, 16, 16, 0, 0, 1},    {16, 3, 64, 24, 0, 0, 2},    {24, 3, 72, 24, 0, 0, 1},
    {24, 5, 72, 40, 1, 0, 2},    {40, 5, 120, 40, 1, 0, 1},   {40, 5, 120, 40, 1, 0, 1},
    {40, 3, 240, 80, 0, 1, 2},   {80, 3, 200, 80, 0, 1, 1},   {80, 3, 184, 80, 0, 1, 1},
    {80, 3, 184, 80, 0, 1, 1},   {80, 3, 480, 112, 1, 1, 1},  {112, 3, 672, 112, 1, 1, 1},
    {112, 5, 672, 160, 1, 1, 2}, {160, 5, 960, 160, 1, 1, 1}, {160, 5, 960, 160, 1, 1, 1},
};
static const V3Conf v3_small[] = {
    {16, 3, 16, 16, 1, 0, 2},  {16, 3, 72, 24, 0, 0, 2},   {24, 3, 88, 24, 0, 0, 1},  {24, 5, 96, 40, 1, 1, 2},
    {40, 5, 240, 40, 1, 1, 1}, {40, 5, 240, 40, 1, 1, 1},  {40, 5, 120, 48, 1, 1, 1}, {48, 5, 144, 48, 1, 1, 1},
    {48, 5, 288, 96, 1, 1, 2}, {96, 5, 576, 96, 1, 1, 1},  {96, 5, 576, 96, 1, 1, 1},
};

/* BatchNorm2d(eps=0.001, momentum=0.01), MobileNetV3's norm_layer */
static const ZooNorm V3_BN = {0.001f, 0.01f};

/* adjust_channels at width multiplier 1 */
static int v3_ch(int c) { return zoo_make_divisible(c, 8, 0); }

/* InvertedResidual(cnf): the 1x1 expansion when it widens, the depthwise k x k, squeeze-excitation
 * (ReLU, then Hardsigmoid; the squeeze a multiple of 8) when use_se, the 1x1 projection without
 * activation ("block.K"); input + that when the shapes allow. */
static int v3_block(NetSpec *s, int in, const V3Conf *c, const char *pre) {
    const int act = c->hardswish ? ACT_HARDSWISH : ZOO_RELU;
    const int cin = v3_ch(c->in), exp = v3_ch(c->expanded), out = v3_ch(c->out);
    char name[48];
    int x = in, k = 0;
    if (exp != cin) {
        snprintf_check(name, sizeof name, "%s.block.%d", pre, k++);
        x = zoo_conv_norm_act(s, x, exp, 1, 1, 1, V3_BN, act, name);
    }
    snprintf_check(name, sizeof name, "%s.block.%d", pre, k++);
    x = zoo_conv_norm_act(s, x, exp, c->kernel, c->stride, exp, V3_BN, act, name);
    if (c->use_se) {
        snprintf_check(name, sizeof name, "%s.block.%d", pre, k++);
        x = zoo_squeeze_excitation(s, x, exp, zoo_make_divisible(exp / 4, 8, 0), ZOO_RELU, ACT_HARDSIGMOID, name);
    }
    snprintf_check(name, sizeof name, "%s.block.%d", pre, k);
    x = zoo_conv_norm_act(s, x, out, 1, 1, 1, V3_BN, ZOO_NO_ACT, name);
    return c->stride == 1 && cin == out ? zoo_residual(s, x, in, pre) : x;
}

static void mobilenet_v3(NetSpec *s, const ZooNet *z) {
    const V3Conf *conf = z->p.mobilenet.large ? v3_large : v3_small;
    const int n = z->p.mobilenet.large ? (int)(sizeof v3_large / sizeof v3_large[0])
                                       : (int)(sizeof v3_small / sizeof v3_small[0]);
    const int last_channel = v3_ch(z->p.mobilenet.large ? 1280 : 1024);
    netspec_init(s, z->name, NET_INIT_MOBILENET);
    char pre[32];
    int h = zoo_conv_norm_act(s, NET_INPUT, v3_ch(conf[0].in), 3, 2, 1, V3_BN, ACT_HARDSWISH, "features.0");
    for (int i = 0; i < n; i++) {
        snprintf_check(pre, sizeof pre, "features.%d", i + 1);
        h = v3_block(s, h, &conf[i], pre);
    }
    const int last_conv = 6 * v3_ch(conf[n - 1].out);
    snprintf_check(pre, sizeof pre, "features.%d", n + 1);
    h = zoo_conv_norm_act(s, h, last_conv, 1, 1, 1, V3_BN, ACT_HARDSWISH, pre);
    h = netspec_avgpool(s, h, "avgpool");
    h = netspec_linear(s, h, last_channel, "classifier.0");
    h = netspec_act(s, h, ACT_HARDSWISH, "classifier.1");
    h = netspec_dropout(s, h, 0.2f, "classifier.2");
    netspec_linear(s, h, 0, "classifier.3");
}

void zoo_build_mobilenet(NetSpec *s, const ZooNet *z, int width, int blocks) {
    (void)width; (void)blocks;
    if (z->p.mobilenet.version == 2) mobilenet_v2(s, z);
    else mobilenet_v3(s, z);
}
