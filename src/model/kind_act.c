/* SPDX-License-Identifier: BSD-3-Clause */
/* kind_act.c - the "act" node: one of torchvision's activation functions (backend.h's ACT_FNS:
 * relu6, hardswish, hardsigmoid, silu, sigmoid, gelu and its tanh approximation, tanh,
 * leaky_relu), value by value. Its backward reads the input, as PyTorch's autograd formulas do. */
#include <math.h>

#include "model_step.h"
#include "onnx.h"

static const char *act_backend_lacks(const Backend *be, const NetNode *n) {
    int count;
    return be->act_forward && be->act_backward ? NULL : net_field_choices(F_FUNCTION, &count)[n->fn];
}

static void act_node_forward(Model *m, ModelStep *st, int N, int train) {
    (void)train;
    m->be->act_forward(st->fn, st->slope, model_value(m, st->in), st->y, step_numel(st, N));
}

static void act_grad(const Model *m, const ModelStep *st, float *dy, float *dx, int N) {
    m->be->act_backward(st->fn, st->slope, model_value(m, st->in), dy, dx, step_numel(st, N));
}

static void act_node_backward(Slots *s, ModelStep *st, float *dy, int N) { backward_to_input(s, st, dy, N, act_grad); }

/* ---- ONNX ---------------------------------------------------------------------------------- */

static const char *scalar(OnnxGraph *g, const NetNode *n, const char *what, double v) {
    const float f = (float)v;
    return onnx_const(g, n, what, 0, NULL, &f);
}

/* relu6(x + 3) / 6 */
static void hardsigmoid(OnnxGraph *g, const char *y, const char *x) {
    onnx_op(g, "HardSigmoid", y, x, NULL);
    onnx_attr_float(g, "alpha", (float)(1.0 / 6.0));
    onnx_attr_float(g, "beta", 0.5f);
}

/* Each function as PyTorch defines it, in the operators of opset 13 that OpenCV's reader (4.6)
 * runs too. ReLU6 as 6 * HardSigmoid(x) of slope 1/6 and offset 0: Clip takes its bounds as
 * inputs from opset 11 on, which that reader refuses, and Min of a constant it cannot broadcast;
 * the product is 6 exactly above 6, and x within two units in the last place below (r - relu(r -
 * 6) of r = relu(x), exact up to 12, is off by half a unit of r itself where r is large).
 * Hardswish as x * HardSigmoid(x) below opset 14; GELU from Erf. */
static int act_onnx(OnnxGraph *g, const NetNode *n) {
    int rank;
    const char *x = onnx_in_any(g, n, 0, &rank);
    const char *y = onnx_out(g, n, rank);
    switch ((ActFn)n->fn) {
    case ACT_RELU6: {   /* 6 max(0, min(1, x / 6)) = min(max(x, 0), 6) */
        const char *h = onnx_tmp(g, n, "sixth");
        onnx_op(g, "HardSigmoid", h, x, NULL);
        onnx_attr_float(g, "alpha", (float)(1.0 / 6.0));
        onnx_attr_float(g, "beta", 0.0f);
        onnx_op(g, "Mul", y, h, scalar(g, n, "six", 6.0), NULL);
        break;
    }
    case ACT_HARDSWISH:
        if (onnx_opset(g) >= 14) {
            onnx_op(g, "HardSwish", y, x, NULL);
        } else {
            const char *hs = onnx_tmp(g, n, "hardsigmoid");
            hardsigmoid(g, hs, x);
            onnx_op(g, "Mul", y, x, hs, NULL);
        }
        break;
    case ACT_HARDSIGMOID: hardsigmoid(g, y, x); break;
    case ACT_SILU: {
        const char *s = onnx_tmp(g, n, "sigmoid");
        onnx_op(g, "Sigmoid", s, x, NULL);
        onnx_op(g, "Mul", y, x, s, NULL);
        break;
    }
    case ACT_SIGMOID: onnx_op(g, "Sigmoid", y, x, NULL); break;
    case ACT_TANH: onnx_op(g, "Tanh", y, x, NULL); break;
    case ACT_LEAKY_RELU:
        onnx_op(g, "LeakyRelu", y, x, NULL);
        onnx_attr_float(g, "alpha", n->slope);
        break;
    case ACT_GELU: {   /* 0.5 x (1 + erf(x / sqrt(2))) */
        const char *a = onnx_tmp(g, n, "scaled"), *e = onnx_tmp(g, n, "erf"), *p = onnx_tmp(g, n, "one_plus"),
                   *xp = onnx_tmp(g, n, "times_x");
        onnx_op(g, "Div", a, x, scalar(g, n, "sqrt2", sqrt(2.0)), NULL);
        onnx_op(g, "Erf", e, a, NULL);
        onnx_op(g, "Add", p, e, scalar(g, n, "one", 1.0), NULL);
        onnx_op(g, "Mul", xp, x, p, NULL);
        onnx_op(g, "Mul", y, xp, scalar(g, n, "half", 0.5), NULL);
        break;
    }
    case ACT_GELU_TANH: {   /* 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) */
        const char *x2 = onnx_tmp(g, n, "x2"), *x3 = onnx_tmp(g, n, "x3"), *c = onnx_tmp(g, n, "cubic"),
                   *s = onnx_tmp(g, n, "inner"), *t = onnx_tmp(g, n, "scaled"), *th = onnx_tmp(g, n, "tanh"),
                   *p = onnx_tmp(g, n, "one_plus"), *xp = onnx_tmp(g, n, "times_x");
        onnx_op(g, "Mul", x2, x, x, NULL);
        onnx_op(g, "Mul", x3, x2, x, NULL);
        onnx_op(g, "Mul", c, x3, scalar(g, n, "k", 0.044715), NULL);
        onnx_op(g, "Add", s, x, c, NULL);
        onnx_op(g, "Mul", t, s, scalar(g, n, "sqrt_2_over_pi", sqrt(2.0 / M_PI)), NULL);
        onnx_op(g, "Tanh", th, t, NULL);
        onnx_op(g, "Add", p, th, scalar(g, n, "one", 1.0), NULL);
        onnx_op(g, "Mul", xp, x, p, NULL);
        onnx_op(g, "Mul", y, xp, scalar(g, n, "half", 0.5), NULL);
        break;
    }
    default: return onnx_err(g, n, "function %d has no ONNX form", n->fn);
    }
    return 0;
}

const NodeKindDef node_kind_act = {
    .name = "act",
    .doc = "`function` of each value: `nn.ReLU6`, `Hardswish`, `Hardsigmoid`, `SiLU`, `Sigmoid`, `GELU` "
           "(`gelu_tanh`: approximate=\"tanh\"), `Tanh`, `LeakyReLU(negative_slope)`",
    .tensors = "",
    .inputs = 1,
    .fields = {{F_FUNCTION, .need = 1, .write_always = 1},
               {F_SLOPE, .rdef = 0.01f, .rmin = -1e6f, .rmax = 1e6f, .def_doc = "0.01, leaky_relu's"}},
    .n_fields = 2,
    .backend_lacks = act_backend_lacks,
    .forward = act_node_forward,
    .backward = act_node_backward,
    .onnx = act_onnx,
};
