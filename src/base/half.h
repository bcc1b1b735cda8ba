/* SPDX-License-Identifier: BSD-3-Clause */
/* half.h - float32 <-> 16-bit float conversions for compressed gradient all-reduce
 * (--comm_dtype bf16|fp16), and the elementwise sum the reduction applies to them.
 *
 * Both conversions to 16 bits round to nearest, ties to even, as PyTorch's .to(bfloat16) and
 * .to(float16) do. bf16 keeps float32's exponent range and 8 bits of mantissa; fp16 has 11
 * bits of mantissa but overflows above 65504 and loses gradients below 6e-8 (subnormals
 * below 6.1e-5). A NaN stays a NaN, an infinity an infinity. */
#ifndef DDP_HALF_H
#define DDP_HALF_H

#include <stddef.h>
#include <stdint.h>

typedef enum { HALF_BF16, HALF_FP16 } HalfKind;

uint16_t half_from_float(HalfKind k, float x);
float half_to_float(HalfKind k, uint16_t h);

/* dst[i] = half(src[i]), and back: dst[i] = float(src[i]) / divisor (a division, as COMM_AVG
 * does, not a multiplication by 1/divisor). */
void half_pack(HalfKind k, uint16_t *dst, const float *src, size_t n);
void half_unpack(HalfKind k, float *dst, const uint16_t *src, size_t n, float divisor);

/* inout[i] = half(float(in[i]) + float(inout[i])): the two values added in float32 (exact
 * unless their exponents differ by more than 15), then rounded to 16 bits. Each step of the
 * all-reduce does this, in the order the MPI library chooses: a sum over W ranks is rounded to
 * 16 bits W-1 times. */
void half_sum(HalfKind k, const uint16_t *in, uint16_t *inout, size_t n);

#endif
