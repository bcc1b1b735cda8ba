/* SPDX-License-Identifier: BSD-3-Clause */
/* zoo_efficientnet.c - torchvision's EfficientNet B0-B7 and EfficientNetV2 S/M/L
 * (models/efficientnet.py): a stem, stages of MBConv (v1, v2's later stages) or FusedMBConv
 * blocks ("features.S.B"), a 1x1 head convolution, the pool and a dropout before the linear layer.
 * Block b of all T has stochastic depth 0.2 * b / T on its residual branch (none on the first,
 * whose probability is 0, nor on a block without a residual). */
#include <math.h>
#include <stdio.h>

#include "base/util.h"
#include "zoo_family.h"

#define STOCHASTIC_DEPTH_PROB 0.2   /* EfficientNet's default, which no builder changes */

/* A row of _efficientnet_conf: MBConvConfig or FusedMBConvConfig before the multipliers. */
typedef struct {
    int fused;
    int expand, kernel, stride, in, out, layers;
} Stage;

static const Stage b0[] = {
    {0, 1, 3, 1, 32, 16, 1},  {0, 6, 3, 2, 16, 24, 2},  {0, 6, 5, 2, 24, 40, 2},   {0, 6, 3, 2, 40, 80, 3},
    {0, 6, 5, 1, 80, 112, 3}, {0, 6, 5, 2, 112, 192, 4}, {0, 6, 3, 1, 192, 320, 1},
};
static const Stage v2_s[] = {
    {1, 1, 3, 1, 24, 24, 2},   {1, 4, 3, 2, 24, 48, 4},    {1, 4, 3, 2, 48, 64, 4},
    {0, 4, 3, 2, 64, 128, 6},  {0, 6, 3, 1, 128, 160, 9},  {0, 6, 3, 2, 160, 256, 15},
};
static const Stage v2_m[] = {
    {1, 1, 3, 1, 24, 24, 3},   {1, 4, 3, 2, 24, 48, 5},    {1, 4, 3, 2, 48, 80, 5},    {0, 4, 3, 2, 80, 160, 7},
    {0, 6, 3, 1, 160, 176, 14}, {0, 6, 3, 2, 176, 304, 18}, {0, 6, 3, 1, 304, 512, 5},
};
static const Stage v2_l[] = {
    {1, 1, 3, 1, 32, 32, 4},   {1, 4, 3, 2, 32, 64, 7},    {1, 4, 3, 2, 64, 96, 7},    {0, 4, 3, 2, 96, 192, 10},
    {0, 6, 3, 1, 192, 224, 19}, {0, 6, 3, 2, 224, 384, 25}, {0, 6, 3, 1, 384, 640, 7},
};
#define N_OF(a) ((int)(sizeof a / sizeof a[0]))

/* MBConvConfig.adjust_channels */
static int adjust(double channels, double width_mult) { return zoo_make_divisible(channels * width_mult, 8, 0); }

/* MBConv: the 1x1 expansion when it widens, the depthwise k x k, squeeze-excitation (SiLU, then
 * sigmoid; the squeeze a quarter of the block's input), the 1x1 projection. FusedMBConv: a k x k
 * expansion and the 1x1 projection, or one k x k convolution when it does not widen. */
static int block(NetSpec *s, int h, const Stage *st, int in, int out, int stride, ZooNorm bn, double sd_prob,
                 const char *pre) {
    const int exp = adjust(in, st->expand);
    char name[48];
    int x = h, k = 0;
#define NEXT() snprintf_check(name, sizeof name, "%s.block.%d", pre, k++)
    if (st->fused) {
        NEXT();
        if (exp != in) {
            x = zoo_conv_norm_act(s, x, exp, st->kernel, stride, 1, bn, ACT_SILU, name);
            NEXT();
            x = zoo_conv_norm_act(s, x, out, 1, 1, 1, bn, ZOO_NO_ACT, name);
        } else {
            x = zoo_conv_norm_act(s, x, out, st->kernel, stride, 1, bn, ACT_SILU, name);
        }
    } else {
        if (exp != in) {
            NEXT();
            x = zoo_conv_norm_act(s, x, exp, 1, 1, 1, bn, ACT_SILU, name);
        }
        NEXT();
        x = zoo_conv_norm_act(s, x, exp, st->kernel, stride, exp, bn, ACT_SILU, name);
        NEXT();
        x = zoo_squeeze_excitation(s, x, exp, in / 4 > 1 ? in / 4 : 1, ACT_SILU, ACT_SIGMOID, name);
        NEXT();
        x = zoo_conv_norm_act(s, x, out, 1, 1, 1, bn, ZOO_NO_ACT, name);
    }
#undef NEXT
    if (stride != 1 || in != out) return x;
    if (sd_prob > 0) x = netspec_stochastic_depth(s, x, (float)sd_prob, "%s.stochastic_depth", pre);
    return zoo_residual(s, x, h, pre);
}

void zoo_build_efficientnet(NetSpec *s, const ZooNet *z, int width, int blocks) {
    (void)width; (void)blocks;
    const ZooEfficientNet *e = &z->p.efficientnet;
    const Stage *conf = e->v2 == 's' ? v2_s : e->v2 == 'm' ? v2_m : e->v2 == 'l' ? v2_l : b0;
    const int n = e->v2 == 's' ? N_OF(v2_s) : e->v2 == 'm' ? N_OF(v2_m) : e->v2 == 'l' ? N_OF(v2_l) : N_OF(b0);
    const ZooNorm bn = {e->bn_eps, e->bn_momentum};
    /* v1's multipliers (MBConvConfig); v2's tables are used as they are */
    const double wm = e->v2 ? 1.0 : e->width_mult, dm = e->v2 ? 1.0 : e->depth_mult;
    int layers[8], total = 0;
    for (int i = 0; i < n; i++) {
        layers[i] = e->v2 ? conf[i].layers : (int)ceil(conf[i].layers * dm);
        total += layers[i];
    }
    netspec_init(s, z->name, NET_INIT_EFFICIENTNET);
    int h = zoo_conv_norm_act(s, NET_INPUT, adjust(conf[0].in, wm), 3, 2, 1, bn, ACT_SILU, "features.0");
    int id = 0;
    for (int i = 0; i < n; i++) {
        const int out = adjust(conf[i].out, wm);
        for (int b = 0; b < layers[i]; b++, id++) {
            char pre[32];
            snprintf_check(pre, sizeof pre, "features.%d.%d", i + 1, b);
            const int in = b == 0 ? adjust(conf[i].in, wm) : out;
            h = block(s, h, &conf[i], in, out, b == 0 ? conf[i].stride : 1, bn,
                      STOCHASTIC_DEPTH_PROB * (double)id / total, pre);
        }
    }
    const int head = e->v2 ? 1280 : 4 * adjust(conf[n - 1].out, wm);
    char pre[32];
    snprintf_check(pre, sizeof pre, "features.%d", n + 1);
    h = zoo_conv_norm_act(s, h, head, 1, 1, 1, bn, ACT_SILU, pre);
    h = netspec_avgpool(s, h, "avgpool");
    h = netspec_dropout(s, h, e->dropout, "classifier.0");
    netspec_linear(s, h, 0, "classifier.1");
}
