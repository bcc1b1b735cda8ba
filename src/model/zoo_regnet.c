/* SPDX-License-Identifier: BSD-3-Clause */
/* zoo_regnet.c - torchvision's RegNetX and RegNetY (models/regnet.py): the 3x3/2 stem, stages of
 * ResBottleneckBlocks whose widths BlockParams.from_init_params quantises from (depth, w_0, w_a,
 * w_m), grouped 3x3 convolutions of group_width channels, and in RegNetY a squeeze-excitation of a
 * quarter of the block's input width. */
#include <math.h>
#include <stdio.h>

#include "base/util.h"
#include "zoo_family.h"

#define MAX_DEPTH 64

/* from_init_params: per block the width w_0 * w_m^round(log(1 + i w_a / w_0) / log w_m), to a
 * multiple of 8; a stage is a run of equal widths; then _adjust_widths_groups_compatibilty at
 * bottleneck multiplier 1 (a group width at most the stage's width, the width a multiple of it).
 * torchvision computes in float32 with torch.round, which rounds halves to even (RegNetX-1.6GF's
 * second width is 8 x 22.5 -> 176, not 184); nearbyint does the same, and the other values of
 * these builders lie 0.003 or more from a rounding point, where double and float32 agree.
 * Returns the number of stages. */
static int stages(const ZooRegNet *r, int width[], int depth[], int group[]) {
    CHECK(r->depth <= MAX_DEPTH);
    int n = 0;
    for (int i = 0; i < r->depth; i++) {
        const double cont = i * r->w_a + r->w_0;
        const double cap = nearbyint(log(cont / r->w_0) / log(r->w_m));
        const int w = (int)nearbyint(r->w_0 * pow(r->w_m, cap) / 8) * 8;
        if (n == 0 || width[n - 1] != w) {
            width[n] = w;
            depth[n++] = 0;
        }
        depth[n - 1]++;
    }
    for (int i = 0; i < n; i++) {
        group[i] = r->group_width < width[i] ? r->group_width : width[i];
        width[i] = zoo_make_divisible(width[i], group[i], 0);
    }
    return n;
}

/* ResBottleneckBlock: the projection (PRE.proj) when the shape changes, then f: a (1x1), b (3x3,
 * width / group_width groups), se (RegNetY), c (1x1, no activation); proj(x) + f(x) (or x + f(x)),
 * and the ReLU (PRE.activation). */
static int block(NetSpec *s, int h, int w_in, int w_out, int stride, int group_width, double se_ratio,
                 const char *pre) {
    const ZooNorm bn = ZOO_BN_DEFAULT;
    char name[64];
    int skip = h;
    if (w_in != w_out || stride != 1) {
        snprintf_check(name, sizeof name, "%s.proj", pre);
        skip = zoo_conv_norm_act(s, h, w_out, 1, stride, 1, bn, ZOO_NO_ACT, name);
    }
    snprintf_check(name, sizeof name, "%s.f.a", pre);
    int x = zoo_conv_norm_act(s, h, w_out, 1, 1, 1, bn, ZOO_RELU, name);
    snprintf_check(name, sizeof name, "%s.f.b", pre);
    x = zoo_conv_norm_act(s, x, w_out, 3, stride, w_out / group_width, bn, ZOO_RELU, name);
    if (se_ratio > 0) {
        snprintf_check(name, sizeof name, "%s.f.se", pre);
        /* int(round(se_ratio * width_in)): python's round halves to even */
        x = zoo_squeeze_excitation(s, x, w_out, (int)nearbyint(se_ratio * w_in), ZOO_RELU, ACT_SIGMOID, name);
    }
    snprintf_check(name, sizeof name, "%s.f.c", pre);
    x = zoo_conv_norm_act(s, x, w_out, 1, 1, 1, bn, ZOO_NO_ACT, name);
    const int a = zoo_residual(s, x, skip, pre);
    return netspec_relu(s, a, "%s.activation", pre);
}

void zoo_build_regnet(NetSpec *s, const ZooNet *z, int width, int blocks) {
    (void)width; (void)blocks;
    const ZooRegNet *r = &z->p.regnet;
    int w[MAX_DEPTH], d[MAX_DEPTH], g[MAX_DEPTH];
    const int n = stages(r, w, d, g);
    netspec_init(s, z->name, NET_INIT_REGNET);
    int h = zoo_conv_norm_act(s, NET_INPUT, 32, 3, 2, 1, ZOO_BN_DEFAULT, ZOO_RELU, "stem");
    int cur = 32;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < d[i]; j++) {
            char pre[48];
            snprintf_check(pre, sizeof pre, "trunk_output.block%d.block%d-%d", i + 1, i + 1, j);
            h = block(s, h, j == 0 ? cur : w[i], w[i], j == 0 ? 2 : 1, g[i], r->se_ratio, pre);
            if (j == 0) cur = w[i];
        }
    h = netspec_avgpool(s, h, "avgpool");
    netspec_linear(s, h, 0, "fc");
}
