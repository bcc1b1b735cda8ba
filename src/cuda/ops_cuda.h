/* SPDX-License-Identifier: BSD-3-Clause */
/* ops_cuda.h - the GPU kernels of any network description (netspec.h) whose operations they
 * cover: those of conv_cpu.h and ops_cpu.h on device memory, but for max pooling, the blur and
 * a ReLU after no batch norm, which the CUDA backend does not have yet (backend.h).
 *
 * Part of the CUDA backend module, ddptrain-cuda.so: programs reach the device through its
 * table (cuda_plugin.h), which exports the calls below that they need; only the GPU tests link
 * these functions directly. The CUDA_AMP_* values (cuda_amp.h) are shared with the table's
 * set_amp.
 *
 * Same contract as conv_cpu.h and ops_cpu.h, with every tensor argument a DEVICE pointer:
 *  - activations NHWC float32, convolution weights OIHW inside the flat parameter buffer;
 *  - parameter gradients are ACCUMULATED (+=), activation gradients overwritten;
 *  - batch-norm per-channel sums are double, so sums all-reduced over ranks are exact enough
 *    to make synchronised batch norm independent of how the batch is split.
 * Differences from the CPU contract, each to avoid a host round trip per layer:
 *  - the batch-norm element count is a device scalar (an all-reduced count stays on the GPU);
 *  - softmax_xent writes the loss and the number of correct rows to device memory;
 *  - a bad label does not stop the process inside the op: it sets a flag that the next
 *    cuda_sync() reports (with the op's name).
 *
 * Everything runs on one compute stream in issue order, so the caller needs no synchronisation
 * between ops; cuda_download and cuda_sync wait for the stream. Every reduction has a fixed
 * order that depends only on the shapes (no floating-point atomics), so a run reproduces bit for
 * bit on the same GPU model; TF32 is off unless cuda_set_tf32(1), so the results agree with the
 * CPU backend to float32 round-off.
 *
 * Failures of CUDA, cuDNN or cuBLAS calls after cuda_backend_init print the call, file:line and
 * the library's message, and exit (fail_at). Only cuda_backend_init reports failure by return
 * value, so that a caller can fall back to the CPU backend. */
#ifndef DDP_OPS_CUDA_H
#define DDP_OPS_CUDA_H

#include <stddef.h>

#include "cuda_amp.h"
#include "ops/backend.h"   /* ConvShape, conv_out_size */

#ifdef __cplusplus
extern "C" {
#endif

/* cudaStream_t without including the CUDA headers (it is `struct CUstream_st *`). */
struct CUstream_st;

/* ---- context: device, compute stream, cuDNN and cuBLAS handles, scratch ---- */

/* Select `device`, create the compute stream and the library handles bound to it. Returns 0,
 * or -1 with one line in err when there is no usable GPU (no driver, no device, device out of
 * range, a library that does not initialise): the caller then uses the CPU backend. */
int cuda_backend_init(int device, char *err, size_t errlen);
/* GPUs this process sees; 0 when there is no driver or no device. Needs no init. */
int cuda_device_count(void);
/* Release everything cuda_backend_init created. Idempotent. */
void cuda_backend_free(void);
/* Nonzero between a successful cuda_backend_init and cuda_backend_free. */
int cuda_backend_active(void);
/* The device selected by cuda_backend_init. */
int cuda_device(void);
/* The stream every op below is issued on. */
struct CUstream_st *cuda_compute_stream(void);

/* "CUDA: NVIDIA H200 (sm_90, 140 GiB, 132 SMs), driver 13.0, runtime 13.0, cuDNN 9.19.0,
 * cuBLAS 13.0.0, TF32 off". Valid until the next call. */
const char *cuda_describe(void);

/* TF32 tensor cores for the float32 convolutions and matrix products: faster, ~1e-3 relative
 * error. Off by default. Applies to convolutions initialised afterwards and to the next
 * cuBLAS call. */
void cuda_set_tf32(int enable);
/* Weight layout the convolutions hand cuDNN: -1 (default) OIHW, the flat buffer itself, when
 * cuDNN offers algorithms for OIHW weights with NHWC activations, else OHWI; 0 always OIHW;
 * 1 always OHWI, a reordered copy refreshed after cuda_conv2d_weights_changed (and a
 * gradient reordered back). Applies to convolutions initialised afterwards. */
void cuda_set_conv_filter_layout(int mode);
/* Mixed precision of the convolutions: CUDA_AMP_OFF (float32, the default), CUDA_AMP_BF16 or
 * CUDA_AMP_FP16. With AMP a convolution runs on the tensor cores in the 16-bit type with
 * float32 accumulation, as under torch.autocast: its input and weights are rounded to the
 * 16-bit type, its outputs (activation, input gradient, weight gradient) rounded from it and
 * widened back to float32, where everything else (batch norm, the head, the loss, the master
 * weights, the gradients and their all-reduce, SGD) stays. A layer for which cuDNN offers no
 * 16-bit algorithm (e.g. the 3-channel first convolution on some versions) stays in float32; the layer's
 * impl name says which. Applies to convolutions initialised afterwards. The modes are in
 * cuda_amp.h. */
void cuda_set_amp(int mode);
/* Element type of the activations and their gradients in device memory: CUDA_AMP_OFF (float32,
 * the default) or the 16-bit type, as torch.autocast leaves them, which halves the memory
 * traffic of every op around the convolutions. Every activation argument of the ops below
 * (conv x, y, dy, dx; batch-norm x, y, residual, dy, g, dx; avgpool x and dx; relu_mask_copy;
 * add_act_inplace) then points to elements of that type (typed float * for the interface);
 * statistics, parameters, gradients of parameters, the head and the loss stay float32, and
 * every op still computes in float32 (double for sums), rounding only what it stores. A layer
 * whose convolution runs in another type (a float32 fallback) converts on the way. Set it
 * before the model allocates (cuda_act_bytes). */
void cuda_set_act_storage(int mode);
size_t cuda_act_bytes(void);
/* The model's float32 input batch as activations: x itself for float32 storage, else the n
 * values converted into scratch (device memory of n * cuda_act_bytes()), which is returned. */
const float *cuda_act_input(const float *x, size_t n, float *scratch);
/* Convolution algorithm choice: 0 (default) the cuDNN heuristics, the same choice on every
 * run; 1 time the candidates once per shape (cudnnFind*), usually faster but the choice, and
 * so the low bits of the results, can differ between runs. Only deterministic algorithms are
 * taken either way. Applies to shapes seen afterwards. */
void cuda_set_conv_benchmark(int enable);

/* Wait for the compute stream, then report (and exit on) an asynchronous error or a flag set
 * by a kernel; `where` names the caller's step in the message. */
void cuda_sync(const char *where);

/* Device memory. Allocation failure is fatal. cuda_free(NULL) is a no-op. */
void *cuda_malloc(size_t bytes);
void cuda_free(void *p);
/* Blocking copies (ordered after the work queued on the compute stream). */
void cuda_upload(void *dst_dev, const void *src_host, size_t bytes);
void cuda_download(void *dst_host, const void *src_dev, size_t bytes);
/* Asynchronous on the compute stream. */
void cuda_memset_zero(void *dst_dev, size_t bytes);
void cuda_copy(void *dst_dev, const void *src_dev, size_t bytes);

/* ---- convolution (cuDNN) ---- */

typedef struct CudaConv2d {
    ConvShape shape;
    void *impl;           /* descriptors and algorithms per input shape, weight copy */
} CudaConv2d;

/* c->shape = *shape (which conv_shape_valid must accept). */
void cuda_conv2d_init(CudaConv2d *c, const ConvShape *shape);
void cuda_conv2d_free(CudaConv2d *c);
/* y[N,Ho,Wo,C_out] = conv(x[N,H,W,C_in], w[C_out,C_in,k,k]). */
void cuda_conv2d_forward(CudaConv2d *c, int N, int H, int W, const float *x, const float *w, float *y);
/* dw += dL/dw (OIHW); dx = dL/dx (overwritten) unless dx == NULL. */
void cuda_conv2d_backward(CudaConv2d *c, int N, int H, int W, const float *x, const float *w,
                          const float *dy, float *dx, float *dw);
/* Call after every change of the weights (optimizer step, load): a layer that keeps a
 * reordered copy of the weights refreshes it on its next forward. */
void cuda_conv2d_weights_changed(CudaConv2d *c);
/* The cuDNN algorithms chosen for this shape and the weight layout, e.g.
 * "fwd IMPLICIT_PRECOMP_GEMM / bwd-data ALGO_1 / bwd-filter ALGO_1, filter OIHW". */
const char *cuda_conv2d_impl_name(CudaConv2d *c, int N, int H, int W);

/* ---- batch norm over [M, C] ---- */

/* Per-channel sum and sum of squares of x in double; count (may be NULL) receives M. */
void cuda_bn_stats(const float *x, size_t M, int C, double *sum, double *sumsq, double *count);
/* mean, invstd and the running-statistics update (running_* may be NULL), from sums over
 * *count values; count is a device scalar. Per channel rules.h's bn_finalize_channel, as on
 * the CPU. */
void cuda_bn_finalize_stats(const double *sum, const double *sumsq, const double *count, int C,
                            float eps, float momentum, float *mean, float *invstd,
                            float *running_mean, float *running_var);
/* Evaluation: mean = running_mean, invstd = rules.h's bn_eval_invstd of running_var, as on the CPU. */
void cuda_bn_eval_stats(const float *running_mean, const float *running_var, int C, float eps,
                        float *mean, float *invstd);
/* y = gamma*(x-mean)*invstd + beta [+ residual] [then ReLU]; residual may be NULL. */
void cuda_bn_apply(const float *x, float *y, size_t M, int C, const float *mean,
                   const float *invstd, const float *gamma, const float *beta,
                   const float *residual, int relu);
/* g = relu ? dy*(y>0) : dy (g may alias dy); sum_g = sum(g), sum_gx = sum(g*xhat), double. */
void cuda_bn_backward_reduce(const float *x, const float *y, const float *dy, float *g, size_t M,
                             int C, const float *mean, const float *invstd, int relu,
                             double *sum_g, double *sum_gx);
/* dgamma += local_sum_gx, dbeta += local_sum_g (either may be NULL), and
 * dx = gamma*invstd*(g - global_sum_g/count - xhat*global_sum_gx/count); dx may alias g.
 * count is a device scalar. */
void cuda_bn_backward_apply(const float *x, const float *g, float *dx, size_t M, int C,
                            const float *mean, const float *invstd, const float *gamma,
                            const double *local_sum_g, const double *local_sum_gx,
                            const double *global_sum_g, const double *global_sum_gx,
                            const double *count, float *dgamma, float *dbeta);

/* ---- head ---- */

void cuda_avgpool_forward(const float *x, float *y, int N, int HW, int C);
void cuda_avgpool_backward(const float *dy, float *dx, int N, int HW, int C);
/* y[N,O] = x[N,I] w[O,I]^T + b[O] (cuBLAS). */
void cuda_linear_forward(const float *x, const float *w, const float *b, float *y, int N, int I, int O);
/* dw += dy^T x; db += sum_n dy; dx = dy w (overwritten) unless dx == NULL. */
void cuda_linear_backward(const float *x, const float *w, const float *dy, float *dx, float *dw,
                          float *db, int N, int I, int O);
/* Mean softmax cross-entropy over N rows of K logits into *loss (device float). `smoothing`
 * must be 0 and `mix` 1: label smoothing and mixed targets (ops_cpu.h's softmax_xent) are the
 * CPU's only until a kernel for them has run on a GPU. dlogits (may be NULL) receives
 * d(loss*scale)/dlogits; *correct (device int, may be NULL) the number of rows whose argmax is
 * the label. A label outside [0, K) sets the flag cuda_sync reports. */
void cuda_softmax_xent(const float *logits, const int *labels, int N, int K, float scale,
                       float smoothing, float mix, float *dlogits, float *loss, int *correct);

/* ---- elementwise helpers of the model's backward, and the optimizer ---- */

/* g = g * (y > 0) in place, and out = the same. */
void cuda_relu_mask_copy(float *g, const float *y, float *out, size_t n);
/* d += s, float32. */
void cuda_add_inplace(float *d, const float *s, size_t n);
/* d += s on activations (cuda_set_act_storage). */
void cuda_add_act_inplace(float *d, const float *s, size_t n);
/* x *= *s (s a device scalar). */
void cuda_scale_inplace(float *x, size_t n, const float *s);
/* x[i] /= d, correctly rounded, float32 or (f64) float64, queued on `stream`: the division of
 * COMM_AVG after the sum (comm.h), on the communication stream that did the sum. */
void cuda_div_inplace(void *x, size_t n, int f64, int d, struct CUstream_st *stream);
/* The loss scaler's two steps (scaler.h, Backend.unscale_check / scaler_update). */
void cuda_unscale_check(float *g, size_t n, const float *scale, int *found_inf);
void cuda_scaler_update(float *scale, int *state, float growth, float backoff, int interval);
/* SGD with momentum and weight decay over the flat buffers, optim.c's rule and rounding:
 * d = g + wd*p; buf = momentum ? buf*momentum + d : d; p -= lr*buf. buf starts zeroed.
 * `nesterov` must be 0: Nesterov momentum is the CPU's only until it has run on a GPU.
 * Nothing changes when skip (a device int, may be NULL) is nonzero as the kernel runs. */
void cuda_sgd_step(float *params, const float *grads, float *buf, size_t n, float lr,
                   float momentum, float weight_decay, int nesterov, const int *skip);

#ifdef __cplusplus
}
#endif

#endif
