/* SPDX-License-Identifier: BSD-3-Clause */
/* zoo.c - see zoo.h: the table of built-ins, MiniResNet, and the blocks of zoo_family.h. */
#include "zoo.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "zoo_family.h"

/* The parameters are torchvision's builders' (torchvision/models/, version 0.14); a family's
 * records stay together, which the listing of messages relies on. */
#define RESNET(n, fam, bneck, l0, l1, l2, l3, g, wpg) \
    {n, fam, zoo_build_resnet, .p.resnet = {bneck, {l0, l1, l2, l3}, g, wpg}}
#define EFFNET(n, v2, wm, dm, drop, eps, mom) \
    {n, "efficientnet_", zoo_build_efficientnet, .p.efficientnet = {v2, wm, dm, drop, eps, mom}}
#define REGNET(n, fam, d, w0, wa, wm, gw, se) \
    {n, fam, zoo_build_regnet, .p.regnet = {d, w0, wa, wm, gw, se}}
#define DENSENET(n, growth, l0, l1, l2, l3, init) \
    {n, "densenet", zoo_build_densenet, .p.densenet = {growth, {l0, l1, l2, l3}, init}}
#define VGG(n, cfg, bn) {n, "vgg", zoo_build_vgg, .p.vgg = {cfg, bn}}
/* ShuffleNet V2: stages of 4, 8, 4 blocks after a 24-channel conv1 */
#define SHUFFLENET(n, c2, c3, c4, c5) \
    {n, "shufflenet_v2_", zoo_build_shufflenet, .p.shufflenet = {{4, 8, 4}, {24, c2, c3, c4, c5}}}
/* ConvNeXt: widths w, 2w, 4w, 8w */
#define CONVNEXT(n, w, d0, d1, d2, d3, sd) \
    {n, "convnext_", zoo_build_convnext, .p.convnext = {{w, 2 * w, 4 * w, 8 * w}, {d0, d1, d2, d3}, sd}}

static const ZooNet zoo[] = {
    {"miniresnet", "miniresnet", zoo_build_miniresnet, .p.resnet = {0}},
    RESNET("resnet18", "resnet", 0, 2, 2, 2, 2, 1, 64),
    RESNET("resnet34", "resnet", 0, 3, 4, 6, 3, 1, 64),
    RESNET("resnet50", "resnet", 1, 3, 4, 6, 3, 1, 64),
    RESNET("resnet101", "resnet", 1, 3, 4, 23, 3, 1, 64),
    RESNET("resnet152", "resnet", 1, 3, 8, 36, 3, 1, 64),
    RESNET("resnext50_32x4d", "resnext", 1, 3, 4, 6, 3, 32, 4),
    RESNET("resnext101_32x8d", "resnext", 1, 3, 4, 23, 3, 32, 8),
    RESNET("resnext101_64x4d", "resnext", 1, 3, 4, 23, 3, 64, 4),
    RESNET("wide_resnet50_2", "wide_resnet", 1, 3, 4, 6, 3, 1, 128),
    RESNET("wide_resnet101_2", "wide_resnet", 1, 3, 4, 23, 3, 1, 128),
    {"mobilenet_v2", "mobilenet_v2", zoo_build_mobilenet, .p.mobilenet = {2, 0}},
    {"mobilenet_v3_large", "mobilenet_v3_", zoo_build_mobilenet, .p.mobilenet = {3, 1}},
    {"mobilenet_v3_small", "mobilenet_v3_", zoo_build_mobilenet, .p.mobilenet = {3, 0}},
    /* b0-b4 keep nn.BatchNorm2d's defaults; b5-b7 pass eps 1e-3, momentum 0.01; v2 eps 1e-3 */
    EFFNET("efficientnet_b0", 0, 1.0, 1.0, 0.2f, 1e-5f, 0.1f),
    EFFNET("efficientnet_b1", 0, 1.0, 1.1, 0.2f, 1e-5f, 0.1f),
    EFFNET("efficientnet_b2", 0, 1.1, 1.2, 0.3f, 1e-5f, 0.1f),
    EFFNET("efficientnet_b3", 0, 1.2, 1.4, 0.3f, 1e-5f, 0.1f),
    EFFNET("efficientnet_b4", 0, 1.4, 1.8, 0.4f, 1e-5f, 0.1f),
    EFFNET("efficientnet_b5", 0, 1.6, 2.2, 0.4f, 1e-3f, 0.01f),
    EFFNET("efficientnet_b6", 0, 1.8, 2.6, 0.5f, 1e-3f, 0.01f),
    EFFNET("efficientnet_b7", 0, 2.0, 3.1, 0.5f, 1e-3f, 0.01f),
    EFFNET("efficientnet_v2_s", 's', 1.0, 1.0, 0.2f, 1e-3f, 0.1f),
    EFFNET("efficientnet_v2_m", 'm', 1.0, 1.0, 0.3f, 1e-3f, 0.1f),
    EFFNET("efficientnet_v2_l", 'l', 1.0, 1.0, 0.4f, 1e-3f, 0.1f),
    REGNET("regnet_x_400mf", "regnet_x_", 22, 24, 24.48, 2.54, 16, 0),
    REGNET("regnet_x_800mf", "regnet_x_", 16, 56, 35.73, 2.28, 16, 0),
    REGNET("regnet_x_1_6gf", "regnet_x_", 18, 80, 34.01, 2.25, 24, 0),
    REGNET("regnet_x_3_2gf", "regnet_x_", 25, 88, 26.31, 2.25, 48, 0),
    REGNET("regnet_x_8gf", "regnet_x_", 23, 80, 49.56, 2.88, 120, 0),
    REGNET("regnet_x_16gf", "regnet_x_", 22, 216, 55.59, 2.1, 128, 0),
    REGNET("regnet_x_32gf", "regnet_x_", 23, 320, 69.86, 2.0, 168, 0),
    REGNET("regnet_y_400mf", "regnet_y_", 16, 48, 27.89, 2.09, 8, 0.25),
    REGNET("regnet_y_800mf", "regnet_y_", 14, 56, 38.84, 2.4, 16, 0.25),
    REGNET("regnet_y_1_6gf", "regnet_y_", 27, 48, 20.71, 2.65, 24, 0.25),
    REGNET("regnet_y_3_2gf", "regnet_y_", 21, 80, 42.63, 2.66, 24, 0.25),
    REGNET("regnet_y_8gf", "regnet_y_", 17, 192, 76.82, 2.19, 56, 0.25),
    REGNET("regnet_y_16gf", "regnet_y_", 18, 200, 106.23, 2.48, 112, 0.25),
    REGNET("regnet_y_32gf", "regnet_y_", 20, 232, 115.89, 2.53, 232, 0.25),
    REGNET("regnet_y_128gf", "regnet_y_", 27, 456, 160.83, 2.52, 264, 0.25),
    {"mnasnet0_5", "mnasnet", zoo_build_mnasnet, .p.mnasnet = {0.5}},
    {"mnasnet0_75", "mnasnet", zoo_build_mnasnet, .p.mnasnet = {0.75}},
    {"mnasnet1_0", "mnasnet", zoo_build_mnasnet, .p.mnasnet = {1.0}},
    {"mnasnet1_3", "mnasnet", zoo_build_mnasnet, .p.mnasnet = {1.3}},
    DENSENET("densenet121", 32, 6, 12, 24, 16, 64),
    DENSENET("densenet161", 48, 6, 12, 36, 24, 96),
    DENSENET("densenet169", 32, 6, 12, 32, 32, 64),
    DENSENET("densenet201", 32, 6, 12, 48, 32, 64),
    VGG("vgg11", 'A', 0),
    VGG("vgg11_bn", 'A', 1),
    VGG("vgg13", 'B', 0),
    VGG("vgg13_bn", 'B', 1),
    VGG("vgg16", 'D', 0),
    VGG("vgg16_bn", 'D', 1),
    VGG("vgg19", 'E', 0),
    VGG("vgg19_bn", 'E', 1),
    {"alexnet", "alexnet", zoo_build_alexnet, .p.vgg = {0}},
    {"squeezenet1_0", "squeezenet1_", zoo_build_squeezenet, .p.squeezenet = {10}},
    {"squeezenet1_1", "squeezenet1_", zoo_build_squeezenet, .p.squeezenet = {11}},
    {"googlenet", "googlenet", zoo_build_googlenet, .p.resnet = {0}},
    {"inception_v3", "inception_v3", zoo_build_inception, .p.resnet = {0}},
    SHUFFLENET("shufflenet_v2_x0_5", 48, 96, 192, 1024),
    SHUFFLENET("shufflenet_v2_x1_0", 116, 232, 464, 1024),
    SHUFFLENET("shufflenet_v2_x1_5", 176, 352, 704, 1024),
    SHUFFLENET("shufflenet_v2_x2_0", 244, 488, 976, 2048),
    CONVNEXT("convnext_tiny", 96, 3, 3, 9, 3, 0.1),
    CONVNEXT("convnext_small", 96, 3, 3, 27, 3, 0.4),
    CONVNEXT("convnext_base", 128, 3, 3, 27, 3, 0.5),
    CONVNEXT("convnext_large", 192, 3, 3, 27, 3, 0.5),
};
#define ZOO_N ((int)(sizeof zoo / sizeof zoo[0]))

static const ZooNet *find(const char *name) {
    for (int i = 0; i < ZOO_N; i++)
        if (!strcmp(zoo[i].name, name)) return &zoo[i];
    return NULL;
}

int zoo_has(const char *name) { return find(name) != NULL; }
int zoo_count(void) { return ZOO_N; }
const char *zoo_name(int i) { return i >= 0 && i < ZOO_N ? zoo[i].name : NULL; }

void zoo_list(char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = '\0';
#define PUT(...) (len += (size_t)snprintf(buf + (len < cap ? len : cap), len < cap ? cap - len : 0, __VA_ARGS__))
    for (int i = 0; i < ZOO_N;) {
        const char *fam = zoo[i].family;
        int j = i;
        while (j < ZOO_N && !strcmp(zoo[j].family, fam)) j++;
        if (j - i == 1) PUT("%s%s", i ? ", " : "", zoo[i].name);
        else {
            PUT("%s%s{", i ? ", " : "", fam);
            for (int k = i; k < j; k++) PUT("%s%s", k > i ? "," : "", zoo[k].name + strlen(fam));
            PUT("}");
        }
        i = j;
    }
#undef PUT
}

int zoo_build(NetSpec *s, const char *name, int width, int blocks, char *err, size_t errlen) {
    const ZooNet *z = find(name);
    if (!z) {
        char names[1024];
        zoo_list(names, sizeof names);
        snprintf(err, errlen, "--model %s: not a built-in network (%s) nor a file", name, names);
        return -1;
    }
    z->build(s, z, width, blocks);
    return 0;
}

/* ---- the blocks ------------------------------------------------------------------------------ */

const ZooNorm ZOO_BN_DEFAULT = {1e-5f, 0.1f};

int zoo_make_divisible(double v, int divisor, int min_value) {
    if (min_value == 0) min_value = divisor;
    int new_v = (int)(v + divisor / 2.0) / divisor * divisor;   /* python: int(v + divisor / 2) // divisor */
    if (new_v < min_value) new_v = min_value;
    if (new_v < 0.9 * v) new_v += divisor;
    return new_v;
}

int zoo_act(NetSpec *s, int in, int act, const char *fmt, ...) {
    if (act == ZOO_NO_ACT) return in;
    char name[sizeof ((NetNode *)0)->name];
    va_list ap;
    va_start(ap, fmt);
    const int len = vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    CHECK(len >= 0 && (size_t)len < sizeof name);
    if (act == ZOO_RELU) return netspec_relu(s, in, "%s", name);
    CHECK(act >= 0 && act < ACT_FN_COUNT);
    return netspec_act(s, in, (ActFn)act, "%s", name);
}

int zoo_conv_norm_act(NetSpec *s, int in, int out, int k, int stride, int groups, ZooNorm norm, int act,
                      const char *pre) {
    const ConvArgs a = {.out = out, .k = k, .stride = stride, .pad = (k - 1) / 2, .groups = groups > 1 ? groups : 0};
    int x = netspec_conv_ex(s, in, a, "%s.0", pre);
    x = netspec_bn_ex(s, x, norm.eps, norm.momentum, 0, "%s.1", pre);
    return zoo_act(s, x, act, "%s.2", pre);
}

int zoo_squeeze_excitation(NetSpec *s, int in, int channels, int squeeze, int act, int scale_act, const char *pre) {
    int g = netspec_avgpool(s, in, "%s.avgpool", pre);
    g = netspec_conv_ex(s, g, (ConvArgs){.out = squeeze, .k = 1, .stride = 1, .bias = 1}, "%s.fc1", pre);
    g = zoo_act(s, g, act, "%s.activation", pre);
    g = netspec_conv_ex(s, g, (ConvArgs){.out = channels, .k = 1, .stride = 1, .bias = 1}, "%s.fc2", pre);
    g = zoo_act(s, g, scale_act, "%s.scale_activation", pre);
    return netspec_mul(s, in, g, "%s", pre);
}

int zoo_residual(NetSpec *s, int main, int skip, const char *pre) { return netspec_add(s, main, skip, "%s.add", pre); }

/* ---- MiniResNet ------------------------------------------------------------------------------ */

/* A convolution followed by its batch norm, and a ReLU when `relu`; returns the last node. */
static int conv_bn(NetSpec *s, int in, int out, int k, int stride, const char *conv, const char *bn, int zero_init,
                   const char *relu) {
    int c = netspec_conv(s, in, out, k, stride, k / 2, "%s", conv);
    int b = netspec_bn(s, c, zero_init, "%s", bn);
    return relu ? netspec_relu(s, b, "%s", relu) : b;
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
            const int a = netspec_add(s, x, skip, "%s.add", pre);
            h = netspec_relu(s, a, "%s.relu", pre);
            cin = cout;
        }
    }
    int p = netspec_avgpool(s, h, "avgpool");
    netspec_linear(s, p, 0, "fc");
}

void zoo_build_miniresnet(NetSpec *s, const ZooNet *z, int width, int blocks) {
    (void)z;
    zoo_miniresnet(s, width, blocks);
}
