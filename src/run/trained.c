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
    if (model_init_net(m, &backend_cpu, &t->net, c->model, (int)c->num_classes, (int)config_input_size(c), max_batch,
                       why, sizeof why) != 0) {
        errf(err, errlen, "%s: the run's network: %s", path, why);
        goto fail_net;
    }
    if (!strcmp(c->model, "miniresnet")) { m->width = (int)c->width; m->blocks = (int)c->blocks; }
    CkptEma ema = {0};
    ema.params = mallocCheck(m->num_params * sizeof(float));
    ema.buffers = mallocCheck(m->num_buffers * sizeof(float));
    ema.nbt = callocCheck((size_t)model_bn_count(m) + 1, sizeof(int64_t));
    TrainState ts;
    int own;
    int rc = checkpoint_load_ema(path, m, NULL, &ts, 0, 1, &own, &ema, err, errlen);
    if (rc == 0 && which == TRAINED_EMA && ema.n_averaged == 0)
        rc = errf(err, errlen, "%s: --ema: the checkpoint holds no moving average of the weights (/ema)", path);
    if (rc == 0 && which != TRAINED_NO_EMA && ema.n_averaged > 0) {
        take_ema(m, &ema);
        t->ema = 1;
    }
    free(ema.params);
    free(ema.buffers);
    free(ema.nbt);
    if (rc != 0) goto fail_model;
    t->step = ts.global_step;
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
