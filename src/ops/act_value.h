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

/* exp for the AVX2 and AVX-512 paths, one value in plain C that GCC vectorises there (fmaf is
 * an instruction on both): x = n ln2 + r with n = rint(x / ln2) and ln2 in two parts, exp(r) by
 * a degree-7 polynomial on |r| <= ln2 / 2, then 2^n applied in two factors so that a subnormal or
 * an infinite result comes out rounded once. The reduction and the coefficients are SLEEF's
 * (expf_u10, the one PyTorch's vectorised kernels call): within 1 ulp of exp over the float
 * range, a NaN in gives a NaN out. glibc's expf is correctly rounded in practice, so a value may
 * differ from it by an ulp: the scalar build (SSE4.1, ONEDNN_MAX_CPU_ISA=SSE41) keeps expf. */
#define EXP_V_ATTR static inline __attribute__((always_inline))
EXP_V_ATTR float exp_v(float x) {
    const float xc = pick(x > 100.0f, 100.0f, pick(x < -104.0f, -104.0f, x));   /* NaN stays */
    const float shifter = 12582912.0f;   /* 1.5 * 2^23: adding it rounds to an integer */
    const float t = xc * 1.442695040888963407359924681001892137f + shifter;
    uint32_t tb;
    memcpy(&tb, &t, sizeof tb);
    const int32_t n = (int32_t)(tb - 0x4B400000u);   /* |n| <= 151, in the low mantissa bits */
    const float nf = t - shifter;
    float r = fmaf(nf, -0.693145751953125f, xc);
    r = fmaf(nf, -1.428606765330187045e-06f, r);
    float u = 0.000198527617612853646278381f;
    u = fmaf(u, r, 0.00139304355252534151077271f);
    u = fmaf(u, r, 0.00833336077630519866943359f);
    u = fmaf(u, r, 0.0416664853692054748535156f);
    u = fmaf(u, r, 0.166666671633720397949219f);
    u = fmaf(u, r, 0.5f);
    u = 1.0f + fmaf(r * r, u, r);
    const int32_t n1 = n / 2, n2 = n - n1;   /* each within the normal exponents */
    const uint32_t b1 = (uint32_t)(n1 + 127) << 23, b2 = (uint32_t)(n2 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    return u * s1 * s2;
}

/* erf for the AVX2 and AVX-512 paths, branch-free so that GCC vectorises it: below 1,
 * x + x r(x^2) with r a degree-6 polynomial; from 1 on, 1 - exp(q(|x| - 1)) with q a degree-11
 * polynomial for log(erfc), exp by exp_v, |x| taken as 4 beyond 4 (erf is 1 in float from 3.92),
 * the sign of x put back. The coefficients are least-squares fits refined toward minimax (in
 * erfc's weight for q) on Chebyshev nodes. Against erf in double, over every float in [0, 5]:
 * within 1.22 ulp (at 0.9989; glibc's erff, 0.97 ulp); -0, +-inf and NaN as erff gives them.
 * PyTorch's own vectorised erf (ATen's Vectorized<float>::erf, Abramowitz and Stegun 7.1.26)
 * and oneDNN's GELU are within 1.5e-7 of erf, about 2.5 ulp below 1. */
EXP_V_ATTR float erf_v(float x) {
    uint32_t xb;
    memcpy(&xb, &x, sizeof xb);
    const float t = fabsf(x), s = x * x;
    float r = 7.889119297e-05f;
    r = fmaf(r, s, -8.020841051e-04f);
    r = fmaf(r, s, 5.189535208e-03f);
    r = fmaf(r, s, -2.685444430e-02f);
    r = fmaf(r, s, 1.128360033e-01f);
    r = fmaf(r, s, -3.761262596e-01f);
    r = fmaf(r, s, 1.283791661e-01f);
    const float small = fmaf(x, r, x);
    const float u = pick(t > 4.0f, 4.0f, t) - 1.0f;   /* NaN stays */
    float q = 7.232105759e-08f;
    q = fmaf(q, u, -1.029708301e-06f);
    q = fmaf(q, u, 6.468876109e-06f);
    q = fmaf(q, u, -2.178538671e-05f);
    q = fmaf(q, u, 2.047873568e-05f);
    q = fmaf(q, u, 2.413632465e-04f);
    q = fmaf(q, u, -1.979699126e-03f);
    q = fmaf(q, u, 1.003431529e-02f);
    q = fmaf(q, u, -4.156117514e-02f);
    q = fmaf(q, u, -8.431072235e-01f);
    q = fmaf(q, u, -2.638967514e+00f);
    q = fmaf(q, u, -1.849605560e+00f);
    float large = 1.0f - exp_v(q);
    uint32_t lb;
    memcpy(&lb, &large, sizeof lb);
    lb |= xb & 0x80000000u;
    memcpy(&large, &lb, sizeof large);
    return pick(t < 1.0f, small, large);
}

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

/* ---- the same with exp_v and erf_v, for the vector paths (see exp_v, erf_v): silu, sigmoid
 * and gelu, whose loops then vectorise. gelu_tanh and tanh keep libm's tanhf, which no vector
 * path replaces. ---- */

EXP_V_ATTR float silu_fv(float x, float s) { (void)s; return x / (1.0f + exp_v(-x)); }
EXP_V_ATTR float sigmoid_fv(float x, float s) { (void)s; return 1.0f / (1.0f + exp_v(-x)); }
EXP_V_ATTR float silu_bv(float x, float d, float s) {
    (void)s;
    const float sig = 1.0f / (1.0f + exp_v(-x));
    return d * sig * (1.0f + x * (1.0f - sig));
}
EXP_V_ATTR float sigmoid_bv(float x, float d, float s) {
    const float y = sigmoid_fv(x, s);
    return d * (1.0f - y) * y;
}
EXP_V_ATTR float gelu_fv(float x, float s) { (void)s; return x * 0.5f * (1.0f + erf_v(x * GELU_ERF_ALPHA)); }
EXP_V_ATTR float gelu_bv(float x, float d, float s) {
    (void)s;
    const float cdf = 0.5f * (1.0f + erf_v(x * GELU_ERF_ALPHA));
    const float pdf = GELU_ERF_PDF * exp_v(x * x * -0.5f);
    return d * (cdf + x * pdf);
}

#endif
