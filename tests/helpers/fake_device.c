/* SPDX-License-Identifier: BSD-3-Clause */
/* fake_device.c - a CUDA backend module without CUDA (fake_device.h): the table of
 * cuda_plugin.h over the CPU backend's operations and guarded host memory, for running
 * ddptrain --device cuda on a machine without a GPU (tests/test_fake_device.sh).
 *
 * It fills exactly the operations src/cuda/backend_cuda.c fills, and leaves NULL the ones it
 * leaves NULL (tests/test_gpu_refusals.sh compares the two), so that a network or option the
 * CUDA module refuses is refused here too. Each operation opens the buffers of its operands,
 * runs the CPU backend's operation and closes them again; upload and download are the host's
 * only other doors. The batches of a split "held on the device" are the loader's plans applied
 * on the host (dataloader_apply_plan) and uploaded, the batches the GPU's kernel makes. No
 * NCCL: one rank, as a CUDA module built without NCCL. DDPTRAIN_FAKE_GPUS sets the number of
 * devices it reports (1 by default). */
#include "build_config.h"

#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_plugin.h"
#include "fake_device.h"
#include "base/util.h"

static const Backend *const cpu = &backend_cpu;

/* OP(name, call, operands...): the CPU backend's call with the operands' buffers opened. */
#define OP(name, call, ...)                                                                  \
    do {                                                                                     \
        FdCall fc_;                                                                          \
        const void *const p_[] = {__VA_ARGS__};                                              \
        fd_enter(&fc_, name, #__VA_ARGS__, p_, (int)(sizeof p_ / sizeof p_[0]));             \
        call;                                                                                \
        fd_leave(&fc_);                                                                      \
    } while (0)

/* ---- memory and the host's doors ------------------------------------------------------------ */

static void f_upload(void *dst, const void *src_host, size_t bytes) {
    fd_check_range("upload", dst, bytes);
    if (fd_is_device(src_host)) die("fake device: upload from %p, which is device memory", src_host);
    OP("upload", memcpy(dst, src_host, bytes), dst);
}

static void f_download(void *dst_host, const void *src, size_t bytes) {
    fd_check_range("download", src, bytes);
    if (fd_is_device(dst_host)) die("fake device: download into %p, which is device memory", dst_host);
    OP("download", memcpy(dst_host, src, bytes), src);
}

static void f_zero(void *p, size_t bytes) {
    fd_check_range("zero", p, bytes);
    OP("zero", memset(p, 0, bytes), p);
}

static void f_copy(void *dst, const void *src, size_t bytes) {
    fd_check_range("copy", dst, bytes);
    fd_check_range("copy", src, bytes);
    OP("copy", memmove(dst, src, bytes), dst, src);
}

/* ---- the operations backend_cuda.c fills ----------------------------------------------------- */

static void f_conv2d_init(Conv2d *c, const ConvShape *shape) {
    const ConvShape s = conv_shape_norm(shape);
    /* backend_cuda.c's check: conv_grouped is 0 */
    CHECK(s.groups == 1 && s.dilation == 1 && s.kw == s.k && s.padw == s.pad);
    cpu->conv2d_init(c, shape);
}
static void f_conv2d_free(Conv2d *c) { cpu->conv2d_free(c); }
static void f_conv2d_forward(Conv2d *c, int N, int H, int W, const float *x, const float *w, float *y) {
    OP("conv2d_forward", cpu->conv2d_forward(c, N, H, W, x, w, y), x, w, y);
}
static void f_conv2d_backward(Conv2d *c, int N, int H, int W, const float *x, const float *w, const float *dy,
                              float *dx, float *dw) {
    OP("conv2d_backward", cpu->conv2d_backward(c, N, H, W, x, w, dy, dx, dw), x, w, dy, dx, dw);
}
static void f_conv2d_weights_changed(Conv2d *c) { OP("conv2d_weights_changed", cpu->conv2d_weights_changed(c), NULL); }

static void f_bn_stats(const float *x, size_t M, int C, double *sum, double *sumsq, double *count) {
    OP("bn_stats", cpu->bn_stats(x, M, C, sum, sumsq, count), x, sum, sumsq, count);
}
static void f_bn_finalize_stats(const double *sum, const double *sumsq, const double *count, int C, float eps,
                                float momentum, float *mean, float *invstd, float *running_mean, float *running_var) {
    OP("bn_finalize_stats",
       cpu->bn_finalize_stats(sum, sumsq, count, C, eps, momentum, mean, invstd, running_mean, running_var), sum, sumsq,
       count, mean, invstd, running_mean, running_var);
}
static void f_bn_eval_stats(const float *running_mean, const float *running_var, int C, float eps, float *mean,
                            float *invstd) {
    OP("bn_eval_stats", cpu->bn_eval_stats(running_mean, running_var, C, eps, mean, invstd), running_mean, running_var,
       mean, invstd);
}
static void f_bn_apply(const float *x, float *y, size_t M, int C, const float *mean, const float *invstd,
                       const float *gamma, const float *beta, const float *residual, int relu) {
    OP("bn_apply", cpu->bn_apply(x, y, M, C, mean, invstd, gamma, beta, residual, relu), x, y, mean, invstd, gamma, beta,
       residual);
}
static void f_bn_backward_reduce(const float *x, const float *y, const float *dy, float *g, size_t M, int C,
                                 const float *mean, const float *invstd, int relu, double *sum_g, double *sum_gx) {
    OP("bn_backward_reduce", cpu->bn_backward_reduce(x, y, dy, g, M, C, mean, invstd, relu, sum_g, sum_gx), x, y, dy, g,
       mean, invstd, sum_g, sum_gx);
}
static void f_bn_backward_apply(const float *x, const float *g, float *dx, size_t M, int C, const float *mean,
                                const float *invstd, const float *gamma, const double *lsg, const double *lsgx,
                                const double *gsg, const double *gsgx, const double *count, float *dgamma,
                                float *dbeta) {
    OP("bn_backward_apply",
       cpu->bn_backward_apply(x, g, dx, M, C, mean, invstd, gamma, lsg, lsgx, gsg, gsgx, count, dgamma, dbeta), x, g, dx,
       mean, invstd, gamma, lsg, lsgx, gsg, gsgx, count, dgamma, dbeta);
}
static void f_avgpool_forward(const float *x, float *y, int N, int HW, int C) {
    OP("avgpool_forward", cpu->avgpool_forward(x, y, N, HW, C), x, y);
}
static void f_avgpool_backward(const float *dy, float *dx, int N, int HW, int C) {
    OP("avgpool_backward", cpu->avgpool_backward(dy, dx, N, HW, C), dy, dx);
}
static void f_linear_forward(const float *x, const float *w, const float *b, float *y, int N, int I, int O) {
    OP("linear_forward", cpu->linear_forward(x, w, b, y, N, I, O), x, w, b, y);
}
static void f_linear_backward(const float *x, const float *w, const float *dy, float *dx, float *dw, float *db, int N,
                              int I, int O) {
    OP("linear_backward", cpu->linear_backward(x, w, dy, dx, dw, db, N, I, O), x, w, dy, dx, dw, db);
}
static void f_softmax_xent(const float *logits, const int *labels, int N, int K, float scale, float smoothing, float mix,
                           float *dlogits, float *loss, int *correct) {
    OP("softmax_xent", cpu->softmax_xent(logits, labels, N, K, scale, smoothing, mix, dlogits, loss, correct), logits,
       labels, dlogits, loss, correct);
}
static void f_relu_mask_copy(float *g, const float *y, float *out, size_t n) {
    OP("relu_mask_copy", cpu->relu_mask_copy(g, y, out, n), g, y, out);
}
static void f_add_inplace(float *d, const float *s, size_t n) { OP("add_inplace", cpu->add_inplace(d, s, n), d, s); }
static size_t f_act_bytes(void) { return cpu->act_bytes(); }
static const float *f_act_input(const float *x, size_t n, float *scratch) {
    const float *r;
    OP("act_input", r = cpu->act_input(x, n, scratch), x, scratch);
    return r;
}
static void f_add_act_inplace(float *d, const float *s, size_t n) {
    OP("add_act_inplace", cpu->add_act_inplace(d, s, n), d, s);
}
static void f_scale_inplace(float *x, size_t n, const float *s) {
    OP("scale_inplace", cpu->scale_inplace(x, n, s), x, s);
}
static void f_unscale_check(float *g, size_t n, const float *scale, int *found_inf) {
    OP("unscale_check", cpu->unscale_check(g, n, scale, found_inf), g, scale, found_inf);
}
static void f_scaler_update(float *scale, int *state, float growth, float backoff, int interval) {
    OP("scaler_update", cpu->scaler_update(scale, state, growth, backoff, interval), scale, state);
}
static void f_sgd_step(float *params, const float *grads, float *buf, size_t n, float lr, float momentum,
                       float weight_decay, int nesterov, const int *skip) {
    OP("sgd_step", cpu->sgd_step(params, grads, buf, n, lr, momentum, weight_decay, nesterov, skip), params, grads, buf,
       skip);
}
static void f_synchronize(void) {}
static const char *f_describe(void) {
    return "fake device: the CPU backend's operations over guarded host memory (device discipline only, no GPU)";
}

/* The members backend_cuda.c sets, and only those. */
static const Backend k_fake = {
    .name = "cuda",
    .on_device = 1,
    .alloc = fd_alloc,
    .release = fd_release,
    .upload = f_upload,
    .download = f_download,
    .zero = f_zero,
    .copy = f_copy,
    .conv2d_init = f_conv2d_init,
    .conv2d_free = f_conv2d_free,
    .conv2d_forward = f_conv2d_forward,
    .conv2d_backward = f_conv2d_backward,
    .conv2d_weights_changed = f_conv2d_weights_changed,
    .conv_grouped = 0,
    .bias_add = NULL,
    .bias_grad = NULL,
    .bn_stats = f_bn_stats,
    .bn_finalize_stats = f_bn_finalize_stats,
    .bn_eval_stats = f_bn_eval_stats,
    .bn_apply = f_bn_apply,
    .bn_backward_reduce = f_bn_backward_reduce,
    .bn_backward_apply = f_bn_backward_apply,
    .avgpool_forward = f_avgpool_forward,
    .avgpool_backward = f_avgpool_backward,
    .linear_forward = f_linear_forward,
    .linear_backward = f_linear_backward,
    .softmax_xent = f_softmax_xent,
    .relu_mask_copy = f_relu_mask_copy,
    .add_inplace = f_add_inplace,
    .act_bytes = f_act_bytes,
    .act_input = f_act_input,
    .add_act_inplace = f_add_act_inplace,
    .scale_inplace = f_scale_inplace,
    .unscale_check = f_unscale_check,
    .scaler_update = f_scaler_update,
    .sgd_step = f_sgd_step,
    .synchronize = f_synchronize,
    .describe = f_describe,
};

/* ---- the device ------------------------------------------------------------------------------ */

static int f_device_count(void) {
    const char *e = getenv("DDPTRAIN_FAKE_GPUS");
    return e && *e ? atoi(e) : 1;
}

static const Backend *f_backend_open(int device, char *err, size_t errlen) {
    if (device < 0 || device >= f_device_count()) {
        errf(err, errlen, "fake device: no device %d (DDPTRAIN_FAKE_GPUS=%d)", device, f_device_count());
        return NULL;
    }
    fd_install_handler();
    return &k_fake;
}
static void f_backend_free(void) {}
/* the settings change nothing: the arithmetic is the CPU backend's, float32 throughout */
static void f_set_int(int v) { (void)v; }

/* ---- batches "made on the device": the loader's plans applied on the host, then uploaded ---- */

struct DeviceData {
    const DataLoader *dl;
    int max_batch;
    size_t image_floats;
    SamplePlan *plan;
    float *x;
    int *y;
};

static DeviceData *f_device_data_open(const DataLoader *dl, int max_batch, char *err, size_t errlen) {
    if (!dataloader_images(dl)) {   /* device_data.cu's condition */
        errf(err, errlen, "fake device: the loader holds no images to make batches from");
        return NULL;
    }
    if (max_batch < dataloader_batch_size(dl)) {
        errf(err, errlen, "fake device: max_batch %d below the loader's batch size %d", max_batch, dataloader_batch_size(dl));
        return NULL;
    }
    DeviceData *d = callocCheck(1, sizeof *d);
    const int S = dataloader_output_size(dl);
    d->dl = dl;
    d->max_batch = max_batch;
    d->image_floats = (size_t)S * S * 3;
    d->plan = callocCheck((size_t)max_batch, sizeof *d->plan);
    d->x = callocCheck((size_t)max_batch * d->image_floats, sizeof *d->x);
    d->y = callocCheck((size_t)max_batch, sizeof *d->y);
    return d;
}

static void f_device_data_next(DeviceData *d, DataLoader *dl, float *x_dev, int *labels_dev, int *n_out) {
    CHECK(dl == d->dl);
    const int n = dataloader_next_plan(dl, d->plan, d->y);
    *n_out = n;
    if (n <= 0) return;
    dataloader_apply_plan(dl, d->plan, n, d->x);
    f_upload(x_dev, d->x, (size_t)n * d->image_floats * sizeof(float));
    f_upload(labels_dev, d->y, (size_t)n * sizeof(int));
}

/* what the GPU would hold: the images as uint8 and the normalisation table */
static size_t f_device_data_bytes(const DeviceData *d) {
    return dataloader_num_samples(d->dl) * d->image_floats + 3 * 256 * sizeof(float);
}

static void f_device_data_free(DeviceData *d) {
    if (!d) return;
    free(d->plan);
    free(d->x);
    free(d->y);
    free(d);
}

static const CudaPlugin k_plugin = {
    .abi_version = CUDA_PLUGIN_ABI,
    .version = PACKAGE_VERSION "-fake",
    .device_count = f_device_count,
    .backend_open = f_backend_open,
    .backend_free = f_backend_free,
    .set_tf32 = f_set_int,
    .set_conv_benchmark = f_set_int,
    .set_amp = f_set_int,
    .set_act_storage = f_set_int,
    /* no NCCL: one rank, as a module built without it */
    .device_data_open = f_device_data_open,
    .device_data_next = f_device_data_next,
    .device_data_bytes = f_device_data_bytes,
    .device_data_free = f_device_data_free,
};

const CudaPlugin *ddptrain_cuda_plugin(int abi_version) {
    (void)abi_version;
    return &k_plugin;
}
