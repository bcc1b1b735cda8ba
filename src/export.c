/* SPDX-License-Identifier: BSD-3-Clause */
/* export.c - ddptrain-export: a trained network as an ONNX model, for runtimes other than
 * ddptrain (OpenCV's dnn, ONNX Runtime, TensorRT).
 *
 *   ddptrain-export CHECKPOINT --out FILE [--ema | --no_ema] [--model FILE] [--opset N]
 *                   [--test_data DIR]
 *
 * The checkpoint opens as the run's network with its weights (run/trained.h: the EMA's when
 * there is an average), model/onnx.h writes the graph, and the file is written under a
 * temporary name and renamed: a failure leaves nothing under FILE. --test_data writes the ONNX
 * model zoo's DIR/test_data_set_0/input_0.pb and output_0.pb: a seeded random batch and the
 * logits ddptrain's own evaluation forward gives for it, which a runtime must reproduce.
 *
 * Exit status: 0 written, 1 a checkpoint, network or file that fails (one line naming it),
 * 2 a bad command line. */
#include "build_config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/flags.h"
#include "base/protobuf.h"
#include "base/rng.h"
#include "base/util.h"
#include "data/shards.h"
#include "model/onnx.h"
#include "run/trained.h"

/* The test batch: two images, so that a runtime that mixed the images of a batch would show;
 * their values normal(0, 1), as normalised pixels are about. */
enum { TEST_BATCH = 2 };
#define TEST_SEED 20261207u

static const char *USAGE =
    "usage: ddptrain-export CHECKPOINT --out FILE [flags]\n"
    "\n"
    "Writes the network of a ddptrain checkpoint, with its weights, as an ONNX model that other\n"
    "runtimes run (OpenCV's dnn, ONNX Runtime, TensorRT). The model takes \"input\", float32\n"
    "[batch, 3, S, S]: RGB images in NCHW at the run's evaluation size S, each channel normalised\n"
    "as (pixel / 255 - mean) / std with the dataset's mean and std (the metadata gives them), as\n"
    "torchvision's models take them; it gives \"logits\" [batch, classes] (no softmax). The\n"
    "weights are initializers under their state_dict names, batch norm in its inference form;\n"
    "dropout and stochastic depth are the identity, auxiliary classifiers are left out. The\n"
    "metadata_props hold the architecture, the number of classes, the image size, the weights\n"
    "used, the training step, and the mean, std and class names when the run's dataset is found.\n"
    "\n"
    "flags:\n"
    "  --out FILE        the ONNX model to write (required); written under a temporary name and\n"
    "                    renamed, so that a failure leaves no FILE\n"
    "  --ema             the moving average of the weights (fails when the checkpoint has none)\n"
    "  --no_ema          the trained weights even when the checkpoint has an average (default:\n"
    "                    the average when there is one, as the run's evaluation used it)\n"
    "  --model FILE      the network: a network file (or a built-in name) in place of the one the\n"
    "                    checkpoint's run named, for a run whose network file has moved\n"
    "  --opset N         the ONNX opset declared, 13 to 17 (default 13); the graph is the same but\n"
    "                    for hardswish, one HardSwish node from 14 on\n"
    "  --test_data DIR   also write DIR/test_data_set_0/input_0.pb and output_0.pb (TensorProto):\n"
    "                    a batch of 2 random inputs (normal, seeded) and ddptrain's logits for them,\n"
    "                    the ONNX model zoo's check that a runtime gives the same\n"
    "  --help            this text\n"
    "  --version         the version\n"
    "\n"
    "exit status: 0 written, 1 a checkpoint, network or file that fails (one line names it),\n"
    "2 a bad command line.\n";

typedef struct {
    const char *checkpoint, *out, *model, *test_data;
    int ema, no_ema;
    long long opset;
} Args;

static void print_version(void) {
    printf("ddptrain-export %s\n", PACKAGE_VERSION);
}

static void parse_args(int argc, char **argv, Args *a) {
    *a = (Args){.opset = ONNX_OPSET_MIN};
    Flag flags[] = {
        {STRING_FLAG("out", &a->out), .value = "FILE", .required = 1},
        {SWITCH_FLAG("ema", &a->ema)},
        {SWITCH_FLAG("no_ema", &a->no_ema)},
        {STRING_FLAG("model", &a->model)},
        {INT_FLAG("opset", &a->opset, ONNX_OPSET_MIN, ONNX_OPSET_MAX)},
        {STRING_FLAG("test_data", &a->test_data)},
    };
    const FlagSpec spec = {.usage = USAGE, .version = print_version, .flags = flags, .nflags = NFLAGS(flags)};
    char **pos = mallocCheck((size_t)argc * sizeof *pos);
    const int npos = flags_parse(&spec, argc - 1, argv + 1, pos);
    if (npos > 1) flags_usage_error(NULL, "one checkpoint only: '%s' and '%s'", QUOTED(pos[0]), QUOTED(pos[1]));
    if (npos == 1 && !*pos[0]) flags_usage_error(NULL, "an empty checkpoint name");
    if (npos == 0) flags_usage_error(NULL, "no checkpoint named");
    a->checkpoint = pos[0];
    free(pos);
    if (a->ema && a->no_ema) flags_usage_error(NULL, "--ema and --no_ema: one or the other");
}

/* The directory FILE goes into exists: checked before the network is built. */
static void check_out_dir(const char *out) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", out);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) slash[1] = '\0';
    else *slash = '\0';
    struct stat st;
    if (stat(dir, &st) != 0) die("%s: directory %s: %s", QUOTED(out), QUOTED(dir), strerror(errno));
    if (!S_ISDIR(st.st_mode)) die("%s: %s is not a directory", QUOTED(out), QUOTED(dir));
}

/* ---- metadata ------------------------------------------------------------------------------ */

/* A growing string. */
typedef struct {
    char *s;
    size_t len, cap;
} Str;

static void str_add(Str *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void str_add(Str *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *piece = NULL;
    const int n = vasprintf(&piece, fmt, ap);
    va_end(ap);
    CHECK(n >= 0);
    if (b->len + (size_t)n + 1 > b->cap) {
        b->cap = 2 * (b->len + (size_t)n + 1);
        b->s = realloc(b->s, b->cap);
        CHECK(b->s != NULL);
    }
    memcpy(b->s + b->len, piece, (size_t)n + 1);
    b->len += (size_t)n;
    free(piece);
}

/* A JSON string: the names hold no control character (the shards' reader refuses them), so
 * only the quote and the backslash need escaping. */
static void str_json(Str *b, const char *v) {
    str_add(b, "\"");
    for (const char *p = v; *p; p++) str_add(b, *p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
    str_add(b, "\"");
}

enum { MAX_META = 12 };
typedef struct {
    OnnxMeta e[MAX_META];
    int n;
    Str owned[MAX_META];
    char data_note[512];
} Meta;

static void meta_put(Meta *m, const char *key, Str *value) {
    CHECK(m->n < MAX_META);
    m->owned[m->n] = *value;
    m->e[m->n++] = (OnnxMeta){key, value->s};
    *value = (Str){0};
}

static void meta_printf(Meta *m, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void meta_printf(Meta *m, const char *key, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *v = NULL;
    CHECK(vasprintf(&v, fmt, ap) >= 0);
    va_end(ap);
    Str s = {v, strlen(v), strlen(v) + 1};
    meta_put(m, key, &s);
}

/* What the model's reader needs beside the graph. The mean, std and class names are the run's
 * dataset's (any shard describes it), when it is still where the run found it. */
static void make_meta(Meta *meta, const Trained *t) {
    const Model *m = &t->model;
    meta_printf(meta, "architecture", "%s", model_architecture(m));
    meta_printf(meta, "num_classes", "%d", m->num_classes);
    meta_printf(meta, "image_size", "%d", m->input_size);
    meta_printf(meta, "input", "float32 [batch, 3, %d, %d], RGB, NCHW, (pixel / 255 - mean) / std per channel",
                m->input_size, m->input_size);
    meta_printf(meta, "weights", "%s", t->ema ? "ema" : "trained");
    meta_printf(meta, "step", "%ld", t->step);
    ShardSet set;
    char err[1024];
    if (shardset_open(&set, t->cfg.data_dir, "test", 0, m->num_classes, err, sizeof err) != 0 &&
        shardset_open(&set, t->cfg.data_dir, "train", 0, m->num_classes, err, sizeof err) != 0) {
        snprintf(meta->data_note, sizeof meta->data_note, "no mean, std or class names: the run's dataset %s is not "
                 "readable here", QUOTED(t->cfg.data_dir));
        return;
    }
    const ShardAttrs *a = &set.shards[0].attrs;
    meta_printf(meta, "mean", "[%.9g, %.9g, %.9g]", (double)a->mean[0], (double)a->mean[1], (double)a->mean[2]);
    meta_printf(meta, "std", "[%.9g, %.9g, %.9g]", (double)a->std[0], (double)a->std[1], (double)a->std[2]);
    if (a->class_names) {
        Str s = {0};
        str_add(&s, "[");
        for (int c = 0; c < a->num_classes; c++) {
            if (c) str_add(&s, ", ");
            str_json(&s, a->class_names[c]);
        }
        str_add(&s, "]");
        meta_put(meta, "class_names", &s);
    }
    snprintf(meta->data_note, sizeof meta->data_note, "mean, std%s from %s", a->class_names ? " and class names" : "",
             QUOTED(t->cfg.data_dir));
    shardset_free(&set);
}

static void meta_free(Meta *m) {
    for (int i = 0; i < m->n; i++) free(m->owned[i].s);
}

/* ---- test data ----------------------------------------------------------------------------- */

/* A seeded batch in NCHW, and the logits of ddptrain's evaluation forward for it (which runs
 * NHWC): the two TensorProtos. */
static void make_test_data(Model *m, PbBuf *input, PbBuf *output) {
    const int S = m->input_size, C = m->num_classes;
    const size_t plane = (size_t)S * S, numel = (size_t)TEST_BATCH * 3 * plane;
    float *nchw = mallocCheck(numel * sizeof(float)), *nhwc = mallocCheck(numel * sizeof(float));
    Rng r;
    rng_init(&r, TEST_SEED, 0, 0);
    rng_fill_normal(&r, nchw, numel, 1.0f);
    for (int i = 0; i < TEST_BATCH; i++)
        for (int c = 0; c < 3; c++)
            for (size_t p = 0; p < plane; p++) nhwc[((size_t)i * plane + p) * 3 + c] = nchw[((size_t)i * 3 + c) * plane + p];
    int labels[TEST_BATCH] = {0};
    long correct;
    double loss;
    model_evaluate(m, nhwc, labels, TEST_BATCH, &correct, &loss);
    onnx_tensor(input, "input", 4, (const int64_t[]){TEST_BATCH, 3, S, S}, nchw);
    onnx_tensor(output, "logits", 2, (const int64_t[]){TEST_BATCH, C}, m->logits);   /* host memory: CPU backend */
    free(nchw);
    free(nhwc);
}

/* DIR/test_data_set_0/NAME; 0, or -1 with errno. */
static int write_in(const char *dir, const char *name, const PbBuf *b, char *path, size_t cap) {
    snprintf(path, cap, "%s/test_data_set_0/%s", dir, name);
    return write_file_atomic(path, b->data, b->len);
}

int main(int argc, char **argv) {
    g_progname = "ddptrain-export";
    Args a;
    parse_args(argc, argv, &a);
    check_out_dir(a.out);
    shards_quiet_hdf5();

    Trained t;
    char err[8192];
    const TrainedWeights which = a.ema ? TRAINED_EMA : a.no_ema ? TRAINED_NO_EMA : TRAINED_AUTO;
    if (trained_open(&t, a.checkpoint, a.model, which, TEST_BATCH, err, sizeof err) != 0) die("%s", err);

    Meta meta = {0};
    make_meta(&meta, &t);
    const OnnxOptions o = {.opset = (int)a.opset, .producer_version = PACKAGE_VERSION, .meta = meta.e,
                           .n_meta = meta.n};
    PbBuf model;
    if (onnx_model(&t.model, &o, &model, err, sizeof err) != 0) die("%s: %s", QUOTED(a.checkpoint), err);

    /* Everything is made before anything is written. */
    char in_path[4200] = "", out_path[4200] = "";
    PbBuf input, output;
    pb_init(&input);
    pb_init(&output);
    if (a.test_data) {
        make_test_data(&t.model, &input, &output);
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/test_data_set_0", a.test_data);
        if (mkdir_p(dir) != 0) die("%s: %s", QUOTED(dir), strerror(errno));
        if (write_in(a.test_data, "input_0.pb", &input, in_path, sizeof in_path) != 0)
            die("%s: %s", QUOTED(in_path), strerror(errno));
        if (write_in(a.test_data, "output_0.pb", &output, out_path, sizeof out_path) != 0) {
            const int e = errno;
            unlink(in_path);
            die("%s: %s", QUOTED(out_path), strerror(e));
        }
    }
    if (write_file_atomic(a.out, model.data, model.len) != 0) {
        const int e = errno;
        if (a.test_data) {
            unlink(in_path);
            unlink(out_path);
        }
        die("%s: %s", QUOTED(a.out), strerror(e));
    }
    printf("%s: %s, %zu parameters, %s weights of step %ld, opset %lld, input [batch, 3, %d, %d], %zu bytes; %s%s%s\n",
           a.out, model_architecture(&t.model), t.model.num_params, t.ema ? "EMA" : "trained", t.step, a.opset,
           t.model.input_size, t.model.input_size, model.len, meta.data_note, a.test_data ? "; test data in " : "",
           a.test_data ? a.test_data : "");
    pb_free(&model);
    pb_free(&input);
    pb_free(&output);
    meta_free(&meta);
    trained_free(&t);
    return 0;
}
