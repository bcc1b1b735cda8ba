/* SPDX-License-Identifier: BSD-3-Clause */
/* options.c - ddptrain-predict's command line (options.h), over base/flags.h. */
#include "options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/flags.h"
#include "base/util.h"
#include "run/version.h"

static const char *USAGE =
    "usage: ddptrain-predict CHECKPOINT INPUT... [flags]\n"
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
    "flags:\n";

static const char *USAGE_END =
    "  --help, --version\n"
    "\n"
    "exit status: 0 success, 1 bad input (the checkpoint, an image, a shard, a class list that does\n"
    "not match the network) or a failure to write, 2 a bad command line.\n";

static void print_version(void) {
    version_print(stdout, "ddptrain-predict");
}

void predict_options_parse(PredictOptions *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    o->topk = 5;
    const char *format = "csv";
    /* The one table: the parser reads it, --help prints it. */
    Flag flags[] = {
        {STRING_FLAG("out", &o->out), .value = "FILE",
         .help = "write the rows to FILE (under a temporary name beside it, renamed once complete; default: the standard "
                 "output)"},
        {STRING_FLAG("format", &format), .value = "csv|jsonl",
         .help = "CSV with a header line, or JSON Lines: one object per image (default: csv)"},
        {INT_FLAG("topk", &o->topk, 1, 100000), .value = "K",
         .help = "the K most probable classes of each image, at most the number of classes (default: 5)"},
        {INT_FLAG("batch_size", &o->batch_size, 0, 65536), .value = "N",
         .help = "images per forward of the network (default 0: the run's --batch_size, as its evaluation)"},
        {INT_FLAG("threads", &o->threads, 0, 4096), .value = "N",
         .help = "CPU threads per rank, for the network and for decoding images (default 0: as ddptrain: "
                 "OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK, else the cores shared among the ranks of the node)"},
        {STRING_FLAG("tta", &o->tta), .value = "none|flip|flip_shift",
         .help = "test-time augmentation, as ddptrain --tta: the logits of the image and of its mirror image (and of "
                 "both shifted by a pixel) averaged (default: the run's)"},
        {SWITCH_FLAG("ema", &o->ema),
         .help = "the moving average of the weights (/ema), refused when the checkpoint holds none (default: the "
                 "average when it holds one, as the run's evaluation)"},
        {SWITCH_FLAG("no_ema", &o->no_ema),
         .help = "the trained weights (/model) even when the checkpoint holds an average"},
        {STRING_FLAG("model", &o->model), .value = "NAME|FILE",
         .help = "the network, in place of the run's --model (a network file moved since the run); a checkpoint of "
                 "another network is refused"},
        {STRING_FLAG("data_dir", &o->data_dir), .value = "DIR",
         .help = "the class names, mean and std from DIR's test split (default: the checkpoint's /dataset, else the "
                 "run's --data_dir)"},
        {SWITCH_FLAG("skip_bad", &o->skip_bad),
         .help = "an image that cannot be read is one line on stderr and no row, counted in the summary (default: the "
                 "first one ends the run, exit status 1, no output)"},
        {STRING_FLAG("dump_inputs", &o->dump_inputs), .value = "FILE",
         .help = "debugging, one rank only: write the network's inputs, float32 [N][S][S][3] (the normalised pixels, "
                 "NHWC, the rows' order) to FILE"},
        {STRING_FLAG("dump_logits", &o->dump_logits), .value = "FILE",
         .help = "debugging, one rank only: write the (averaged) logits, float32 [N][classes], to FILE"},
    };
    const FlagSpec spec = {.usage = USAGE, .usage_end = USAGE_END, .version = print_version, .flags = flags,
                           .nflags = NFLAGS(flags)};
    char **pos = mallocCheck((size_t)(argc + 1) * sizeof *pos);
    const int npos = flags_parse(&spec, argc - 1, argv + 1, pos);
    if (!strcmp(format, "csv")) o->format = FORMAT_CSV;
    else if (!strcmp(format, "jsonl")) o->format = FORMAT_JSONL;
    else flags_usage_error(NULL, "--format %s: csv or jsonl", QUOTED(format));
    if (o->tta && strcmp(o->tta, "none") && strcmp(o->tta, "flip") && strcmp(o->tta, "flip_shift"))
        flags_usage_error(NULL, "--tta %s: none, flip or flip_shift", QUOTED(o->tta));
    if (o->ema && o->no_ema) flags_usage_error(NULL, "--ema and --no_ema: one or the other");
    if (npos < 1) flags_usage_error(NULL, "no CHECKPOINT given: ddptrain-predict CHECKPOINT INPUT... [flags]");
    if (npos < 2)
        flags_usage_error(NULL, "no INPUT given (image files, folders of them, dataset directories or shards)");
    o->checkpoint = pos[0];
    o->inputs = pos + 1;
    o->n_inputs = npos - 1;
}

void predict_options_free(PredictOptions *o) {
    if (o->inputs) free(o->inputs - 1);
    memset(o, 0, sizeof *o);
}
