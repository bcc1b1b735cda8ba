/* SPDX-License-Identifier: BSD-3-Clause */
/* half.c - see half.h. */
#include <string.h>

#include "half.h"

/* bf16 is float32's upper half: round the lower half away, to nearest even. */
static uint16_t bf16_from_float(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);   /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static float bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* fp16 through the compiler's _Float16 (GCC >= 12 and clang on x86-64): its conversions are
 * IEEE's, rounding, subnormals and overflow included, in hardware where F16C is enabled and in
 * libgcc otherwise. */
static uint16_t fp16_from_float(float x) {
    _Float16 h = (_Float16)x;
    uint16_t u;
    memcpy(&u, &h, sizeof u);
    return u;
}

static float fp16_to_float(uint16_t u) {
    _Float16 h;
    memcpy(&h, &u, sizeof h);
    return (float)h;
}

uint16_t half_from_float(HalfKind k, float x) { return k == HALF_BF16 ? bf16_from_float(x) : fp16_from_float(x); }
float half_to_float(HalfKind k, uint16_t h) { return k == HALF_BF16 ? bf16_to_float(h) : fp16_to_float(h); }

void half_pack(HalfKind k, uint16_t *dst, const float *src, size_t n) {
    if (k == HALF_BF16)
        for (size_t i = 0; i < n; i++) dst[i] = bf16_from_float(src[i]);
    else
        for (size_t i = 0; i < n; i++) dst[i] = fp16_from_float(src[i]);
}

void half_unpack(HalfKind k, float *dst, const uint16_t *src, size_t n, float divisor) {
    if (k == HALF_BF16)
        for (size_t i = 0; i < n; i++) dst[i] = bf16_to_float(src[i]) / divisor;
    else
        for (size_t i = 0; i < n; i++) dst[i] = fp16_to_float(src[i]) / divisor;
}

void half_sum(HalfKind k, const uint16_t *in, uint16_t *inout, size_t n) {
    if (k == HALF_BF16)
        for (size_t i = 0; i < n; i++) inout[i] = bf16_from_float(bf16_to_float(in[i]) + bf16_to_float(inout[i]));
    else
        for (size_t i = 0; i < n; i++) inout[i] = fp16_from_float(fp16_to_float(in[i]) + fp16_to_float(inout[i]));
}
