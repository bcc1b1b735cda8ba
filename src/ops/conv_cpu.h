/* SPDX-License-Identifier: BSD-3-Clause */
/* conv_cpu.h - the CPU backend's convolutions: oneDNN primitives cached per shape,
 * winograd.c's F(4x4, 3x3) and depthwise.c's depthwise convolution where they are faster, and
 * the reference convolution.
 *
 * Everything nn.Conv2d computes but the bias (ops_cpu.h's bias_add and bias_grad add it):
 * groups (depthwise when groups == C_in, with a channel multiplier when C_out is a multiple of
 * it) and dilation, any stride and padding. Layouts as ops_cpu.h: activations NHWC float32,
 * weights [C_out, C_in/groups, k, k] (PyTorch's OIHW) inside the flat parameter buffer, weight
 * gradients ACCUMULATED (+=), input gradients overwritten. Winograd takes only dense
 * undilated 3x3 stride-1 convolutions. */
#ifndef DDP_CONV_CPU_H
#define DDP_CONV_CPU_H

#include "backend.h"   /* Conv2d, ConvShape, conv_out_size */

/* c->shape = *shape with groups and dilation of 0 made 1 (conv_shape_norm; conv_shape_valid
 * must accept it); primitives come with the first call at each input size. */
void conv2d_init(Conv2d *c, const ConvShape *shape);
void conv2d_free(Conv2d *c);

/* y[N,Ho,Wo,C_out] = conv(x[N,H,W,C_in], w[C_out,C_in/groups,k,k]). The batch size N may change
 * between calls (training vs evaluation, a short last batch); primitives are cached per shape. */
void conv2d_forward(Conv2d *c, int N, int H, int W, const float *x, const float *w, float *y);

/* Given dy[N,Ho,Wo,C_out]: dw += dL/dw (OIHW); dx = dL/dx (overwritten) unless dx == NULL.
 * Results depend only on the data and the shapes, not on the thread count, except winograd.c's
 * (repeatable for one thread count; winograd.h). */
void conv2d_backward(Conv2d *c, int N, int H, int W, const float *x, const float *w,
                     const float *dy, float *dx, float *dw);

/* Weights are reordered into the backend's preferred layout once per optimizer step rather
 * than on every call; the model calls this after every change of the parameters. */
void conv2d_weights_changed(Conv2d *c);

/* Backend.conv2d_memory: the memory the kernel this shape selects needs. For oneDNN's, the
 * plan is made (and kept, as the first call would make it): its workspace, its primitives'
 * scratchpads with the guard after them, and its copies of the weights. */
void conv2d_memory(Conv2d *c, int N, int H, int W, ConvMemory *m);

/* Winograd for the 3x3 stride-1 convs (default on; faster, within ~1e-5 of direct): winograd.c's
 * F(4x4, 3x3) or oneDNN's, whichever conv_cpu.c selects for the ISA and the shape. Applies to
 * convs initialised afterwards. No effect without oneDNN. */
void conv2d_use_winograd(int enable);

/* With 0, only oneDNN's Winograd (AVX-512 only) is used where it applies: for benchmarks and
 * tests that compare the two. Default 1. Applies to convs initialised afterwards. */
void conv2d_use_own_winograd(int enable);

/* With 0, the depthwise convolutions go through oneDNN even where depthwise.c is selected: for
 * benchmarks and tests that compare the two. Default 1. Applies to convs initialised
 * afterwards. */
void conv2d_use_own_depthwise(int enable);

/* bfloat16 (torch.autocast's convolution): with 1, the convs initialised afterwards compute
 * through oneDNN with src, weights and diff_dst rounded to bfloat16 (nearest even), sums in
 * float32, dst and diff_src rounded to bfloat16 (as autocast returns them) and diff_weights
 * written in float32; the interfaces stay float32 tensors.
 * winograd.c and depthwise.c (float32 kernels) are not used for them; a shape for which oneDNN
 * has only its reference bf16 loops stays float32 (oneDNN's direct kernels) and is counted by
 * conv2d_bf16_fallbacks. Default 0: float32 throughout. */
void conv2d_use_bf16(int enable);
int conv2d_bf16_fallbacks(void);
/* Whether this conv at this shape computes in bf16 (makes its plan). */
int conv2d_is_bf16(Conv2d *c, int N, int H, int W);
/* Backend.conv2d_bf16_io, for a conv that computes in bf16 (conv2d_is_bf16 at the model's
 * batch): from then on conv2d_forward and _backward take x as bfloat16 NHWC (uint16_t
 * elements) with `in`, and conv2d_forward writes y as bfloat16 NHWC with `out`: y the values
 * the float32 y held (oneDNN's dst rounded to bf16, widened exactly), x the values its ports
 * made of a float32 x. dy and dx stay float32. At another batch size where oneDNN has only its
 * reference bf16 loops the plan is float32, and its ports widen x and round y. */
void conv2d_bf16_io(Conv2d *c, int in, int out);
/* Backend.narrow_bf16: y[i] = x[i] rounded to bfloat16 by oneDNN's reorder, the conversion a
 * bf16 convolution applies to a float32 input (nearest even). */
void conv2d_narrow_bf16(const float *x, void *y, size_t n);

/* What oneDNN does with bf16 on this CPU, and the implementation a probe 3x3 conv gets (impl). */
typedef enum { CPU_BF16_NONE, CPU_BF16_EMULATED, CPU_BF16_NATIVE } CpuBf16Path;
CpuBf16Path conv2d_bf16_path(char *impl, size_t n);

/* Name of the implementation the backend picked for the forward of this conv at this shape:
 * oneDNN's ("brgconv:avx512_core", "jit_dw:avx2"), "winograd4x3:avx512", "own_dw:avx512". */
const char *conv2d_impl_name(Conv2d *c, int N, int H, int W);

/* The reference convolution (direct loops, double accumulation): the backend without oneDNN,
 * and what the tests compare oneDNN against. Same contract as conv2d_forward/_backward. */
void conv2d_reference_forward(const Conv2d *c, int N, int H, int W, const float *x,
                              const float *w, float *y);
void conv2d_reference_backward(const Conv2d *c, int N, int H, int W, const float *x,
                               const float *w, const float *dy, float *dx, float *dw);

/* The CPU backend's description, which is that of its dense convolutions, the bulk of a ResNet's work:
 * "oneDNN 2.6.3 (3x3 s1: winograd4x3:avx512, 3x3 s2: brgconv:avx512_core)". */
const char *ops_cpu_describe(void);

#endif
