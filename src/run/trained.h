/* SPDX-License-Identifier: BSD-3-Clause */
/* trained.h - a trained network from its checkpoint, for the programs that use one after
 * training (ddptrain-predict, ddptrain-export): the run's options from the file's /config, the
 * network they name (a built-in, or a network file, which --model may point elsewhere), and its
 * weights, the EMA's when the file holds an average (as the run's evaluation used them) unless
 * told otherwise. The model is built on the CPU backend for `max_batch` images at the larger of
 * the training and evaluation sizes and shaped for the evaluation's (--val_crop_size), ready for
 * evaluation forwards.
 *
 * Every failure is one line in err naming the checkpoint (or the network file) and what is
 * wrong: not a ddptrain checkpoint, no /config, a network that does not match the tensors. */
#ifndef DDP_TRAINED_H
#define DDP_TRAINED_H

#include <stddef.h>

#include "base/config.h"
#include "model/model.h"
#include "model/netspec.h"

/* Which weights: the EMA's when the file has an average (TRAINED_AUTO), always (fails when it
 * has none), or never. */
typedef enum { TRAINED_AUTO = 0, TRAINED_EMA, TRAINED_NO_EMA } TrainedWeights;

typedef struct {
    Config cfg;          /* the run's options, from /config (model as overridden) */
    NetSpec net;
    Model model;         /* shaped for config_eval_size(&cfg) */
    int ema;             /* the weights are the EMA's */
    long step;           /* the checkpoint's global step */
} Trained;

/* model_override: a network file (or built-in name) in place of the run's --model, NULL to keep
 * it. max_batch: images per forward, 0 for the run's --batch_size (its evaluation's forwards).
 * Returns 0, or -1 with one line in err (t left zeroed). */
int trained_open(Trained *t, const char *path, const char *model_override, TrainedWeights which, int max_batch,
                 char *err, size_t errlen);
void trained_free(Trained *t);

#endif
