/* SPDX-License-Identifier: BSD-3-Clause */
/* model_step.h - the executor's inside, shared by model.c and the kinds' records (node_kind.h):
 * a step of the forward, the tensor layouts, and the slots that hold the activation gradients
 * of one backward (model_slots.c). Private to src/model/. */
#ifndef DDP_MODEL_STEP_H
#define DDP_MODEL_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* One step of the forward: a node of the table, or a batch norm with the add and the ReLU
 * that follow it fused in, or with the act node that follows it (model.c). */
struct ModelStep {
    NodeKind kind;
    int node;                 /* its node in m->net (the last of a fused group) */
    int first;                /* the group's first node (the batch norm), else == node */
    int in, in2;              /* producing steps, or NET_INPUT; in2: add's, or a fused residual */
    int n_ins;                /* a list of inputs (concat): how many, and their steps */
    int *ins;
    int train_only;           /* its output reaches the loss only through a sink (an auxiliary
                               * classifier): evaluation skips it */
    int relu;                 /* bn: ReLU fused */
    int fused_act;            /* bn: an act node fused (its fn and slope below) */
    int C_in, H_in, W_in, C, H, W;
    int act;                  /* y holds activations (act_bytes), else float32 */
    int y_bf16;               /* y holds bfloat16 (uint16_t): a bf16 convolution's output that batch norms
                               * alone read, or a batch norm's that bf16 convolutions alone read (model.c) */
    Conv2d conv;
    size_t w_off, b_off;      /* conv weight / bn weight / linear weight; bn or linear bias */
    size_t rmean_off, rvar_off;
    int bn;                   /* its counter in bn_tracked */
    int zero_init;
    int k, stride, pad;       /* maxpool */
    int groups;               /* conv */
    float eps, momentum;      /* bn */
    int fn;                   /* act, or bn with fused_act: ActFn */
    float slope;              /* act, or bn with fused_act: leaky_relu's */
    float p;                  /* dropout, stochastic_depth */
    int p_lo, p_hi;           /* its tensors in param_info */
    float *y;                 /* output [max_batch, H, W, C] */
    size_t grad_bytes;        /* its output's gradient for max_batch images at the allocated image size:
                               * the size of the slot that holds it */
    float *mean, *invstd;     /* bn: statistics used by the last forward */
    double *count;            /* bn: values behind those statistics (all ranks' with sync BN) */
    int32_t *arg;             /* maxpool: the input pixel of each output */
    uint8_t *keep;            /* dropout: the mask of the last training forward */
    float *scale;             /* stochastic_depth: each image's factor in the last training forward; linear: its
                               * output_scale (a backend scalar) */
    float *dlogits;           /* aux_loss: the gradient of its loss, as weighted */
    float *aux_loss;          /* aux_loss: its mean loss (backend scalar), then weighted */
    float *aux_weight;        /* aux_loss: its weight (backend scalar) */
    int *aux_correct;
    int aux_ready;            /* aux_loss: its weight is in aux_weight */
    int noisy;                /* dropout, stochastic_depth: the last forward was a training one with p > 0 */
};

/* ---- layouts: tensors appended in state_dict order ---------------------------------------- */

typedef struct Layout {
    TensorInfo *info;
    int n, cap;
    size_t size;
} Layout;

/* Appends PREFIX.NAME of `ndim` dimensions d0..d3; returns its offset. */
size_t layout_add(Layout *l, const char *prefix, const char *name, TensorRole role, int bn, int ndim, int d0, int d1,
                  int d2, int d3);

/* ---- values ------------------------------------------------------------------------------- */

/* The node of the table a step computes (the first of a fused group: the one with its fields). */
static inline const NetNode *step_node(const Model *m, const ModelStep *st) { return &m->net.node[st->first]; }

/* The output of step `step`, or the input batch for NET_INPUT. */
static inline const float *model_value(const Model *m, int step) {
    return step == NET_INPUT ? m->input : m->step[step].y;
}
/* Elements of a step's output for N images, and the bytes of one element. */
static inline size_t step_numel(const ModelStep *st, int N) { return (size_t)N * st->H * st->W * st->C; }
static inline size_t step_elem_bytes(const Model *m, const ModelStep *st) {
    return st->act ? m->be->act_bytes() : sizeof(float);   /* y_bf16: a conv's or bn's, which none asks */
}

/* The key of a dropout or stochastic-depth step's draws in this forward: the model's noise key
 * (model_set_noise) and the step's place. */
uint64_t step_noise_key(const Model *m, const ModelStep *st);

/* ---- the slots of one backward (model_slots.c) -------------------------------------------- */

/* Which slot holds each step's output gradient, which are free. A gradient takes the smallest
 * free slot that holds it; in the dry run, where none does, the largest free slot grown to its
 * size, or a new one of its size when none is free. The dry run computes nothing (every pointer
 * is NULL) and records the slots it made, which model_init_net allocates, and the slot each
 * take got (script); a real backward asks for the same gradients in the same order and takes
 * the same slots, so they suffice. Small slots serve the small gradients: a DenseNet's many
 * small feature maps, whose gradients all wait in a block's backward, hold their own size
 * each, not the largest map's. */
typedef struct Slots {
    Model *m;
    int dry;
    int *grad;        /* step -> its slot, or -1 */
    int *busy;        /* slot -> in use */
    size_t *bytes;    /* slot -> its size */
    int n, cap;       /* slots made, and room for */
    int *script;      /* the slot of each slot_take of the dry run, in order (model_slots.c) */
    int n_script, cap_script;
    int k;            /* slot_takes so far */
} Slots;

/* A free slot of at least `bytes` (a step's grad_bytes): the dry run's choice (above). */
int slot_take(Slots *s, size_t bytes);
void slot_give(Slots *s, int i);
float *slot_ptr(const Slots *s, int i);

/* Where an operation that overwrites writes the gradient of step t's output: its own slot when
 * it has none yet, else a temporary, added into it by grad_done. */
typedef struct { int t, slot, tmp; } GradOut;
float *grad_begin(Slots *s, int t, GradOut *g);
void grad_done(Slots *s, const GradOut *g, int N);

/* The common backward of a one-input step without parameters: nothing when its input is the
 * image; else dx begun, op(dy, dx) unless dry, dx done. */
typedef void (*GradOp)(const Model *m, const ModelStep *st, float *dy, float *dx, int N);
void backward_to_input(Slots *s, ModelStep *st, float *dy, int N, GradOp op);

#endif
