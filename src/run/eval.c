/* SPDX-License-Identifier: BSD-3-Clause */
/* eval.c - see eval.h. */
#include "eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>

#include "confusion.h"
#include "tta.h"
#include "base/util.h"

void eval_init(Evaluator *e, const Config *c, Comm *comm, Logger *log, Batches *b, const NetSpec *net,
               const Backend *be, const char *job_dir) {
    memset(e, 0, sizeof *e);
    e->cfg = c;
    e->comm = comm;
    e->log = log;
    e->batches = b;
    e->job_dir = job_dir;
    e->last_acc = e->last_acc5 = -1.0;
    e->eval_step = -1;
    /* the model's forwards take at most batch_size images (model_evaluate's chunks) */
    eval_tally_init(&e->tally, (int)c->num_classes, (int)c->batch_size);
    const long size = config_eval_size(c);
    if (size != config_input_size(c)) {
        char err[4800];
        /* learner_network resolved the network at this size too: not refused here */
        if (model_init_net(&e->sized, be, net, c->model, (int)c->num_classes, (int)size, (int)c->batch_size, err,
                           sizeof err) != 0)
            die("%s", err);
        log_info(log, "evaluation: at %ldx%ld (--val_crop_size; training at %ldx%ld): the network's activations a "
                 "second time at that size, %.3f GMACs per image", size, size, config_input_size(c),
                 config_input_size(c), model_macs_per_image(&e->sized) / 1e9);
    }
    if (strcmp(c->tta, "none") != 0) {   /* the model's forwards take at most batch_size images */
        const size_t img = (size_t)size * size * 3;
        e->tta_x = alignedAllocCheck((size_t)c->batch_size * img * sizeof(float));
        e->tta_logits = mallocCheck((size_t)c->batch_size * c->num_classes * sizeof(float));
    }
}

/* Each chunk's logits tallied before the next forward overwrites them (model_evaluate_each). */
static void tally_chunk(void *tally, const Model *m, const int *labels, int off, int n) {
    eval_tally_add_model(tally, m, labels, n);
}

/* Accuracy over the whole test split; *loss_out the mean loss; e->tally the counts. Exact sums. */
static double evaluate(Evaluator *e, Model *m, double *loss_out) {
    dataloader_start_epoch(e->batches->dl[BATCH_TEST], 0, 0);
    const int tta = tta_parse(e->cfg->tta);
    eval_tally_reset(&e->tally);
    double sums[3] = {0.0, 0.0, 0.0};   /* correct, total, loss*n */
    int n;
    const float *x;
    const int *y;
    while ((n = batches_next(e->batches, BATCH_TEST, &x, &y)) > 0) {
        /* an evaluation batch larger than the training batch goes through in chunks */
        long c;
        double loss_sum;
        if (tta != TTA_NONE) tta_evaluate(m, tta, x, y, n, e->tta_x, e->tta_logits, &c, &loss_sum, &e->tally);
        else model_evaluate_each(m, x, y, n, &c, &loss_sum, tally_chunk, &e->tally);
        sums[0] += (double)c;
        sums[1] += n;
        sums[2] += loss_sum;
    }
    comm_set_context(e->comm, "evaluation totals");
    comm_allreduce(e->comm, sums, 3, COMM_FLOAT64, COMM_SUM);   /* integers < 2^53: exact */
    eval_tally_allreduce(&e->tally, e->comm);
    *loss_out = sums[1] > 0 ? sums[2] / sums[1] : 0.0;
    return sums[1] > 0 ? sums[0] / sums[1] : 0.0;
}

/* The model to evaluate: the trained one, or the one at the evaluation size with its weights
 * and buffers (the EMA's or the averaged ones, as they stand in m now). */
static Model *sized_copy(Evaluator *e, Model *m) {
    Model *s = &e->sized;
    if (!s->be) return m;
    CHECK(s->num_params == m->num_params && s->num_buffers == m->num_buffers);
    s->be->copy(s->params, m->params, m->num_params * sizeof(float));
    s->be->copy(s->buffers, m->buffers, m->num_buffers * sizeof(float));
    memcpy(s->bn_tracked, m->bn_tracked, (size_t)m->n_bn * sizeof(int64_t));
    model_params_changed(s);
    return s;
}

static void set_size(Model *m, int size) {
    char err[4800];
    if (model_set_input_size(m, size, err, sizeof err) != 0) die("%s", err);   /* learner_network resolved it */
}

void eval_run_and_log(Evaluator *e, Learner *l, Replica *rep, long epoch, long step, double lr, double t_train0) {
    const Config *c = e->cfg;
    double t0 = now_sec(), test_loss;
    /* The average when there is one: the same on every rank, buffers included (train.c's
     * ema_step). */
    const int ema = learner_has_average(l);
    if (ema) ema_swap_in(&l->ema, &l->model);
    else replica_buffers_average(rep);
    /* The trained model itself when it was built for this size: shaped for it when progressive
     * resizing trains it at another size now, and back afterwards. */
    Model *m = sized_copy(e, &l->model);
    const int train_size = m->input_size;
    set_size(m, (int)config_eval_size(c));
    e->last_acc = evaluate(e, m, &test_loss);
    set_size(m, train_size);
    if (ema) ema_swap_out(&l->ema, &l->model);
    else replica_buffers_restore(rep);
    if (e->last_acc > e->best_acc) e->best_acc = e->last_acc;
    const EvalTally *t = &e->tally;
    e->last_acc5 = t->has_top5 && t->c[TALLY_IMAGES] > 0 ? (double)t->c[TALLY_TOP5] / (double)t->c[TALLY_IMAGES] : -1.0;
    /* top-5 after the loss, so that "test_acc A test_loss L" reads as it always has */
    char acc5[48] = "", acc5_json[48] = "";
    if (e->last_acc5 >= 0.0) {
        snprintf_check(acc5, sizeof acc5, " test_acc5 %.4f", e->last_acc5);
        snprintf_check(acc5_json, sizeof acc5_json, "\"test_acc5\": %.6f, ", e->last_acc5);
    }
    const char *which = !l->ema.be || l->lookahead ? "" : ema ? " (EMA)" : " (EMA not updated yet: the trained weights)";
    const int tta = strcmp(c->tta, "none") != 0;
    log_info(e->log, "epoch %ld step %ld test_acc %.4f test_loss %.4f%s%s%s%s%s (%.1f s)", epoch + 1, step, e->last_acc,
             test_loss, acc5, which, tta ? " (TTA " : "", tta ? c->tta : "", tta ? ")" : "", now_sec() - t0);
    char tta_json[64] = "";
    if (tta) snprintf_check(tta_json, sizeof tta_json, "\"tta\": \"%s\", ", c->tta);
    char line[512];
    snprintf_check(line, sizeof line,
                   "{\"epoch\": %ld, \"step\": %ld, \"lr\": %.8g, \"test_acc\": %.6f, \"test_loss\": %.6f, %s%s%s\"time\": %.3f}",
                   epoch + 1, step, lr, e->last_acc, test_loss, acc5_json, ema ? "\"ema\": true, " : "", tta_json,
                   now_sec() - t_train0);
    logger_metrics(e->log, line);
    /* rank 0 replaces the file after every evaluation: the last one stays, the run's final */
    if (e->comm->rank == 0) {
        const ConfusionInfo info = {.epoch = epoch + 1, .step = step, .ema = ema, .tta = c->tta,
                                    .test = e->batches->dl[BATCH_TEST]};
        if (confusion_write(e->job_dir, t, &info) != 0)
            log_warn(e->log, "%s/" CONFUSION_FILE ": cannot write: %s", QUOTED(e->job_dir), strerror(errno));
    }
    e->eval_step = step;
    /* every rank sees the same accuracy, so every rank stops at the same step */
    if (c->target_accuracy > 0.0 && !e->target_reached && e->last_acc >= c->target_accuracy) {
        e->target_reached = 1;
        e->target_time = now_sec() - t_train0;
        e->target_step = step;
        e->target_epoch = epoch + 1;
        log_info(e->log, "target_accuracy %g reached: test_acc %.4f at step %ld (epoch %ld), %.1f s after the start "
                 "of training; stopping", c->target_accuracy, e->last_acc, step, epoch + 1, e->target_time);
    }
}

void eval_report_target(const Evaluator *e, long step, double train_sec, double startup_sec) {
    const double target = e->cfg->target_accuracy;
    char line[512];
    if (e->target_reached) {
        log_info(e->log, "time to train: %.3f s to test_acc %.4f >= target_accuracy %g at step %ld (epoch %ld); "
                 "start-up %.3f s apart", e->target_time, e->last_acc, target, e->target_step, e->target_epoch,
                 startup_sec);
        snprintf_check(line, sizeof line,
                       "{\"event\": \"target_accuracy\", \"reached\": true, \"target\": %.6g, \"accuracy\": %.6f, "
                       "\"step\": %ld, \"epoch\": %ld, \"time_to_train\": %.3f, \"startup\": %.3f}",
                       target, e->last_acc, e->target_step, e->target_epoch, e->target_time, startup_sec);
    } else {
        log_info(e->log, "target_accuracy %g not reached: best test_acc %.4f in %ld steps (%.3f s of training; start-up "
                 "%.3f s apart); exit status %d", target, e->best_acc, step, train_sec, startup_sec, EVAL_EXIT_TARGET_MISSED);
        snprintf_check(line, sizeof line,
                       "{\"event\": \"target_accuracy\", \"reached\": false, \"target\": %.6g, \"best_accuracy\": %.6f, "
                       "\"step\": %ld, \"train_time\": %.3f, \"startup\": %.3f}",
                       target, e->best_acc, step, train_sec, startup_sec);
    }
    logger_metrics(e->log, line);
}

void eval_free(Evaluator *e) {
    if (e->sized.be) model_free(&e->sized);
    eval_tally_free(&e->tally);
    free(e->tta_x);
    free(e->tta_logits);
    e->tta_x = e->tta_logits = NULL;
}
