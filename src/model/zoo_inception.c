/* SPDX-License-Identifier: BSD-3-Clause */
/* zoo_inception.c - torchvision's GoogLeNet (models/googlenet.py) and Inception v3
 * (models/inception.py), as built without weights: auxiliary classifiers on (aux_logits=True),
 * transform_input off; netspec_drop_aux and netspec_add_transform_input give the other settings
 * (--aux_logits, --transform_input).
 *
 * Both are made of BasicConv2d: a convolution without bias, a batch norm of eps 0.001 and a ReLU
 * (F.relu in the module's forward: the node NAME.relu). An Inception module's branches read one
 * input and meet in a concat named by the module's path.
 *
 * The auxiliary heads come where their tensors are in the state_dict, which is also where they
 * run here: GoogLeNet's aux1 (on inception4a's output) and aux2 (on inception4d's) after
 * inception5b, Inception v3's AuxLogits after Mixed_6e. torchvision runs aux1 and aux2 right
 * after the modules they read; each head's result is the same wherever it runs, and its
 * aux_loss node adds weight x its cross-entropy to the training loss (0.3 each in GoogLeNet,
 * 0.4 in Inception v3, the papers' weights). A pool or flatten that torchvision calls as a
 * function is named by its module's path and ".pool" (a windowed pool), ".avgpool" (the
 * adaptive one) or ".flatten"; a flatten of a 1x1 map is the identity and left out. */
#include <stdarg.h>
#include <stdio.h>

#include "base/util.h"
#include "zoo_family.h"

/* BasicConv2d: PRE.conv (k x kw, padding pad x padw, no bias; kw 0: square), PRE.bn
 * (eps 0.001, momentum 0.1), PRE.relu. init_std: the module's stddev (0: the family's). */
static int basic_ex(NetSpec *s, int in, int out, int k, int kw, int stride, int pad, int padw, float init_std,
                    const char *fmt, ...) __attribute__((format(printf, 10, 11)));

static int basic_ex(NetSpec *s, int in, int out, int k, int kw, int stride, int pad, int padw, float init_std,
                    const char *fmt, ...) {
    char pre[NET_NAME_MAX - 8];
    va_list ap;
    va_start(ap, fmt);
    const int len = vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    CHECK(len >= 0 && (size_t)len < sizeof pre);
    const ConvArgs a = {.out = out, .k = k, .kw = kw, .stride = stride, .pad = pad, .padw = padw,
                        .init_std = init_std};
    int x = netspec_conv_ex(s, in, a, "%s.conv", pre);
    x = netspec_bn_ex(s, x, 0.001f, 0.1f, 0, "%s.bn", pre);
    return netspec_relu(s, x, "%s.relu", pre);
}

/* A square k x k BasicConv2d */
#define BASIC(s, in, out, k, stride, pad, ...) basic_ex(s, in, out, k, 0, stride, pad, 0, 0.0f, __VA_ARGS__)
/* A k x kw one at stride 1, padded to keep the size (Inception v3's 1x7, 7x1, 1x3, 3x1) */
#define RECT(s, in, out, k, kw, ...) basic_ex(s, in, out, k, kw, 1, (k) / 2, (kw) / 2, 0.0f, __VA_ARGS__)

/* ---- GoogLeNet ------------------------------------------------------------------------------ */

/* Inception(in, ch1x1, ch3x3red, ch3x3, ch5x5red, ch5x5, pool_proj): branch1 (1x1), branch2
 * (1x1, 3x3), branch3 (1x1, then torchvision's 3x3 where the paper has a 5x5: its known
 * deviation, which its weights were trained with), branch4 (3x3 max pool of stride 1,
 * ceil_mode, then 1x1); their concat. */
static int g_inception(NetSpec *s, int in, int ch1, int ch3red, int ch3, int ch5red, int ch5, int pool_proj,
                       const char *pre) {
    int b[4];
    b[0] = BASIC(s, in, ch1, 1, 1, 0, "%s.branch1", pre);
    b[1] = BASIC(s, in, ch3red, 1, 1, 0, "%s.branch2.0", pre);
    b[1] = BASIC(s, b[1], ch3, 3, 1, 1, "%s.branch2.1", pre);
    b[2] = BASIC(s, in, ch5red, 1, 1, 0, "%s.branch3.0", pre);
    b[2] = BASIC(s, b[2], ch5, 3, 1, 1, "%s.branch3.1", pre);
    b[3] = netspec_maxpool_ex(s, in, (PoolArgs){.k = 3, .stride = 1, .pad = 1, .ceil_mode = 1}, "%s.branch4.0", pre);
    b[3] = BASIC(s, b[3], pool_proj, 1, 1, 0, "%s.branch4.1", pre);
    return netspec_concat(s, b, 4, "%s", pre);
}

/* InceptionAux: F.adaptive_avg_pool2d to 4x4, conv (1x1 BasicConv2d to 128), flatten, fc1
 * (2048 -> 1024), F.relu, dropout (p 0.7), fc2; its loss at weight 0.3. */
static void g_aux(NetSpec *s, int in, const char *pre) {
    int x = netspec_adaptive_avgpool(s, in, 4, "%s.avgpool", pre);
    x = BASIC(s, x, 128, 1, 1, 0, "%s.conv", pre);
    x = netspec_flatten(s, x, "%s.flatten", pre);
    x = netspec_linear(s, x, 1024, "%s.fc1", pre);
    x = netspec_relu(s, x, "%s.relu", pre);
    x = netspec_dropout(s, x, 0.7f, "%s.dropout", pre);
    x = netspec_linear(s, x, 0, "%s.fc2", pre);
    netspec_aux_loss(s, x, 0.3f, "%s.loss", pre);
}

void zoo_build_googlenet(NetSpec *s, const ZooNet *z, int width, int blocks) {
    (void)width; (void)blocks;
    /* in, ch1x1, ch3x3red, ch3x3, ch5x5red, ch5x5, pool_proj; a max pool before 3a, 4a, 5a */
    static const struct { const char *name; int c[6]; } mods[9] = {
        {"inception3a", {64, 96, 128, 16, 32, 32}},    {"inception3b", {128, 128, 192, 32, 96, 64}},
        {"inception4a", {192, 96, 208, 16, 48, 64}},   {"inception4b", {160, 112, 224, 24, 64, 64}},
        {"inception4c", {128, 128, 256, 24, 64, 64}},  {"inception4d", {112, 144, 288, 32, 64, 64}},
        {"inception4e", {256, 160, 320, 32, 128, 128}}, {"inception5a", {256, 160, 320, 32, 128, 128}},
        {"inception5b", {384, 192, 384, 48, 128, 128}},
    };
    netspec_init(s, z->name, NET_INIT_GOOGLENET);
    const PoolArgs pool = {.k = 3, .stride = 2, .ceil_mode = 1};
    int h = BASIC(s, NET_INPUT, 64, 7, 2, 3, "conv1");
    h = netspec_maxpool_ex(s, h, pool, "maxpool1");
    h = BASIC(s, h, 64, 1, 1, 0, "conv2");
    h = BASIC(s, h, 192, 3, 1, 1, "conv3");
    h = netspec_maxpool_ex(s, h, pool, "maxpool2");
    int aux_in[2] = {0, 0};
    for (int i = 0; i < 9; i++) {
        if (i == 2) h = netspec_maxpool_ex(s, h, pool, "maxpool3");
        if (i == 7) h = netspec_maxpool_ex(s, h, (PoolArgs){.k = 2, .stride = 2, .ceil_mode = 1}, "maxpool4");
        const int *c = mods[i].c;
        h = g_inception(s, h, c[0], c[1], c[2], c[3], c[4], c[5], mods[i].name);
        if (i == 2) aux_in[0] = h;   /* inception4a */
        if (i == 5) aux_in[1] = h;   /* inception4d */
    }
    g_aux(s, aux_in[0], "aux1");
    g_aux(s, aux_in[1], "aux2");
    h = netspec_avgpool(s, h, "avgpool");
    h = netspec_dropout(s, h, 0.2f, "dropout");
    netspec_linear(s, h, 0, "fc");
}

/* ---- Inception v3 --------------------------------------------------------------------------- */

/* The F.avg_pool2d(x, 3, stride 1, padding 1) of the modules' pool branch (count_include_pad). */
static int avg3(NetSpec *s, int in, const char *pre) {
    return netspec_avgpool_ex(s, in, (PoolArgs){.k = 3, .stride = 1, .pad = 1}, "%s.pool", pre);
}

/* InceptionA(pool_features): 1x1; 1x1, 5x5; 1x1, 3x3, 3x3; pool, 1x1. */
static int inc_a(NetSpec *s, int in, int pool_features, const char *pre) {
    int b[4];
    b[0] = BASIC(s, in, 64, 1, 1, 0, "%s.branch1x1", pre);
    b[1] = BASIC(s, in, 48, 1, 1, 0, "%s.branch5x5_1", pre);
    b[1] = BASIC(s, b[1], 64, 5, 1, 2, "%s.branch5x5_2", pre);
    b[2] = BASIC(s, in, 64, 1, 1, 0, "%s.branch3x3dbl_1", pre);
    b[2] = BASIC(s, b[2], 96, 3, 1, 1, "%s.branch3x3dbl_2", pre);
    b[2] = BASIC(s, b[2], 96, 3, 1, 1, "%s.branch3x3dbl_3", pre);
    b[3] = BASIC(s, avg3(s, in, pre), pool_features, 1, 1, 0, "%s.branch_pool", pre);
    return netspec_concat(s, b, 4, "%s", pre);
}

/* InceptionB: 3x3/2; 1x1, 3x3, 3x3/2; F.max_pool2d(3, 2). */
static int inc_b(NetSpec *s, int in, const char *pre) {
    int b[3];
    b[0] = BASIC(s, in, 384, 3, 2, 0, "%s.branch3x3", pre);
    b[1] = BASIC(s, in, 64, 1, 1, 0, "%s.branch3x3dbl_1", pre);
    b[1] = BASIC(s, b[1], 96, 3, 1, 1, "%s.branch3x3dbl_2", pre);
    b[1] = BASIC(s, b[1], 96, 3, 2, 0, "%s.branch3x3dbl_3", pre);
    b[2] = netspec_maxpool_ex(s, in, (PoolArgs){.k = 3, .stride = 2}, "%s.pool", pre);
    return netspec_concat(s, b, 3, "%s", pre);
}

/* InceptionC(channels_7x7 = c7): 1x1; 1x1, 1x7, 7x1; 1x1, 7x1, 1x7, 7x1, 1x7; pool, 1x1. */
static int inc_c(NetSpec *s, int in, int c7, const char *pre) {
    int b[4];
    b[0] = BASIC(s, in, 192, 1, 1, 0, "%s.branch1x1", pre);
    b[1] = BASIC(s, in, c7, 1, 1, 0, "%s.branch7x7_1", pre);
    b[1] = RECT(s, b[1], c7, 1, 7, "%s.branch7x7_2", pre);
    b[1] = RECT(s, b[1], 192, 7, 1, "%s.branch7x7_3", pre);
    b[2] = BASIC(s, in, c7, 1, 1, 0, "%s.branch7x7dbl_1", pre);
    b[2] = RECT(s, b[2], c7, 7, 1, "%s.branch7x7dbl_2", pre);
    b[2] = RECT(s, b[2], c7, 1, 7, "%s.branch7x7dbl_3", pre);
    b[2] = RECT(s, b[2], c7, 7, 1, "%s.branch7x7dbl_4", pre);
    b[2] = RECT(s, b[2], 192, 1, 7, "%s.branch7x7dbl_5", pre);
    b[3] = BASIC(s, avg3(s, in, pre), 192, 1, 1, 0, "%s.branch_pool", pre);
    return netspec_concat(s, b, 4, "%s", pre);
}

/* InceptionD: 1x1, 3x3/2; 1x1, 1x7, 7x1, 3x3/2; F.max_pool2d(3, 2). */
static int inc_d(NetSpec *s, int in, const char *pre) {
    int b[3];
    b[0] = BASIC(s, in, 192, 1, 1, 0, "%s.branch3x3_1", pre);
    b[0] = BASIC(s, b[0], 320, 3, 2, 0, "%s.branch3x3_2", pre);
    b[1] = BASIC(s, in, 192, 1, 1, 0, "%s.branch7x7x3_1", pre);
    b[1] = RECT(s, b[1], 192, 1, 7, "%s.branch7x7x3_2", pre);
    b[1] = RECT(s, b[1], 192, 7, 1, "%s.branch7x7x3_3", pre);
    b[1] = BASIC(s, b[1], 192, 3, 2, 0, "%s.branch7x7x3_4", pre);
    b[2] = netspec_maxpool_ex(s, in, (PoolArgs){.k = 3, .stride = 2}, "%s.pool", pre);
    return netspec_concat(s, b, 3, "%s", pre);
}

/* InceptionE: 1x1; 1x1, then 1x3 and 3x1 side by side; 1x1, 3x3, then 1x3 and 3x1; pool, 1x1.
 * torchvision's inner torch.cat of each pair and the outer one give the channels in the order
 * of one concat of the six. */
static int inc_e(NetSpec *s, int in, const char *pre) {
    int b[6];
    b[0] = BASIC(s, in, 320, 1, 1, 0, "%s.branch1x1", pre);
    const int t = BASIC(s, in, 384, 1, 1, 0, "%s.branch3x3_1", pre);
    b[1] = RECT(s, t, 384, 1, 3, "%s.branch3x3_2a", pre);
    b[2] = RECT(s, t, 384, 3, 1, "%s.branch3x3_2b", pre);
    int d = BASIC(s, in, 448, 1, 1, 0, "%s.branch3x3dbl_1", pre);
    d = BASIC(s, d, 384, 3, 1, 1, "%s.branch3x3dbl_2", pre);
    b[3] = RECT(s, d, 384, 1, 3, "%s.branch3x3dbl_3a", pre);
    b[4] = RECT(s, d, 384, 3, 1, "%s.branch3x3dbl_3b", pre);
    b[5] = BASIC(s, avg3(s, in, pre), 192, 1, 1, 0, "%s.branch_pool", pre);
    return netspec_concat(s, b, 6, "%s", pre);
}

/* InceptionAux: F.avg_pool2d(5, stride 3), conv0 (1x1 to 128), conv1 (5x5 to 768),
 * F.adaptive_avg_pool2d to 1x1, fc (stddev 0.001); its loss at weight 0.4. Its 5x5 convolution
 * needs a 17x17 map or larger after Mixed_6e: images of 299 pixels or more.
 * torchvision sets stddev 0.01 on conv1, a BasicConv2d, but Inception3's initialisation reads
 * the attribute from the nn.Conv2d and nn.Linear modules it draws: conv1's convolution has
 * none and is drawn at the default 0.1, as here; fc, an nn.Linear, at its 0.001. */
static void v3_aux(NetSpec *s, int in, const char *pre) {
    int x = netspec_avgpool_ex(s, in, (PoolArgs){.k = 5, .stride = 3}, "%s.pool", pre);
    x = BASIC(s, x, 128, 1, 1, 0, "%s.conv0", pre);
    x = BASIC(s, x, 768, 5, 1, 0, "%s.conv1", pre);
    x = netspec_avgpool(s, x, "%s.avgpool", pre);
    x = netspec_linear(s, x, 0, "%s.fc", pre);
    s->node[x].init_std = 0.001f;
    netspec_aux_loss(s, x, 0.4f, "%s.loss", pre);
}

void zoo_build_inception(NetSpec *s, const ZooNet *z, int width, int blocks) {
    (void)width; (void)blocks;
    netspec_init(s, z->name, NET_INIT_INCEPTION);
    const PoolArgs pool = {.k = 3, .stride = 2};
    int h = BASIC(s, NET_INPUT, 32, 3, 2, 0, "Conv2d_1a_3x3");
    h = BASIC(s, h, 32, 3, 1, 0, "Conv2d_2a_3x3");
    h = BASIC(s, h, 64, 3, 1, 1, "Conv2d_2b_3x3");
    h = netspec_maxpool_ex(s, h, pool, "maxpool1");
    h = BASIC(s, h, 80, 1, 1, 0, "Conv2d_3b_1x1");
    h = BASIC(s, h, 192, 3, 1, 0, "Conv2d_4a_3x3");
    h = netspec_maxpool_ex(s, h, pool, "maxpool2");
    h = inc_a(s, h, 32, "Mixed_5b");
    h = inc_a(s, h, 64, "Mixed_5c");
    h = inc_a(s, h, 64, "Mixed_5d");
    h = inc_b(s, h, "Mixed_6a");
    h = inc_c(s, h, 128, "Mixed_6b");
    h = inc_c(s, h, 160, "Mixed_6c");
    h = inc_c(s, h, 160, "Mixed_6d");
    h = inc_c(s, h, 192, "Mixed_6e");
    v3_aux(s, h, "AuxLogits");
    h = inc_d(s, h, "Mixed_7a");
    h = inc_e(s, h, "Mixed_7b");
    h = inc_e(s, h, "Mixed_7c");
    h = netspec_avgpool(s, h, "avgpool");
    h = netspec_dropout(s, h, 0.5f, "dropout");
    netspec_linear(s, h, 0, "fc");
}
