/* SPDX-License-Identifier: BSD-3-Clause */
/* kind_act.c - the "act" node: one of torchvision's activation functions (backend.h's ACT_FNS:
 * relu6, hardswish, hardsigmoid, silu, sigmoid, gelu and its tanh approximation, tanh,
 * leaky_relu), value by value. Its backward reads the input, as PyTorch's autograd formulas do. */
#include "model_step.h"

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
};
