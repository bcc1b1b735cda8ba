/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_reshard.c - ddptrain-data reshard: a dataset rewritten into another number of shards per
 * split, the sample order and the attributes kept, JPEG bytes copied unchanged. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/flags.h"
#include "base/util.h"
#include "data/shards.h"
#include "data_cmd.h"
#include "output.h"

static const char *USAGE_RESHARD =
    "usage: ddptrain-data reshard --in DIR --out DIR --shards S [--force]\n"
    "\n"
    "Rewrites the train and test splits of DIR into S shards each, keeping the sample order and\n"
    "the attributes (num_classes, class_names, mean, std). JPEG shards stay JPEG, their bytes\n"
    "copied unchanged. --out must differ from --in.\n"
    "\n"
    "  --in DIR      input dataset directory\n"
    "  --out DIR     output directory (created if missing)\n"
    "  --shards S    shards per split\n"
    "  --force       replace shards already in --out\n";

typedef struct { const ShardSet *set; int image_size, num_classes; } ReshardCtx;

static int reshard_produce(void *vctx, size_t start, size_t count, uint8_t *images, int32_t *labels,
                           char *err, size_t errlen) {
    const ReshardCtx *c = vctx;
    size_t per = (size_t)c->image_size * (size_t)c->image_size * 3, off = 0, done = 0;
    for (int i = 0; i < c->set->num_shards && done < count; i++) {
        const ShardInfo *s = &c->set->shards[i];
        size_t a = off, b = off + s->n;
        off = b;
        size_t lo = start + done;
        if (lo >= b) continue;
        size_t n = b - lo < count - done ? b - lo : count - done;
        if (shard_read_range(s->path, lo - a, n, c->image_size, images + done * per, labels + done,
                             err, errlen) != 0)
            return -1;
        for (size_t j = 0; j < n; j++)
            if (labels[done + j] < 0 || labels[done + j] >= c->num_classes) {
                snprintf(err, errlen, "%s: label %d at index %zu is outside [0, %d) (num_classes is %d)",
                         s->path, labels[done + j], lo - a + j, c->num_classes, c->num_classes);
                return -1;
            }
        done += n;
    }
    CHECK(done == count);
    return 0;
}

/* reshard_produce for JPEG shards: the samples' bytes, offsets, sizes and labels copied as
 * they are (nothing decoded), a source shard's range at a time. */
static int reshard_produce_jpeg(void *vctx, size_t start, size_t count, JpegBatch *b, char *err, size_t errlen) {
    const ReshardCtx *c = vctx;
    size_t off = 0, done = 0;
    for (int i = 0; i < c->set->num_shards && done < count; i++) {
        const ShardInfo *s = &c->set->shards[i];
        size_t a = off, e = off + s->n;
        off = e;
        size_t lo = start + done;
        if (lo >= e) continue;
        size_t n = e - lo < count - done ? e - lo : count - done;
        uint64_t *o = mallocCheck((n + 1) * sizeof *o);
        uint16_t *sz = mallocCheck(n * 2 * sizeof *sz);
        int32_t *lab = mallocCheck(n * sizeof *lab);
        uint8_t *bytes = NULL;
        int rc = shard_read_jpeg_range(s->path, lo - a, n, o, sz, &bytes, lab, err, errlen);
        for (size_t j = 0; j < n && rc == 0; j++) {
            if (lab[j] < 0 || lab[j] >= c->num_classes)
                rc = errf(err, errlen, "%s: label %d at index %zu is outside [0, %d) (num_classes is %d)",
                          s->path, lab[j], lo - a + j, c->num_classes, c->num_classes);
            else
                jpeg_batch_add(b, bytes + o[j], (size_t)(o[j + 1] - o[j]), sz[2 * j], sz[2 * j + 1], lab[j]);
        }
        free(o); free(sz); free(lab); free(bytes);
        if (rc != 0) return -1;
        done += n;
    }
    CHECK(done == count);
    return 0;
}

/* Opens each split of in that has shards, validated whole before anything is written. */
static void open_input(const char *in, const char *const splits[2], ShardSet sets[2], int have[2]) {
    char err[2 * SHARD_PATH_MAX];
    for (int k = 0; k < 2; k++) {
        if (!shards_dir_has_split(in, splits[k])) continue;
        if (shardset_open(&sets[k], in, splits[k], 0, 0, err, sizeof err) != 0) die("%s", err);
        have[k] = 1;
    }
    if (!have[0] && !have[1]) {
        struct stat st;
        if (stat(in, &st) != 0) die("%s: cannot open input directory: %s", in, strerror(errno));
        die("%s: no train or test shards found (files named train-NNNNN-of-MMMMM.h5 are expected)", in);
    }
}

int cmd_reshard(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    long long nshards = 0;
    int force = 0;
    Flag flags[] = {
        {STRING_FLAG("in", &in), .value = "DIR", .required = 1},
        {STRING_FLAG("out", &out), .value = "DIR", .required = 1},
        {INT_FLAG("shards", &nshards, 1, SHARD_MAX_SHARDS), .value = "S", .required = 1},
        {SWITCH_FLAG("force", &force)},
    };
    flags_parse(&(FlagSpec){.cmd = "reshard", .usage = USAGE_RESHARD, .flags = flags, .nflags = NFLAGS(flags)}, argc, argv, NULL);
    const char *const splits[2] = {"train", "test"};
    ShardSet sets[2];
    int have[2] = {0, 0};
    open_input(in, splits, sets, have);
    for (int k = 0; k < 2; k++)
        if (have[k]) check_split_size(in, splits[k], sets[k].total, (int)nshards);
    if (mkdir_p(out) != 0) die("%s: cannot create output directory: %s", QUOTED(out), strerror(errno));
    char rin[PATH_MAX], rout[PATH_MAX];
    if (realpath(in, rin) && realpath(out, rout) && strcmp(rin, rout) == 0)
        die("%s: --out is the same directory as --in (write to a new directory, then replace)", out);
    for (int k = 0; k < 2; k++)
        if (have[k]) ensure_out_dir(out, splits[k], force);
    Output o = {.dir = out};
    for (int k = 0; k < 2; k++) {
        if (!have[k]) continue;
        const ShardInfo *s0 = &sets[k].shards[0];
        ReshardCtx ctx = {&sets[k], s0->image_size, s0->attrs.num_classes};
        if (s0->encoding == SHARD_ENC_JPEG)
            write_split_jpeg(&o, splits[k], sets[k].total, (int)nshards, s0->image_size, &s0->attrs, reshard_produce_jpeg, &ctx);
        else
            write_split(&o, splits[k], sets[k].total, (int)nshards, s0->image_size, &s0->attrs, reshard_produce, &ctx);
    }
    output_commit(&o);
    for (int k = 0; k < 2; k++)
        if (have[k]) shardset_free(&sets[k]);
    return 0;
}
