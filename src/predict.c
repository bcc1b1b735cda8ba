/* SPDX-License-Identifier: BSD-3-Clause */
/* predict.c - ddptrain-predict: a trained network asked about new images.
 *
 *   ddptrain-predict CHECKPOINT INPUT... [--out FILE] [--format csv|jsonl] [--topk K]
 *                    [--batch_size N] [--threads N] [--tta none|flip|flip_shift]
 *                    [--ema|--no_ema] [--model FILE] [--data_dir DIR] [--skip_bad]
 *
 * main() reads as the algorithm: the ranks and the flags -> start_up on every rank (the
 * checkpoint's network and weights, its class list, the inputs listed, the output's folder) and
 * the start-up check -> predict_share: this rank's groups of images prepared as the evaluation
 * prepared them, through the network with --tta's views, a row each -> the rows gathered ->
 * rank 0 writes them and the summary. Each piece is a file of src/predict/.
 *
 * The images go in groups of the run's --eval_batch_size, each through the network in forwards
 * of --batch_size, as the run's evaluation on one rank cut its test split; a rank takes a
 * contiguous run of groups. So an image's logits come from the same forward, with the same
 * neighbours, on any number of ranks: the output is the same bytes.
 *
 * Exit status: 0 success, 1 bad input or a failure to write, 2 bad command line. */
#include "build_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "base/util.h"
#include "data/shards.h"
#include "device/device.h"
#include "dist/world.h"
#include "predict/classes.h"
#include "predict/inputs.h"
#include "predict/options.h"
#include "predict/output.h"
#include "predict/prepare.h"
#include "predict/rows.h"
#include "run/trained.h"
#include "run/tta.h"

typedef struct {
    PredictOptions opt;
    World world;
    Trained net;
    ClassList classes;
    Inputs inputs;
    Preparer prep;
    Rows rows;
    int tta;                 /* TTA_* */
    int topk;                /* at most the number of classes */
    int threads;
    size_t group;            /* images per group: the run's --eval_batch_size */
    AtomicFile dump_x, dump_z;
} Predict;

/* ---- start-up ----------------------------------------------------------------------------- */

/* A rank's failure before the predictions: rank 0 prints it (every rank usually fails alike:
 * one line for the job), then every rank leaves through the start-up check (world.h), where the
 * lowest healthy rank names another rank that failed alone. */
static void startup_fail(Predict *p, const char *msg) {
    if (p->world.boot.rank == 0) {
        char line[4 * 4800];
        fflush(stdout);
        fprintf(stderr, "%s: error: %s\n", g_progname, one_line(line, sizeof line, msg));
        fflush(stderr);
    }
    world_startup_fail(&p->world, 1, msg);
}

/* The output file's folder exists and may be written, before anything is computed. */
static int check_out(const char *flag, const char *path, char *err, size_t errlen) {
    char dir[4200];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (access(dir, W_OK | X_OK) != 0)
        return errf(err, errlen, "--%s %s: cannot write into %s: %s", flag, QUOTED(path), QUOTED(dir), strerror(errno));
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return errf(err, errlen, "--%s %s: a folder", flag, QUOTED(path));
    return 0;
}

static void start_up(Predict *p) {
    const PredictOptions *o = &p->opt;
    char err[4800];
    const TrainedWeights which = o->ema ? TRAINED_EMA : o->no_ema ? TRAINED_NO_EMA : TRAINED_AUTO;
    if (trained_open(&p->net, o->checkpoint, o->model, which, (int)o->batch_size, err, sizeof err) != 0)
        startup_fail(p, err);
    Config *c = &p->net.cfg;
    if (class_list_open(&p->classes, o->checkpoint, o->data_dir, c->data_dir, (int)c->num_classes, err, sizeof err) != 0)
        startup_fail(p, err);
    if (inputs_list(&p->inputs, o->inputs, o->n_inputs, (int)c->image_size, &p->classes, err, sizeof err) != 0)
        startup_fail(p, err);
    if (p->world.boot.rank == 0) {
        if ((o->out && check_out("out", o->out, err, sizeof err) != 0) ||
            (o->dump_inputs && check_out("dump_inputs", o->dump_inputs, err, sizeof err) != 0) ||
            (o->dump_logits && check_out("dump_logits", o->dump_logits, err, sizeof err) != 0))
            startup_fail(p, err);
    }
    p->tta = tta_parse(o->tta ? o->tta : c->tta);
    if (p->tta < 0) {
        snprintf(err, sizeof err, "%s: /config: --tta %s is none of none, flip, flip_shift", o->checkpoint, c->tta);
        startup_fail(p, err);
    }
    p->topk = o->topk < c->num_classes ? (int)o->topk : (int)c->num_classes;
    p->group = (size_t)c->eval_batch_size;
    c->threads = o->threads;   /* device_threads reads the flag from the configuration */
    p->threads = device_threads(c, &p->world.boot);
}

/* ---- predictions -------------------------------------------------------------------------- */

/* An item that could not be read: skipped with one line (--skip_bad), or the end of the job. */
static void bad_item(Predict *p, size_t i, const Prepared *r) {
    if (!p->opt.skip_bad) die("%s", r->err);
    char line[4 * PREPARE_ERR_MAX];
    fprintf(stderr, "%s: warning: %s; skipped\n", g_progname, one_line(line, sizeof line, r->err));
    rows_set_bad(&p->rows, i, r->label);
}

static void dump(AtomicFile *a, const void *data, size_t bytes) {
    if (a->f && bytes) CHECK(fwrite(data, 1, bytes, a->f) == bytes);
}

/* A chunk's logits kept in the array ctx, in host memory (the CPU backend). */
static void keep_logits(void *logits, const Model *m, const int *labels, int off, int n) {
    const size_t K = (size_t)m->num_classes;
    memcpy((float *)logits + (size_t)off * K, m->logits, (size_t)n * K * sizeof(float));
}

/* The logits of n images: the evaluation's forwards (model_evaluate's chunks of max_batch), or
 * with --tta the average of the views (tta_logits). */
static void logits_of(Model *m, int tta, const float *x, const int *labels, int n, float *scratch, float *logits) {
    if (tta != TTA_NONE) tta_logits(m, tta, x, labels, n, scratch, logits);
    else model_evaluate_each(m, x, labels, n, NULL, NULL, keep_logits, logits);
}

/* This rank's contiguous run of groups, a row per image. */
static void predict_share(Predict *p) {
    Model *m = &p->net.model;
    const size_t N = p->inputs.total, G = p->group;
    const size_t groups = (N + G - 1) / G;
    const int rank = p->world.boot.rank, world = p->world.boot.world_size;
    const size_t g0 = groups * (size_t)rank / (size_t)world, g1 = groups * (size_t)(rank + 1) / (size_t)world;
    const int K = m->num_classes;
    const size_t img = (size_t)p->prep.out * p->prep.out * 3;
    CHECK(p->prep.out == m->input_size);
    float *x = alignedAllocCheck(G * img * sizeof(float));
    float *scratch = alignedAllocCheck((size_t)m->max_batch * img * sizeof(float));
    float *logits = mallocCheck(G * (size_t)K * sizeof(float));
    Prepared *res = mallocCheck(G * sizeof *res);
    int *labels = mallocCheck(G * sizeof *labels), *where = mallocCheck(G * sizeof *where);
    for (size_t g = g0; g < g1; g++) {
        const size_t first = g * G;
        const int n = (int)(N - first < G ? N - first : G);
        prepare_items(&p->prep, &p->inputs, first, n, x, res);
        int ok = 0;   /* the readable images, moved together */
        for (int i = 0; i < n; i++) {
            if (!res[i].ok) {
                bad_item(p, first + (size_t)i, &res[i]);
                continue;
            }
            if (ok != i) memcpy(x + (size_t)ok * img, x + (size_t)i * img, img * sizeof(float));
            labels[ok] = res[i].label >= 0 ? res[i].label : 0;   /* the forward's loss needs one */
            where[ok++] = i;
        }
        if (ok > 0) logits_of(m, p->tta, x, labels, ok, scratch, logits);
        for (int j = 0; j < ok; j++)
            rows_set(&p->rows, first + (size_t)where[j], logits + (size_t)j * K, K, res[where[j]].label);
        dump(&p->dump_x, x, (size_t)ok * img * sizeof(float));
        dump(&p->dump_z, logits, (size_t)ok * K * sizeof(float));
    }
    free(x);
    free(scratch);
    free(logits);
    free(res);
    free(labels);
    free(where);
}

/* ---- the end ------------------------------------------------------------------------------ */

/* The images, and the accuracy over those with labels (the run's evaluation's measure). */
static void summary(const Predict *p, FILE *f) {
    long ok = 0, bad = 0, labelled = 0, hit1 = 0, hit5 = 0;
    for (size_t i = 0; i < p->rows.n; i++) {
        const Row r = rows_get(&p->rows, i);
        ok += r.status == ROW_OK;
        bad += r.status == ROW_BAD;
        if (r.status == ROW_OK && r.label >= 0) {
            labelled++;
            hit1 += r.hit1;
            hit5 += r.hit5;
        }
    }
    fprintf(f, "%s: %ld image%s", g_progname, ok, ok == 1 ? "" : "s");
    if (labelled > 0) {
        fprintf(f, "; %ld with labels: top-1 %.6f (%ld)", labelled, (double)hit1 / (double)labelled, hit1);
        if (p->net.model.num_classes > 5) fprintf(f, ", top-5 %.6f (%ld)", (double)hit5 / (double)labelled, hit5);
    }
    if (p->opt.skip_bad) fprintf(f, "; %ld skipped (unreadable)", bad);
    fputc('\n', f);
    fflush(f);
}

static void finish(Predict *p) {
    char err[4800];
    if (output_write(p->opt.out, p->opt.format, &p->inputs, &p->rows, &p->classes, err, sizeof err) != 0)
        die("%s", err);
    if (p->dump_x.f && atomic_commit(&p->dump_x, err, sizeof err) != 0) die("%s", err);
    if (p->dump_z.f && atomic_commit(&p->dump_z, err, sizeof err) != 0) die("%s", err);
    summary(p, p->opt.out ? stdout : stderr);
}

static World *g_die_world;
static Predict *g_predict;

/* die() once the ranks predict: one rank's bad image ends them all; no dump is left behind. */
static void die_ends_job(int code) {
    if (g_predict) {
        atomic_abandon(&g_predict->dump_x);
        atomic_abandon(&g_predict->dump_z);
    }
    if (g_die_world && g_die_world->boot.world_size > 1) world_abort_job(g_die_world, code);
}

int main(int argc, char **argv) {
    g_progname = "ddptrain-predict";
    shards_quiet_hdf5();
    static Predict p;
    char err[4800];
    if (world_init(&p.world, err, sizeof err) != 0) die("%s", err);
    g_die_quiet = p.world.boot.rank != 0;   /* every rank parses the same flags: say it once */
    predict_options_parse(&p.opt, argc, argv);
    if (p.world.boot.world_size > 1 && (p.opt.dump_inputs || p.opt.dump_logits))
        die_code(2, "--dump_inputs and --dump_logits: on one rank only (they are for debugging)");
    g_die_quiet = 0;
    /* no timeout: ranks end their shares at different times, and a rank that dies ends the job */
    if (world_connect(&p.world, NULL, -1, 0.0, NULL, err, sizeof err) != 0) die("%s", err);

    start_up(&p);
    if (world_startup_check(&p.world) != 0) world_startup_fail(&p.world, 1, NULL);
    g_die_world = &p.world;
    g_predict = &p;
    g_die_hook = die_ends_job;
#ifdef _OPENMP
    omp_set_num_threads(p.threads);
#endif
    preparer_init(&p.prep, &p.net.cfg, p.classes.lut, p.threads);
    rows_init(&p.rows, p.inputs.total, p.topk);
    if (p.opt.dump_inputs && atomic_open(&p.dump_x, p.opt.dump_inputs, err, sizeof err) != 0) die("%s", err);
    if (p.opt.dump_logits && atomic_open(&p.dump_z, p.opt.dump_logits, err, sizeof err) != 0) die("%s", err);

    predict_share(&p);
    rows_gather(&p.rows, p.world.comm);
    if (p.world.boot.rank == 0) finish(&p);

    g_die_hook = NULL;
    rows_free(&p.rows);
    preparer_free(&p.prep);
    inputs_free(&p.inputs);
    class_list_free(&p.classes);
    trained_free(&p.net);
    predict_options_free(&p.opt);
    world_free(&p.world);
    return 0;
}
