/* SPDX-License-Identifier: BSD-3-Clause */
/* zoo_mnasnet.c - torchvision's MNASNet B1 (models/mnasnet.py, version 2 of its stem) at depth
 * multiplier alpha: one nn.Sequential "layers" of a stem, six stacks of inverted residuals
 * ("layers.8" to "layers.13", each block's own "layers.0" to "layers.7") and a 1x1 head, then the
 * mean over the map, a dropout and the linear layer. Batch norm momentum 1 - 0.9997. */
#include <stdio.h>

#include "base/util.h"
#include "zoo_family.h"

/* _round_to_multiple_of(val, 8, 0.9): to the nearest multiple of 8, up when that loses over 10% */
static int round_to_8(double val) {
    int v = (int)(val + 4.0) / 8 * 8;
    if (v < 8) v = 8;
    return v >= 0.9 * val ? v : v + 8;
}

/* A convolution without bias (padding k/2), named NAME.I, and its batch norm NAME.I+1 */
static int conv_bn(NetSpec *s, int in, int out, int k, int stride, int groups, ZooNorm bn, const char *pre, int i) {
    const ConvArgs a = {.out = out, .k = k, .stride = stride, .pad = k / 2, .groups = groups > 1 ? groups : 0};
    int x = netspec_conv_ex(s, in, a, "%s.%d", pre, i);
    return netspec_bn_ex(s, x, bn.eps, bn.momentum, 0, "%s.%d", pre, i + 1);
}

/* _InvertedResidual: 1x1 expansion, ReLU, depthwise k x k, ReLU, 1x1 projection; + input when the
 * shapes allow. */
static int block(NetSpec *s, int h, int in, int out, int k, int stride, int expansion, ZooNorm bn, const char *pre) {
    const int mid = in * expansion;
    char seq[48];
    snprintf_check(seq, sizeof seq, "%s.layers", pre);
    int x = conv_bn(s, h, mid, 1, 1, 1, bn, seq, 0);
    x = netspec_relu(s, x, "%s.2", seq);
    x = conv_bn(s, x, mid, k, stride, mid, bn, seq, 3);
    x = netspec_relu(s, x, "%s.5", seq);
    x = conv_bn(s, x, out, 1, 1, 1, bn, seq, 6);
    return in == out && stride == 1 ? zoo_residual(s, x, h, pre) : x;
}

void zoo_build_mnasnet(NetSpec *s, const ZooNet *z, int width, int blocks) {
    (void)width; (void)blocks;
    static const int base[8] = {32, 16, 24, 40, 80, 96, 192, 320};
    /* _stack(depths[i], depths[i + 1], kernel, stride, expansion, repeats) for i = 1..6 */
    static const int stack[6][4] = {{3, 2, 3, 3}, {5, 2, 3, 3}, {5, 2, 6, 3}, {3, 1, 6, 2}, {5, 2, 6, 4}, {3, 1, 6, 1}};
    const ZooNorm bn = {1e-5f, (float)(1.0 - 0.9997)};
    int d[8];
    for (int i = 0; i < 8; i++) d[i] = round_to_8(base[i] * z->p.mnasnet.alpha);
    netspec_init(s, z->name, NET_INIT_MNASNET);
    int h = conv_bn(s, NET_INPUT, d[0], 3, 2, 1, bn, "layers", 0);
    h = netspec_relu(s, h, "layers.2");
    h = conv_bn(s, h, d[0], 3, 1, d[0], bn, "layers", 3);
    h = netspec_relu(s, h, "layers.5");
    h = conv_bn(s, h, d[1], 1, 1, 1, bn, "layers", 6);
    for (int i = 0; i < 6; i++)
        for (int r = 0; r < stack[i][3]; r++) {
            char pre[32];
            snprintf_check(pre, sizeof pre, "layers.%d.%d", 8 + i, r);
            h = block(s, h, r == 0 ? d[i + 1] : d[i + 2], d[i + 2], stack[i][0], r == 0 ? stack[i][1] : 1,
                      stack[i][2], bn, pre);
        }
    h = conv_bn(s, h, 1280, 1, 1, 1, bn, "layers", 14);
    h = netspec_relu(s, h, "layers.16");
    h = netspec_avgpool(s, h, "avgpool");   /* x.mean([2, 3]) in torchvision's forward, not a module */
    h = netspec_dropout(s, h, 0.2f, "classifier.0");
    netspec_linear(s, h, 0, "classifier.1");
}
