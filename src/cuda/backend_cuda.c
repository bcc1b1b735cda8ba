/* SPDX-License-Identifier: BSD-3-Clause */
/* backend_cuda.c - the Backend over one GPU: cuDNN, cuBLAS and the kernels of ops_cuda.cu.
 * Part of the CUDA backend module only (cuda_plugin.h). A Conv2d's impl holds its CudaConv2d. */
#include "build_config.h"

#ifdef HAVE_CUDA_BACKEND
#include <stdio.h>

#include "ops/backend.h"
#include "ops_cuda.h"
#include "base/util.h"

static CudaConv2d *cc(Conv2d *c) { return (CudaConv2d *)c->impl; }

static void g_conv2d_init(Conv2d *c, const ConvShape *shape) {
    const ConvShape s = conv_shape_norm(shape);
    CHECK(s.groups == 1 && s.dilation == 1 && s.kw == s.k && s.padw == s.pad);   /* conv_grouped is 0: the model asks for none */
    c->shape = s;
    CudaConv2d *d = callocCheck(1, sizeof *d);
    cuda_conv2d_init(d, &s);
    c->impl = d;
}

static void g_conv2d_free(Conv2d *c) {
    if (!c->impl) return;
    cuda_conv2d_free(cc(c));
    free(c->impl);
    c->impl = NULL;
}

static void g_conv2d_forward(Conv2d *c, int N, int H, int W, const float *x, const float *w, float *y) {
    cuda_conv2d_forward(cc(c), N, H, W, x, w, y);
}

static void g_conv2d_backward(Conv2d *c, int N, int H, int W, const float *x, const float *w,
                              const float *dy, float *dx, float *dw) {
    cuda_conv2d_backward(cc(c), N, H, W, x, w, dy, dx, dw);
}

static void g_conv2d_weights_changed(Conv2d *c) { cuda_conv2d_weights_changed(cc(c)); }

/* The Backend contract: allocations come zeroed (momentum buffers rely on it). */
static void *g_alloc(size_t bytes) {
    void *p = cuda_malloc(bytes);
    cuda_memset_zero(p, bytes);
    return p;
}

static void g_synchronize(void) { cuda_sync("backend synchronize"); }

static const Backend backend_cuda = {
    .name = "cuda",
    .on_device = 1,
    .alloc = g_alloc,
    .release = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .zero = cuda_memset_zero,
    .copy = cuda_copy,
    .conv2d_init = g_conv2d_init,
    .conv2d_free = g_conv2d_free,
    .conv2d_forward = g_conv2d_forward,
    .conv2d_backward = g_conv2d_backward,
    .conv2d_weights_changed = g_conv2d_weights_changed,
    /* no grouped or dilated convolution, no bias: none has run on a GPU here yet, and the
     * model refuses a network that needs them (kind_conv.c's backend_lacks) */
    .conv_grouped = 0,
    .bias_add = NULL,
    .bias_grad = NULL,
    .bn_stats = cuda_bn_stats,
    .bn_finalize_stats = cuda_bn_finalize_stats,
    .bn_eval_stats = cuda_bn_eval_stats,
    .bn_apply = cuda_bn_apply,
    .bn_backward_reduce = cuda_bn_backward_reduce,
    .bn_backward_apply = cuda_bn_backward_apply,
    .avgpool_forward = cuda_avgpool_forward,
    .avgpool_backward = cuda_avgpool_backward,
    .linear_forward = cuda_linear_forward,
    .linear_backward = cuda_linear_backward,
    .softmax_xent = cuda_softmax_xent,
    .relu_mask_copy = cuda_relu_mask_copy,
    .add_inplace = cuda_add_inplace,
    .act_bytes = cuda_act_bytes,
    .act_input = cuda_act_input,
    .add_act_inplace = cuda_add_act_inplace,
    .scale_inplace = cuda_scale_inplace,
    .unscale_check = cuda_unscale_check,
    .scaler_update = cuda_scaler_update,
    .sgd_step = cuda_sgd_step,
    .synchronize = g_synchronize,
    .describe = cuda_describe,
};

const Backend *backend_cuda_open(int device, char *err, size_t errlen) {
    if (!cuda_backend_active() && cuda_backend_init(device, err, errlen) != 0) return NULL;
    return &backend_cuda;
}
#else
typedef int backend_cuda_is_empty_without_cuda;
#endif
