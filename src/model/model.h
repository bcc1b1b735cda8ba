/* SPDX-License-Identifier: BSD-3-Clause */
/* model.h - a network run from its description (netspec.h): one forward and one backward
 * over the backend's operations, for MiniResNet and torchvision's ResNets alike (zoo.h).
 *
 * All trainable parameters live in one flat buffer (and their gradients in another) in the
 * order of PyTorch's state_dict for the equivalent nn.Module, so the gradients of a layer are a
 * contiguous slice and backward completes them from the end of the buffer towards the start:
 * a gradient bucket is just a slice. BatchNorm running statistics live in a second flat buffer.
 *
 * Every tensor of the model lives in its Backend's memory (host memory for the CPU backend):
 * host code reads or writes params, grads and buffers directly only when !be->on_device, and
 * otherwise through be->download / be->upload. Activations and their gradients (every step's
 * output before the global average pool, and the slots) hold be->act_bytes()-byte elements:
 * float32 except on a GPU that stores them in 16 bits under mixed precision; the pooled
 * features, the logits and their gradients are float32. */
#ifndef DDP_MODEL_H
#define DDP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "ops/backend.h"
#include "netspec.h"

/* What a tensor is to the code outside the model (the optimizer's parameter groups, the EMA,
 * the host mirror, checkpoints): they read these roles and the tables below, never the
 * model's layers, so that they hold for any architecture. */
typedef enum {
    TENSOR_CONV_WEIGHT,
    TENSOR_BN_WEIGHT,
    TENSOR_BN_BIAS,
    TENSOR_BN_RUNNING_MEAN,     /* buffers */
    TENSOR_BN_RUNNING_VAR,
    TENSOR_BN_COUNTER,          /* num_batches_tracked: an int64 counter (bn_tracked) */
    TENSOR_LINEAR_WEIGHT,
    TENSOR_LINEAR_BIAS,
    TENSOR_CONV_BIAS,
    TENSOR_NORM_WEIGHT,         /* layer norm */
    TENSOR_NORM_BIAS,
    TENSOR_LAYER_SCALE,
} TensorRole;

typedef struct {
    char name[NET_NAME_MAX + 24]; /* PyTorch state_dict name, e.g. "layer2.0.shortcut.0.weight": a node's
                                   * name, '.' and the longest tensor's, num_batches_tracked */
    size_t offset, numel; /* into params/grads (or buffers, or bn_tracked for a counter) */
    int ndim;
    int shape[4];
    TensorRole role;
    int bn;               /* the batch-norm layer a BN tensor belongs to (bn_info order), else -1 */
    int frozen;           /* a parameter that is not trained (requires_grad=False): the optimizer's group of it
                           * has learning rate 0 (optim.h) */
    int whiten_bias;      /* the bias of a whitening convolution: frozen after --whiten_bias_epochs */
} TensorInfo;

/* One step of the forward: a node of the table, or a batch norm with the add and the ReLU
 * that follow it fused in (model.c); model_step.h, private to src/model/. */
typedef struct ModelStep ModelStep;

/* Called during backward each time the gradients at params offsets >= `offset` are final. */
typedef void (*GradReadyFn)(void *ctx, size_t offset);
/* Called in training-mode batch norm to sum per-channel statistics over ranks (sync BN):
 * buf holds n doubles to be summed in place across ranks. NULL: per-rank statistics. */
typedef void (*StatsAllreduceFn)(void *ctx, double *buf, size_t n);

typedef struct Model {
    const Backend *be;
    NetSpec net;            /* the description it was built from, shapes resolved */
    int width, blocks;      /* MiniResNet's (what its checkpoints record), else 0 */
    /* image_size: the largest input, which the activations are allocated for and checkpoints
     * record; input_size: the one the steps are shaped for now (model_set_input_size) */
    int num_classes, image_size, input_size, max_batch;
    size_t num_params, num_buffers;
    float *params, *grads, *buffers;
    TensorInfo *param_info, *buffer_info;
    int n_param_info, n_buffer_info;
    /* num_batches_tracked of every batch-norm layer, in state_dict order, and their names
     * (bn_info[k]: role TENSOR_BN_COUNTER, offset k); host memory on every backend */
    int64_t *bn_tracked;
    TensorInfo *bn_info;
    int n_bn;

    ModelStep *step;        /* in the order the forward runs them */
    int n_step;
    /* --zero_init_residual: model_init_weights starts at 0 the weight of every batch norm the
     * table marks as a residual branch's end (torchvision's zero_init_residual) */
    int zero_init_residual;

    const float *input;     /* the batch of the last forward, as activations (Backend.act_input) */
    float *input_act;       /* its converted copy when activations are not float32, else NULL */
    float *bf16_in;         /* a bf16-stored convolution output widened for its batch norm (model.c), */
    float *bf16_out;        /* a bf16-stored batch norm's output in float32; else NULL */
    int last_N;
    float *logits;          /* the last step's output [max_batch, num_classes], float32 */
    float *dlogits;
    float *loss;            /* backend scalar: mean loss of the last forward */
    float *loss_sum;        /* backend scalar: sum of training losses since model_take_loss_sum */
    int *correct;           /* backend scalar: correct predictions of the last forward */
    float **slot;           /* activation-gradient scratch for backward: the slots one dry run of it
                             * made, each of the size of the gradients it holds (model_step.h) */
    size_t *slot_bytes;
    int n_slot;
    int *slot_script;       /* the dry run's choice of slot at each take, for backward to repeat */
    int n_slot_script;
    double *stat_scratch;   /* batch-norm sums: 4 C + 1 doubles for the widest batch norm */

    /* Loss scale in backend memory (scaler.h), multiplied into the gradient of the training
     * loss on top of model_forward's loss_scale; NULL: none. */
    const float *grad_scale;
    /* Label smoothing of the training loss (nn.CrossEntropyLoss(label_smoothing=...)), 0 after
     * model_init; evaluation's loss is always the plain cross-entropy. */
    float label_smoothing;
    /* The weight of the labels in the next training forward's targets under mixup or cutmix
     * (dataloader_batch_lambda; the rest goes to the labels rolled by one), 1 after model_init. */
    float mix;

    /* The labels and loss scale of the forward under way, for the auxiliary losses' steps */
    const int *labels;
    float loss_scale;

    /* The draws of dropout and stochastic depth in the next training forward (model_set_noise) */
    uint64_t noise_key;

    GradReadyFn grad_ready;
    void *grad_ready_ctx;
    StatsAllreduceFn stats_allreduce;
    void *stats_allreduce_ctx;
} Model;

/* max_batch is the training capacity: the most images one model_forward takes, and the
 * batch every activation buffer that model_backward needs is sized for (about 5.6 MB per image
 * at width 64). Evaluation does not need it to be larger: model_evaluate takes any number of
 * images in chunks of max_batch. */
void model_init(Model *m, int width, int blocks, int num_classes, int image_size, int max_batch);
/* The same on a given backend (model_init uses backend_cpu). */
void model_init_on(Model *m, const Backend *be, int width, int blocks, int num_classes, int image_size,
                   int max_batch);
/* Any network (netspec.h) on a given backend: its shapes are resolved for image_size and
 * num_classes. Returns 0, or -1 with one line in err (errlen bytes) naming `what` (its file,
 * or "--model NAME") and the node at fault, m left zeroed. */
int model_init_net(Model *m, const Backend *be, const NetSpec *net, const char *what, int num_classes, int image_size,
                   int max_batch, char *err, size_t errlen);
void model_free(Model *m);

/* Calls fn for each convolution of the network, in the order the forward runs them, with its
 * node's name, the backend's convolution and the size of its input at the model's image size
 * (--use_amp on the CPU names those that stay float32: cpu_amp.h). */
void model_each_conv(Model *m, void (*fn)(void *ctx, const char *node, Conv2d *conv, int H, int W), void *ctx);

/* Shape the steps for size x size inputs, at most image_size (progressive resizing, or an
 * evaluation at another size than the last training step's): the same parameters, buffers
 * and allocations, the activations of the first size^2 / image_size^2 of each buffer; the
 * backend's kernels keep their plans for every size seen. Returns 0, or -1 with one line in err
 * when the network does not take that size (netspec_resolve's reason). */
int model_set_input_size(Model *m, int size, char *err, size_t errlen);

/* The network's initialisation (NetInit: PyTorch's defaults, kaiming-uniform convolutions and
 * linear layer; or torchvision's ResNet, kaiming-normal fan_out convolutions), BN gamma 1
 * (0 for a residual branch's end under zero_init_residual), beta 0, running mean 0, running
 * var 1, drawn from `seed` in table order. */
void model_init_weights(Model *m, uint64_t seed);

/* Forward on N <= max_batch images (NHWC). train=1: batch statistics and running-stat update,
 * and the gradient of the loss (scaled by loss_scale) is kept for model_backward. Returns the
 * mean cross-entropy; *correct (may be NULL) gets the number of correct predictions. */
float model_forward(Model *m, const float *x, const int *labels, int N, int train, float loss_scale,
                    int *correct);

/* Evaluation of N images, any N, with running statistics, in forwards of at most max_batch
 * images each: batch norm then treats every sample on its own, so the chunks change no
 * prediction, and evaluating a large batch allocates nothing. *correct gets the number of
 * correct predictions (exact); *loss_sum the sum over the chunks of the chunk's mean loss times
 * its size, in double: the per-sample loss summed, to float rounding of each chunk's mean. */
void model_evaluate(Model *m, const float *x, const int *labels, int N, long *correct, double *loss_sum);

/* What sees each chunk of model_evaluate_each: images off..off+n-1 of the call, `labels` theirs
 * (the call's labels + off), their logits in m->logits until the next chunk's forward. */
typedef void (*ModelChunkFn)(void *ctx, const Model *m, const int *labels, int off, int n);

/* model_evaluate, calling fn (unless NULL) after each chunk's forward: for what needs every
 * image's logits (the evaluation's tallies, predictions). correct and loss_sum may be NULL. */
void model_evaluate_each(Model *m, const float *x, const int *labels, int N, long *correct, double *loss_sum,
                         ModelChunkFn fn, void *ctx);

/* A training forward that keeps its loss in backend memory (added to a running sum) instead of
 * returning it, so that a device backend need not wait for the GPU in every step. */
void model_forward_train(Model *m, const float *x, const int *labels, int N, float loss_scale);
/* The sum of the losses of model_forward_train since the last call, and reset it. */
double model_take_loss_sum(Model *m);

/* Backward of the last training forward; ACCUMULATES into m->grads. */
void model_backward(Model *m);

void model_zero_grad(Model *m);

/* Tell the kernels the parameters changed (after an optimizer step or a load). */
void model_params_changed(Model *m);

/* Work per image, as a benchmark's GFLOP/s counts it: the multiply-adds of one image's
 * forward through every convolution (as a direct convolution: H_out*W_out*C_out*C_in*k*k,
 * whichever algorithm the backend picks; Winograd does fewer multiplies for the same result)
 * and the linear head. Batch norm, ReLU, residual adds, pooling and the loss are not counted
 * (a few operations per activation: under 1% of the convolutions' work). */
double model_macs_per_image(const Model *m);
/* FLOPs of one training image: 2 per multiply-add, times 3 for forward, backward-data and
 * backward-weights, each of the forward's size. The stem's backward-data, which is not computed
 * (the input needs no gradient), is counted too, as is customary (0.14% at width 64). */
double model_train_flops_per_image(const Model *m);

/* Offset of a parameter or buffer tensor by name, or -1. */
long model_find_param(const Model *m, const char *name);
long model_find_buffer(const Model *m, const char *name);

/* What checkpoints call the architecture: "MiniResNet" for the built-in, else the network's
 * name ("resnet50", or a network file's "network"); "-blurpool" after either under
 * --use_blurpool (netspec_blurpool). */
const char *model_architecture(const Model *m);

/* The steps whose output is stored in bfloat16 (--use_amp on the CPU: a bf16 convolution's that
 * batch norms alone read, model.c), and in *saved the bytes that saves at the largest batch
 * (less the float32 buffer they are widened into). */
int model_bf16_outputs(const Model *m, size_t *saved);

/* How many batch-norm layers (bn_tracked and bn_info hold one each). */
int model_bn_count(const Model *m);

/* The outputs of the ReLUs of the last forward, in the order PyTorch's forward calls F.relu
 * (for comparisons with it): how many, and the k-th with its [last_N, *H, *W, *C] shape (one
 * stored in bf16 under --use_amp widened into a buffer of the model, until the next call). */
int model_relu_count(const Model *m);
const float *model_relu_output(const Model *m, int k, int *H, int *W, int *C);
/* The name of the k-th's ReLU node (the last of a fused batch norm's group), for comparisons
 * that replay the masks by name where the table's order is not the forward's (GoogLeNet's
 * auxiliary heads). */
const char *model_relu_name(const Model *m, int k);
/* The max pools of the last training forward, in order: the input pixel (h * W_in + w) each
 * output took, per (image, pixel, channel), in backend memory; for comparisons that replay them */
int model_maxpool_count(const Model *m);
const int32_t *model_maxpool_arg(const Model *m, int k, int *Ho, int *Wo, int *C);

/* The draws of the next training forwards' dropout and stochastic-depth masks: a function of
 * the seed, the optimizer step, the rank and the micro-batch only, so that a resumed run draws
 * what the uninterrupted one drew. Without a call, every forward draws from the key 0. */
void model_set_noise(Model *m, uint64_t seed, uint64_t step, int rank, int micro);
/* The dropout and stochastic-depth steps, in order, and the k-th's mask of the last training
 * forward in backend memory (for comparisons that replay it): a dropout's keep flags (uint8,
 * [last_N, *H, *W, *C]) or a stochastic depth's factor per image (float, [last_N]); NULL when
 * that forward dropped nothing there (evaluation, or p 0). *kind: NODE_DROPOUT or
 * NODE_STOCHASTIC_DEPTH. */
int model_noise_count(const Model *m);
const void *model_noise_mask(const Model *m, int k, NodeKind *kind, int *H, int *W, int *C);

#endif
