/* SPDX-License-Identifier: BSD-3-Clause */
/* ckpt_policy.c - see ckpt_policy.h. */
#include "ckpt_policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/agree.h"
#include "ckpt/host_mirror.h"
#include "ckpt/resume.h"
#include "data/shard_format.h"
#include "base/util.h"

void ckpt_policy_init(CkptPolicy *p, const Config *c, Comm *comm, Logger *log, const char *const *hosts,
                      const char *ckpt_dir, const char *config_json) {
    memset(p, 0, sizeof *p);
    p->cfg = c;
    p->comm = comm;
    p->log = log;
    p->hosts = hosts;
    p->ckpt_dir = ckpt_dir;
    p->config_json = config_json;
    checkpoint_writer_init(&p->writer, (int)c->keep_checkpoints);
}

void ckpt_policy_set_dataset(CkptPolicy *p, const DataLoader *test) {
    CkptDataset d = {.present = 1, .num_classes = dataloader_num_classes(test)};
    dataloader_norm(test, d.mean, d.std);
    /* the loader's names are the shards' (all or none), borrowed for the copy the writer takes;
     * a name longer than a dataset of names may hold (an attribute's may be) leaves them out */
    int fit = dataloader_class_name(test, 0) != NULL;
    for (int k = 0; fit && k < d.num_classes; k++) fit = strlen(dataloader_class_name(test, k)) <= SHARD_MAX_CLASS_NAME;
    if (!fit && dataloader_class_name(test, 0))
        log_warn(p->log, "checkpoint: a class name of the test split is longer than %d bytes: the checkpoints record "
                 "no class names", SHARD_MAX_CLASS_NAME);
    if (fit) {
        d.class_names = mallocCheck((size_t)d.num_classes * sizeof(char *));
        for (int k = 0; k < d.num_classes; k++) d.class_names[k] = (char *)dataloader_class_name(test, k);
    }
    checkpoint_writer_set_dataset(&p->writer, &d);
    free(d.class_names);
}

/* Rank 0: the file, from the model's averaged statistics and the ranks' own. */
static void write_on_rank0(CkptPolicy *p, Learner *l, const float *rank_buffers, const DataLoader *train, long epoch,
                           long step_in_epoch, long global_step, int wait) {
    const Config *c = p->cfg;
    TrainState ts = {.epoch = epoch, .step_in_epoch = step_in_epoch, .global_step = global_step,
                     .world_size = p->comm->world_size, .seed = (uint64_t)c->seed};
    resume_stamp(&ts, c->batch_size, c->grad_accum_steps, c->seed, train);
    if (l->scaler.enabled) {
        ts.has_amp = 1;
        ts.amp[AMP_LOSS_SCALE] = scaler_get_scale(&l->scaler);
        ts.amp[AMP_GROWTH_TRACKER] = scaler_get_tracker(&l->scaler);
    }
    char path[CKPT_PATH_MAX], err[1200];
    checkpoint_path(path, sizeof path, p->ckpt_dir, global_step);
    HostMirror h;
    host_mirror_open(&h, &l->model, &l->opt);
    host_mirror_pull(&h, &l->model, &l->opt);
    const CkptEma *ema = NULL;
    /* Lookahead's slow copy is kept where the EMA would be */
    if (learner_has_average(l) || (l->lookahead && l->ema.n_averaged > 0)) {
        ema_download(&l->ema, l->ema_host.params, l->ema_host.buffers, l->ema_host.nbt);
        l->ema_host.n_averaged = l->ema.n_averaged;
        l->ema_host.decay = l->ema.decay;
        ema = &l->ema_host;
    }
    if (checkpoint_writer_submit_ema(&p->writer, path, h.model, h.opt, &ts, rank_buffers, ema, p->config_json, err,
                                     sizeof err) != 0)
        log_warn(p->log, "checkpoint: previous write failed: %s", err);
    host_mirror_close(&h);
    log_info(p->log, "checkpoint: %s (epoch %ld, step %ld; training paused %.1f ms)", path, epoch + 1, global_step,
             1e3 * p->writer.last_submit_sec);
    if (wait && checkpoint_writer_wait(&p->writer, err, sizeof err) != 0) log_warn(p->log, "checkpoint: write failed: %s", err);
}

void ckpt_policy_save(CkptPolicy *p, Learner *l, Replica *rep, const DataLoader *train, long epoch, long step_in_epoch,
                      long global_step, int wait) {
    /* /model gets the running statistics averaged over the ranks, /train_state/rank_buffers
     * every rank's own; every rank takes part, and goes on with its own afterwards. */
    float *rank_buffers = replica_buffers_gather(rep);
    replica_buffers_average(rep);
    if (p->comm->rank == 0) write_on_rank0(p, l, rank_buffers, train, epoch, step_in_epoch, global_step, wait);
    replica_buffers_restore(rep);
    free(rank_buffers);
}

static void log_skipped_checkpoint(void *ctx, const char *path, const char *reason) {
    log_warn((Logger *)ctx, "resume: skipping %s: %s; falling back to the previous checkpoint", path, reason);
}

/* Rank 0 picks the file, and every rank learns it: 0 found (path), 1 none (a fresh start);
 * dies when --resume names nothing usable. */
static int choose(CkptPolicy *p, const Model *m, char *path, size_t n) {
    const Config *c = p->cfg;
    char err[1200] = "";
    int status = 0;   /* 0 found, 1 none, -1 error */
    path[0] = '\0';
    if (p->comm->rank == 0) {
        if (!strcmp(c->resume, "none")) {
            status = 1;
        } else if (!strcmp(c->resume, "auto")) {
            status = checkpoint_find_latest(p->ckpt_dir, m, path, n, log_skipped_checkpoint, p->log, err, sizeof err);
        } else {
            snprintf_check(path, n, "%s", c->resume);
            status = checkpoint_verify(path, m, err, sizeof err) == 0 ? 0 : -1;
            if (status != 0 && err[0] == '\0') snprintf(err, sizeof err, "--resume %s: not a usable checkpoint", path);
        }
    }
    int64_t st = status;
    comm_broadcast(p->comm, &st, sizeof st, 0);
    comm_broadcast(p->comm, path, n, 0);
    comm_broadcast(p->comm, err, sizeof err, 0);
    if (st < 0) {
        if (!strcmp(c->resume, "auto"))
            die("--resume auto: no usable checkpoint in %s (%s); pass --resume none to start over", p->ckpt_dir, err);
        die("%s", err);
    }
    return (int)st;
}

/* The file's state into the learner (through host copies on a device). `own`: the file gave
 * this rank its own running statistics. */
static void load(CkptPolicy *p, Learner *l, const char *path, TrainState *ts, int *own) {
    char err[1200];
    Model *m = &l->model;
    HostMirror h;
    host_mirror_open(&h, m, &l->opt);
    /* the file's /ema is read (and checked) whether this run averages or not */
    CkptEma fe = {0};
    if (!l->ema.be) {
        fe.params = mallocCheck(m->num_params * sizeof(float));
        fe.buffers = mallocCheck(m->num_buffers * sizeof(float));
        fe.nbt = callocCheck((size_t)model_bn_count(m), sizeof(int64_t));
    }
    CkptEma *fema = l->ema.be ? &l->ema_host : &fe;
    if (checkpoint_load_ema(path, h.model, h.opt, ts, p->comm->rank, p->comm->world_size, own, fema, err, sizeof err) != 0)
        die("%s", err);
    if (l->lookahead && fema->n_averaged > 0) {
        ema_upload(&l->ema, fema->params, fema->buffers, fema->nbt, fema->n_averaged);
        log_info(p->log, "resume: Lookahead: its slow copy from the checkpoint's /ema");
    } else if (l->ema.be && fema->n_averaged > 0) {
        ema_upload(&l->ema, fema->params, fema->buffers, fema->nbt, fema->n_averaged);
        log_info(p->log, "resume: EMA: the average of %ld update%s (decay %g%s)", fema->n_averaged,
                 fema->n_averaged == 1 ? "" : "s", fema->decay,
                 fema->decay == p->cfg->ema_decay ? "" : "; it goes on with this run's --ema_decay");
    } else if (l->ema.be) {
        log_info(p->log, "resume: EMA: the checkpoint holds no average; it starts as a copy of the model at the next update");
    } else if (fema->n_averaged > 0) {
        log_info(p->log, "resume: the checkpoint's EMA (/ema) is not used by this run (--ema_decay 0) and is not kept");
    }
    free(fe.params);
    free(fe.buffers);
    free(fe.nbt);
    host_mirror_push(&h, m, &l->opt);
    host_mirror_close(&h);
}

/* The fp16 loss scaler's state from the file, when this run scales. */
static void resume_scaler(CkptPolicy *p, Learner *l, const char *path, const TrainState *ts) {
    GradScaler *s = &l->scaler;
    if (s->enabled && ts->has_amp) {
        const double sc = ts->amp[AMP_LOSS_SCALE], tr = ts->amp[AMP_GROWTH_TRACKER];
        if (!(sc > 0.0 && sc < 3.4e38 && tr >= 0.0 && tr < 2147483647.0))
            die("%s: /train_state/amp holds an invalid loss scale %g or growth tracker %g", path, sc, tr);
        scaler_set(s, (float)sc, (int)tr);
        log_info(p->log, "resume: fp16 loss scale %g, %d clean steps towards the next growth", sc, (int)tr);
    } else if (s->enabled) {
        log_info(p->log, "resume: the checkpoint has no loss-scaler state; fp16 loss scale starts at %g", (double)s->init_scale);
    } else if (ts->has_amp) {
        log_info(p->log, "resume: the checkpoint's fp16 loss-scaler state is not needed by this run (%s)",
                 l->model.be->on_device ? "no fp16" : "CPU");
    }
}

int ckpt_policy_resume(CkptPolicy *p, Learner *l, Replica *rep, Splits *s, TrainState *ts) {
    const Config *c = p->cfg;
    const int world = p->comm->world_size;
    char path[CKPT_PATH_MAX], err[1200];
    if (choose(p, &l->model, path, sizeof path) != 0) return 0;
    int own = 0;
    load(p, l, path, ts, &own);
    /* --data_in_memory auto follows the checkpoint: a requeued job goes on in the order it
     * stopped in, whatever memory its new node has (every rank read the same file, and
     * splits_agree_on_storage made the ranks' choices one). */
    if (!strcmp(c->data_in_memory, "auto") && ts->has_data_order)
        splits_hold(s, ts->data_chunk_images != 0,
                    ts->data_chunk_images == 0 ? "--data_in_memory auto: held in memory as when the checkpoint was written"
                                               : "--data_in_memory auto: streamed as when the checkpoint was written",
                    p->log);
    TrainState now = *ts;
    resume_stamp(&now, c->batch_size, c->grad_accum_steps, c->seed, s->train);
    if (resume_check(ts, &now, c->data_dir, err, sizeof err) != 0) {
        g_die_quiet = p->comm->rank != 0;   /* every rank finds the same */
        if (!c->resume_data_change) die("%s: %s; %s", path, err, RESUME_REFUSAL_HINT);
        g_die_quiet = 0;
        log_warn(p->log, "resume: %s: %s; --resume_data_change: going on from the start of the next epoch", path, err);
        resume_next_epoch(ts);
    }
    log_info(p->log, "resume: %s: epoch %ld, step %ld of the epoch, global step %ld (written by %d rank%s)", path,
             ts->epoch + 1, ts->step_in_epoch, ts->global_step, ts->world_size, ts->world_size == 1 ? "" : "s");
    /* Every rank reads the same file, so `own` is the same on every rank. */
    if (own)
        log_info(p->log, "resume: batch norm: every rank continues from its own running statistics");
    else if (world > 1 || ts->world_size > 1)
        log_info(p->log, "resume: batch norm: every rank starts from the running statistics averaged over the "
                 "checkpoint's %d rank%s%s", ts->world_size, ts->world_size == 1 ? "" : "s",
                 ts->world_size == world ? " (it holds no per-rank statistics)" : "");
    resume_scaler(p, l, path, ts);
    if (ts->world_size != world)
        log_warn(p->log, "resume: checkpoint from %d ranks, running on %d: the rest of epoch %ld follows this world "
                 "size's data order from step %ld (some of its samples may be seen twice or not at all)",
                 ts->world_size, world, ts->epoch + 1, ts->step_in_epoch);
    /* every rank read the file itself: a stale copy on one node shows here */
    Agreement a;
    agree_init(&a);
    const int64_t where[3] = {ts->epoch, ts->step_in_epoch, ts->global_step};
    char v[48];
    snprintf(v, sizeof v, "global step %ld", ts->global_step);
    agree_add(&a, "the resumed checkpoint's position", v, where, sizeof where);
    const uint64_t w = replica_params_checksum(rep);
    agree_add(&a, "the resumed checkpoint's weights", "", &w, sizeof w);
    agree_require(&a, p->comm, p->hosts);
    return 1;
}

int ckpt_policy_wait(CkptPolicy *p, char *err, size_t errlen) {
    return p->comm->rank == 0 ? checkpoint_writer_wait(&p->writer, err, errlen) : 0;
}

void ckpt_policy_free(CkptPolicy *p) { checkpoint_writer_free(&p->writer); }
