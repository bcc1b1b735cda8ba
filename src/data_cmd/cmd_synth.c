/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_synth.c - ddptrain-data synth: the procedural 10-class dataset of data/synth.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/flags.h"
#include "base/util.h"
#include "data/shards.h"
#include "data/synth.h"
#include "data_cmd.h"
#include "output.h"

static const char *USAGE_SYNTH =
    "usage: ddptrain-data synth --out DIR [--train N] [--test N] [--shards S] [--seed X] [--size P] [--force]\n"
    "\n"
    "Writes a procedural dataset of 10 classes of shapes and textures (circle, square, triangle,\n"
    "cross, ring, horizontal/vertical/diagonal stripes, checkerboard, dots) in random positions and\n"
    "colours with pixel noise. The same seed gives byte-identical files.\n"
    "\n"
    "  --out DIR     output directory (created if missing)\n"
    "  --train N     training samples (default 5000)\n"
    "  --test N      test samples (default 1000)\n"
    "  --shards S    shards per split (default 2)\n"
    "  --seed X      random seed (default 1)\n"
    "  --size P      image size P x P (default 32)\n"
    "  --force       replace shards already in DIR\n";

typedef struct { uint64_t seed; int split_id, size; } SynthCtx;

static int synth_produce(void *vctx, size_t start, size_t count, uint8_t *images, int32_t *labels,
                         char *err, size_t errlen) {
    (void)err; (void)errlen;
    const SynthCtx *c = vctx;
    size_t per = (size_t)c->size * (size_t)c->size * 3;
    /* Each sample depends only on (seed, split, index): the parallel loop is deterministic. */
    #pragma omp parallel for schedule(static)
    for (long long i = 0; i < (long long)count; i++)
        labels[i] = synth_sample(c->seed, c->split_id, start + (size_t)i, c->size, images + (size_t)i * per);
    return 0;
}

/* mean/std of the training images: one extra generation pass, cheaper than holding them. */
static void synth_stats(SynthCtx *train, size_t ntrain, ShardAttrs *attrs) {
    size_t size = (size_t)train->size, per = size * size * 3;
    uint8_t *img = mallocCheck(CHUNK * per);
    int32_t lab[CHUNK];
    PixelStats st = {0};
    for (size_t s = 0; s < ntrain; s += CHUNK) {
        size_t n = ntrain - s < CHUNK ? ntrain - s : CHUNK;
        synth_produce(train, s, n, img, lab, NULL, 0);
        stats_add(&st, img, n * size * size);
    }
    free(img);
    stats_finish(&st, attrs);
}

int cmd_synth(int argc, char **argv) {
    const char *out = NULL;
    long long ntrain = 5000, ntest = 1000, nshards = 2, size = 32;
    uint64_t seed = 1;
    int force = 0;
    Flag flags[] = {
        {STRING_FLAG("out", &out), .value = "DIR", .required = 1},
        {INT_FLAG("train", &ntrain, 1, 100000000)},
        {INT_FLAG("test", &ntest, 1, 100000000)},
        {INT_FLAG("shards", &nshards, 1, SHARD_MAX_SHARDS)},
        {U64_FLAG("seed", &seed)},
        {INT_FLAG("size", &size, 8, 1024)},
        {SWITCH_FLAG("force", &force)},
    };
    flags_parse(&(FlagSpec){.cmd = "synth", .usage = USAGE_SYNTH, .flags = flags, .nflags = NFLAGS(flags)}, argc, argv, NULL);
    if (nshards > ntrain || nshards > ntest)
        flags_usage_error("synth", "--shards %lld exceeds the %s samples (%lld); every shard needs one",
                          nshards, nshards > ntrain ? "--train" : "--test", nshards > ntrain ? ntrain : ntest);
    ensure_out_dir(out, "train", force);
    ensure_out_dir(out, "test", force);

    ShardAttrs attrs = {.num_classes = SYNTH_NUM_CLASSES, .class_names = (char **)synth_class_names};
    SynthCtx train = {seed, SYNTH_SPLIT_TRAIN, (int)size}, test = {seed, SYNTH_SPLIT_TEST, (int)size};
    synth_stats(&train, (size_t)ntrain, &attrs);
    Output o = {.dir = out};
    write_split(&o, "train", (size_t)ntrain, (int)nshards, (int)size, &attrs, synth_produce, &train);
    write_split(&o, "test", (size_t)ntest, (int)nshards, (int)size, &attrs, synth_produce, &test);
    output_commit(&o);
    print_mean_std(&attrs);
    return 0;
}
