/* SPDX-License-Identifier: BSD-3-Clause */
/* gpu_refusals.c - see gpu_refusals.h. */
#include "gpu_refusals.h"

#include <stdio.h>
#include <string.h>

#include "model/optim.h"

/* ---- the options ------------------------------------------------------------------------------- */

/* whole operations: the Backend's member is NULL */
static int r_optimizer(const Config *c, const Backend *be) {
    const OptimKind *k = optim_kind(c->optimizer);
    return k && !k->available(be);
}
static int r_clip(const Config *c, const Backend *be) { return c->clip_grad_norm > 0 && !be->sumsq; }
static int r_blurpool(const Config *c, const Backend *be) { return c->use_blurpool && !be->blur; }
/* arguments the GPU's operations do not take yet */
static int r_model(const Config *c, const Backend *be) { (void)be; return strcmp(c->model, "miniresnet") != 0; }
static int r_nesterov(const Config *c, const Backend *be) { (void)be; return c->nesterov; }
static int r_smoothing(const Config *c, const Backend *be) { (void)be; return c->label_smoothing > 0; }
static int r_erase(const Config *c, const Backend *be) { (void)be; return c->random_erase > 0; }
static int r_mixup(const Config *c, const Backend *be) { (void)be; return c->mixup_alpha > 0; }
static int r_cutmix(const Config *c, const Backend *be) { (void)be; return c->cutmix_alpha > 0; }
static int r_ra(const Config *c, const Backend *be) { (void)be; return c->ra_reps > 1; }
static int r_tta(const Config *c, const Backend *be) { (void)be; return strcmp(c->tta, "none") != 0; }
static int r_comm(const Config *c, const Backend *be) { (void)be; return strcmp(c->comm_dtype, "fp32") != 0; }

static const GpuRefusal k_refusals[] = {
    {"model", "--model resnet18", NULL, "only miniresnet has run on a GPU", r_model},
    {"optimizer", "--optimizer adamw", "adamw_step", "other optimizers than sgd have no GPU update yet", r_optimizer},
    {"clip_grad_norm", "--clip_grad_norm 1", "sumsq", "the gradients' norm has no GPU kernel yet", r_clip},
    {"use_blurpool", "--use_blurpool --width 16", "blur", "the blur has no GPU kernel yet", r_blurpool},
    {"nesterov", "--nesterov", NULL, "its kernel has not run on a GPU yet", r_nesterov},
    {"label_smoothing", "--label_smoothing 0.1", NULL, "its kernel has not run on a GPU yet", r_smoothing},
    /* a split held on the GPU makes its batches there from plans, without these draws */
    {"random_erase", "--random_erase 0.25", NULL, "not made on the GPU's batches yet", r_erase},
    {"mixup_alpha", "--mixup_alpha 0.2", NULL, "not made on the GPU's batches yet", r_mixup},
    {"cutmix_alpha", "--cutmix_alpha 1", NULL, "not made on the GPU's batches yet", r_cutmix},
    {"ra_reps", "--ra_reps 2", NULL, "not made on the GPU's batches yet", r_ra},
    /* the views are made from host batches; a GPU holds its test split on the device */
    {"tta", "--tta flip", NULL, "the views are made on host batches only", r_tta},
    /* the 16-bit conversion runs on the host; NCCL would need it on the device */
    {"comm_dtype", "--comm_dtype bf16", NULL, "compressed all-reduce is for CPU ranks only (use fp32)", r_comm},
};

int gpu_refusal_count(void) { return (int)(sizeof k_refusals / sizeof k_refusals[0]); }
const GpuRefusal *gpu_refusal(int i) { return i >= 0 && i < gpu_refusal_count() ? &k_refusals[i] : NULL; }

const GpuRefusal *gpu_refuses(const Config *c, const Backend *be, char *msg, size_t n) {
    for (int i = 0; i < gpu_refusal_count(); i++) {
        const GpuRefusal *r = &k_refusals[i];
        if (!r->refuses(c, be)) continue;
        snprintf(msg, n, "--%s: not available on the %s backend: %s%s%s%s; pass --device cpu", r->flag, be->name, r->why,
                 r->op ? " (it has no " : "", r->op ? r->op : "", r->op ? ")" : "");
        return r;
    }
    return NULL;
}

/* ---- the operations ----------------------------------------------------------------------------- */

#define OPS(X)                                                                                                       \
    X(alloc) X(release) X(upload) X(download) X(zero) X(copy) X(conv2d_init) X(conv2d_free) X(conv2d_forward)        \
    X(conv2d_backward) X(conv2d_weights_changed) X(conv2d_memory) X(conv2d_is_bf16) X(conv2d_bf16_io) X(widen_bf16) X(narrow_bf16) X(bias_add) X(bias_grad) X(bn_stats)               \
    X(bn_finalize_stats) X(bn_eval_stats) X(bn_apply) X(bn_backward_reduce) X(bn_backward_apply) X(avgpool_forward)  \
    X(avgpool_backward) X(relu_forward) X(maxpool_forward) X(maxpool_backward) X(blur) X(act_forward)                \
    X(act_backward) X(mul_forward) X(mul_backward) X(dropout_mask) X(dropout_apply) X(sample_scale) X(bn_apply_act)  \
    X(bn_backward_reduce_act) X(channel_copy) X(channel_shuffle) X(transpose) X(channel_scale_forward)               \
    X(channel_scale_backward) X(channel_affine) X(avgpool2d_forward) X(avgpool2d_backward)                           \
    X(adaptive_avgpool_forward) X(adaptive_avgpool_backward) X(layernorm_forward) X(layernorm_backward)              \
    X(linear_forward) X(linear_backward) X(softmax_xent) X(relu_mask_copy) X(add_inplace) X(act_bytes) X(act_input)  \
    X(add_act_inplace) X(scale_inplace) X(unscale_check) X(scaler_update) X(sgd_step) X(sumsq) X(adamw_step)         \
    X(rmsprop_step) X(lamb_moments) X(lamb_apply) X(lars_step) X(synchronize) X(describe)

typedef void (*AnyFn)(void);
#define OP_ENTRY(m) {#m, offsetof(Backend, m)},
static const struct {
    const char *name;
    size_t offset;
} k_ops[] = {OPS(OP_ENTRY)};

int backend_op_count(void) { return (int)(sizeof k_ops / sizeof k_ops[0]); }
const char *backend_op_name(int i) { return i >= 0 && i < backend_op_count() ? k_ops[i].name : NULL; }

int backend_op_present(const Backend *be, int i) {
    AnyFn f;   /* every member is a function pointer, and all have one representation */
    memcpy(&f, (const char *)be + k_ops[i].offset, sizeof f);
    return f != NULL;
}
