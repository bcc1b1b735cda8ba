/* SPDX-License-Identifier: BSD-3-Clause */
/* act_value.h - the activation functions of act_cpu.h one value at a time, f(x) and dy * f'(x),
 * for the loops that apply them (act_cpu.c's, and the batch norm's that applies one in its own
 * pass, ops_cpu.c): NAME_f(x, slope) and NAME_b(x, dy, slope). act_cpu.c says which PyTorch
 * formula each follows. Private to src/ops/. */
#ifndef DDP_ACT_VALUE_H
#define DDP_ACT_VALUE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* c ? a : b, chosen on the bits. GCC (trapping math) will not turn a plain choice into a vector
 * blend when an arm holds arithmetic that the scalar code might skip, and it moves arithmetic
 * done before the choice into the arms (a clamp's / 6 folds to 0 and 1 there); a choice of bits
 * it leaves alone, so every piecewise function below vectorises. Both arms are computed, so
 * only the value chosen matters: the result is the plain choice's, bit for bit. */
static inline float pick(int c, float a, float b) {
    uint32_t ua, ub, r;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    const uint32_t m = -(uint32_t)(c != 0);
    r = (ua & m) | (ub & ~m);
    float f;
    memcpy(&f, &r, sizeof f);
    return f;
}

/* std::min(std::max(x, lo), hi): x when a comparison fails, so a NaN comes out NaN */
static inline float clamp_s(float x, float lo, float hi) {
    const float t = pick(x < lo, lo, x);
    return pick(hi < t, hi, t);
}

/* GeluKernel.cpp's constants, computed in double and rounded to float as scalar_t(...) does */
#define GELU_TANH_BETA ((float)(M_SQRT2 * M_2_SQRTPI * 0.5))
#define GELU_TANH_KAPPA 0.044715f
#define GELU_ERF_ALPHA ((float)M_SQRT1_2)                       /* forward: erf(x * alpha) */
#define GELU_ERF_PDF ((float)(M_2_SQRTPI * M_SQRT1_2 * 0.5))   /* backward: 1 / sqrt(2 pi) */

/* ---- forward, one value ---- */

static inline float relu6_f(float x, float s) { (void)s; return clamp_s(x, 0.0f, 6.0f); }
static inline float hardswish_f(float x, float s) { (void)s; return x * clamp_s(x + 3.0f, 0.0f, 6.0f) / 6.0f; }
static inline float hardsigmoid_f(float x, float s) { (void)s; return clamp_s(x + 3.0f, 0.0f, 6.0f) / 6.0f; }
static inline float silu_f(float x, float s) { (void)s; return x / (1.0f + expf(-x)); }
static inline float sigmoid_f(float x, float s) { (void)s; return 1.0f / (1.0f + expf(-x)); }
static inline float gelu_f(float x, float s) { (void)s; return x * 0.5f * (1.0f + erff(x * GELU_ERF_ALPHA)); }
static inline float gelu_tanh_f(float x, float s) {
    (void)s;
    const float x_cube = x * x * x;
    const float inner = GELU_TANH_BETA * (x + GELU_TANH_KAPPA * x_cube);
    return 0.5f * x * (1.0f + tanhf(inner));
}
static inline float tanh_f(float x, float s) { (void)s; return tanhf(x); }
static inline float leaky_relu_f(float x, float s) { return pick(x > 0.0f, x, x * s); }

/* ---- backward, one value: dy * f'(x) ---- */

static inline float relu6_b(float x, float d, float s) { (void)s; return pick((x > 0.0f) & (x < 6.0f), d, 0.0f); }
static inline float hardswish_b(float x, float d, float s) {
    (void)s;
    return pick(x < -3.0f, 0.0f, pick(x >= 3.0f, d, d * (x / 3.0f + 0.5f)));
}
static inline float hardsigmoid_b(float x, float d, float s) {
    (void)s;
    return pick((x > -3.0f) & (x < 3.0f), d * (1.0f / 6.0f), 0.0f);
}
static inline float silu_b(float x, float d, float s) {
    (void)s;
    const float sig = 1.0f / (1.0f + expf(-x));
    return d * sig * (1.0f + x * (1.0f - sig));
}
static inline float sigmoid_b(float x, float d, float s) {
    const float y = sigmoid_f(x, s);
    return d * (1.0f - y) * y;
}
static inline float gelu_b(float x, float d, float s) {
    (void)s;
    const float cdf = 0.5f * (1.0f + erff(x * GELU_ERF_ALPHA));
    const float pdf = GELU_ERF_PDF * expf(x * x * -0.5f);
    return d * (cdf + x * pdf);
}
static inline float gelu_tanh_b(float x, float d, float s) {
    (void)s;
    const float x_sq = x * x;
    const float x_cube = x_sq * x;
    const float inner = GELU_TANH_BETA * (x + GELU_TANH_KAPPA * x_cube);
    const float tanh_inner = tanhf(inner);
    const float left = 0.5f * x;
    const float right = 1.0f + tanh_inner;
    const float left_derivative = 0.5f * right;
    const float tanh_derivative = 1.0f - tanh_inner * tanh_inner;
    const float inner_derivative = GELU_TANH_BETA * (1.0f + 3.0f * GELU_TANH_KAPPA * x_sq);
    const float right_derivative = left * tanh_derivative * inner_derivative;
    return d * (left_derivative + right_derivative);
}
static inline float tanh_b(float x, float d, float s) {
    (void)s;
    const float y = tanhf(x);
    return d * (1.0f - y * y);
}
static inline float leaky_relu_b(float x, float d, float s) { return pick(x > 0.0f, d, d * s); }

#endif
