/* SPDX-License-Identifier: BSD-3-Clause */
/* learner.c - see learner.h. */
#include "learner.h"

#include <math.h>
#include <string.h>

#include "ckpt/init_from.h"
#include "memory_check.h"
#include "model/netfile.h"
#include "base/util.h"
#include "model/zoo.h"

int learner_network(const Config *c, NetSpec *net, char *err, size_t errlen) {
    if (netfile_load(c->model, (int)c->width, (int)c->blocks, net, err, errlen) != 0) return -1;
    char what[4200];
    snprintf(what, sizeof what, "%s%s", zoo_has(c->model) ? "--model " : "", c->model);
    if (!c->aux_logits && netspec_drop_aux(net) == 0) {
        snprintf(err, errlen, "--aux_logits false: %s has no auxiliary classifier (an aux_loss node) to leave out", what);
        netspec_free(net);
        return -1;
    }
    if (c->transform_input && netspec_add_transform_input(net) == 0) {
        snprintf(err, errlen, "--transform_input: %s has a transform_input node already", what);
        netspec_free(net);
        return -1;
    }
    if (c->use_blurpool && netspec_blurpool(net) == 0) {
        snprintf(err, errlen, "--use_blurpool: %s has no convolution with a stride above 1 and 16 or more input "
                 "channels to blur", what);
        netspec_free(net);
        return -1;
    }
    NetSpec trial;   /* shapes for this run's images and classes, checked now */
    netspec_copy(&trial, net);
    int rc = netspec_resolve(&trial, (int)config_input_size(c), (int)c->num_classes, what, err, errlen);
    if (rc == 0 && config_eval_size(c) != config_input_size(c)) {   /* the evaluator's copy (eval.h) */
        char why[4000];
        rc = netspec_resolve(&trial, (int)config_eval_size(c), (int)c->num_classes, what, why, sizeof why);
        if (rc != 0) snprintf(err, errlen, "--val_crop_size %ld: %s", c->val_crop_size, why);
    }
    /* every size of a progressive ramp (model_set_input_size), before any collective */
    for (long e = 0, last = config_input_size(c); rc == 0 && e < c->epochs; e++) {
        const long size = config_train_crop_at(c, e);
        if (size == last) continue;
        char why[4000];
        rc = netspec_resolve(&trial, (int)size, (int)c->num_classes, what, why, sizeof why);
        if (rc != 0) snprintf(err, errlen, "--progressive_min_crop %ld: epoch %ld's crop of %ld: %s",
                              c->progressive_min_crop, e + 1, size, why);
        last = size;
    }
    netspec_free(&trial);
    if (rc != 0) netspec_free(net);
    return rc;
}

int learner_check_init_from(const Config *c, const NetSpec *net, char *err, size_t errlen) {
    if (!c->init_from[0]) return 0;
    Model probe;
    if (model_init_net(&probe, &backend_cpu, net, c->model, (int)c->num_classes, (int)config_input_size(c), 1, err, errlen) != 0)
        return -1;
    char note[1400];
    const int rc = init_from_file(&probe, c->init_from, note, sizeof note, err, errlen);
    model_free(&probe);
    return rc;
}

void learner_init(Learner *l, const Config *c, const NetSpec *net, const Backend *be, int world_size, size_t peak_bytes,
                  Logger *log) {
    memset(l, 0, sizeof *l);
    Model *m = &l->model;
    char err[4800];
    if (model_init_net(m, be, net, c->model, (int)c->num_classes, (int)config_input_size(c), (int)c->batch_size, err,
                       sizeof err) != 0)
        die("%s", err);   /* learner_network checked it: not reached */
    const int mini = !strcmp(c->model, "miniresnet");
    if (mini) { m->width = (int)c->width; m->blocks = (int)c->blocks; }
    m->zero_init_residual = c->zero_init_residual;
    model_init_weights(m, (uint64_t)c->seed);
    if (c->init_from[0]) {
        char note[1400];
        if (init_from_file(m, c->init_from, note, sizeof note, err, sizeof err) != 0) die("%s", err);
        log_info(log, "init_from %s: %s", c->init_from, note);
    }
    m->label_smoothing = (float)c->label_smoothing;
    char shape[64] = "";
    if (mini) snprintf(shape, sizeof shape, " width %ld blocks %ld", c->width, c->blocks);
    char peak[64] = "";
    if (peak_bytes) {
        char b[32];
        memory_format(peak_bytes, b, sizeof b);
        snprintf(peak, sizeof peak, ", estimated peak %s", b);
    }
    log_info(log, "model: %s%s: %zu parameters, %.3f GMACs per %ldx%ld image, %d batch norms%s%s", m->net.name, shape,
             m->num_params, model_macs_per_image(m) / 1e9, config_input_size(c), config_input_size(c), m->n_bn,
             c->zero_init_residual ? ", residual branches' last batch norms start at 0" : "", peak);

    const OptimKind *kind = optim_kind(c->optimizer);
    CHECK(kind != NULL && kind->available(be));   /* the option's choices are the table's; device.c refused the rest */
    const OptimSettings set = {.momentum = (float)c->momentum, .weight_decay = c->weight_decay, .nesterov = c->nesterov,
                               .beta1 = c->adam_beta1, .beta2 = !strcmp(kind->name, "rmsprop") ? c->rmsprop_alpha : c->adam_beta2,
                               .eps = c->opt_eps > 0.0 ? c->opt_eps : kind->eps, .trust_coeff = c->lars_trust_coeff,
                               .max_grad_norm = c->lamb_max_grad_norm};
    optim_init(&l->opt, kind, be, m->num_params, &set);
    l->whiten_bias_epochs = c->whiten_bias_epochs;
    l->rules = (OptimGroupRules){.no_decay_1d = c->no_decay_1d, .norm_weight_decay = c->norm_weight_decay,
                                 .bn_bias_lr_mult = c->bn_bias_lr_mult, .bn_bias_wd_mult = c->bn_bias_wd_mult};
    const int groups = optim_set_model_groups(&l->opt, m, &l->rules);
    if (strcmp(kind->name, "sgd") != 0)
        log_info(log, "optimizer: %s: %s (eps %g)", kind->name, kind->doc, set.eps);
    int frozen = 0;
    for (int i = 0; i < m->n_param_info; i++) frozen += m->param_info[i].frozen;
    if (l->opt.group) {
        /* the rules that made the groups, in the order optim.h applies them */
        const char *why[5];
        int nw = 0;
        if (c->no_decay_1d) why[nw++] = "no weight decay on 1-D parameters";
        if (c->norm_weight_decay >= 0.0) why[nw++] = "the norms' weights and biases at --norm_weight_decay";
        if (c->bn_bias_lr_mult != 1.0) why[nw++] = "batch-norm biases at a multiple of the learning rate";
        if (c->bn_bias_wd_mult != 1.0) why[nw++] = "batch-norm biases' weight decay times --bn_bias_wd_mult";
        if (frozen) why[nw++] = "not trained: tensors marked so by the network (a whitening convolution's weight, batch norms' held weights)";
        log_info(log, "optimizer: %d parameter ranges (%s%s%s%s%s%s%s%s%s)", groups, nw > 0 ? why[0] : "", nw > 1 ? "; " : "",
                 nw > 1 ? why[1] : "", nw > 2 ? "; " : "", nw > 2 ? why[2] : "", nw > 3 ? "; " : "", nw > 3 ? why[3] : "",
                 nw > 4 ? "; " : "", nw > 4 ? why[4] : "");
    }
    grad_clip_init(&l->clip, be, c->clip_grad_norm);
    l->grad_norm = NAN;
    if (l->clip.be) log_info(log, "gradients: clipped to a global L2 norm of %g before every step", c->clip_grad_norm);

    l->lookahead_every = c->lookahead_every;
    l->lookahead_decay = c->lookahead_decay;
    if (c->lookahead_every > 0) {
        /* the slow copy lives where an EMA would (checkpoints' /ema); learner_lookahead_start fills it */
        l->lookahead = 1;
        ema_init(&l->ema, m, 0.0);
        l->ema_host.params = mallocCheck(m->num_params * sizeof(float));
        l->ema_host.buffers = mallocCheck(m->num_buffers * sizeof(float));
        l->ema_host.nbt = callocCheck((size_t)model_bn_count(m), sizeof(int64_t));
        log_info(log, "Lookahead: every %ld steps the weights and batch-norm buffers are pulled to a slow copy with decay "
                 "%g^%ld x (step / total)^3 (airbench's), and set to it at the last step", c->lookahead_every,
                 c->lookahead_decay, c->lookahead_every);
    } else if (c->ema_decay > 0.0) {
        /* torchvision's --model-ema-steps adjustment of the decay, as its train.py computes it */
        double decay = c->ema_decay;
        if (c->ema_adjust) {
            const double adjust = (double)world_size * (double)c->batch_size * (double)c->ema_every / (double)c->epochs;
            double alpha = 1.0 - c->ema_decay;
            alpha = fmin(1.0, alpha * adjust);
            decay = 1.0 - alpha;
        }
        ema_init(&l->ema, m, decay);
        l->ema_host.params = mallocCheck(m->num_params * sizeof(float));
        l->ema_host.buffers = mallocCheck(m->num_buffers * sizeof(float));
        l->ema_host.nbt = callocCheck((size_t)model_bn_count(m), sizeof(int64_t));
        /* the adjusted decay in full, for comparison with train.py's; --ema_decay as given */
        log_info(log, c->ema_adjust ? "EMA: weights and batch-norm buffers averaged with decay %.17g%s every %ld step%s (%s); "
                                      "evaluation and checkpoints use the average"
                                    : "EMA: weights and batch-norm buffers averaged with decay %g%s every %ld step%s (%s); "
                                      "evaluation and checkpoints use the average",
                 decay, c->ema_adjust ? " (--ema_adjust: torchvision's adjusted --ema_decay)" : "", c->ema_every, c->ema_every == 1 ? "" : "s",
                 world_size > 1 ? "buffers averaged over the ranks first" : "one rank");
    }

    scaler_init(&l->scaler, be, be->on_device && c->use_amp && !strcmp(c->amp_dtype, "fp16"), SCALER_INIT_SCALE,
                SCALER_GROWTH, SCALER_BACKOFF, SCALER_INTERVAL);
    m->grad_scale = scaler_scale_ptr(&l->scaler);
}

void learner_update(Learner *l, double lr) {
    Model *m = &l->model;
    scaler_unscale(&l->scaler, m->grads, m->num_params);
    if (l->clip.be) l->grad_norm = grad_clip(&l->clip, m->grads, m->num_params);
    optim_step_unless(&l->opt, m->params, m->grads, lr, scaler_skip_flag(&l->scaler));
    scaler_update(&l->scaler);
    model_params_changed(m);
}

int learner_has_average(const Learner *l) { return l->ema.be && !l->lookahead && l->ema.n_averaged > 0; }

int learner_set_epoch(Learner *l, long epoch) {
    Model *m = &l->model;
    if (l->whiten_bias_epochs <= 0) return 0;
    const int freeze = epoch >= l->whiten_bias_epochs;
    int changed = 0;
    for (int i = 0; i < m->n_param_info; i++)
        if (m->param_info[i].whiten_bias && m->param_info[i].frozen != freeze) {
            m->param_info[i].frozen = freeze;
            changed = 1;
        }
    if (changed) optim_set_model_groups(&l->opt, m, &l->rules);
    return changed && freeze;
}

void learner_lookahead_start(Learner *l) {
    if (!l->lookahead) return;
    l->ema.n_averaged = 0;
    ema_update(&l->ema, &l->model);   /* the first update copies */
}

double learner_lookahead_decay(const Learner *l, long step, long total) {
    const double t = (double)step / (double)total;
    return pow(l->lookahead_decay, (double)l->lookahead_every) * t * t * t;
}

void learner_lookahead_pull(Learner *l, double decay) {
    Model *m = &l->model;
    Ema *e = &l->ema;
    if (decay < 1.0) ema_lerp(e, m, 1.0 - decay);   /* airbench's ema.lerp_(net, 1 - decay) */
    m->be->copy(m->params, e->params, e->num_params * sizeof(float));
    m->be->copy(m->buffers, e->buffers, e->num_buffers * sizeof(float));
    model_params_changed(m);
}

void learner_free(Learner *l) {
    optim_free(&l->opt);
    grad_clip_free(&l->clip);
    ema_free(&l->ema);
    free(l->ema_host.params);
    free(l->ema_host.buffers);
    free(l->ema_host.nbt);
    scaler_free(&l->scaler);
    model_free(&l->model);
}
