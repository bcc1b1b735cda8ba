/* SPDX-License-Identifier: BSD-3-Clause */
/* zoo_convnext.c - torchvision's ConvNeXt tiny, small, base and large (models/convnext.py): one
 * nn.Sequential "features" of the stem ("features.0": 4x4/4 convolution with bias, LayerNorm2d),
 * four stages of CNBlocks ("features.1", .3, .5, .7) and the downsamplings between them
 * ("features.2", .4, .6: LayerNorm2d, 2x2/2 convolution with bias); then the global average pool
 * and the classifier (LayerNorm2d, Flatten, Linear). Every layer norm has eps 1e-6. Block b of
 * all T has stochastic depth p * b / (T - 1) on its residual branch (none on the first, whose
 * probability is 0). Convolutions' and linear layers' weights trunc_normal_(std=0.02), their
 * biases zero (NET_INIT_CONVNEXT). */
#include <stdio.h>

#include "base/util.h"
#include "zoo_family.h"

#define LN_EPS 1e-6f
#define LAYER_SCALE 1e-6f   /* ConvNeXt's default, which no builder changes */

/* CNBlock(dim): block.0 a depthwise 7x7 convolution with bias (padding 3), block.2 nn.LayerNorm
 * over the channels, block.3 nn.Linear(dim, 4 dim), block.4 nn.GELU (exact), block.5
 * nn.Linear(4 dim, dim) at every pixel (block.1 and block.6 are the permutes to channels-last and
 * back, which ddptrain's NHWC maps need not do); then layer_scale * that, its stochastic depth,
 * and + the block's input. */
static int block(NetSpec *s, int h, int dim, double sd_prob, const char *pre) {
    int x = netspec_conv_ex(s, h, (ConvArgs){.out = dim, .k = 7, .stride = 1, .pad = 3, .groups = dim, .bias = 1},
                            "%s.block.0", pre);
    x = netspec_layernorm(s, x, LN_EPS, "%s.block.2", pre);
    x = netspec_linear(s, x, 4 * dim, "%s.block.3", pre);
    x = netspec_act(s, x, ACT_GELU, "%s.block.4", pre);
    x = netspec_linear(s, x, dim, "%s.block.5", pre);
    x = netspec_layer_scale(s, x, LAYER_SCALE, "%s.layer_scale", pre);
    if (sd_prob > 0) x = netspec_stochastic_depth(s, x, (float)sd_prob, "%s.stochastic_depth", pre);
    return zoo_residual(s, x, h, pre);
}

void zoo_build_convnext(NetSpec *s, const ZooNet *z, int width, int blocks) {
    (void)width; (void)blocks;
    const ZooConvNeXt *c = &z->p.convnext;
    int total = 0;
    for (int i = 0; i < 4; i++) total += c->depths[i];
    netspec_init(s, z->name, NET_INIT_CONVNEXT);
    int h = netspec_conv_ex(s, NET_INPUT, (ConvArgs){.out = c->dims[0], .k = 4, .stride = 4, .pad = 0, .bias = 1},
                            "features.0.0");
    h = netspec_layernorm(s, h, LN_EPS, "features.0.1");
    int f = 1, id = 0;
    for (int i = 0; i < 4; i++, f++) {
        for (int b = 0; b < c->depths[i]; b++, id++) {
            char pre[24];
            snprintf_check(pre, sizeof pre, "features.%d.%d", f, b);
            h = block(s, h, c->dims[i], c->stochastic_depth_prob * id / (total - 1.0), pre);
        }
        if (i == 3) break;
        f++;
        h = netspec_layernorm(s, h, LN_EPS, "features.%d.0", f);
        h = netspec_conv_ex(s, h, (ConvArgs){.out = c->dims[i + 1], .k = 2, .stride = 2, .pad = 0, .bias = 1},
                            "features.%d.1", f);
    }
    h = netspec_avgpool(s, h, "avgpool");
    h = netspec_layernorm(s, h, LN_EPS, "classifier.0");
    h = netspec_flatten(s, h, "classifier.1");
    netspec_linear(s, h, 0, "classifier.2");
}
