/* SPDX-License-Identifier: BSD-3-Clause */
/* linear_cpu.h - the CPU backend's linear layer (nn.Linear): oneDNN's sgemm on fixed blocks
 * of the output when oneDNN is available, and the reference loops.
 *
 * Layouts as ops_cpu.h: x[N,I] and y[N,O] row-major float32, the weight [O,I] (PyTorch's) and
 * the bias [O] inside the flat parameter buffer; weight and bias gradients ACCUMULATED (+=),
 * the input gradient overwritten. Results depend only on the data and the shapes, never on the
 * number of threads: each block of the output is one single-threaded sgemm, and the blocks are
 * cut by the shape alone (linear_cpu.c). */
#ifndef DDP_LINEAR_CPU_H
#define DDP_LINEAR_CPU_H

/* y[N,O] = x[N,I] w[O,I]^T + b[O]; b NULL (and db below): a layer without bias. */
void linear_forward(const float *x, const float *w, const float *b, float *y, int N, int I, int O);
/* dw += dy^T x; db += sum_n dy; dx = dy w (overwritten) unless dx == NULL. */
void linear_backward(const float *x, const float *w, const float *dy, float *dx, float *dw,
                     float *db, int N, int I, int O);

/* bfloat16 (torch.autocast's linear): with 1, x, w and dy enter the products rounded to
 * bfloat16 (nearest even), the products and their sums in float32 and the outputs float32. The
 * products of two bf16 values are exact in float32, so this is a bf16 GEMM with float32
 * accumulation, computed by sgemm on the rounded copies: the numbers of bf16, not its speed
 * (the classifier is a small part of a convnet's work). Default 0. */
void linear_use_bf16(int enable);

/* The reference loops (double accumulation): the backend without oneDNN, and what the tests
 * compare the fast path against. Same contract. */
void linear_reference_forward(const float *x, const float *w, const float *b, float *y, int N,
                              int I, int O);
void linear_reference_backward(const float *x, const float *w, const float *dy, float *dx,
                               float *dw, float *db, int N, int I, int O);

#endif
