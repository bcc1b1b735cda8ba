/* SPDX-License-Identifier: BSD-3-Clause */
/* zoo_densenet.c - torchvision's DenseNet-BC (models/densenet.py): a 7x7/2 stem and a 3x3/2 max
 * pool ("features.conv0" to "features.pool0"), four dense blocks with a transition (batch norm,
 * ReLU, 1x1 convolution halving the channels, 2x2/2 average pool) between them, "features.norm5",
 * then the forward's F.relu, the global average pool and the linear layer "classifier".
 *
 * A dense layer ("features.denseblockB.denselayerL") reads torch.cat of every map of its block
 * so far (the block's input first, then each earlier layer's output): norm1, relu1, a 1x1
 * convolution to bn_size * growth = 4 * growth channels, norm2, relu2, a 3x3 convolution to
 * growth channels. The block's output is the concatenation of all of them. torchvision's
 * memory_efficient=False (the concatenations are kept, not recomputed: the same values) and
 * drop_rate 0 (no dropout). The concatenations are named by the layer's path and ".cat", the
 * block's by the block's path; a layer with a single input (the first) reads it directly. */
#include <stdio.h>

#include "base/util.h"
#include "zoo_family.h"

enum { BN_SIZE = 4 };

/* A batch norm, a ReLU and a bias-free convolution (k x k, padding k / 2), named PRE.NORM,
 * PRE.RELU and PRE.CONV. */
static int norm_relu_conv(NetSpec *s, int in, int out, int k, const char *pre, const char *norm, const char *relu,
                          const char *conv) {
    int x = netspec_bn(s, in, 0, "%s.%s", pre, norm);
    x = netspec_relu(s, x, "%s.%s", pre, relu);
    return netspec_conv_ex(s, x, (ConvArgs){.out = out, .k = k, .stride = 1, .pad = k / 2}, "%s.%s", pre, conv);
}

void zoo_build_densenet(NetSpec *s, const ZooNet *z, int width, int blocks) {
    (void)width; (void)blocks;
    const ZooDenseNet *d = &z->p.densenet;
    netspec_init(s, z->name, NET_INIT_DENSENET);
    int h = netspec_conv_ex(s, NET_INPUT, (ConvArgs){.out = d->init_features, .k = 7, .stride = 2, .pad = 3},
                            "features.conv0");
    h = netspec_bn(s, h, 0, "features.norm0");
    h = netspec_relu(s, h, "features.relu0");
    h = netspec_maxpool(s, h, 3, 2, 1, "features.pool0");
    int channels = d->init_features;
    for (int b = 0; b < 4; b++) {
        int feats[NET_MAX_INPUTS];
        int n = 0;
        CHECK(d->layers[b] + 1 <= NET_MAX_INPUTS);
        feats[n++] = h;
        for (int l = 0; l < d->layers[b]; l++) {
            char pre[56];
            snprintf_check(pre, sizeof pre, "features.denseblock%d.denselayer%d", b + 1, l + 1);
            const int x = n == 1 ? feats[0] : netspec_concat(s, feats, n, "%s.cat", pre);
            const int y = norm_relu_conv(s, x, BN_SIZE * d->growth, 1, pre, "norm1", "relu1", "conv1");
            feats[n++] = norm_relu_conv(s, y, d->growth, 3, pre, "norm2", "relu2", "conv2");
        }
        h = netspec_concat(s, feats, n, "features.denseblock%d", b + 1);
        channels += d->layers[b] * d->growth;
        if (b == 3) break;
        char pre[32];
        snprintf_check(pre, sizeof pre, "features.transition%d", b + 1);
        channels /= 2;
        h = norm_relu_conv(s, h, channels, 1, pre, "norm", "relu", "conv");
        h = netspec_avgpool_ex(s, h, (PoolArgs){.k = 2, .stride = 2}, "%s.pool", pre);
    }
    h = netspec_bn(s, h, 0, "features.norm5");
    h = netspec_relu(s, h, "relu");           /* F.relu in torchvision's forward, not a module */
    h = netspec_avgpool(s, h, "avgpool");     /* F.adaptive_avg_pool2d(out, (1, 1)), then flatten */
    netspec_linear(s, h, 0, "classifier");
}
