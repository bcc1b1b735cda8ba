/* SPDX-License-Identifier: BSD-3-Clause */
/* trained.c - see trained.h. */
#include "trained.h"

#include <stdlib.h>
#include <string.h>

#include "ckpt/checkpoint.h"
#include "learner.h"
#include "ops/backend.h"
#include "base/util.h"

/* The run's options: the defaults, then every key of /config, as --config FILE applies a
 * file; the model overridden last. */
static int read_config(Config *c, const char *path, const char *model_override, char *err, size_t errlen) {
    char *json = checkpoint_read_config(path, err, errlen);
    if (!json) return -1;
    config_init(c);
    char what[CKPT_PATH_MAX + 16];
    snprintf(what, sizeof what, "%s: /config", path);
    int rc = config_json_apply(c, json, strlen(json), what, err, errlen);
    free(json);
    if (rc == 0 && model_override && config_set(c, "model", model_override, err, errlen) != 0) rc = -1;
    if (rc != 0) config_free(c);
    return rc;
}

/* The EMA's weights and buffers in place of the trained ones. */
static void take_ema(Model *m, const CkptEma *e) {
    memcpy(m->params, e->params, m->num_params * sizeof(float));
    memcpy(m->buffers, e->buffers, m->num_buffers * sizeof(float));
    memcpy(m->bn_tracked, e->nbt, (size_t)model_bn_count(m) * sizeof(int64_t));
    model_params_changed(m);
}

/* The weights of the file's model (built as the run built it, at the training size, for the
 * checks of checkpoint_load) into m, which may be built for a larger evaluation size. */
static int load_into(Model *m, const Trained *t, const char *path, TrainedWeights which, int *ema_taken, long *step,
                     char *err, size_t errlen) {
    const Config *c = &t->cfg;
    Model file_model, *f = m;
    char why[4800];
    if (m->image_size != config_input_size(c)) {
        f = &file_model;
        if (model_init_net(f, &backend_cpu, &t->net, c->model, (int)c->num_classes, (int)config_input_size(c), 1, why,
                           sizeof why) != 0)
            return errf(err, errlen, "%s: the run's network: %s", path, why);
        f->width = m->width;
        f->blocks = m->blocks;
        if (f->num_params != m->num_params || f->num_buffers != m->num_buffers) {
            model_free(f);
            return errf(err, errlen, "%s: the network has other parameters at --val_crop_size %ld than at the training "
                        "size %ld", path, config_eval_size(c), config_input_size(c));
        }
    }
    CkptEma ema = {0};
    ema.params = mallocCheck(m->num_params * sizeof(float));
    ema.buffers = mallocCheck(m->num_buffers * sizeof(float));
    ema.nbt = callocCheck((size_t)model_bn_count(m) + 1, sizeof(int64_t));
    TrainState ts;
    int own;
    int rc = checkpoint_load_ema(path, f, NULL, &ts, 0, 1, &own, &ema, err, errlen);
    if (rc == 0 && which == TRAINED_EMA && ema.n_averaged == 0)
        rc = errf(err, errlen, "%s: --ema: the checkpoint holds no moving average of the weights (/ema)", path);
    if (rc == 0 && which != TRAINED_NO_EMA && ema.n_averaged > 0) {
        take_ema(f, &ema);
        *ema_taken = 1;
    }
    if (rc == 0 && f != m) {   /* the same tables at another size: the same flat layout */
        memcpy(m->params, f->params, m->num_params * sizeof(float));
        memcpy(m->buffers, f->buffers, m->num_buffers * sizeof(float));
        memcpy(m->bn_tracked, f->bn_tracked, (size_t)model_bn_count(m) * sizeof(int64_t));
        model_params_changed(m);
    }
    if (f != m) model_free(f);
    free(ema.params);
    free(ema.buffers);
    free(ema.nbt);
    *step = ts.global_step;
    return rc;
}

int trained_open(Trained *t, const char *path, const char *model_override, TrainedWeights which, int max_batch,
                 char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    if (read_config(&t->cfg, path, model_override, err, errlen) != 0) return -1;
    const Config *c = &t->cfg;
    char why[4800];
    if (learner_network(c, &t->net, why, sizeof why) != 0) {
        errf(err, errlen, "%s: the run's network: %s", path, why);
        config_free(&t->cfg);
        return -1;
    }
    Model *m = &t->model;
    /* room for the larger of the two sizes (FixRes evaluates above the training crop) */
    const long size = config_eval_size(c) > config_input_size(c) ? config_eval_size(c) : config_input_size(c);
    if (max_batch <= 0) max_batch = (int)c->batch_size;
    if (model_init_net(m, &backend_cpu, &t->net, c->model, (int)c->num_classes, (int)size, max_batch, why,
                       sizeof why) != 0) {
        errf(err, errlen, "%s: the run's network: %s", path, why);
        goto fail_net;
    }
    if (!strcmp(c->model, "miniresnet")) { m->width = (int)c->width; m->blocks = (int)c->blocks; }
    if (load_into(m, t, path, which, &t->ema, &t->step, err, errlen) != 0) goto fail_model;
    if (model_set_input_size(m, (int)config_eval_size(c), why, sizeof why) != 0) {
        errf(err, errlen, "%s: --val_crop_size %ld: %s", path, config_eval_size(c), why);
        goto fail_model;
    }
    return 0;
fail_model:
    model_free(m);
fail_net:
    netspec_free(&t->net);
    config_free(&t->cfg);
    memset(t, 0, sizeof *t);
    return -1;
}

void trained_free(Trained *t) {
    model_free(&t->model);
    netspec_free(&t->net);
    config_free(&t->cfg);
    memset(t, 0, sizeof *t);
}
