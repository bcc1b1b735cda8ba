/* SPDX-License-Identifier: BSD-3-Clause */
/* kind_conv.c - the "conv" node: nn.Conv2d, its weight [C_out, C_in/groups, k, kw] (OIHW) in the
 * flat parameter buffer (node_kind.h), then its bias when it has one. Grouped (depthwise when
 * groups is the input's channel count) and dilated convolutions need a backend with
 * conv_grouped, a bias one with bias_add and bias_grad. */
#include <math.h>

#include "base/rng.h"
#include "model_step.h"
#include "onnx.h"

static int conv_shape(NetNode *n, const NetNode *const *ins, const NetCheck *c) {
    (void)ins;
    /* out 0: one channel per class (SqueezeNet's final convolution, whose maps are the classes') */
    const int out = n->out ? n->out : c->num_classes;
    if (n->out < 0 || out < 1 || out > NET_MAX_CHANNELS)
        return node_err(c, n, "out_channels", "%d is not in 1..%d (or 0: --num_classes)", n->out, NET_MAX_CHANNELS);
    if (n->groups < 1 || n->C % n->groups || out % n->groups)
        return node_err(c, n, "groups", "%d does not divide both the %d input and the %d output channels", n->groups,
                        n->C, out);
    if (n->dilation < 1 || n->dilation > NET_MAX_KERNEL)
        return node_err(c, n, "dilation", "%d is not in 1..%d", n->dilation, NET_MAX_KERNEL);
    /* the padding stays below the window's span, as for an undilated kernel of that size */
    const int span = n->dilation * (n->k - 1) + 1, span_w = n->dilation * (n->kw - 1) + 1;
    if (n->k >= 1 && n->k <= NET_MAX_KERNEL && (n->pad < 0 || n->pad >= span))
        return node_err(c, n, "padding", "%d is not in 0..%d (below the kernel's span)", n->pad, span - 1);
    if (n->kw >= 1 && n->kw <= NET_MAX_KERNEL && (n->padw < 0 || n->padw >= span_w))
        return node_err(c, n, "padding", "a width's padding of %d is not in 0..%d (below the kernel's span)", n->padw,
                        span_w - 1);
    /* a whitening convolution: both signs of one filter per input value of a patch (whiten.h) */
    if (n->whiten && n->in != NET_INPUT)
        return node_err(c, n, "whiten", "a whitening convolution reads the image (\"in\": \"input\")");
    if (n->whiten && (n->groups != 1 || n->dilation != 1 || out != 2 * n->C * n->k * n->kw))
        return node_err(c, n, "whiten", "a whitening convolution has groups 1, dilation 1 and out_channels 2 x in x "
                        "kernel x kernel (%d here), not %d", 2 * n->C * n->k * n->kw, out);
    const int H = n->H, W = n->W;
    if (node_window(n, H, W, c)) return -1;
    n->H = window_out_size_dilated(H, n->k, n->dilation, n->stride, n->pad);
    n->W = window_out_size_dilated(W, n->kw, n->dilation, n->stride, n->padw);
    if (n->H < 1 || n->W < 1)
        return node_err(c, n, "dilation", "a %dx%d window of dilation %d (%d pixels across) at stride %d with padding "
                        "%d leaves no pixels of the %dx%d input", n->k, n->k, n->dilation, span, n->stride, n->pad, H,
                        W);
    n->C = out;
    return 0;
}

static const char *conv_backend_lacks(const Backend *be, const NetNode *n) {
    if (n->groups > 1 && !be->conv_grouped) return "grouped convolution";
    if (n->dilation > 1 && !be->conv_grouped) return "dilated convolution";
    if ((n->k != n->kw || n->pad != n->padw) && !be->conv_grouped) return "rectangular kernel";
    return !n->bias || (be->bias_add && be->bias_grad) ? NULL : "convolution bias";
}

static int conv_has_bias(const Model *m, const ModelStep *st) { return m->net.node[st->node].bias; }

static void conv_layout(const Backend *be, const NetNode *n, ModelStep *st, Layout *P, Layout *B, Layout *NB) {
    (void)B; (void)NB;
    const ConvShape shape = {.C_in = st->C_in, .C_out = n->C, .k = n->k, .stride = n->stride, .pad = n->pad,
                             .groups = n->groups, .dilation = n->dilation, .kw = n->kw, .padw = n->padw};
    be->conv2d_init(&st->conv, &shape);
    st->w_off = layout_add(P, n->name, "weight", TENSOR_CONV_WEIGHT, -1, 4, n->C, st->C_in / n->groups, n->k, n->kw);
    /* airbench's whitening layer: the weight computed from the data (whiten.h), requires_grad=False;
     * the bias trained for --whiten_bias_epochs */
    if (n->whiten) P->info[P->n - 1].frozen = 1;
    if (n->bias) st->b_off = layout_add(P, n->name, "bias", TENSOR_CONV_BIAS, -1, 1, n->C, 0, 0, 0);
    if (n->bias && n->whiten) P->info[P->n - 1].whiten_bias = 1;
}

static void conv_release(const Backend *be, ModelStep *st) { be->conv2d_free(&st->conv); }

/* PyTorch's default: weight kaiming_uniform_(a=sqrt(5)), within 1/sqrt(fan_in), fan_in being
 * in / groups * k * kw; the bias within the same bound. torchvision's families (each
 * family's __init__ in torchvision/models/):
 *   ResNet, MobileNet, EfficientNet, RegNet, MNASNet, VGG: kaiming_normal_(mode="fan_out"),
 *     std sqrt(2 / fan_out), fan_out = out * k * kw (RegNet writes the same normal out);
 *   DenseNet: kaiming_normal_ (fan_in), std sqrt(2 / fan_in);
 *   SqueezeNet: kaiming_uniform_ (fan_in, gain sqrt(2)), within sqrt(6 / fan_in), but the final
 *     convolution, normal(0, 0.01) (init_std);
 *   GoogLeNet: trunc_normal_(std=0.01, a=-2, b=2); Inception v3: the same with std 0.1 or the
 *     module's stddev (init_std); ConvNeXt: trunc_normal_(std=0.02). Bounds of -2 and 2 lie 20
 *     standard deviations out or more, where a normal draw never goes: drawn as normals.
 * The bias: PyTorch's within the same bound for PyTorch's init and RegNet (its
 * squeeze-excitation's), else zero. */
static void conv_init(const Model *m, const ModelStep *st, float *params, float *buffers, Rng *r) {
    (void)buffers;
    const NetNode *node = &m->net.node[st->first];
    const size_t taps = (size_t)node->k * node->kw;
    const size_t fan_in = (size_t)(st->C_in / node->groups) * taps;
    const size_t n = (size_t)st->C * fan_in;
    const float bound = 1.0f / sqrtf((float)fan_in);
    float *w = params + st->w_off;
    switch (m->net.init) {
    case NET_INIT_PYTORCH: rng_fill_uniform(r, w, n, bound); break;
    case NET_INIT_DENSENET: rng_fill_normal(r, w, n, sqrtf(2.0f / (float)fan_in)); break;
    case NET_INIT_SQUEEZENET:
        if (node->init_std > 0) rng_fill_normal(r, w, n, node->init_std);
        else rng_fill_uniform(r, w, n, sqrtf(6.0f / (float)fan_in));
        break;
    case NET_INIT_GOOGLENET: rng_fill_normal(r, w, n, node->init_std > 0 ? node->init_std : 0.01f); break;
    case NET_INIT_INCEPTION: rng_fill_normal(r, w, n, node->init_std > 0 ? node->init_std : 0.1f); break;
    case NET_INIT_CONVNEXT: rng_fill_normal(r, w, n, node->init_std > 0 ? node->init_std : 0.02f); break;
    default: rng_fill_normal(r, w, n, sqrtf(2.0f / (float)((size_t)st->C * taps))); break;
    }
    /* torch.nn.init.dirac_(weight[:in]): filter o < in passes input channel o through, unchanged */
    if (node->dirac) {
        const int cin = st->C_in / node->groups, nd = st->C < cin ? st->C : cin;
        for (size_t i = 0; i < (size_t)nd * fan_in; i++) w[i] = 0.0f;
        for (int o = 0; o < nd; o++) w[(size_t)o * fan_in + (size_t)o * taps + (size_t)(node->k / 2) * node->kw + node->kw / 2] = 1.0f;
    }
    if (!node->bias) return;
    if (m->net.init == NET_INIT_PYTORCH || m->net.init == NET_INIT_REGNET)
        rng_fill_uniform(r, params + st->b_off, (size_t)st->C, bound);
    else
        for (int i = 0; i < st->C; i++) params[st->b_off + i] = 0.0f;
}

static void conv_node_forward(Model *m, ModelStep *st, int N, int train) {
    (void)train;
    m->be->conv2d_forward(&st->conv, N, st->H_in, st->W_in, model_value(m, st->in), m->params + st->w_off, st->y);
    if (conv_has_bias(m, st)) m->be->bias_add(st->y, m->params + st->b_off, (size_t)N * st->H * st->W, st->C);
}

/* The image needs no gradient: dx is NULL there, and the kernel skips backward-data. */
static void conv_node_backward(Slots *s, ModelStep *st, float *dy, int N) {
    Model *m = s->m;
    GradOut g = {-1, 0, 0};
    float *dx = st->in >= 0 ? grad_begin(s, st->in, &g) : NULL;
    if (!s->dry) {
        if (conv_has_bias(m, st)) m->be->bias_grad(dy, m->grads + st->b_off, (size_t)N * st->H * st->W, st->C);
        m->be->conv2d_backward(&st->conv, N, st->H_in, st->W_in, model_value(m, st->in), m->params + st->w_off, dy, dx,
                               m->grads + st->w_off);
    }
    if (g.t >= 0) grad_done(s, &g, N);
}

static void conv_params_changed(const Backend *be, ModelStep *st) { be->conv2d_weights_changed(&st->conv); }

/* As a direct convolution, whichever algorithm the backend picks: each output reads in / groups
 * channels. */
static double conv_macs(const ModelStep *st) {
    return (double)st->H * st->W * st->C * st->C_in * st->k * st->conv.shape.kw / st->groups;
}

/* Conv, its weight the state_dict's OIHW tensor; pads [top, left, bottom, right]. kernel_shape,
 * optional in ONNX, is given: OpenCV's reader needs it. */
static int conv_onnx(OnnxGraph *g, const NetNode *n) {
    const char *x = onnx_in(g, n, 0);
    onnx_op(g, "Conv", onnx_out(g, n, 4), x, onnx_param(g, n, "weight", 0, NULL),
            n->bias ? onnx_param(g, n, "bias", 0, NULL) : NULL, NULL);
    onnx_attr_ints(g, "kernel_shape", 2, (const int64_t[]){n->k, n->kw});
    onnx_attr_ints(g, "strides", 2, (const int64_t[]){n->stride, n->stride});
    onnx_attr_ints(g, "pads", 4, (const int64_t[]){n->pad, n->padw, n->pad, n->padw});
    onnx_attr_ints(g, "dilations", 2, (const int64_t[]){n->dilation, n->dilation});
    onnx_attr_int(g, "group", n->groups);
    return 0;
}

const NodeKindDef node_kind_conv = {
    .name = "conv",
    .doc = "a convolution, as `nn.Conv2d`: grouped (depthwise when groups is the input's channel count), dilated, "
           "rectangular (`\"kernel\": [1, 7], \"padding\": [0, 3]`); without bias by default (a batch norm follows); "
           "`out_channels` 0: one per class (SqueezeNet's classifier)",
    .tensors = "`NAME.weight` [out, in/groups, kh, kw], and `NAME.bias` with a bias",
    .inputs = 1,
    .fields = {{F_OUT_CHANNELS, .need = 1, .write_always = 1},
               {F_KERNEL, .need = 1, .write_always = 1},
               {F_STRIDE, .def = 1, .write_always = 1, .def_doc = "1"},
               {F_PADDING, .def_kernel_div = 2, .write_always = 1, .def_doc = "kernel/2"},
               {F_GROUPS, .def = 1, .min = 1, .def_doc = "1"},
               {F_DILATION, .def = 1, .min = 1, .def_doc = "1"},
               {F_BIAS, .def_doc = "false"},
               {F_INIT_STD, .rmin = 0, .rmax = 10, .def_doc = "the family's"},
               {F_DIRAC, .def_doc = "false; true: the first in-channels filters start as the identity (airbench's)"},
               {F_WHITEN, .def_doc = "false; true: the weight is the whitening of the training images' patches, not "
                                     "trained; out_channels 2 x in x kernel x kernel"}},
    .n_fields = 10,
    .shape = conv_shape,
    .backend_lacks = conv_backend_lacks,
    .layout = conv_layout,
    .release = conv_release,
    .init = conv_init,
    .forward = conv_node_forward,
    .backward = conv_node_backward,
    .params_changed = conv_params_changed,
    .macs = conv_macs,
    .onnx = conv_onnx,
};
