/* SPDX-License-Identifier: BSD-3-Clause */
/* options.c - ddptrain-predict's command line (options.h). */
#include "options.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "run/version.h"

typedef enum { O_STR, O_INT, O_BOOL } OptKind;

typedef struct {
    const char *name;    /* without the dashes */
    OptKind kind;
    size_t off;          /* of the member of PredictOptions it fills */
    long lo, hi;         /* O_INT's range */
    const char *arg;     /* the value's name in --help; NULL for O_BOOL */
    const char *help;
} Opt;

#define OFF(member) offsetof(PredictOptions, member)

/* The one table: the parser reads it, --help prints it. */
static const Opt OPTS[] = {
    {"out", O_STR, OFF(out), 0, 0, "FILE",
     "write the rows to FILE (under a temporary name beside it, renamed once complete; default: the standard output)"},
    {"format", O_STR, 0, 0, 0, "csv|jsonl",
     "CSV with a header line, or JSON Lines: one object per image (default: csv)"},
    {"topk", O_INT, OFF(topk), 1, 100000, "K", "the K most probable classes of each image, at most the number of classes (default: 5)"},
    {"batch_size", O_INT, OFF(batch_size), 0, 65536, "N",
     "images per forward of the network (default 0: the run's --batch_size, as its evaluation)"},
    {"threads", O_INT, OFF(threads), 0, 4096, "N",
     "CPU threads per rank, for the network and for decoding images (default 0: as ddptrain: OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK, else the cores shared among the ranks of the node)"},
    {"tta", O_STR, OFF(tta), 0, 0, "none|flip|flip_shift",
     "test-time augmentation, as ddptrain --tta: the logits of the image and of its mirror image (and of both shifted by a pixel) averaged (default: the run's)"},
    {"ema", O_BOOL, OFF(ema), 0, 0, NULL, "the moving average of the weights (/ema), refused when the checkpoint holds none (default: the average when it holds one, as the run's evaluation)"},
    {"no_ema", O_BOOL, OFF(no_ema), 0, 0, NULL, "the trained weights (/model) even when the checkpoint holds an average"},
    {"model", O_STR, OFF(model), 0, 0, "NAME|FILE",
     "the network, in place of the run's --model (a network file moved since the run); a checkpoint of another network is refused"},
    {"data_dir", O_STR, OFF(data_dir), 0, 0, "DIR",
     "the class names, mean and std from DIR's test split (default: the checkpoint's /dataset, else the run's --data_dir)"},
    {"skip_bad", O_BOOL, OFF(skip_bad), 0, 0, NULL,
     "an image that cannot be read is one line on stderr and no row, counted in the summary (default: the first one ends the run, exit status 1, no output)"},
    {"dump_inputs", O_STR, OFF(dump_inputs), 0, 0, "FILE",
     "debugging, one rank only: write the network's inputs, float32 [N][S][S][3] (the normalised pixels, NHWC, the rows' order) to FILE"},
    {"dump_logits", O_STR, OFF(dump_logits), 0, 0, "FILE",
     "debugging, one rank only: write the (averaged) logits, float32 [N][classes], to FILE"},
};
enum { NOPTS = sizeof OPTS / sizeof OPTS[0] };

static void usage(FILE *f) {
    fputs("usage: ddptrain-predict CHECKPOINT INPUT... [flags]\n"
          "\n"
          "Asks a network that ddptrain trained about images: each INPUT, a JPEG or PNG file, a folder of\n"
          "them at any depth (in the order of ddptrain-data import: folders sorted, files sorted in each,\n"
          "hidden names left out, symbolic links followed, a loop of links refused), a dataset directory\n"
          "(the images of its test split, with their labels) or one shard file, is prepared exactly as the\n"
          "run's evaluation prepared its test images: an image file decoded as ddptrain-data import\n"
          "decodes it, torchvision's Resize and CenterCrop at the run's sizes (--val_resize_size and\n"
          "--val_crop_size with --train_crop_size, else --image_size), normalised with the mean and std\n"
          "of the run's dataset; a shard's images as the evaluation's loader makes them. The weights are\n"
          "the moving average's when the checkpoint holds one (as the evaluation's). Each image gets one\n"
          "row, in input order: its K most probable classes (named as the dataset named them) with the\n"
          "softmax of the logits, in double. CSV: file,[label,]top1,prob1,...,topK,probK; JSON Lines:\n"
          "{\"file\":...,[\"label\":...,\"label_index\":...,]\"topk\":[{\"class\":...,\"index\":...,\"prob\":...},...]}.\n"
          "When images have labels, a summary line gives the top-1 (and top-5) accuracy over them (on\n"
          "the standard output, or on stderr when the rows go there).\n"
          "\n"
          "Under srun or mpirun each rank predicts a share of the images and rank 0 writes the rows:\n"
          "the output is the same bytes for any number of ranks.\n"
          "\n"
          "flags:\n",
          f);
    for (int i = 0; i < NOPTS; i++) {
        char head[64];
        snprintf(head, sizeof head, "--%s%s%s", OPTS[i].name, OPTS[i].arg ? " " : "", OPTS[i].arg ? OPTS[i].arg : "");
        fprintf(f, "  %s\n", head);
        /* the help wrapped at 96 columns, indented */
        const char *p = OPTS[i].help;
        while (*p) {
            int len = (int)strlen(p);
            if (len > 88) {
                len = 88;
                while (len > 0 && p[len] != ' ') len--;
                if (len == 0) len = 88;
            }
            fprintf(f, "      %.*s\n", len, p);
            p += len;
            while (*p == ' ') p++;
        }
    }
    fputs("  --help, --version\n"
          "\n"
          "exit status: 0 success, 1 bad input (the checkpoint, an image, a shard, a class list that does\n"
          "not match the network) or a failure to write, 2 a bad command line.\n",
          f);
}

__attribute__((format(printf, 1, 2), noreturn))
static void usage_error(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    die_code(2, "%s (see ddptrain-predict --help)", msg);
}

static const Opt *find_opt(const char *name, size_t len) {
    for (int i = 0; i < NOPTS; i++)
        if (strlen(OPTS[i].name) == len && !strncmp(OPTS[i].name, name, len)) return &OPTS[i];
    return NULL;
}

/* Digits only, in the flag's range (strtol alone would take a sign or spaces). */
static long parse_int(const Opt *o, const char *val) {
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (val[0] < '0' || val[0] > '9' || *end || errno)
        usage_error("--%s: '%s' is not a non-negative integer", o->name, QUOTED(val));
    if (v < o->lo || v > o->hi) usage_error("--%s %ld: out of range [%ld, %ld]", o->name, v, o->lo, o->hi);
    return v;
}

void predict_options_parse(PredictOptions *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    o->topk = 5;
    const char *format = "csv";
    char **pos = mallocCheck((size_t)(argc + 1) * sizeof *pos);
    int npos = 0, flags_end = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!flags_end && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
            usage(stdout);
            exit(0);
        }
        if (!flags_end && !strcmp(a, "--version")) {
            version_print(stdout, "ddptrain-predict");
            exit(0);
        }
        if (!flags_end && !strcmp(a, "--")) {
            flags_end = 1;
            continue;
        }
        if (flags_end || strncmp(a, "--", 2) != 0) {
            if (a[0] == '-' && !flags_end) usage_error("unknown flag '%s'", QUOTED(a));
            pos[npos++] = argv[i];
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        const Opt *f = find_opt(name, eq ? (size_t)(eq - name) : strlen(name));
        if (!f) usage_error("unknown flag '%s'", QUOTED(a));
        if (f->kind == O_BOOL) {
            if (eq) usage_error("--%s takes no value", f->name);
            *(int *)((char *)o + f->off) = 1;
            continue;
        }
        const char *val = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!val || !*val) usage_error("--%s needs a value (%s)", f->name, f->arg);
        if (!strcmp(f->name, "format")) format = val;
        else if (f->kind == O_STR) *(const char **)((char *)o + f->off) = val;
        else *(long *)((char *)o + f->off) = parse_int(f, val);
    }
    if (!strcmp(format, "csv")) o->format = FORMAT_CSV;
    else if (!strcmp(format, "jsonl")) o->format = FORMAT_JSONL;
    else usage_error("--format %s: csv or jsonl", QUOTED(format));
    if (o->tta && strcmp(o->tta, "none") && strcmp(o->tta, "flip") && strcmp(o->tta, "flip_shift"))
        usage_error("--tta %s: none, flip or flip_shift", QUOTED(o->tta));
    if (o->ema && o->no_ema) usage_error("--ema and --no_ema: one or the other");
    if (npos < 1) usage_error("no CHECKPOINT given: ddptrain-predict CHECKPOINT INPUT... [flags]");
    if (npos < 2) usage_error("no INPUT given (image files, folders of them, dataset directories or shards)");
    o->checkpoint = pos[0];
    o->inputs = pos + 1;
    o->n_inputs = npos - 1;
}

void predict_options_free(PredictOptions *o) {
    if (o->inputs) free(o->inputs - 1);
    memset(o, 0, sizeof *o);
}
