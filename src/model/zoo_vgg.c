/* SPDX-License-Identifier: BSD-3-Clause */
/* zoo_vgg.c - torchvision's VGG (models/vgg.py) and AlexNet (models/alexnet.py): a "features"
 * nn.Sequential of convolutions with biases, ReLUs and max pools, an adaptive average pool to
 * 7x7 (VGG) or 6x6 (AlexNet), torch.flatten, and a "classifier" of three linear layers with
 * ReLUs and dropouts of 0.5.
 *
 * VGG's features follow its configuration (make_layers): per number a 3x3 convolution (padding
 * 1), its batch norm in the _bn variants, a ReLU; per "M" a 2x2/2 max pool; modules numbered in
 * that order. Its classifier: Linear(512 * 7 * 7, 4096), ReLU, Dropout, Linear(4096, 4096), ReLU,
 * Dropout, Linear(4096, classes). Init: kaiming_normal_ fan_out convolutions with zero biases,
 * linear layers normal(0, 0.01) with zero biases (NET_INIT_VGG).
 * AlexNet's classifier has its dropouts first: Dropout, Linear(256 * 6 * 6, 4096), ReLU, Dropout,
 * Linear(4096, 4096), ReLU, Linear(4096, classes); PyTorch's default initialisation. */
#include <stdio.h>

#include "base/util.h"
#include "zoo_family.h"

#define M (-1)   /* a max pool in a configuration */

/* cfgs["A"], ["B"], ["D"], ["E"], ending at 0 */
static const int cfg_a[] = {64, M, 128, M, 256, 256, M, 512, 512, M, 512, 512, M, 0};
static const int cfg_b[] = {64, 64, M, 128, 128, M, 256, 256, M, 512, 512, M, 512, 512, M, 0};
static const int cfg_d[] = {64, 64, M, 128, 128, M, 256, 256, 256, M, 512, 512, 512, M, 512, 512, 512, M, 0};
static const int cfg_e[] = {64, 64, M, 128, 128, M, 256, 256, 256, 256, M, 512, 512, 512, 512, M,
                            512, 512, 512, 512, M, 0};

/* Linear, ReLU, Dropout(0.5) named classifier.I, .I+1, .I+2; the dropout first when drop_first
 * (AlexNet's order: Dropout, Linear, ReLU). Returns the last node. */
static int linear_relu_dropout(NetSpec *s, int in, int out, int i, int drop_first) {
    if (drop_first) in = netspec_dropout(s, in, 0.5f, "classifier.%d", i++);
    int x = netspec_linear(s, in, out, "classifier.%d", i);
    x = netspec_relu(s, x, "classifier.%d", i + 1);
    return drop_first ? x : netspec_dropout(s, x, 0.5f, "classifier.%d", i + 2);
}

void zoo_build_vgg(NetSpec *s, const ZooNet *z, int width, int blocks) {
    (void)width; (void)blocks;
    const int *cfg = z->p.vgg.cfg == 'A' ? cfg_a : z->p.vgg.cfg == 'B' ? cfg_b : z->p.vgg.cfg == 'D' ? cfg_d : cfg_e;
    CHECK(z->p.vgg.cfg == 'A' || z->p.vgg.cfg == 'B' || z->p.vgg.cfg == 'D' || z->p.vgg.cfg == 'E');
    netspec_init(s, z->name, NET_INIT_VGG);
    int h = NET_INPUT, i = 0;
    for (const int *v = cfg; *v; v++) {
        if (*v == M) {
            h = netspec_maxpool(s, h, 2, 2, 0, "features.%d", i++);
            continue;
        }
        h = netspec_conv_ex(s, h, (ConvArgs){.out = *v, .k = 3, .stride = 1, .pad = 1, .bias = 1}, "features.%d", i++);
        if (z->p.vgg.bn) h = netspec_bn(s, h, 0, "features.%d", i++);
        h = netspec_relu(s, h, "features.%d", i++);
    }
    h = netspec_adaptive_avgpool(s, h, 7, "avgpool");
    h = netspec_flatten(s, h, "flatten");     /* torch.flatten(x, 1) in the forward */
    h = linear_relu_dropout(s, h, 4096, 0, 0);
    h = linear_relu_dropout(s, h, 4096, 3, 0);
    netspec_linear(s, h, 0, "classifier.6");
}

void zoo_build_alexnet(NetSpec *s, const ZooNet *z, int width, int blocks) {
    (void)width; (void)blocks;
    /* features.0 to .12: (out, kernel, stride, padding) of each convolution, then its ReLU,
     * and a 3x3/2 max pool after the first, the second and the last */
    static const int conv[5][4] = {{64, 11, 4, 2}, {192, 5, 1, 2}, {384, 3, 1, 1}, {256, 3, 1, 1}, {256, 3, 1, 1}};
    netspec_init(s, z->name, NET_INIT_PYTORCH);
    int h = NET_INPUT, i = 0;
    for (int c = 0; c < 5; c++) {
        const ConvArgs a = {.out = conv[c][0], .k = conv[c][1], .stride = conv[c][2], .pad = conv[c][3], .bias = 1};
        h = netspec_conv_ex(s, h, a, "features.%d", i++);
        h = netspec_relu(s, h, "features.%d", i++);
        if (c == 0 || c == 1 || c == 4) h = netspec_maxpool(s, h, 3, 2, 0, "features.%d", i++);
    }
    h = netspec_adaptive_avgpool(s, h, 6, "avgpool");
    h = netspec_flatten(s, h, "flatten");
    h = linear_relu_dropout(s, h, 4096, 0, 1);
    h = linear_relu_dropout(s, h, 4096, 3, 1);
    netspec_linear(s, h, 0, "classifier.6");
}
