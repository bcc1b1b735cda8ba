/* SPDX-License-Identifier: BSD-3-Clause */
/* zoo.c - see zoo.h. The builders follow torchvision's _make_layer: a block's nodes in the
 * order of its __init__ (so the table gives the state_dict order), the projection shortcut
 * last, then the add and the ReLU that end the block. */
#include "zoo.h"

#include <stdio.h>
#include <string.h>

#include "base/util.h"

const char ZOO_NAMES[] = "miniresnet, resnet18, resnet34, resnet50";

/* A convolution followed by its batch norm, and a ReLU when `relu`; returns the last node. */
static int conv_bn(NetSpec *s, int in, int out, int k, int stride, const char *conv, const char *bn, int zero_init,
                   const char *relu) {
    int c = netspec_conv(s, in, out, k, stride, k / 2, "%s", conv);
    int b = netspec_bn(s, c, zero_init, "%s", bn);
    return relu ? netspec_relu(s, b, "%s", relu) : b;
}

/* The end of a block: the residual add of `main` and `skip`, then the ReLU. */
static int block_end(NetSpec *s, int main, int skip, const char *pre) {
    char name[48];
    snprintf_check(name, sizeof name, "%s.add", pre);
    int a = netspec_add(s, main, skip, "%s", name);
    return netspec_relu(s, a, "%s.relu", pre);
}

void zoo_miniresnet(NetSpec *s, int width, int blocks) {
    netspec_init(s, "miniresnet", NET_INIT_PYTORCH);
    int h = conv_bn(s, NET_INPUT, width, 3, 1, "conv1", "bn1", 0, "relu");
    int cin = width;
    for (int st = 0; st < 3; st++) {
        const int cout = width << st;
        for (int b = 0; b < blocks; b++) {
            const int stride = (st > 0 && b == 0) ? 2 : 1;
            char pre[24], c1[40], b1[40], r1[40], c2[40], b2[40], sc0[40], sc1[40];
            snprintf_check(pre, sizeof pre, "layer%d.%d", st + 1, b);
            snprintf_check(c1, sizeof c1, "%s.conv1", pre);
            snprintf_check(b1, sizeof b1, "%s.bn1", pre);
            snprintf_check(r1, sizeof r1, "%s.relu1", pre);
            snprintf_check(c2, sizeof c2, "%s.conv2", pre);
            snprintf_check(b2, sizeof b2, "%s.bn2", pre);
            snprintf_check(sc0, sizeof sc0, "%s.shortcut.0", pre);
            snprintf_check(sc1, sizeof sc1, "%s.shortcut.1", pre);
            int x = conv_bn(s, h, cout, 3, stride, c1, b1, 0, r1);
            x = conv_bn(s, x, cout, 3, 1, c2, b2, 1, NULL);
            int skip = h;
            if (stride != 1 || cin != cout) skip = conv_bn(s, h, cout, 1, stride, sc0, sc1, 0, NULL);
            h = block_end(s, x, skip, pre);
            cin = cout;
        }
    }
    int p = netspec_avgpool(s, h, "avgpool");
    netspec_linear(s, p, 0, "fc");
}

/* torchvision's BasicBlock (expansion 1) or Bottleneck (expansion 4, the stride on conv2). */
static int resnet_block(NetSpec *s, int in, int inplanes, int planes, int stride, int bottleneck, const char *pre) {
    char c[3][40], b[3][40], r[2][40], d0[40], d1[40];
    for (int i = 0; i < 3; i++) {
        snprintf_check(c[i], sizeof c[i], "%s.conv%d", pre, i + 1);
        snprintf_check(b[i], sizeof b[i], "%s.bn%d", pre, i + 1);
    }
    for (int i = 0; i < 2; i++) snprintf_check(r[i], sizeof r[i], "%s.relu%d", pre, i + 1);
    snprintf_check(d0, sizeof d0, "%s.downsample.0", pre);
    snprintf_check(d1, sizeof d1, "%s.downsample.1", pre);
    const int out = bottleneck ? 4 * planes : planes;
    int x;
    if (bottleneck) {
        x = conv_bn(s, in, planes, 1, 1, c[0], b[0], 0, r[0]);
        x = conv_bn(s, x, planes, 3, stride, c[1], b[1], 0, r[1]);
        x = conv_bn(s, x, out, 1, 1, c[2], b[2], 1, NULL);
    } else {
        x = conv_bn(s, in, planes, 3, stride, c[0], b[0], 0, r[0]);
        x = conv_bn(s, x, planes, 3, 1, c[1], b[1], 1, NULL);
    }
    int skip = in;
    if (stride != 1 || inplanes != out) skip = conv_bn(s, in, out, 1, stride, d0, d1, 0, NULL);
    return block_end(s, x, skip, pre);
}

void zoo_resnet(NetSpec *s, int depth) {
    static const int layers18[4] = {2, 2, 2, 2}, layers34[4] = {3, 4, 6, 3};
    CHECK(depth == 18 || depth == 34 || depth == 50);
    const int *layers = depth == 18 ? layers18 : layers34;
    const int bottleneck = depth == 50;
    char name[16];
    snprintf_check(name, sizeof name, "resnet%d", depth);
    netspec_init(s, name, NET_INIT_RESNET);
    int h = conv_bn(s, NET_INPUT, 64, 7, 2, "conv1", "bn1", 0, "relu");
    h = netspec_maxpool(s, h, 3, 2, 1, "maxpool");
    int inplanes = 64;
    for (int l = 0; l < 4; l++) {
        const int planes = 64 << l;
        for (int b = 0; b < layers[l]; b++) {
            char pre[24];
            snprintf_check(pre, sizeof pre, "layer%d.%d", l + 1, b);
            h = resnet_block(s, h, inplanes, planes, (l > 0 && b == 0) ? 2 : 1, bottleneck, pre);
            inplanes = bottleneck ? 4 * planes : planes;
        }
    }
    int p = netspec_avgpool(s, h, "avgpool");
    netspec_linear(s, p, 0, "fc");
}

int zoo_has(const char *name) {
    return !strcmp(name, "miniresnet") || !strcmp(name, "resnet18") || !strcmp(name, "resnet34") ||
           !strcmp(name, "resnet50");
}

int zoo_build(NetSpec *s, const char *name, int width, int blocks, char *err, size_t errlen) {
    if (!strcmp(name, "miniresnet")) zoo_miniresnet(s, width, blocks);
    else if (!strcmp(name, "resnet18")) zoo_resnet(s, 18);
    else if (!strcmp(name, "resnet34")) zoo_resnet(s, 34);
    else if (!strcmp(name, "resnet50")) zoo_resnet(s, 50);
    else {
        snprintf(err, errlen, "--model %s: not a built-in network (%s) nor a file", name, ZOO_NAMES);
        return -1;
    }
    return 0;
}
