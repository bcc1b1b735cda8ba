/* SPDX-License-Identifier: BSD-3-Clause */
/* backend.h - the operations a network needs (model.c), as a table one backend fills.
 *
 * The model, the optimizer and the reducer call only through a Backend, so the same code
 * trains on the CPU (backend_cpu: oneDNN convolutions, conv_cpu.h, and OpenMP kernels,
 * ops_cpu.h) or on a GPU (backend_cuda: cuDNN, cuBLAS and CUDA kernels, ops_cuda.h). Every
 * pointer an operation takes is the backend's memory (host memory for the CPU, device memory
 * for CUDA); host code moves data in and out with upload/download. Semantics are conv_cpu.h's
 * and ops_cpu.h's, with one difference that keeps device backends free of host round trips:
 * element counts, the loss and the number of correct predictions live in backend memory
 * (`count`, `loss`, `correct`). */
#ifndef DDP_BACKEND_H
#define DDP_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {   /* ops_cuda.cu includes it (ConvShape) */
#endif

/* A convolution's shape: everything a backend needs to set one up, as nn.Conv2d's arguments.
 * Callers use designated initialisers, so a member left out is 0: groups and dilation of 0
 * mean 1 (conv_shape_norm), and a plain dense convolution names neither. */
typedef struct ConvShape {
    int C_in, C_out;     /* input and output channels */
    int k;               /* the kernel is k x k, or k x kw */
    int stride, pad;     /* stride along both axes; pad pixels of zeros above and below (and on
                          * the left and right for a square kernel) */
    int groups;          /* C_in and C_out split into this many independent convolutions; 0: 1 */
    int dilation;        /* spacing of the kernel's taps (nn.Conv2d's dilation); 0: 1 */
    int kw, padw;        /* a k x kw kernel with padw pixels on the left and right (Inception's
                          * (1, 7) and (7, 1)); kw 0: square, kw = k and padw = pad */
} ConvShape;

/* A convolution on some backend: its shape and the backend's state (cached primitives or
 * descriptors per input shape, weight copies, scratch). */
typedef struct Conv2d {
    ConvShape shape;
    void *impl;
} Conv2d;

/* What a convolution takes from a backend besides the model's tensors (model_memory.h): the
 * workspace and the scratchpad its calls need at one shape, which every convolution of the
 * process shares (each grows to the largest need), and what it holds for its lifetime (its
 * weights copied into the layouts its kernels want). */
typedef struct ConvMemory {
    size_t workspace, scratchpad, held;
} ConvMemory;

/* Output size along one axis of a k x k window at `stride` over `in` pixels with `pad` pixels
 * of padding on each side, for convolutions and pooling alike (nn.Conv2d, nn.MaxPool2d with
 * ceil_mode=False): (in + 2 pad - k) / stride + 1; 0 when the window does not fit. */
static inline int window_out_size(int in, int k, int stride, int pad) {
    const int span = in + 2 * pad - k;
    return span < 0 ? 0 : span / stride + 1;
}
/* The same with nn.MaxPool2d's ceil_mode (PyTorch's pooling_output_shape): the last window may
 * run past the end, but must start inside the input or its left padding; so may the first,
 * wider than the padded input by less than the stride (a 3x3 window at stride 2 on a 2x2 map
 * gives one pixel, as GoogLeNet's pools at torchvision's smallest size of 15). */
static inline int pool_out_size(int in, int k, int stride, int pad, int ceil_mode) {
    if (!ceil_mode) return window_out_size(in, k, stride, pad);
    const int span = in + 2 * pad - k + stride - 1;   /* ceil((in + 2 pad - k) / stride) * stride */
    if (span < 0) return 0;
    int out = span / stride + 1;
    if ((out - 1) * stride >= in + pad) out--;
    return out;
}
/* The same for a window whose taps are `dilation` pixels apart: it spans dilation (k - 1) + 1. */
static inline int window_out_size_dilated(int in, int k, int dilation, int stride, int pad) {
    return window_out_size(in, (dilation > 1 ? dilation : 1) * (k - 1) + 1, stride, pad);
}
/* Output height and width (of a normalised shape, conv_shape_norm). */
static inline int conv_out_size(const ConvShape *s, int in) {
    return window_out_size_dilated(in, s->k, s->dilation, s->stride, s->pad);
}
static inline int conv_out_w(const ConvShape *s, int in) {
    return window_out_size_dilated(in, s->kw ? s->kw : s->k, s->dilation, s->stride, s->kw ? s->padw : s->pad);
}

/* The shape with groups and dilation of 0 made 1: what conv2d_init stores in Conv2d.shape, so
 * that the kernels read the real values. */
static inline ConvShape conv_shape_norm(const ConvShape *s) {
    ConvShape n = *s;
    if (n.groups == 0) n.groups = 1;
    if (n.dilation == 0) n.dilation = 1;
    if (n.kw == 0) { n.kw = n.k; n.padw = n.pad; }
    return n;
}

/* Nonzero for a shape the reference convolution can compute (conv2d_init checks it; a backend
 * without conv_grouped refuses groups or dilation above 1 besides). */
static inline int conv_shape_valid(const ConvShape *s) {
    const ConvShape n = conv_shape_norm(s);
    return n.C_in > 0 && n.C_out > 0 && n.k > 0 && n.kw > 0 && n.stride > 0 && n.pad >= 0 && n.padw >= 0 && n.groups > 0 &&
           n.dilation > 0 && n.C_in % n.groups == 0 && n.C_out % n.groups == 0;
}

/* The activation functions of an "act" node (torchvision's modules): X(ENUM, name in network
 * files). ReLU is a kind of its own, which the executor fuses into the batch norm before it. */
#define ACT_FNS(X)                   \
    X(ACT_RELU6, "relu6")            \
    X(ACT_HARDSWISH, "hardswish")    \
    X(ACT_HARDSIGMOID, "hardsigmoid") \
    X(ACT_SILU, "silu")              \
    X(ACT_SIGMOID, "sigmoid")        \
    X(ACT_GELU, "gelu")              \
    X(ACT_GELU_TANH, "gelu_tanh")    \
    X(ACT_TANH, "tanh")              \
    X(ACT_LEAKY_RELU, "leaky_relu")

/* The scalars of one optimizer update of one parameter group (or tensor), as PyTorch's kernels
 * take them: computed in double where PyTorch computes a Python float, then rounded to float
 * (model/optim.c). Each update reads the fields its comment in ops/optim_cpu.h names. */
typedef struct OptimScalars {
    float lr;            /* the group's learning rate */
    float weight_decay;  /* the group's */
    float momentum;      /* RMSprop's and LARS' */
    int nesterov;        /* LARS */
    float beta1, one_minus_beta1;   /* first moment: m = m * beta1 + (1 - beta1) * g */
    float beta2, one_minus_beta2;   /* second moment (RMSprop's alpha, 1 - alpha) */
    float eps;
    float decay;         /* AdamW: p *= 1 - lr * weight_decay */
    float step_size;     /* AdamW: lr / (1 - beta1^t) */
    float bc1;           /* LAMB: 1 - beta1^t */
    float bc2_sqrt;      /* AdamW, LAMB: sqrt(1 - beta2^t) */
    float grad_div;      /* LAMB: the gradients divided by this (its global norm clip; 1: none) */
    float trust;         /* LAMB, LARS: the tensor's trust ratio (1 where none applies) */
    int adapt;           /* LAMB, LARS: weight decay and trust ratio apply to this tensor */
} OptimScalars;

#define ACT_FN_ENUM(e, name) e,
typedef enum { ACT_FNS(ACT_FN_ENUM) ACT_FN_COUNT } ActFn;
#undef ACT_FN_ENUM

typedef struct Backend {
    const char *name;
    int on_device;                  /* memory is not addressable by the host */

    void *(*alloc)(size_t bytes);   /* zeroed; aligned for vector loads */
    void (*release)(void *p);
    void (*upload)(void *dst, const void *src_host, size_t bytes);
    void (*download)(void *dst_host, const void *src, size_t bytes);
    void (*zero)(void *p, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes);

    /* c->shape = *shape (conv_shape_valid), and the backend's state for it */
    void (*conv2d_init)(Conv2d *c, const ConvShape *shape);
    void (*conv2d_free)(Conv2d *c);
    void (*conv2d_forward)(Conv2d *c, int N, int H, int W, const float *x, const float *w, float *y);
    void (*conv2d_backward)(Conv2d *c, int N, int H, int W, const float *x, const float *w,
                            const float *dy, float *dx, float *dw);
    void (*conv2d_weights_changed)(Conv2d *c);
    /* The memory of c's forward and backward on N images of H x W (ConvMemory), from the plan
     * the backend would make for them; NULL on a backend that counts none. */
    void (*conv2d_memory)(Conv2d *c, int N, int H, int W, ConvMemory *m);
    /* --use_amp on the CPU's 16-bit storage (conv_cpu.h): whether c computes in bfloat16 on N
     * images of H x W; then, conv2d_bf16_io: its input x (in) and output y (out) bfloat16
     * (uint16_t) from now on; widen_bf16 y[i] = x[i], bfloat16 to float32 (exact); narrow_bf16
     * y[i] = x[i] rounded to bfloat16 as the convolutions round a float32 input. NULL on a
     * backend without them (the model then stores everything as before). */
    int (*conv2d_is_bf16)(Conv2d *c, int N, int H, int W);
    void (*conv2d_bf16_io)(Conv2d *c, int in, int out);
    void (*widen_bf16)(const void *x, float *y, size_t n);
    void (*narrow_bf16)(const float *x, void *y, size_t n);
    /* 1: conv2d_init takes groups and dilation above 1, and rectangular kernels; 0: it takes
     * only dense, undilated, square convolutions, and a network that has others is refused
     * before anything is set up */
    int conv_grouped;
    /* A convolution's bias over NHWC activations, [M, C] with M = N*H*W: bias_add y[m,c] +=
     * b[c]; bias_grad db[c] += sum over m of dy[m,c], summed in double in an order that depends
     * only on M and C, then added. NULL on a backend without them (no bias there). */
    void (*bias_add)(float *y, const float *b, size_t M, int C);
    void (*bias_grad)(const float *dy, float *db, size_t M, int C);

    /* sum, sumsq per channel and *count = M, all in double */
    void (*bn_stats)(const float *x, size_t M, int C, double *sum, double *sumsq, double *count);
    void (*bn_finalize_stats)(const double *sum, const double *sumsq, const double *count, int C,
                              float eps, float momentum, float *mean, float *invstd,
                              float *running_mean, float *running_var);
    /* mean = running_mean, invstd = 1/sqrt(running_var + eps): evaluation mode */
    void (*bn_eval_stats)(const float *running_mean, const float *running_var, int C, float eps,
                          float *mean, float *invstd);
    void (*bn_apply)(const float *x, float *y, size_t M, int C, const float *mean,
                     const float *invstd, const float *gamma, const float *beta,
                     const float *residual, int relu);
    void (*bn_backward_reduce)(const float *x, const float *y, const float *dy, float *g, size_t M,
                               int C, const float *mean, const float *invstd, int relu,
                               double *sum_g, double *sum_gx);
    void (*bn_backward_apply)(const float *x, const float *g, float *dx, size_t M, int C,
                              const float *mean, const float *invstd, const float *gamma,
                              const double *local_sum_g, const double *local_sum_gx,
                              const double *global_sum_g, const double *global_sum_gx,
                              const double *count, float *dgamma, float *dbeta);

    void (*avgpool_forward)(const float *x, float *y, int N, int HW, int C);
    void (*avgpool_backward)(const float *dy, float *dx, int N, int HW, int C);
    /* y = max(x, 0) over n activations: a ReLU that follows no batch norm (one that does is
     * fused into bn_apply). NULL on a backend without it; so are the two below. */
    void (*relu_forward)(const float *x, float *y, size_t n);
    /* ops_cpu.h's max pooling, with the index of each output's input pixel (int32), and
     * nn.MaxPool2d's ceil_mode */
    void (*maxpool_forward)(const float *x, float *y, int32_t *arg, int N, int H, int W, int C, int k, int stride,
                            int pad, int ceil_mode);
    void (*maxpool_backward)(const float *dy, const int32_t *arg, float *dx, int N, int H, int W, int C, int k,
                             int stride, int pad, int ceil_mode);
    /* ops_cpu.h's blur3: forward, and backward (it is its own adjoint); NULL on a backend
     * without it */
    void (*blur)(const float *x, float *y, int N, int H, int W, int C);
    /* y = f(x) over n activations, f one of ActFn (slope: leaky_relu's negative slope), and
     * dx = dy * f'(x) (overwritten), as PyTorch's functions and their autograd formulas. NULL on
     * a backend without them; so are the operations below up to linear_forward. */
    void (*act_forward)(int fn, float slope, const float *x, float *y, size_t n);
    void (*act_backward)(int fn, float slope, const float *x, const float *dy, float *dx, size_t n);
    /* Squeeze-excitation's gate: y[n,p,c] = x[n,p,c] * s[n,c] over N images of HW pixels; and
     * its backward, dx = dy * s and ds[n,c] = sum over p of dy * x (both overwritten). */
    void (*mul_forward)(const float *x, const float *s, float *y, int N, int HW, int C);
    void (*mul_backward)(const float *x, const float *s, const float *dy, float *dx, float *ds, int N, int HW,
                         int C);
    /* Dropout: keep[i] = 1 with probability 1 - p, drawn from (key, i) alone (rng.h's
     * rng_hash_uniform), so the mask depends on no thread count; y = keep ? x * (1 / (1 - p)) : 0
     * (zeros when p is 1). The backward is dropout_apply on dy with the same keep. */
    void (*dropout_mask)(uint8_t *keep, size_t n, float p, uint64_t key);
    void (*dropout_apply)(const float *x, const uint8_t *keep, float *y, size_t n, float p);
    /* Stochastic depth ("row"): y[n, :] = x[n, :] * s[n] over N images of `per` values, s in
     * backend memory; forward and backward alike. */
    void (*sample_scale)(const float *x, const float *s, float *y, int N, size_t per);
    /* A batch norm and the act node after it as one step (the executor fuses them where these
     * are not NULL): bn_apply without residual or ReLU, then f (act_forward's fn, slope) in the
     * same pass; and bn_backward_reduce's first phase with f's derivative at the pre-activation,
     * recomputed from x, gamma and beta as the forward computed it (nothing kept between the two):
     * g = dy * f'(z) (g may be dy), then sum_g and sum_gx. The same numbers as the two steps. */
    void (*bn_apply_act)(const float *x, float *y, size_t M, int C, const float *mean, const float *invstd,
                         const float *gamma, const float *beta, int fn, float slope);
    void (*bn_backward_reduce_act)(const float *x, const float *dy, float *g, size_t M, int C, const float *mean,
                                   const float *invstd, const float *gamma, const float *beta, int fn, float slope,
                                   double *sum_g, double *sum_gx);
    /* The operations of the joins, pools and norms of torchvision's other families, as
     * channels_cpu.h, pool_cpu.h and layernorm_cpu.h define them; NULL on a backend without
     * them (its kinds' records refuse the network). */
    void (*channel_copy)(const float *x, int Cx, int x_off, float *y, int Cy, int y_off, int C, size_t M);
    void (*channel_shuffle)(const float *x, float *y, size_t M, int C, int groups);
    void (*transpose)(const float *x, float *y, int N, int P, int C);
    void (*channel_scale_forward)(const float *x, const float *g, float *y, size_t M, int C);
    void (*channel_scale_backward)(const float *x, const float *g, const float *dy, float *dx, float *dg, size_t M,
                                   int C);
    void (*channel_affine)(const float *x, float *y, size_t M, int C, const float *a, const float *b);
    void (*avgpool2d_forward)(const float *x, float *y, int N, int H, int W, int C, int Ho, int Wo, int k,
                              int stride, int pad, int count_pad);
    void (*avgpool2d_backward)(const float *dy, float *dx, int N, int H, int W, int C, int Ho, int Wo, int k,
                               int stride, int pad, int count_pad);
    void (*adaptive_avgpool_forward)(const float *x, float *y, int N, int H, int W, int C, int Ho, int Wo);
    void (*adaptive_avgpool_backward)(const float *dy, float *dx, int N, int H, int W, int C, int Ho, int Wo);
    void (*layernorm_forward)(const float *x, float *y, float *mean, float *rstd, const float *gamma,
                              const float *beta, size_t M, int C, float eps);
    void (*layernorm_backward)(const float *x, const float *dy, const float *mean, const float *rstd,
                               const float *gamma, float *dx, float *dgamma, float *dbeta, size_t M, int C);
    void (*linear_forward)(const float *x, const float *w, const float *b, float *y, int N, int I, int O);
    void (*linear_backward)(const float *x, const float *w, const float *dy, float *dx, float *dw,
                            float *db, int N, int I, int O);
    /* *loss = mean cross-entropy, label-smoothed by `smoothing`, the targets mixed with the
     * labels rolled by one at weight `mix` < 1 (ops_cpu.h); *correct = argmax hits; both in
     * backend memory */
    void (*softmax_xent)(const float *logits, const int *labels, int N, int K, float scale,
                         float smoothing, float mix, float *dlogits, float *loss, int *correct);
    void (*relu_mask_copy)(float *g, const float *y, float *out, size_t n);   /* g = out = g*(y>0) */
    void (*add_inplace)(float *d, const float *s, size_t n);
    /* Activation storage. A device backend may keep activations and their gradients in a
     * 16-bit type (ops_cuda.h, cuda_set_act_storage): every activation argument of the ops
     * above then points to act_bytes()-byte elements, and the model sizes those buffers with
     * it. act_input gives the float32 input batch in that form (x itself, or converted into
     * scratch of n elements); add_act_inplace is add_inplace on activations. */
    size_t (*act_bytes)(void);
    const float *(*act_input)(const float *x, size_t n, float *scratch);
    void (*add_act_inplace)(float *d, const float *s, size_t n);
    /* x *= *s, with s in backend memory (the loss scale applied to the logits' gradient) */
    void (*scale_inplace)(float *x, size_t n, const float *s);
    /* Mixed precision (scaler.h): g *= 1 / *scale; *found_inf = 1 when any g is inf or NaN
     * (before or after the multiplication); *found_inf is never cleared here. */
    void (*unscale_check)(float *g, size_t n, const float *scale, int *found_inf);
    /* GradScaler.update: state = [growth_tracker, found_inf, skipped_steps]. With found_inf:
     * scale *= backoff, tracker = 0, skipped_steps++; else tracker++, and at `interval`
     * scale *= growth (when that stays finite) and tracker = 0. Then found_inf = 0. */
    void (*scaler_update)(float *scale, int *state, float growth, float backoff, int interval);
    /* PyTorch SGD over flat buffers (optim.h), with Nesterov momentum when nesterov is
     * nonzero; nothing at all happens when skip is not NULL and *skip (backend memory) is
     * nonzero: a step the loss scaler rejected */
    void (*sgd_step)(float *params, const float *grads, float *buf, size_t n, float lr,
                     float momentum, float weight_decay, int nesterov, const int *skip);
    /* The other optimizers (model/optim.h) and --clip_grad_norm, over a slice of the flat
     * buffers, with the scalars of OptimScalars; NULL on a backend without them (--optimizer
     * and --clip_grad_norm are then refused at start-up). sumsq: *out = the sum of x[i]^2 in
     * double, in an order that depends on n alone (any thread count gives the same bits).
     * The other four are ops/optim_cpu.h's updates. */
    void (*sumsq)(const float *x, size_t n, double *out);
    void (*adamw_step)(float *p, const float *g, float *exp_avg, float *exp_avg_sq, size_t n,
                       const struct OptimScalars *s);
    void (*rmsprop_step)(float *p, const float *g, float *square_avg, float *momentum_buffer, size_t n,
                         const struct OptimScalars *s);
    void (*lamb_moments)(const float *p, const float *g, float *exp_avg, float *exp_avg_sq, size_t n,
                         const struct OptimScalars *s, double *sumsq_p_u);
    void (*lamb_apply)(float *p, const float *exp_avg, const float *exp_avg_sq, size_t n,
                       const struct OptimScalars *s);
    void (*lars_step)(float *p, const float *g, float *momentum_buffer, size_t n, const struct OptimScalars *s);

    void (*synchronize)(void);      /* wait for queued work (no-op on the CPU) */
    const char *(*describe)(void);
} Backend;

extern const Backend backend_cpu;

#ifdef HAVE_CUDA_BACKEND
/* The CUDA backend on `device` (cuda_backend_init), or NULL with one line in err. */
const Backend *backend_cuda_open(int device, char *err, size_t errlen);
#endif

#ifdef __cplusplus
}
#endif

#endif
