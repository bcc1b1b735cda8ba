/* SPDX-License-Identifier: BSD-3-Clause */
/* act_cpu.c - see act_cpu.h.
 *
 * Each function is written as ATen 1.13's CPU kernel writes it: the same float operations in
 * the same order. Where its vectorised lambda and its scalar one disagree (at a bound, or on a
 * NaN), the vectorised one is followed: it is the one that computes all but the last few values
 * of a tensor. So the only differences from PyTorch are those of the transcendental functions
 * (glibc's expf, erff, tanhf here; SLEEF's, ATen's own erf, or oneDNN's GELU there), and
 * tests/test_act_torch.sh finds the same numbers where PyTorch runs over the same libm. The
 * backward formulas are those of PyTorch's derivatives.yaml:
 *   relu6        hardtanh(x, 0, 6) = clamp; backward hardtanh_backward: dy strictly inside
 *                (0, 6), else 0 (both bounds and a NaN give 0)
 *   hardswish    x * min(max(x + 3, 0), 6) / 6; backward 0 below -3, dy from 3 up (3 included:
 *                the vectorised lambda's rule; the scalar one gives 1.5 dy there), else
 *                dy * (x / 3 + 0.5) (a NaN gives NaN)
 *   hardsigmoid  min(max(x + 3, 0), 6) / 6; backward dy * (1/6) strictly inside (-3, 3), else 0
 *   silu         x / (1 + exp(-x)); backward dy * s * (1 + x * (1 - s)), s = 1 / (1 + exp(-x))
 *   sigmoid      1 / (1 + exp(-x)); backward sigmoid_backward(dy, y) = dy * (1 - y) * y, y the
 *                output: recomputed here from x, to the same bits, since the node keeps x
 *   gelu         x * 0.5 * (1 + erf(x / sqrt 2)); backward dy * (cdf + x * pdf), GeluKernel.cpp's
 *                (PyTorch runs oneDNN's GELU instead where it is built with it: its erf differs
 *                by an ulp or two)
 *   gelu_tanh    0.5 * x * (1 + tanh(b * (x + k x^3))), GeluKernel.cpp's constants; its backward
 *   tanh         tanh(x); backward tanh_backward(dy, y) = dy * (1 - y * y), y recomputed
 *   leaky_relu   x > 0 ? x : x * slope; backward x > 0 ? dy : dy * slope
 * min and max are std::min and std::max: a NaN input comes out NaN, as in PyTorch.
 *
 * The functions one value at a time are act_value.h's. The piecewise-linear ones vectorise
 * (their choices become blends, see pick there); the others call libm once or twice per value,
 * which strict IEEE flags keep scalar, except silu, sigmoid and gelu on the AVX2 and AVX-512
 * paths, which use act_value.h's exp_v (within an ulp of expf) and erf_v (within 1.22 ulp of
 * erf, glibc's erff 0.97) and vectorise. */
#include "act_cpu.h"

#include "act_value.h"
#include "backend.h"
#include "cpu_isa.h"
#include "base/util.h"

/* One loop per function, the switch outside it. y may be x (dx may be dy): each value is read
 * before its own output is written, which is all that simd needs. */
#define FWD_LOOP(F)                                                 \
    do {                                                            \
        _Pragma("omp simd")                                         \
        for (size_t i = 0; i < n; i++) y[i] = F(x[i], slope);       \
    } while (0)
#define BWD_LOOP(F)                                                 \
    do {                                                            \
        _Pragma("omp simd")                                         \
        for (size_t i = 0; i < n; i++) dx[i] = F(x[i], dy[i], slope); \
    } while (0)

/* Each span function three times, for the paths of cpu_isa.h: the SSE4.1 one with libm's expf
 * and erff (PyTorch's plain kernels' numbers), the AVX2 and AVX-512 ones with exp_v for silu,
 * sigmoid and gelu and erf_v for gelu (act_value.h: within an ulp or so of expf and erff, as
 * SLEEF's exp and ATen's own erf are in PyTorch's vectorised kernels). V is empty or v: the
 * suffix of the vector flavours. */
#define SPANS(sfx, attr, V)                                                                     \
    attr static void fwd_##sfx(int fn, float slope, const float *x, float *y, size_t n) {         \
        switch (fn) {                                                                            \
        case ACT_RELU6: FWD_LOOP(relu6_f); break;                                                \
        case ACT_HARDSWISH: FWD_LOOP(hardswish_f); break;                                        \
        case ACT_HARDSIGMOID: FWD_LOOP(hardsigmoid_f); break;                                    \
        case ACT_SILU: FWD_LOOP(silu_f##V); break;                                               \
        case ACT_SIGMOID: FWD_LOOP(sigmoid_f##V); break;                                         \
        case ACT_GELU: FWD_LOOP(gelu_f##V); break;                                               \
        case ACT_GELU_TANH: FWD_LOOP(gelu_tanh_f); break;                                        \
        case ACT_TANH: FWD_LOOP(tanh_f); break;                                                  \
        case ACT_LEAKY_RELU: FWD_LOOP(leaky_relu_f); break;                                      \
        default: CHECK(!"act_forward: fn is one of ActFn");                                      \
        }                                                                                        \
    }                                                                                            \
    attr static void bwd_##sfx(int fn, float slope, const float *x, const float *dy, float *dx,  \
                               size_t n) {                                                       \
        switch (fn) {                                                                            \
        case ACT_RELU6: BWD_LOOP(relu6_b); break;                                                \
        case ACT_HARDSWISH: BWD_LOOP(hardswish_b); break;                                        \
        case ACT_HARDSIGMOID: BWD_LOOP(hardsigmoid_b); break;                                    \
        case ACT_SILU: BWD_LOOP(silu_b##V); break;                                               \
        case ACT_SIGMOID: BWD_LOOP(sigmoid_b##V); break;                                         \
        case ACT_GELU: BWD_LOOP(gelu_b##V); break;                                               \
        case ACT_GELU_TANH: BWD_LOOP(gelu_tanh_b); break;                                        \
        case ACT_TANH: BWD_LOOP(tanh_b); break;                                                  \
        case ACT_LEAKY_RELU: BWD_LOOP(leaky_relu_b); break;                                      \
        default: CHECK(!"act_backward: fn is one of ActFn");                                     \
        }                                                                                        \
    }

SPANS(sse41, , )
SPANS(avx2, CPU_ISA_ATTR_AVX2, v)
SPANS(avx512, CPU_ISA_ATTR_AVX512, v)

void act_forward_span(int fn, float slope, const float *x, float *y, size_t n) {
    const int isa = cpu_isa();
    (isa == CPU_ISA_AVX512 ? fwd_avx512 : isa == CPU_ISA_AVX2 ? fwd_avx2 : fwd_sse41)(fn, slope, x, y, n);
}

void act_backward_span(int fn, float slope, const float *x, const float *dy, float *dx, size_t n) {
    const int isa = cpu_isa();
    (isa == CPU_ISA_AVX512 ? bwd_avx512 : isa == CPU_ISA_AVX2 ? bwd_avx2 : bwd_sse41)(fn, slope, x, dy, dx, n);
}

/* Blocks of a fixed size, so the switch runs once per block, and one block (a small map: a
 * squeeze-excitation's [N, C]) starts no threads. */
#define ACT_BLOCK 8192

void act_forward(int fn, float slope, const float *x, float *y, size_t n) {
    const size_t nb = (n + ACT_BLOCK - 1) / ACT_BLOCK;
    #pragma omp parallel for schedule(static) if (nb > 1)
    for (size_t b = 0; b < nb; b++) {
        const size_t i0 = b * ACT_BLOCK, m = n - i0 < ACT_BLOCK ? n - i0 : ACT_BLOCK;
        act_forward_span(fn, slope, x + i0, y + i0, m);
    }
}

void act_backward(int fn, float slope, const float *x, const float *dy, float *dx, size_t n) {
    const size_t nb = (n + ACT_BLOCK - 1) / ACT_BLOCK;
    #pragma omp parallel for schedule(static) if (nb > 1)
    for (size_t b = 0; b < nb; b++) {
        const size_t i0 = b * ACT_BLOCK, m = n - i0 < ACT_BLOCK ? n - i0 : ACT_BLOCK;
        act_backward_span(fn, slope, x + i0, dy + i0, dx + i0, m);
    }
}
