/* SPDX-License-Identifier: BSD-3-Clause */
/* splits.c - see splits.h. */
#include "splits.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/memavail.h"
#include "data/autoaug.h"
#include "base/util.h"

/* mode < 0: as --data_in_memory says. */
static DataLoader *open_split(const Splits *s, const char *split, int train, int mode, char *err, size_t n) {
    const Config *c = s->cfg;
    if (mode < 0)
        mode = !strcmp(c->data_in_memory, "no") ? DL_MEMORY_NO : !strcmp(c->data_in_memory, "yes") ? DL_MEMORY_YES : DL_MEMORY_AUTO;
    DataLoaderOptions o = {
        .data_dir = c->data_dir, .split = split, .rank = s->rank, .world_size = s->world_size,
        .batch_size = (int)(train ? c->batch_size : c->eval_batch_size),
        .augment = train && c->augment, .crop_pad = c->crop_padding > 0 ? (int)c->crop_padding : -1,
        .crop_pad_reflect = train && !strcmp(c->crop_pad_mode, "reflect"),
        .alternating_flip = (int)c->alternating_flip, .shuffle = train && c->shuffle, .drop_last = train,
        .seed = (uint64_t)c->seed, .num_classes = (int)c->num_classes,
        .image_size = (int)c->image_size,
        /* on a GPU too: the batches of a split it cannot hold (streamed, JPEG, crops, pixel
         * augmentations) are made by the workers and uploaded; a split held there takes plans
         * (device_data.h), and the loader's first plan stops its prefetch */
        .prefetch = c->prefetch,
        .in_memory = mode,
        .memory_budget = s->mem_budget,
        .chunk_images = (int)c->data_chunk_images, .window_chunks = (int)c->data_window_chunks,
        /* ImageNet-style views: RandomResizedCrop for training, resize + centre crop for evaluation
         * (and for training without --augment) */
        .crop_size = train ? (int)c->train_crop_size : 0,
        .resize_size = (int)c->val_resize_size,
        .out_size = !c->train_crop_size ? 0 : train ? (int)config_input_size(c) : (int)config_eval_size(c),
        .workers = (int)c->data_workers,
        .random_erase = train ? c->random_erase : 0.0,
        .mixup_alpha = train ? c->mixup_alpha : 0.0, .cutmix_alpha = train ? c->cutmix_alpha : 0.0,
        .ra_reps = train ? (int)c->ra_reps : 0,
    };
    config_rrc_scale(c, &o.rrc_scale_lo, &o.rrc_scale_hi);
    if (train) {   /* the pixel augmentations (autoaug.h) of training batches */
        o.auto_augment = autoaug_policy(c->auto_augment);
        o.ra_magnitude = (int)c->ra_magnitude, o.ra_num_ops = (int)c->ra_num_ops;
        o.augmix_severity = (int)c->augmix_severity;
        config_color_jitter(c, o.color_jitter);
    }
    return dataloader_open(&o, err, n);
}

int splits_open(Splits *s, const Config *c, const Bootstrap *b, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    s->cfg = c;
    s->rank = b->rank;
    s->world_size = b->world_size;
    if (!strcmp(c->data_in_memory, "auto")) s->mem_budget = memavail_budget(b->rank, b->local_size, s->mem_how, sizeof s->mem_how);
    s->train = open_split(s, "train", 1, -1, err, errlen);
    if (!s->train) return -1;
    s->test = open_split(s, "test", 0, -1, err, errlen);
    if (!s->test) return -1;
    if (dataloader_num_batches(s->train) < (size_t)c->grad_accum_steps)
        return errf(err, errlen,
                    "--data_dir %s: this rank's %zu training images are fewer than one optimizer step (batch_size %ld x "
                    "grad_accum_steps %ld)", QUOTED(c->data_dir), dataloader_num_samples(s->train), c->batch_size,
                    c->grad_accum_steps);
    return 0;
}

void splits_hold(Splits *s, int streamed, const char *why, Logger *log) {
    if (!dataloader_streaming(s->train) == !streamed) return;
    char err[1024];
    DataLoader *dl = open_split(s, "train", 1, streamed ? DL_MEMORY_NO : DL_MEMORY_YES, err, sizeof err);
    if (!dl) die("%s", err);
    dataloader_free(s->train);
    s->train = dl;
    log_info(log, "data: train %s (%s)", dataloader_memory_note(dl), why);
}

void splits_agree_on_storage(Splits *s, Comm *comm, Logger *log) {
    if (strcmp(s->cfg->data_in_memory, "auto") != 0 || s->world_size == 1) return;
    const int streams = dataloader_streaming(s->train);
    if (comm_min_long(comm, streams ? 0 : 1) == 0 && !streams)
        splits_hold(s, 1, "--data_in_memory auto: another rank streams its share, so every rank does", log);
}

void splits_log(const Splits *s, Logger *log) {
    const Config *c = s->cfg;
    /* Every rank logs what it reads into its own file; rank 0's line also reaches stdout. */
    log_info(log, "data: %s: train %zu images on this rank of %zu (%s); test %zu of %zu", QUOTED(c->data_dir),
             dataloader_num_samples(s->train), dataloader_global_samples(s->train), dataloader_describe(s->train),
             dataloader_num_samples(s->test), dataloader_global_samples(s->test));
    char why[600];
    if (!strcmp(c->data_in_memory, "auto")) snprintf(why, sizeof why, "; --data_in_memory auto: %s", s->mem_how);
    else snprintf(why, sizeof why, "; --data_in_memory %s", c->data_in_memory);
    log_info(log, "data: train %s; test %s%s", dataloader_memory_note(s->train), dataloader_memory_note(s->test), why);
    splits_log_augment(c, log);
}

/* Appends ", what" to buf (cap bytes). */
static void add(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(char *buf, size_t cap, const char *fmt, ...) {
    const size_t n = strlen(buf);
    if (n + 3 >= cap) return;
    if (n) memcpy(buf + n, ", ", 3);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + strlen(buf), cap - strlen(buf), fmt, ap);
    va_end(ap);
}

void splits_log_augment(const Config *c, Logger *log) {
    if (!c->augment) {
        log_info(log, "augment: none (--no-augment)");
        return;
    }
    char a[512] = "";
    if (c->train_crop_size > 0) add(a, sizeof a, "RandomResizedCrop %ld (scale %s)", c->train_crop_size, c->rrc_scale);
    else if (c->crop_padding > 0) add(a, sizeof a, "%ld px of %s padding and a random crop", c->crop_padding, c->crop_pad_mode);
    add(a, sizeof a, "%s", c->alternating_flip ? "alternating flip" : "flip");
    if (!strcmp(c->auto_augment, "augmix")) add(a, sizeof a, "--auto_augment augmix (AugMix, severity %ld)", c->augmix_severity);
    else if (strcmp(c->auto_augment, "none") != 0) add(a, sizeof a, "--auto_augment %s", c->auto_augment);
    if (c->color_jitter[0]) add(a, sizeof a, "ColorJitter %s", c->color_jitter);
    if (c->random_erase > 0) add(a, sizeof a, "RandomErasing p=%g", c->random_erase);
    if (c->mixup_alpha > 0 || c->cutmix_alpha > 0) add(a, sizeof a, "per batch mixup %g / cutmix %g", c->mixup_alpha, c->cutmix_alpha);
    if (c->ra_reps > 1) add(a, sizeof a, "RASampler with %ld repetitions", c->ra_reps);
    log_info(log, "augment: %s (made by the loader's threads)", a);
}

void splits_free(Splits *s) {
    dataloader_free(s->train);
    dataloader_free(s->test);
    s->train = s->test = NULL;
}
