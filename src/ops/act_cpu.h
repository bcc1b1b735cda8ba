/* SPDX-License-Identifier: BSD-3-Clause */
/* act_cpu.h - the CPU kernels of the activation functions of an "act" node (backend.h's
 * ActFn): y = f(x) and dx = dy * f'(x), each as PyTorch 1.13's CPU float32 kernel computes it
 * and as its autograd formula differentiates it (act_cpu.c says which, function by function).
 *
 * The functions are value by value, so every result depends on its own input alone: the same
 * bits on any number of threads. */
#ifndef DDP_ACT_CPU_H
#define DDP_ACT_CPU_H

#include <stddef.h>

/* y = f(x) over n values (fn one of ActFn, slope leaky_relu's negative slope), OpenMP over the
 * values. y may be x. */
void act_forward(int fn, float slope, const float *x, float *y, size_t n);

/* dx = dy * f'(x) over n values, overwritten, OpenMP over the values. dx may be dy. */
void act_backward(int fn, float slope, const float *x, const float *dy, float *dx, size_t n);

/* The same on the calling thread alone, for a caller that splits the values itself. */
void act_forward_span(int fn, float slope, const float *x, float *y, size_t n);
void act_backward_span(int fn, float slope, const float *x, const float *dy, float *dx, size_t n);

#endif
