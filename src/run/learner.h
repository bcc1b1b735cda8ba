/* SPDX-License-Identifier: BSD-3-Clause */
/* learner.h - what learns, and exactly what a checkpoint holds: the model, the optimizer, the
 * EMA of the weights and the fp16 loss scaler, built from the options on one backend.
 *
 * The loop (train.c) runs the model's forward and backward itself, since the reducer's buckets
 * go out between them; once the gradients are averaged, learner_update takes the step. */
#ifndef DDP_LEARNER_H
#define DDP_LEARNER_H

#include "ops/backend.h"
#include "ckpt/checkpoint.h"
#include "base/config.h"
#include "model/ema.h"
#include "model/grad_clip.h"
#include "base/logger.h"
#include "model/model.h"
#include "model/optim.h"
#include "model/scaler.h"

typedef struct {
    Model model;
    Optimizer opt;           /* --optimizer's (optim.h) */
    GradClip clip;           /* --clip_grad_norm; clip.be is NULL when off */
    float grad_norm;         /* the last step's gradient norm before clipping (NAN when off) */
    Ema ema;                 /* --ema_decay's average (ema.h); ema.be is NULL when off */
    CkptEma ema_host;        /* its host copy for checkpoints and resumes */
    GradScaler scaler;       /* fp16 loss scaling; disabled otherwise */
    int lookahead;           /* --lookahead_every: ema holds Lookahead's slow copy, not an average */
    long lookahead_every;
    double lookahead_decay;
    long whiten_bias_epochs; /* --whiten_bias_epochs (0: the whitening bias trained throughout) */
    OptimGroupRules rules;   /* the groups' settings, to install them again */
} Learner;

/* The network --model names (a built-in, shaped by --width and --blocks for MiniResNet, or a
 * file), checked against the input size, the evaluation size and --num_classes: 0, or -1 with one line in err naming
 * the flag or the file, the node and the field. Run by every rank before any collective. */
int learner_network(const Config *c, NetSpec *net, char *err, size_t errlen);

/* --init_from's file against `net`, tried on a model of one image in host memory, so that a
 * file of another network fails before anything is written: 0, or -1 with one line in err. */
int learner_check_init_from(const Config *c, const NetSpec *net, char *err, size_t errlen);

/* The model of `net` with its initial weights from --seed (or --init_from), --optimizer's optimizer with its parameter
 * groups, the gradient clipping, the EMA and the scaler; logs what was built. The model's activations are sized for the training
 * batch only (model_evaluate chunks a larger evaluation batch). peak_bytes, the run's estimated
 * peak memory (memory_check.h), goes on the model's log line when it is not 0. */
void learner_init(Learner *l, const Config *c, const NetSpec *net, const Backend *be, int world_size, size_t peak_bytes,
                  Logger *log);

/* The optimizer step on the averaged gradients at learning rate lr: unscaled, clipped to
 * --clip_grad_norm (their norm kept in grad_norm), skipped by the fp16 scaler when a gradient
 * overflowed. */
void learner_update(Learner *l, double lr);

/* Whether the EMA holds an average (it starts at the first update); never under Lookahead. */
int learner_has_average(const Learner *l);
/* At the start of an epoch: a whitening convolution's bias frozen from --whiten_bias_epochs on
 * (its parameter group's learning rate 0, as airbench's requires_grad = False). Returns 1 when
 * it was frozen now. */
int learner_set_epoch(Learner *l, long epoch);
/* Lookahead (airbench's LookaheadState): the slow copy taken from the model (at the start of a
 * run, after any whitening); the decay of the pull at global step `step` of `total`,
 * lookahead_decay^every x (step / total)^3; the pull: slow.lerp_(model, 1 - D) over parameters
 * and buffers (ema_lerp; D 1: slow unchanged), then the model set to it. */
void learner_lookahead_start(Learner *l);
double learner_lookahead_decay(const Learner *l, long step, long total);
void learner_lookahead_pull(Learner *l, double decay);

void learner_free(Learner *l);

#endif
