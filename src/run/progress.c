/* SPDX-License-Identifier: BSD-3-Clause */
/* progress.c - see progress.h. */
#include "progress.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/metrics_tags.h"
#include "base/util.h"

void progress_init(Progress *p, const Config *c, Comm *comm, Logger *log, TimeAcct *time, const char *const *hosts) {
    memset(p, 0, sizeof *p);
    p->cfg = c;
    p->comm = comm;
    p->log = log;
    p->time = time;
    p->hosts = hosts;
    straggler_init(&p->straggler, comm->world_size, c->straggler_factor, c->log_interval);
}

void progress_open_window(Progress *p, Reducer *rd, double t) {
    p->t_start = t;
    p->images = 0;
    p->steps = 0;
    p->data_wait = 0.0;
    p->step_time = 0.0;
    rd->wait_time = 0.0;
}

/* Rank 0 with --tensorboard: every rank's seconds in the window and their shares, which only
 * this exchange brings to rank 0 ("rank/003/data_share"; metrics.jsonl holds rank 0's
 * communication wait and the ranks' mean data time). */
static void rank_scalars(Progress *p, const StragglerTimes *all, long step) {
    const int world = p->comm->world_size;
    TfScalar *s = callocCheck((size_t)world * 6, sizeof *s);
    size_t n = 0;
    for (int q = 0; q < world; q++) {
        char group[32];
        snprintf_check(group, sizeof group, "rank/%03d", q);
        const struct { const char *name; double sec; } part[3] = {
            {"data_sec", all[q].data}, {"compute_sec", all[q].compute}, {"comm_wait_sec", all[q].comm}};
        for (int i = 0; i < 3; i++, n++) {
            snprintf_check(s[n].tag, sizeof s[n].tag, "%s/%s", group, part[i].name);
            s[n].value = part[i].sec;
        }
        n += metrics_tags_shares(s + n, group, all[q].data, all[q].compute, all[q].comm);
    }
    logger_scalars(p->log, step, s, n);
    free(s);
}

/* Every rank's times in the window, one collective; rank 0 names a straggler and its recovery
 * in the log and in metrics.jsonl. */
static void check_stragglers(Progress *p, const Reducer *rd, long step) {
    const int world = p->comm->world_size;
    if (p->cfg->straggler_factor <= 0.0 || world == 1) return;
    StragglerTimes mine = {.data = p->data_wait, .comm = rd->wait_time};
    mine.compute = p->step_time - mine.data - mine.comm;
    if (mine.compute < 0.0) mine.compute = 0.0;
    StragglerTimes *all = callocCheck((size_t)world, sizeof *all);
    straggler_exchange(p->comm, &mine, all);
    if (p->comm->rank == 0 && p->log->tb) rank_scalars(p, all, step);
    StragglerEvent ev[STRAGGLER_MAX_EVENTS];
    const int n = straggler_update(&p->straggler, all, step - p->steps + 1, step, ev, STRAGGLER_MAX_EVENTS);
    for (int i = 0; i < n && p->comm->rank == 0; i++) {
        char line[512];
        straggler_describe(&ev[i], p->hosts[ev[i].rank], line, sizeof line);
        log_warn(p->log, "%s", line);
        straggler_json(&ev[i], p->hosts[ev[i].rank], step, line, sizeof line);
        logger_metrics(p->log, line);
    }
    free(all);
}

/* The fp16 scaler's skipped steps in the window (the same on every rank: scaler.h); ends the
 * run when every step of the window overflowed even at a loss scale below 1. */
static long note_skipped(Progress *p, GradScaler *s, long step) {
    const long skipped = scaler_take_skipped(s);
    if (skipped > 0) {
        const double scale = scaler_get_scale(s);
        log_info(p->log, "step %ld: %ld of the last %ld steps skipped: fp16 gradients overflowed; loss scale now %g", step,
                 skipped, p->steps, scale);
        if (skipped == p->steps && scale < 1.0)
            die("step %ld: fp16 gradients overflow even with a loss scale of %g; training diverged (lower --lr, or "
                "--amp_dtype bf16?)", step, scale);
    }
    return skipped;
}

void progress_log(Progress *p, Learner *l, Reducer *rd, const ProgressAt *at) {
    const Config *c = p->cfg;
    const int world = p->comm->world_size;
    reducer_drain(rd);   /* before the loss is read back from the device */
    const double t = now_sec();
    double stats[2] = {model_take_loss_sum(&l->model) / (double)(p->steps * c->grad_accum_steps), p->data_wait};
    comm_set_context(p->comm, "loss for the log");
    comm_allreduce(p->comm, stats, 2, COMM_FLOAT64, COMM_AVG);
    const long skipped = note_skipped(p, &l->scaler, at->step);
    /* A step the scaler skipped may have an infinite loss: that is what it is for. */
    if (!isfinite(stats[0]) && skipped == 0) die("step %ld: loss is %f; training diverged (lower --lr?)", at->step, stats[0]);
    const double dt = t - p->t_start, comm_wait = rd->wait_time;
    check_stragglers(p, rd, at->step);
    const double ips = (double)p->images * world / dt;
    /* ETA from this invocation's average step time (evaluations included). */
    const double eta = (t - at->t_train0) / (double)(at->step - at->step_first) * (double)(at->total_steps - at->step);
    const long epochs = (at->total_steps + at->steps_per_epoch - 1) / at->steps_per_epoch;
    logger_progress(p->log, at->epoch + 1, epochs, at->step, at->total_steps, stats[0], ips, eta,
                    "epoch %ld step %ld/%ld loss %.4f lr %.5f %.1f images/s (data %.0f%%, comm wait %.0f%%)",
                    at->epoch + 1, at->step, at->total_steps, stats[0], at->lr, ips, 100.0 * stats[1] / dt,
                    100.0 * comm_wait / dt);
    char line[640], norm[64] = "";
    /* --clip_grad_norm: the norm of this step's gradients before clipping (the same on every rank) */
    if (l->clip.be && isfinite(l->grad_norm)) snprintf_check(norm, sizeof norm, ", \"grad_norm\": %.8g", (double)l->grad_norm);
    else if (l->clip.be) snprintf_check(norm, sizeof norm, ", \"grad_norm\": null");   /* JSON has no inf */
    snprintf_check(line, sizeof line,
                   "{\"epoch\": %ld, \"step\": %ld, \"loss\": %.6f, \"lr\": %.8g%s, \"images_per_sec\": %.2f, "
                   "\"data_sec\": %.4f, \"compute_sec\": %.4f, \"comm_wait_sec\": %.4f, \"time\": %.3f}",
                   at->epoch + 1, at->step, stats[0], at->lr, norm, ips, stats[1], dt - stats[1] - comm_wait, comm_wait,
                   t - at->t_train0);
    logger_metrics(p->log, line);
    if (timeacct_write(p->time, at->step, TIMEACCT_DUE) != 0)
        log_warn(p->log, "%s: cannot write: %s", p->time->path, strerror(errno));
    progress_open_window(p, rd, t);
}

void progress_free(Progress *p) { straggler_free(&p->straggler); }
