/* SPDX-License-Identifier: BSD-3-Clause */
/* test_refusals.c - a backend that lacks an operation refuses, before anything is allocated and
 * in one line naming the network, the node and what is missing, every network that needs it,
 * and takes every network that does not. The backend here is the CPU's with the operations the
 * CUDA backend leaves NULL (src/cuda/backend_cuda.c: a ReLU outside a batch norm, max pooling,
 * the blur, the activation functions, the
 * squeeze-excitation multiply, dropout, stochastic depth, a convolution's bias, grouped and
 * dilated convolutions, the batch norm fused with an activation, and the operations of the
 * joins, pools and norms of torchvision's other families), which tests/test_refusals.sh
 * checks against that file; so every built-in network is tried as the GPU would try it.
 * Exit status 0 when everything holds. */
#include <stdio.h>
#include <string.h>

#include "model/model.h"
#include "model/netfile.h"
#include "model/zoo.h"

static int g_failed, g_checks;

static void check(int ok, const char *what, const char *detail) {
    g_checks++;
    if (!ok) g_failed++;
    printf("%s: %s%s%s\n", ok ? "ok" : "FAIL", what, detail ? ": " : "", detail ? detail : "");
}

/* The networks built of ResNet's kinds only, without max pooling (MiniResNet): the lacking
 * backend must take them. */
static int resnet_kinds_only(const NetSpec *s) {
    for (int i = 0; i < s->n; i++) {
        const NetNode *n = &s->node[i];
        if (n->kind != NODE_CONV && n->kind != NODE_BN && n->kind != NODE_RELU && n->kind != NODE_ADD &&
            n->kind != NODE_AVGPOOL && n->kind != NODE_LINEAR)
            return 0;
        /* a ReLU runs in the batch norm's step it follows (directly, or through its add) */
        if (n->kind == NODE_RELU && (n->in < 0 || (s->node[n->in].kind != NODE_BN && s->node[n->in].kind != NODE_ADD))) return 0;
        if (n->kind == NODE_CONV && (n->groups > 1 || n->dilation > 1 || n->bias || n->k != n->kw)) return 0;
        if (n->kind == NODE_AVGPOOL && n->k > 0) return 0;   /* windowed */
    }
    return 1;
}

int main(void) {
    Backend lacking = backend_cpu;
    lacking.name = "lacking";
    lacking.relu_forward = NULL;
    lacking.maxpool_forward = NULL;
    lacking.maxpool_backward = NULL;
    lacking.blur = NULL;
    lacking.act_forward = NULL;
    lacking.act_backward = NULL;
    lacking.mul_forward = NULL;
    lacking.mul_backward = NULL;
    lacking.dropout_mask = NULL;
    lacking.dropout_apply = NULL;
    lacking.sample_scale = NULL;
    lacking.bias_add = NULL;
    lacking.bias_grad = NULL;
    lacking.conv_grouped = 0;
    lacking.bn_apply_act = NULL;
    lacking.bn_backward_reduce_act = NULL;
    /* the joins, pools and norms of the other families (concat, split, channel_shuffle,
     * flatten, windowed and adaptive average pools, layernorm, layer_scale, transform_input) */
    lacking.channel_copy = NULL;
    lacking.channel_shuffle = NULL;
    lacking.transpose = NULL;
    lacking.channel_scale_forward = NULL;
    lacking.channel_scale_backward = NULL;
    lacking.channel_affine = NULL;
    lacking.avgpool2d_forward = NULL;
    lacking.avgpool2d_backward = NULL;
    lacking.adaptive_avgpool_forward = NULL;
    lacking.adaptive_avgpool_backward = NULL;
    lacking.layernorm_forward = NULL;
    lacking.layernorm_backward = NULL;
    int refused = 0, taken = 0;
    for (int i = 0; i < zoo_count(); i++) {
        const char *name = zoo_name(i);
        NetSpec net;
        char err[512];
        if (zoo_build(&net, name, 16, 1, err, sizeof err) != 0) {
            check(0, name, err);
            continue;
        }
        const int expect_ok = resnet_kinds_only(&net);
        Model m;
        err[0] = 0;
        /* 8 classes at 64 px (AlexNet's windows need 63; Inception v3 at 299, the least its
         * auxiliary classifier takes), one image: every network resolves, and a refusal must
         * come before any allocation, so that it costs nothing */
        const int size = !strcmp(name, "inception_v3") ? 299 : 64;
        const int rc = model_init_net(&m, &lacking, &net, name, 8, size, 1, err, sizeof err);
        if (expect_ok) {
            check(rc == 0, name, rc == 0 ? "taken (only ResNet's kinds)" : err);
            if (rc == 0) { model_free(&m); taken++; }
        } else {
            char want[96];
            snprintf(want, sizeof want, "%s: node \"", name);
            const int one_line = strchr(err, '\n') == NULL && strstr(err, want) == err &&
                                 strstr(err, "the lacking backend has no ") != NULL;
            check(rc != 0 && one_line, name, err[0] ? err : "taken");
            if (rc == 0) model_free(&m);
            refused += rc != 0;
        }
        netspec_free(&net);
    }
    /* a bias alone, a dilated convolution alone, and each new kind alone, in network files */
    const char *files[][2] = {
        {"{\"nodes\": [{\"name\": \"c\", \"kind\": \"conv\", \"out_channels\": 4, \"kernel\": 3, \"bias\": true},"
         "{\"name\": \"p\", \"kind\": \"avgpool\"}, {\"name\": \"fc\", \"kind\": \"linear\"}]}",
         "convolution bias"},
        {"{\"nodes\": [{\"name\": \"c\", \"kind\": \"conv\", \"out_channels\": 4, \"kernel\": 3, \"dilation\": 2},"
         "{\"name\": \"p\", \"kind\": \"avgpool\"}, {\"name\": \"fc\", \"kind\": \"linear\"}]}",
         "dilated convolution"},
        {"{\"nodes\": [{\"name\": \"c\", \"kind\": \"conv\", \"out_channels\": 4, \"kernel\": [1, 3]},"
         "{\"name\": \"p\", \"kind\": \"avgpool\"}, {\"name\": \"fc\", \"kind\": \"linear\"}]}",
         "rectangular kernel"},
        {"{\"nodes\": [{\"name\": \"c\", \"kind\": \"concat\", \"in\": [\"input\", \"input\"]},"
         "{\"name\": \"p\", \"kind\": \"avgpool\"}, {\"name\": \"fc\", \"kind\": \"linear\"}]}",
         "channel copies"},
        {"{\"nodes\": [{\"name\": \"c\", \"kind\": \"avgpool\", \"kernel\": 2},"
         "{\"name\": \"p\", \"kind\": \"avgpool\"}, {\"name\": \"fc\", \"kind\": \"linear\"}]}",
         "windowed average pooling"},
        {"{\"nodes\": [{\"name\": \"c\", \"kind\": \"layernorm\"},"
         "{\"name\": \"p\", \"kind\": \"avgpool\"}, {\"name\": \"fc\", \"kind\": \"linear\"}]}",
         "layer norm"},
        {"{\"nodes\": [{\"name\": \"c\", \"kind\": \"adaptive_avgpool\", \"output_size\": 1},"
         "{\"name\": \"fc\", \"kind\": \"linear\"}]}",
         "adaptive average pooling"},
        {"{\"nodes\": [{\"name\": \"p\", \"kind\": \"avgpool\"}, {\"name\": \"f\", \"kind\": \"flatten\"},"
         "{\"name\": \"fc\", \"kind\": \"linear\"}]}",
         "flatten"}};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        NetSpec net;
        char err[512];
        if (netfile_parse(files[f][0], strlen(files[f][0]), "net.json", &net, err, sizeof err) != 0) {
            check(0, files[f][1], err);
            continue;
        }
        Model m;
        const int rc = model_init_net(&m, &lacking, &net, "net.json", 8, 16, 1, err, sizeof err);
        check(rc != 0 && strstr(err, files[f][1]) != NULL, files[f][1], rc ? err : "taken");
        if (rc == 0) model_free(&m);
        netspec_free(&net);
    }
    printf("%d networks refused and %d taken by a backend without the new operations\n", refused, taken);
    printf("%d of %d checks failed\n", g_failed, g_checks);
    return g_failed ? 1 : 0;
}
