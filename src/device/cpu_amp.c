/* SPDX-License-Identifier: BSD-3-Clause */
/* cpu_amp.c - see cpu_amp.h. */
#include "build_config.h"

#include "cpu_amp.h"

#include <stdio.h>
#include <string.h>

#include "ops/conv_cpu.h"
#include "ops/cpu_isa.h"
#include "ops/linear_cpu.h"
#include "base/util.h"

static struct {
    int on;
    CpuBf16Path path;
    char impl[64];   /* oneDNN's implementation of a probe 3x3 conv in bf16 */
} g_amp;

int cpu_amp_configure(const Config *c) {
    if (c->use_amp != 1) return 0;   /* auto and off: float32 on the CPU */
    if (strcmp(c->amp_dtype, "bf16") != 0)
        die_code(2, "--amp_dtype %s: the CPU backend's --use_amp computes in bf16 only (pass --amp_dtype bf16, "
                 "or --no-use_amp)", c->amp_dtype);
    g_amp.path = conv2d_bf16_path(g_amp.impl, sizeof g_amp.impl);
    if (g_amp.path == CPU_BF16_NONE)
        die_code(2, "--use_amp: oneDNN has no bfloat16 kernels for this CPU's ISA (%s; they need AVX-512), at best "
                 "its reference loops, far slower than float32: pass --no-use_amp", cpu_isa_name(cpu_isa()));
    conv2d_use_bf16(1);
    linear_use_bf16(1);
    g_amp.on = 1;
    return 1;
}

void cpu_amp_describe(const Config *c, char *out, size_t n) {
    (void)c;
    if (!g_amp.on) {
        snprintf(out, n, "float32");
        return;
    }
    snprintf(out, n, "mixed precision bf16, float32 master weights: %s (bf16 convolutions: %s; Winograd and "
             "ddptrain's own depthwise kernels are float32 and not used)",
             g_amp.path == CPU_BF16_NATIVE ? "bf16 native (avx512_bf16/amx)"
                                           : "bf16 emulated on avx512_core: slower than float32",
             g_amp.impl);
}

typedef struct {
    int N, total, f32;
    char list[1000];   /* "node (C_in->C_out kxkw /stride groups G, HxW), ...", cut with "..." */
} ConvCount;

static void count_conv(void *ctx, const char *node, Conv2d *conv, int H, int W) {
    ConvCount *cc = ctx;
    cc->total++;
    if (conv2d_is_bf16(conv, cc->N, H, W)) return;
    cc->f32++;
    const ConvShape *sh = &conv->shape;
    char one[200];
    snprintf(one, sizeof one, "%s%s (%d->%d %dx%d /%d groups %d, %dx%d)", cc->f32 > 1 ? ", " : "", node, sh->C_in,
             sh->C_out, sh->k, sh->kw, sh->stride, sh->groups, H, W);
    const size_t used = strlen(cc->list);
    if (used + strlen(one) + 5 < sizeof cc->list) memcpy(cc->list + used, one, strlen(one) + 1);
    else if (!strstr(cc->list, ", ...")) snprintf(cc->list + used, sizeof cc->list - used, ", ...");
}

void cpu_amp_log_convs(Model *m, int N, Logger *log) {
    if (!g_amp.on) return;
    ConvCount cc = { .N = N };
    model_each_conv(m, count_conv, &cc);
    size_t saved = 0;
    const int stored = model_bf16_outputs(m, &saved);
    char out[160];
    snprintf(out, sizeof out, "; %d of their outputs stored in 16 bits (%.0f MiB less)", stored,
             (double)saved / 1048576.0);
    if (!cc.f32)
        log_info(log, "--use_amp: all %d convolutions compute in bf16 at batch %d%s", cc.total, N, out);
    else
        log_info(log, "--use_amp: %d of %d convolutions compute in bf16 at batch %d; %d stay float32, oneDNN having "
                 "only its reference bf16 loops for their shapes: %s%s", cc.total - cc.f32, cc.total, N, cc.f32, cc.list,
                 out);
}
