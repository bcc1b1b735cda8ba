/* SPDX-License-Identifier: BSD-3-Clause */
/* backend_cpu.c - the Backend over host memory: oneDNN convolutions (conv_cpu.c), the linear layer
 * (linear_cpu.c, oneDNN's sgemm) and the OpenMP kernels of ops_cpu.c, act_cpu.c, scale_cpu.c and optim_cpu.c. Counts, loss and correct-count pointers are plain host variables here. */
#include <math.h>
#include <string.h>
#include <stdint.h>

#include "act_cpu.h"
#include "backend.h"
#include "conv_cpu.h"
#include "linear_cpu.h"
#include "ops_cpu.h"
#include "optim_cpu.h"
#include "rules.h"
#include "scale_cpu.h"
#include "channels_cpu.h"
#include "layernorm_cpu.h"
#include "pool_cpu.h"
#include "base/util.h"

static void *cpu_alloc(size_t bytes) { return alignedAllocCheck(bytes); }
static void cpu_release(void *p) { free(p); }
static void cpu_copy(void *dst, const void *src, size_t bytes) { if (bytes) memmove(dst, src, bytes); }
static void cpu_zero(void *p, size_t bytes) { if (bytes) memset(p, 0, bytes); }

static void cpu_bn_stats(const float *x, size_t M, int C, double *sum, double *sumsq, double *count) {
    bn_stats(x, M, C, sum, sumsq);
    *count = (double)M;
}

static void cpu_bn_finalize_stats(const double *sum, const double *sumsq, const double *count, int C,
                                  float eps, float momentum, float *mean, float *invstd, float *rm,
                                  float *rv) {
    bn_finalize_stats(sum, sumsq, *count, C, eps, momentum, mean, invstd, rm, rv);
}

static void cpu_bn_eval_stats(const float *rm, const float *rv, int C, float eps, float *mean,
                              float *invstd) {
    memcpy(mean, rm, (size_t)C * sizeof(float));
    for (int i = 0; i < C; i++) invstd[i] = bn_eval_invstd(rv[i], eps);
}

static void cpu_bn_backward_apply(const float *x, const float *g, float *dx, size_t M, int C,
                                  const float *mean, const float *invstd, const float *gamma,
                                  const double *lsg, const double *lsgx, const double *gsg,
                                  const double *gsgx, const double *count, float *dgamma,
                                  float *dbeta) {
    bn_backward_apply(x, g, dx, M, C, mean, invstd, gamma, lsg, lsgx, gsg, gsgx, *count, dgamma, dbeta);
}

static void cpu_softmax_xent(const float *logits, const int *labels, int N, int K, float scale,
                             float smoothing, float mix, float *dlogits, float *loss, int *correct) {
    *loss = softmax_xent(logits, labels, N, K, scale, smoothing, mix, dlogits, correct);
}

static void cpu_relu_forward(const float *restrict x, float *restrict y, size_t n) {
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) y[i] = x[i] < 0.0f ? 0.0f : x[i];   /* NaN stays NaN, as torch.relu */
}

/* bfloat16 is the upper half of a float32: widening is a shift, exact for every value. */
static void cpu_widen_bf16(const void *x, float *restrict y, size_t n) {
    const uint16_t *restrict h = x;
    uint32_t *restrict u = (uint32_t *)y;
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) u[i] = (uint32_t)h[i] << 16;
}

static void cpu_relu_mask_copy(float *restrict g, const float *restrict y, float *restrict out, size_t n) {
    #pragma omp parallel for simd schedule(static)
    for (size_t j = 0; j < n; j++) {
        float v = y[j] > 0.0f ? g[j] : 0.0f;
        g[j] = v;
        out[j] = v;
    }
}

static void cpu_add_inplace(float *restrict d, const float *restrict s, size_t n) {
    #pragma omp parallel for simd schedule(static)
    for (size_t j = 0; j < n; j++) d[j] += s[j];
}

/* Same operation order and float rounding as torch.optim.SGD's foreach path, so a comparison
 * after several steps stays within float round-off. With buf zeroed, the first step's
 * mom*0 + d equals PyTorch's buf = d exactly. Nesterov (PyTorch's nesterov=True) steps along
 * d + mom*buf instead of buf; its own loop, so the plain step's code is what it always was. */
static void cpu_sgd_step(float *restrict params, const float *restrict grads, float *restrict buf,
                         size_t n, float lr, float mom, float wd, int nesterov, const int *skip) {
    if (skip && *skip) return;
    if (nesterov) {
        #pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < n; i++) {
            float d = grads[i] + wd * params[i];
            float b = mom != 0.0f ? buf[i] * mom + d : d;
            buf[i] = b;
            float u = d + mom * b;
            params[i] = params[i] - lr * u;
        }
        return;
    }
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        float d = grads[i] + wd * params[i];
        float b = mom != 0.0f ? buf[i] * mom + d : d;
        buf[i] = b;
        params[i] = params[i] - lr * b;
    }
}

static void cpu_scale_inplace(float *restrict x, size_t n, const float *s) {
    const float f = *s;
    #pragma omp parallel for simd schedule(static)
    for (size_t j = 0; j < n; j++) x[j] *= f;
}

/* GradScaler's unscale: multiply by the reciprocal (exact: scales are powers of two). */
static void cpu_unscale_check(float *restrict g, size_t n, const float *scale, int *found_inf) {
    const float inv = (float)(1.0 / (double)*scale);
    int bad = 0;
    #pragma omp parallel for simd schedule(static) reduction(|:bad)
    for (size_t j = 0; j < n; j++) {
        const float v = g[j] * inv;
        bad |= !isfinite(v);
        g[j] = v;
    }
    if (bad) *found_inf = 1;
}

static void cpu_scaler_update(float *scale, int *state, float growth, float backoff, int interval) {
    scaler_update_rule(scale, state, growth, backoff, interval);
}

static size_t cpu_act_bytes(void) { return sizeof(float); }
static const float *cpu_act_input(const float *x, size_t n, float *scratch) {
    (void)n; (void)scratch;
    return x;
}

static void cpu_synchronize(void) {}

const Backend backend_cpu = {
    .name = "cpu",
    .on_device = 0,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_copy,
    .download = cpu_copy,
    .zero = cpu_zero,
    .copy = cpu_copy,
    .conv2d_init = conv2d_init,
    .conv2d_free = conv2d_free,
    .conv2d_forward = conv2d_forward,
    .conv2d_backward = conv2d_backward,
    .conv2d_weights_changed = conv2d_weights_changed,
    .conv2d_memory = conv2d_memory,
    .conv2d_is_bf16 = conv2d_is_bf16,
    .conv2d_bf16_io = conv2d_bf16_io,
    .widen_bf16 = cpu_widen_bf16,
    .narrow_bf16 = conv2d_narrow_bf16,
    .conv_grouped = 1,
    .bias_add = bias_add,
    .bias_grad = bias_grad,
    .bn_stats = cpu_bn_stats,
    .bn_finalize_stats = cpu_bn_finalize_stats,
    .bn_eval_stats = cpu_bn_eval_stats,
    .bn_apply = bn_apply,
    .bn_backward_reduce = bn_backward_reduce,
    .bn_backward_apply = cpu_bn_backward_apply,
    .avgpool_forward = avgpool_forward,
    .avgpool_backward = avgpool_backward,
    .relu_forward = cpu_relu_forward,
    .maxpool_forward = maxpool_forward,
    .maxpool_backward = maxpool_backward,
    .channel_copy = channel_copy,
    .channel_shuffle = channel_shuffle,
    .transpose = transpose,
    .channel_scale_forward = channel_scale_forward,
    .channel_scale_backward = channel_scale_backward,
    .channel_affine = channel_affine,
    .avgpool2d_forward = avgpool2d_forward,
    .avgpool2d_backward = avgpool2d_backward,
    .adaptive_avgpool_forward = adaptive_avgpool_forward,
    .adaptive_avgpool_backward = adaptive_avgpool_backward,
    .layernorm_forward = layernorm_forward,
    .layernorm_backward = layernorm_backward,
    .blur = blur3,
    .act_forward = act_forward,
    .act_backward = act_backward,
    .mul_forward = mul_forward,
    .mul_backward = mul_backward,
    .dropout_mask = dropout_mask,
    .dropout_apply = dropout_apply,
    .sample_scale = sample_scale,
    .bn_apply_act = bn_apply_act,
    .bn_backward_reduce_act = bn_backward_reduce_act,
    .linear_forward = linear_forward,
    .linear_backward = linear_backward,
    .softmax_xent = cpu_softmax_xent,
    .relu_mask_copy = cpu_relu_mask_copy,
    .add_inplace = cpu_add_inplace,
    .act_bytes = cpu_act_bytes,
    .act_input = cpu_act_input,
    .add_act_inplace = cpu_add_inplace,
    .scale_inplace = cpu_scale_inplace,
    .unscale_check = cpu_unscale_check,
    .scaler_update = cpu_scaler_update,
    .sgd_step = cpu_sgd_step,
    .sumsq = optim_cpu_sumsq,
    .adamw_step = optim_cpu_adamw,
    .rmsprop_step = optim_cpu_rmsprop,
    .lamb_moments = optim_cpu_lamb_moments,
    .lamb_apply = optim_cpu_lamb_apply,
    .lars_step = optim_cpu_lars,
    .synchronize = cpu_synchronize,
    .describe = ops_cpu_describe,
};
