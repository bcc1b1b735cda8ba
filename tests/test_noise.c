/* SPDX-License-Identifier: BSD-3-Clause */
/* test_noise.c - the draws of dropout and stochastic depth as the model makes them
 * (model_set_noise, kind_drop.c): over many training forwards the share of values (dropout) and
 * of images (stochastic depth) dropped is p within 5 standard deviations, a kept value is
 * scaled by 1/(1-p) and a dropped one is 0; the masks are a function of (seed, step, rank,
 * micro-batch): the same for the same four, other for another step, rank or micro-batch; and
 * evaluation drops nothing. Exit status 0 when everything holds. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "model/model.h"
#include "model/netfile.h"

static int g_failed, g_checks;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...) {
    g_checks++;
    if (!ok) g_failed++;
    printf("%s: ", ok ? "ok" : "FAIL");
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

static const char NET[] =
    "{\"nodes\": [{\"name\": \"c\", \"kind\": \"conv\", \"out_channels\": 4, \"kernel\": 3},"
    "{\"name\": \"sd\", \"kind\": \"stochastic_depth\", \"p\": 0.3},"
    "{\"name\": \"p\", \"kind\": \"avgpool\"},"
    "{\"name\": \"d\", \"kind\": \"dropout\", \"p\": 0.2},"
    "{\"name\": \"fc\", \"kind\": \"linear\"}]}";

enum { N = 64, S = 8, K = 10, FORWARDS = 200 };

/* The masks of the last forward: dropout's keep flags (N x 4) and the images' factors (N). */
static void masks(const Model *m, unsigned char *keep, float *scale) {
    for (int k = 0; k < model_noise_count(m); k++) {
        NodeKind kind;
        int H, W, C;
        const void *p = model_noise_mask(m, k, &kind, &H, &W, &C);
        if (kind == NODE_DROPOUT) memcpy(keep, p, (size_t)N * H * W * C);
        else memcpy(scale, p, N * sizeof(float));
    }
}

int main(void) {
    NetSpec net;
    char err[512];
    if (netfile_parse(NET, strlen(NET), "net.json", &net, err, sizeof err) != 0) die("%s", err);
    Model m;
    if (model_init_net(&m, &backend_cpu, &net, "net.json", K, S, N, err, sizeof err) != 0) die("%s", err);
    model_init_weights(&m, 1);
    float *x = mallocCheck((size_t)N * S * S * 3 * sizeof(float));
    int y[N];
    for (size_t i = 0; i < (size_t)N * S * S * 3; i++) x[i] = (float)sin((double)i);
    for (int i = 0; i < N; i++) y[i] = i % K;

    unsigned char keep[N * 4], keep2[N * 4];
    float scale[N], scale2[N];
    long dropped_v = 0, dropped_i = 0, bad_scale = 0;
    const float kept_sd = 1.0f / (1.0f - 0.3f);
    for (int s = 0; s < FORWARDS; s++) {
        model_set_noise(&m, 42, (uint64_t)s, 0, 0);
        model_forward(&m, x, y, N, 1, 1.0f, NULL);
        masks(&m, keep, scale);
        for (int i = 0; i < N * 4; i++) dropped_v += !keep[i];
        for (int i = 0; i < N; i++) {
            dropped_i += scale[i] == 0.0f;
            bad_scale += scale[i] != 0.0f && scale[i] != kept_sd;
        }
    }
    const double nv = (double)N * 4 * FORWARDS, ni = (double)N * FORWARDS;
    const double rv = dropped_v / nv, ri = dropped_i / ni;
    check(fabs(rv - 0.2) <= 5 * sqrt(0.2 * 0.8 / nv), "dropout p 0.2: %.4f of the values dropped (%g draws)", rv, nv);
    check(fabs(ri - 0.3) <= 5 * sqrt(0.3 * 0.7 / ni), "stochastic depth p 0.3: %.4f of the images dropped (%g)", ri,
          ni);
    check(bad_scale == 0, "a kept image scaled by 1/(1-p): %ld of them otherwise", bad_scale);

    /* the same four numbers, the same masks; another step, rank or micro-batch, others */
    model_set_noise(&m, 42, 7, 1, 0);
    model_forward(&m, x, y, N, 1, 1.0f, NULL);
    masks(&m, keep, scale);
    model_set_noise(&m, 42, 7, 1, 0);
    model_forward(&m, x, y, N, 1, 1.0f, NULL);
    masks(&m, keep2, scale2);
    check(!memcmp(keep, keep2, sizeof keep) && !memcmp(scale, scale2, sizeof scale),
          "(seed, step, rank, micro) draws the same masks again");
    const uint64_t other[3][3] = {{8, 1, 0}, {7, 0, 0}, {7, 1, 1}};
    for (int o = 0; o < 3; o++) {
        model_set_noise(&m, 42, other[o][0], (int)other[o][1], (int)other[o][2]);
        model_forward(&m, x, y, N, 1, 1.0f, NULL);
        masks(&m, keep2, scale2);
        check(memcmp(keep, keep2, sizeof keep) != 0 && memcmp(scale, scale2, sizeof scale) != 0,
              "another %s draws other masks", o == 0 ? "step" : o == 1 ? "rank" : "micro-batch");
    }
    model_forward(&m, x, y, N, 0, 1.0f, NULL);
    int none = 1;
    for (int k = 0; k < model_noise_count(&m); k++) {
        NodeKind kind;
        int H, W, C;
        none &= model_noise_mask(&m, k, &kind, &H, &W, &C) == NULL;
    }
    check(none, "evaluation drops nothing");
    printf("%d of %d checks failed\n", g_failed, g_checks);
    free(x);
    model_free(&m);
    netspec_free(&net);
    return g_failed ? 1 : 0;
}
