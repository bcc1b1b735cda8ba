/* SPDX-License-Identifier: BSD-3-Clause */
/* learner.c - see learner.h. */
#include "learner.h"

#include <string.h>

#include "util.h"

void learner_init(Learner *l, const Config *c, const Backend *be, int world_size, Logger *log) {
    memset(l, 0, sizeof *l);
    Model *m = &l->model;
    model_init_on(m, be, (int)c->width, (int)c->blocks, (int)c->num_classes, (int)c->image_size, (int)c->batch_size);
    model_init_weights(m, (uint64_t)c->seed);
    m->label_smoothing = (float)c->label_smoothing;
    log_info(log, "model: MiniResNet width %ld blocks %ld: %zu parameters", c->width, c->blocks, m->num_params);

    sgd_init_on(&l->opt, be, m->num_params, (float)c->momentum, (float)c->weight_decay);
    l->opt.nesterov = c->nesterov;
    const int groups = sgd_set_model_groups(&l->opt, m, c->no_decay_1d, c->bn_bias_lr_mult);
    if (l->opt.group)
        log_info(log, "optimizer: %d parameter ranges (%s%s%s)", groups, c->no_decay_1d ? "no weight decay on 1-D parameters" : "",
                 c->no_decay_1d && c->bn_bias_lr_mult != 1.0 ? ", " : "",
                 c->bn_bias_lr_mult != 1.0 ? "batch-norm biases at a multiple of the learning rate" : "");

    if (c->ema_decay > 0.0) {
        ema_init(&l->ema, m, c->ema_decay);
        l->ema_host.params = mallocCheck(m->num_params * sizeof(float));
        l->ema_host.buffers = mallocCheck(m->num_buffers * sizeof(float));
        l->ema_host.nbt = callocCheck((size_t)model_bn_count(m), sizeof(int64_t));
        log_info(log, "EMA: weights and batch-norm buffers averaged with decay %g every %ld step%s (%s); evaluation "
                 "and checkpoints use the average", c->ema_decay, c->ema_every, c->ema_every == 1 ? "" : "s",
                 world_size > 1 ? "buffers averaged over the ranks first" : "one rank");
    }

    scaler_init(&l->scaler, be, be->on_device && c->use_amp && !strcmp(c->amp_dtype, "fp16"), SCALER_INIT_SCALE,
                SCALER_GROWTH, SCALER_BACKOFF, SCALER_INTERVAL);
    m->grad_scale = scaler_scale_ptr(&l->scaler);
}

void learner_update(Learner *l, double lr) {
    Model *m = &l->model;
    scaler_unscale(&l->scaler, m->grads, m->num_params);
    sgd_step_unless(&l->opt, m->params, m->grads, lr, scaler_skip_flag(&l->scaler));
    scaler_update(&l->scaler);
    model_params_changed(m);
}

int learner_has_average(const Learner *l) { return l->ema.be && l->ema.n_averaged > 0; }

void learner_free(Learner *l) {
    sgd_free(&l->opt);
    ema_free(&l->ema);
    free(l->ema_host.params);
    free(l->ema_host.buffers);
    free(l->ema_host.nbt);
    scaler_free(&l->scaler);
    model_free(&l->model);
}
