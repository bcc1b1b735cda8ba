/* SPDX-License-Identifier: BSD-3-Clause */
/* zoo_resnet.c - torchvision's ResNet (models/resnet.py, v1.5: the stride on the 3x3 convolution
 * of a bottleneck) and the Bottleneck variants of other groups and widths: ResNeXt
 * (groups x width_per_group) and the wide ResNets (width_per_group 128).
 *
 * The builders follow _make_layer: a block's nodes in the order of its __init__ (so the table
 * gives the state_dict order), the projection shortcut last, then the add and the ReLU that end
 * the block; the forward calls them in that order too. torchvision's block holds one nn.ReLU
 * that it calls two or three times: the nodes are relu1, relu2 and relu, one name each. */
#include <stdio.h>

#include "base/util.h"
#include "zoo_family.h"

/* A convolution (k/2 padding, `groups`) followed by its batch norm, and a ReLU when `relu`;
 * returns the last node. */
static int conv_bn(NetSpec *s, int in, int out, int k, int stride, int groups, const char *conv, const char *bn,
                   int zero_init, const char *relu) {
    int c;
    if (groups > 1)
        c = netspec_conv_ex(s, in, (ConvArgs){.out = out, .k = k, .stride = stride, .pad = k / 2, .groups = groups},
                            "%s", conv);
    else
        c = netspec_conv(s, in, out, k, stride, k / 2, "%s", conv);
    int b = netspec_bn(s, c, zero_init, "%s", bn);
    return relu ? netspec_relu(s, b, "%s", relu) : b;
}

/* BasicBlock (expansion 1) or Bottleneck (expansion 4, the stride on conv2, which has `groups`
 * and width int(planes * width_per_group / 64) * groups). */
static int resnet_block(NetSpec *s, int in, int inplanes, int planes, int stride, const ZooResNet *r,
                        const char *pre) {
    char c[3][40], b[3][40], rl[2][40], d0[40], d1[40];
    for (int i = 0; i < 3; i++) {
        snprintf_check(c[i], sizeof c[i], "%s.conv%d", pre, i + 1);
        snprintf_check(b[i], sizeof b[i], "%s.bn%d", pre, i + 1);
    }
    for (int i = 0; i < 2; i++) snprintf_check(rl[i], sizeof rl[i], "%s.relu%d", pre, i + 1);
    snprintf_check(d0, sizeof d0, "%s.downsample.0", pre);
    snprintf_check(d1, sizeof d1, "%s.downsample.1", pre);
    const int out = r->bottleneck ? 4 * planes : planes;
    int x;
    if (r->bottleneck) {
        const int width = planes * r->width_per_group / 64 * r->groups;
        x = conv_bn(s, in, width, 1, 1, 1, c[0], b[0], 0, rl[0]);
        x = conv_bn(s, x, width, 3, stride, r->groups, c[1], b[1], 0, rl[1]);
        x = conv_bn(s, x, out, 1, 1, 1, c[2], b[2], 1, NULL);
    } else {
        x = conv_bn(s, in, planes, 3, stride, 1, c[0], b[0], 0, rl[0]);
        x = conv_bn(s, x, planes, 3, 1, 1, c[1], b[1], 1, NULL);
    }
    int skip = in;
    if (stride != 1 || inplanes != out) skip = conv_bn(s, in, out, 1, stride, 1, d0, d1, 0, NULL);
    const int a = zoo_residual(s, x, skip, pre);
    return netspec_relu(s, a, "%s.relu", pre);
}

void zoo_build_resnet(NetSpec *s, const ZooNet *z, int width, int blocks) {
    (void)width; (void)blocks;
    const ZooResNet *r = &z->p.resnet;
    netspec_init(s, z->name, NET_INIT_RESNET);
    int h = conv_bn(s, NET_INPUT, 64, 7, 2, 1, "conv1", "bn1", 0, "relu");
    h = netspec_maxpool(s, h, 3, 2, 1, "maxpool");
    int inplanes = 64;
    for (int l = 0; l < 4; l++) {
        const int planes = 64 << l;
        for (int b = 0; b < r->layers[l]; b++) {
            char pre[24];
            snprintf_check(pre, sizeof pre, "layer%d.%d", l + 1, b);
            h = resnet_block(s, h, inplanes, planes, (l > 0 && b == 0) ? 2 : 1, r, pre);
            inplanes = r->bottleneck ? 4 * planes : planes;
        }
    }
    int p = netspec_avgpool(s, h, "avgpool");
    netspec_linear(s, p, 0, "fc");
}
