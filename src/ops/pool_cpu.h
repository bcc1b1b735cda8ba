/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_cpu.h - the CPU kernels of the windowed and adaptive average pools (backend.h's
 * contract): nn.AvgPool2d with ceil_mode and count_include_pad (DenseNet's transitions,
 * Inception's 3x3 pools at stride 1, its auxiliary classifier's 5x5 at stride 3) and
 * nn.AdaptiveAvgPool2d to an output size (AlexNet's 6x6, VGG's 7x7, GoogLeNet's auxiliary 4x4).
 * The global pool to 1x1 is ops_cpu.h's avgpool.
 *
 * NHWC float32. Each output sums its window in row-major order in float, as PyTorch's CPU
 * kernels do, then divides; the backwards spread each output's gradient over its window, an
 * image per thread in a fixed order: the same bits on any number of threads. */
#ifndef DDP_POOL_CPU_H
#define DDP_POOL_CPU_H

/* x[N,H,W,C] -> y[N,Ho,Wo,C], the k x k window of output (oh, ow) starting at
 * (oh * stride - pad, ow * stride - pad); Ho and Wo as pool_out_size (backend.h) gives them for
 * the node's ceil_mode. The divisor is PyTorch's: the window clipped to the padded input when
 * count_pad, else to the input itself. */
void avgpool2d_forward(const float *x, float *y, int N, int H, int W, int C, int Ho, int Wo, int k, int stride,
                       int pad, int count_pad);
/* dx (overwritten) from dy, the same windows and divisors. */
void avgpool2d_backward(const float *dy, float *dx, int N, int H, int W, int C, int Ho, int Wo, int k, int stride,
                        int pad, int count_pad);

/* Output (oh, ow) is the mean of rows floor(oh H / Ho) .. ceil((oh + 1) H / Ho) - 1, and the
 * same along the width (PyTorch's adaptive windows, which overlap when Ho does not divide H and
 * repeat pixels when Ho > H). */
void adaptive_avgpool_forward(const float *x, float *y, int N, int H, int W, int C, int Ho, int Wo);
void adaptive_avgpool_backward(const float *dy, float *dx, int N, int H, int W, int C, int Ho, int Wo);

#endif
