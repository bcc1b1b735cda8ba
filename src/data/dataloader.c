/* SPDX-License-Identifier: BSD-3-Clause */
/* dataloader.c - see dataloader.h.
 *
 * Storage choice: dataloader_open reads this rank's whole assignment (uint8 images + int32
 * labels) into memory, once. For CIFAR-sized data that is 150 MiB for the full training set
 * and less per rank; after open nothing touches HDF5 again, so the prefetch thread never
 * competes for the process-wide HDF5 lock (hdf5_lock.h) with the checkpoint writer.
 *
 * Streaming (in_memory DL_MEMORY_NO, or AUTO over the budget): only the labels are read at open.
 * The share, in assignment order, is cut into chunks of chunk_images; an epoch's order is the
 * chunks permuted from rng(seed ^ CHUNK_SALT, epoch, rank), grouped into windows of
 * window_chunks consecutive chunks of that permutation, and each window's samples shuffled from
 * rng(seed ^ WINDOW_SALT, epoch << 32 | rank, window). The order is still a permutation of
 * 0..n-1 in `order`, so the plans and everything after them are the in-memory loader's. Making
 * batch b first reads the chunks of the windows its samples lie in (in the prefetch thread when
 * there is one) and frees the chunks of windows outside them.
 *
 * Determinism: the batch contents depend only on (seed, epoch, rank, batch index): the order
 * from rng(seed, epoch, rank), the augmentation of batch b from its own stream
 * rng(seed ^ AUG_SALT, epoch << 32 | rank, b), the pixel augmentations of the sample at
 * position p of the epoch from rng(seed ^ PIXAUG_SALT, epoch << 32 | rank, p) in the worker
 * that makes it, random erasing's of each sample and mixing's of each batch from streams of
 * their own (random_erase.h, mix.h). So prefetch on/off, thread timing and resuming at any
 * batch all give bit-identical batches.
 *
 * A batch is a plan (make_plan: every random draw) applied to the images
 * (dataloader_apply_plan: none), so that device_data.cu can apply the very same plans on the
 * GPU. The draw order, ox, oy, flip per sample from the batch's stream, is part of the
 * format of a run: changing it changes every augmented batch of a resumed run. */
#include "dataloader.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>

#include "crops.h"
#include "jpegs.h"
#include "mix.h"
#include "ra_sampler.h"
#include "random_erase.h"
#include "base/rng.h"
#include "shards.h"
#include "transform.h"
#include "transform_aug.h"
#include "base/util.h"
#include "loader_state.h"
#include "workpool.h"

#define AUG_SALT 0x6175676d656e7431ULL   /* "augment1": separates the augmentation streams */
#define FLIP_SALT 0x616c74666c697031ULL  /* "altflip1": the per-image coins of alternating flips */
#define READ_PIECE 4096   /* samples per HDF5 read at open (12 MiB at 32x32) */
#define CHUNK_SALT 0x6368756e6b733031ULL    /* "chunks01": the epoch's order of chunks */
#define WINDOW_SALT 0x77696e646f773031ULL   /* "window01": the shuffle within a window */
#define PIXAUG_SALT 0x7069786175673031ULL   /* "pixaug01": a sample's pixel augmentations */

_Static_assert(sizeof(SamplePlan) == 12, "SamplePlan is copied to the GPU as is");

/* The plan and labels of batch b of the current epoch; returns its size. Pure function of
 * (loaded labels, order, epoch, b), so the worker, the caller and the GPU path all get the
 * same plan. */
static int make_plan(const DataLoader *dl, size_t b, SamplePlan *plan, PixelBox *box, int *labels) {
    size_t B = (size_t)dl->opt.batch_size, start = b * B;
    size_t n = dl->epoch_n - start < B ? dl->epoch_n - start : B;
    const int pad = dl->opt.crop_pad < 0 ? 0 : dl->opt.crop_pad > 0 ? dl->opt.crop_pad : DL_CROP_PAD;
    Rng r;
    rng_init(&r, dl->opt.seed ^ AUG_SALT, ((uint64_t)(uint32_t)dl->epoch << 32) | (uint32_t)dl->opt.rank, (uint64_t)b);
    for (size_t i = 0; i < n; i++) {
        uint32_t idx = dl->order[start + i];
        labels[i] = dl->labels[idx];
        plan[i].index = (int32_t)idx;
        plan[i].ox = plan[i].oy = 0;
        plan[i].flip = 0;
        if (!dl->opt.augment) continue;
        if (dl->tf.mode == TF_RRC) {
            /* RandomResizedCrop's box of the whole stored image, then the flip */
            const int w = dl->jpeg ? dl->dims[2 * (size_t)idx + 1] : dl->S, h = dl->jpeg ? dl->dims[2 * (size_t)idx] : dl->S;
            box[i] = rrc_box(&r, w, h, dl->opt.rrc_scale_lo, dl->opt.rrc_scale_hi, NULL);
        } else if (pad > 0) {
            /* Crop offsets in [-pad, pad]: a crop of the image padded by pad zeros on each side,
             * as torchvision's RandomCrop(padding=pad). */
            plan[i].ox = (int16_t)((int)rng_below(&r, 2 * (uint32_t)pad + 1) - pad);
            plan[i].oy = (int16_t)((int)rng_below(&r, 2 * (uint32_t)pad + 1) - pad);
        }
        plan[i].flip = (int32_t)rng_below(&r, 2);
        /* airbench: a coin per image of the rank's share, then the other side every epoch, so
         * that consecutive epochs see both. The draw above is made anyway: the stream stays
         * the same for the offsets of later samples. */
        if (dl->opt.alternating_flip)
            plan[i].flip = (int32_t)((rng_mix64(dl->opt.seed ^ FLIP_SALT ^ ((uint64_t)(uint32_t)dl->opt.rank << 32) ^ idx) & 1) ^
                                     ((uint32_t)dl->epoch & 1));
    }
    return (int)n;
}

/* Where sample i (assignment order) comes from: its shard and index there, for messages. */
static void sample_origin(const DataLoader *dl, size_t i, const char **path, size_t *k) {
    for (int j = 0; j < dl->num_slices; j++) {
        const Slice *sl = &dl->slices[j];
        if (i >= sl->off && i < sl->off + sl->count) {
            *path = sl->path;
            *k = sl->begin + (i - sl->off);
            return;
        }
    }
    CHECK(!"a sample outside every slice");
}

/* The stored bytes of sample i: a raw image or a JPEG file. */
static const uint8_t *sample_bytes(const DataLoader *dl, size_t i, size_t *len) {
    if (!dl->streaming) {
        *len = dl->jpeg ? (size_t)(dl->off[i + 1] - dl->off[i]) : dl->per;
        return dl->images + (dl->jpeg ? (size_t)dl->off[i] : i * dl->per);
    }
    const size_t c = i / dl->C;
    const uint8_t *chunk = dl->chunk_data[c];
    CHECK(chunk != NULL);   /* the plan's batch was made last (dataloader.h) */
    if (!dl->jpeg) {
        *len = dl->per;
        return chunk + (i % dl->C) * dl->per;
    }
    *len = (size_t)(dl->off[i + 1] - dl->off[i]);
    return chunk + (size_t)(dl->off[i] - dl->off[c * dl->C]);
}

typedef struct {
    const DataLoader *dl;
    const SamplePlan *plan;
    const PixelBox *box;
    float *x;
    size_t pos0;                     /* the epoch position of the batch's first sample */
} SampleJob;

/* Sample i of a batch, on worker `worker`: decoded when stored as JPEG (at the DCT scale the
 * view allows), then the view. A JPEG that does not decode ends the run naming its shard and
 * index: the epoch's order cannot go on without it. */
static void make_sample(void *vjob, int i, int worker) {
    const SampleJob *job = vjob;
    const DataLoader *dl = job->dl;
    const SamplePlan *p = &job->plan[i];
    CHECK(p->index >= 0 && (size_t)p->index < dl->n);
    const size_t idx = (size_t)p->index;
    size_t len;
    const uint8_t *bytes = sample_bytes(dl, idx, &len);
    PixelBox box = job->box && dl->tf.mode == TF_RRC ? job->box[i] : (PixelBox){0, 0, dl->S, dl->S};
    ImageView v = {bytes, dl->S, dl->S, (size_t)dl->S * 3};
    ImageRGB dec = {0, 0, NULL};
    if (dl->jpeg) {
        const int h = dl->dims[2 * idx], w = dl->dims[2 * idx + 1];
        if (!(job->box && dl->tf.mode == TF_RRC)) box = (PixelBox){0, 0, w, h};
        const int d = transform_jpeg_denom(&dl->tf, box, w, h);
        char err[256];
        const char *path;
        size_t k;
        /* The JPEG's own size is checked against 'sizes' whatever the scale: at 1/2 to 1/8
         * a JPEG of another size decodes to a size that may look right. */
        if (jpeg_decode_scaled(bytes, len, d, w, h, &dec, err, sizeof err) != 0) {
            sample_origin(dl, idx, &path, &k);
            die("%s: sample %zu: %s", path, k, err);
        }
        if (d > 1) box = transform_scale_box(box, w, h, dec.w, dec.h);
        v = (ImageView){dec.rgb, dec.w, dec.h, (size_t)dec.w * 3};
        if (dl->tf.mode == TF_PAD_CROP) {   /* the centre S x S, as Resize(S) + CenterCrop(S) */
            const PixelBox c = centre_crop(dec.w, dec.h, dl->S);
            v.rgb += (size_t)c.y * v.stride + (size_t)c.x * 3;
            v.w = v.h = dl->S;
        }
    }
    float *x = job->x + (size_t)i * dl->out_floats;
    if (dl->pixaug) {
        /* the sample's own stream: its pixels are the same whichever worker makes them */
        Rng r;
        rng_init(&r, dl->opt.seed ^ PIXAUG_SALT, ((uint64_t)(uint32_t)dl->epoch << 32) | (uint32_t)dl->opt.rank,
                 (uint64_t)(job->pos0 + (size_t)i));
        transform_apply_aug(&dl->tf, &v, p->ox, p->oy, p->flip, box, x, &dl->scratch[worker], &dl->aug, &r);
    } else {
        transform_apply(&dl->tf, &v, p->ox, p->oy, p->flip, box, x, &dl->scratch[worker]);
    }
    free(dec.rgb);
    if (dl->opt.random_erase > 0) {   /* after the normalisation, as the reference recipe */
        Rng r;
        random_erase_stream(&r, dl->opt.seed, dl->epoch, dl->opt.rank, job->pos0 + (size_t)i);
        random_erase_apply(x, dl->tf.out, dl->tf.out, random_erase_box(&r, dl->tf.out, dl->tf.out, dl->opt.random_erase, NULL));
    }
}

static void make_samples(const DataLoader *dl, const SamplePlan *plan, const PixelBox *box, int n, float *x, size_t pos0) {
    SampleJob job = {dl, plan, box, x, pos0};
    workpool_run(dl->pool, n, make_sample, &job);
}

void dataloader_apply_plan(const DataLoader *dl, const SamplePlan *plan, int n, float *x) {
    CHECK(dl->tf.mode != TF_RRC);   /* a plan holds no box (dataloader.h) */
    CHECK(!dl->pixaug);             /* nor the sample's position, which its augmentations draw from */
    CHECK(dl->opt.random_erase <= 0);   /* nor the erasing's draws (the GPU refuses it) */
    make_samples(dl, plan, NULL, n, x, 0);
}

/* Fills x/labels with batch b of the current epoch, *lam with its labels' weight; returns its
 * size. `plan` is scratch of batch_size entries owned by the calling thread. */
static int produce(DataLoader *dl, size_t b, SamplePlan *plan, PixelBox *box, float *x, int *labels, double *lam) {
    if (dl->streaming) loader_stream_batch(dl, b);
    int n = make_plan(dl, b, plan, box, labels);
    make_samples(dl, plan, box, n, x, b * (size_t)dl->opt.batch_size);
    *lam = 1.0;
    if (dl->opt.mixup_alpha > 0 || dl->opt.cutmix_alpha > 0) {   /* the whole batch, once its samples are made */
        Rng r;
        mix_stream(&r, dl->opt.seed, dl->epoch, dl->opt.rank, b);
        const MixDraws d = mix_draw(&r, dl->opt.mixup_alpha, dl->opt.cutmix_alpha, dl->tf.out, dl->tf.out);
        mix_apply(&d, x, n, dl->tf.out, dl->tf.out);
        *lam = d.lambda;
    }
    return n;
}

static void *worker_main(void *arg) {
    DataLoader *dl = arg;
    pthread_mutex_lock(&dl->mu);
    for (;;) {
        while (!dl->quit && (!dl->started || dl->ready || dl->want >= dl->num_batches))
            pthread_cond_wait(&dl->cv, &dl->mu);
        if (dl->quit) break;
        size_t b = dl->want;
        uint64_t g = dl->gen;
        dl->busy = 1;
        pthread_mutex_unlock(&dl->mu);
        double lam;
        int n = produce(dl, b, dl->pre_plan, dl->pre_box, dl->pre_x, dl->pre_labels, &lam);
        pthread_mutex_lock(&dl->mu);
        dl->busy = 0;
        if (g == dl->gen) {
            dl->ready = 1;
            dl->ready_batch = b;
            dl->pre_n = n;
            dl->pre_lam = lam;
            dl->want = b + 1;       /* produced as soon as the caller takes this one */
        }
        pthread_cond_broadcast(&dl->cv);
    }
    pthread_mutex_unlock(&dl->mu);
    return NULL;
}

__attribute__((format(printf, 4, 5)))
static DataLoader *open_fail(DataLoader *dl, char *err, size_t errlen, const char *fmt, ...) {
    if (fmt && err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    dataloader_free(dl);
    return NULL;
}

/* The view a batch holds (dataloader.h's options), with its output size; -1 and one line in
 * err when the options cannot make it. */
static int choose_view(DataLoader *dl, const DataLoaderOptions *opt, char *err, size_t errlen) {
    Transform *t = &dl->tf;
    t->lut = &dl->lut[0][0];
    if (opt->crop_size > 0 && opt->augment) {
        t->mode = TF_RRC;
        t->out = opt->crop_size;
        if (!(opt->rrc_scale_lo > 0.0 && opt->rrc_scale_lo <= opt->rrc_scale_hi && opt->rrc_scale_hi <= 1.0))
            return errf(err, errlen, "%s: invalid RandomResizedCrop scale (%g, %g)", dl->data_dir, opt->rrc_scale_lo,
                        opt->rrc_scale_hi);
    } else if (opt->crop_size > 0 || opt->out_size > 0) {
        t->mode = TF_CENTRE;
        t->out = opt->out_size > 0 ? opt->out_size : opt->crop_size;
        t->resize = opt->resize_size > 0 ? opt->resize_size : t->out;
        if (t->resize < t->out)
            return errf(err, errlen, "%s: a centre crop of %d from images resized to %d", dl->data_dir, t->out, t->resize);
    } else {
        t->mode = TF_PAD_CROP;
        t->out = dl->S;
        t->reflect = opt->crop_pad_reflect;
        if (t->reflect && opt->crop_pad >= dl->S)
            return errf(err, errlen, "%s: a reflected padding of %d pixels needs images larger than that, not %d",
                        dl->data_dir, opt->crop_pad, dl->S);
    }
    if (t->out > dl->S)
        return errf(err, errlen, "%s: the %s images are stored at %d pixels%s, smaller than the %d-pixel crop asked for; "
                    "import them at a size of at least the crop (ddptrain-data import --size)", dl->data_dir, dl->split,
                    dl->S, dl->jpeg ? " on their shorter side" : "", t->out);
    dl->out_floats = (size_t)t->out * t->out * 3;
    dl->max_out = t->out;
    dl->aug = (PixelAug){opt->auto_augment, opt->ra_magnitude, opt->ra_num_ops,
                         {opt->color_jitter[0], opt->color_jitter[1], opt->color_jitter[2], opt->color_jitter[3]},
                         opt->augmix_severity};
    dl->pixaug = opt->augment && autoaug_active(&dl->aug);
    return 0;
}

/* Reads this rank's labels (and, for JPEG shards, the files' offsets and sizes) for every slice,
 * checking the labels; the images themselves only when `images` is given (in memory). */
static int read_share(DataLoader *dl, const ShardSet *set, const ShardSlice *sl, int ns, int with_images, char *err,
                      size_t errlen) {
    size_t off = 0;
    uint64_t *poff = dl->jpeg ? mallocCheck((READ_PIECE + 1) * sizeof(uint64_t)) : NULL;
    int rc = 0;
    for (int k = 0; k < ns && rc == 0; k++) {
        const ShardInfo *s = &set->shards[sl[k].shard];
        size_t cnt = sl[k].end - sl[k].begin;
        /* In pieces: each read holds the process-wide HDF5 lock, which a checkpoint being
         * written in the background also needs. */
        for (size_t p = 0; p < cnt && rc == 0; p += READ_PIECE) {
            size_t m = cnt - p < READ_PIECE ? cnt - p : READ_PIECE;
            const size_t at = off + p;
            if (!dl->jpeg) {
                rc = shard_read_range(s->path, sl[k].begin + p, m, dl->S, with_images ? dl->images + at * dl->per : NULL,
                                      dl->labels + at, err, errlen);
                continue;
            }
            uint8_t *bytes = NULL;
            rc = shard_read_jpeg_range(s->path, sl[k].begin + p, m, poff, dl->dims + 2 * at, with_images ? &bytes : NULL,
                                       dl->labels + at, err, errlen);
            if (rc != 0) break;
            for (size_t i = 1; i <= m; i++) dl->off[at + i] = dl->off[at] + poff[i];
            if (with_images) {
                if (dl->off[at + m] > dl->share_bytes)   /* the file changed between the two reads */
                    rc = errf(err, errlen, "%s: the shard changed while it was read (restart the run)", s->path);
                else
                    memcpy(dl->images + dl->off[at], bytes, (size_t)poff[m]);
            }
            free(bytes);
        }
        if (rc != 0) break;
        for (size_t i = 0; i < cnt; i++) {
            int32_t l = dl->labels[off + i];
            if (l < 0 || l >= dl->attrs.num_classes) {
                rc = errf(err, errlen, "%s: label %d at index %zu is outside [0, %d) (num_classes is %d)", s->path, l,
                          sl[k].begin + i, dl->attrs.num_classes, dl->attrs.num_classes);
                break;
            }
        }
        off += cnt;
    }
    free(poff);
    return rc;
}

/* The log line of what this rank reads ("train-00000-of-00002.h5 [0, 2500) = ..."): the first
 * few slices, then a count, so that it stays short for many shards. */
static void describe_share(DataLoader *dl, const ShardSet *set, const ShardSlice *sl, int ns) {
    size_t dlen = 0;
    int listed = 0;
    for (int k = 0; k < ns; k++) {
        if (listed < 6) {
            dlen += (size_t)snprintf(dl->describe + dlen, sizeof dl->describe - dlen, "%s%s [%zu, %zu)", k ? ", " : "",
                                     set->shards[sl[k].shard].name, sl[k].begin, sl[k].end);
            listed++;
        } else if (k == ns - 1) {
            dlen += (size_t)snprintf(dl->describe + dlen, sizeof dl->describe - dlen, ", ... (%d more)", ns - listed);
        }
        if (dlen >= sizeof dl->describe) dlen = sizeof dl->describe - 1;
    }
    snprintf(dl->describe + dlen, sizeof dl->describe - dlen, " = %zu of %zu %s samples (rank %d of %d)", dl->n,
             dl->global_n, dl->split, dl->opt.rank, dl->opt.world_size);
}

DataLoader *dataloader_open(const DataLoaderOptions *opt, char *err, size_t errlen) {
    shards_quiet_hdf5();
    DataLoader *dl = callocCheck(1, sizeof *dl);
    dl->opt = *opt;
    if (dl->opt.workers < 1) dl->opt.workers = 1;
    dl->data_dir = strdup(opt->data_dir ? opt->data_dir : "");
    dl->split = strdup(opt->split ? opt->split : "");
    CHECK(dl->data_dir && dl->split);
    dl->opt.data_dir = dl->data_dir;
    dl->opt.split = dl->split;
    dl->lam = 1.0;
    if (opt->batch_size < 1 || opt->world_size < 1 || opt->rank < 0 || opt->rank >= opt->world_size)
        return open_fail(dl, err, errlen, "%s: invalid loader options (batch %d, rank %d of %d)",
                         dl->data_dir, opt->batch_size, opt->rank, opt->world_size);

    ShardSet set;
    if (shardset_open(&set, dl->data_dir, dl->split, opt->image_size, opt->num_classes, err, errlen) != 0)
        return open_fail(dl, NULL, 0, NULL);
    dl->S = set.shards[0].image_size;
    dl->jpeg = set.shards[0].encoding == SHARD_ENC_JPEG;
    dl->per = (size_t)dl->S * (size_t)dl->S * 3;
    dl->global_n = set.total;
    dl->shard_list_hash = 1469598103934665603ULL;   /* FNV-1a of every shard's name and size */
    for (int i = 0; i < set.num_shards; i++) {
        const unsigned char *p = (const unsigned char *)set.shards[i].name;
        for (size_t k = 0; k <= strlen(set.shards[i].name); k++) dl->shard_list_hash = (dl->shard_list_hash ^ p[k]) * 1099511628211ULL;
        for (int k = 0; k < 8; k++) dl->shard_list_hash = (dl->shard_list_hash ^ ((uint64_t)set.shards[i].n >> (8 * k) & 255)) * 1099511628211ULL;
    }
    dl->num_shards = set.num_shards;
    shard_attrs_copy(&dl->attrs, &set.shards[0].attrs);
    if (choose_view(dl, opt, err, errlen) != 0) {
        shardset_free(&set);
        return open_fail(dl, NULL, 0, NULL);
    }

    size_t *counts = mallocCheck((size_t)set.num_shards * sizeof(size_t));
    for (int i = 0; i < set.num_shards; i++) counts[i] = set.shards[i].n;
    ShardSlice *sl = mallocCheck((size_t)set.num_shards * sizeof(ShardSlice));
    /* RASampler's ranks read each other's samples: every rank takes the whole split, as one
     * rank of one would */
    const int ra = opt->ra_reps > 1;
    int ns = shards_assign(counts, set.num_shards, ra ? 0 : opt->rank, ra ? 1 : opt->world_size, sl, set.num_shards);
    free(counts);
    CHECK(ns <= set.num_shards);
    for (int k = 0; k < ns; k++) dl->n += sl[k].end - sl[k].begin;
    if (dl->n == 0) {
        free(sl);
        size_t total = set.total;
        int nsh = set.num_shards;
        shardset_free(&set);
        return open_fail(dl, err, errlen, "%s: the %s split has %zu samples in %d shards: too few for %d ranks (rank %d gets none)",
                         dl->data_dir, dl->split, total, nsh, opt->world_size, opt->rank);
    }
    CHECK(dl->n < UINT32_MAX);
    dl->slices = callocCheck((size_t)ns, sizeof(Slice));
    dl->num_slices = ns;
    size_t o = 0;
    for (int k = 0; k < ns; k++) {
        dl->slices[k].path = strdup(set.shards[sl[k].shard].path);
        CHECK(dl->slices[k].path);
        struct stat st;
        if (stat(dl->slices[k].path, &st) != 0) {
            snprintf(err, errlen, "%s: cannot stat: %s", dl->slices[k].path, strerror(errno));
            free(sl);
            shardset_free(&set);
            return open_fail(dl, NULL, 0, NULL);
        }
        dl->slices[k].id = (ShardId){st.st_dev, st.st_ino, st.st_size, st.st_mtim, set.shards[sl[k].shard].n};
        dl->slices[k].begin = sl[k].begin;
        dl->slices[k].count = sl[k].end - sl[k].begin;
        dl->slices[k].off = o;
        o += dl->slices[k].count;
    }
    dl->labels = malloc(dl->n * sizeof(int32_t));
    dl->order = malloc(dl->n * sizeof(uint32_t));
    if (dl->jpeg) {
        dl->off = calloc(dl->n + 1, sizeof(uint64_t));
        dl->dims = malloc(dl->n * 2 * sizeof(uint16_t));
    }
    if (!dl->labels || !dl->order || (dl->jpeg && (!dl->off || !dl->dims))) {
        free(sl);
        shardset_free(&set);
        return open_fail(dl, err, errlen, "%s: rank %d's share of the %s split (%zu samples) does not fit in memory; use more ranks",
                         dl->data_dir, opt->rank, dl->split, dl->n);
    }
    /* A JPEG share's size is known once its offsets are read. */
    if (dl->jpeg && read_share(dl, &set, sl, ns, 0, err, errlen) != 0) {
        free(sl);
        shardset_free(&set);
        return open_fail(dl, NULL, 0, NULL);
    }
    dl->share_bytes = dl->jpeg ? (size_t)dl->off[dl->n] : dl->n * dl->per;
    const double share_mib = (double)dl->share_bytes / 1048576.0;
    const char *what = dl->jpeg ? " of JPEG files" : "";
    dl->streaming = opt->in_memory == DL_MEMORY_NO ||
                    (opt->in_memory == DL_MEMORY_AUTO && opt->memory_budget && dl->share_bytes > opt->memory_budget);
    if (opt->in_memory == DL_MEMORY_AUTO && opt->memory_budget)
        snprintf(dl->memory_note, sizeof dl->memory_note, "%s: the %s share is %.1f MiB%s, %s the budget of %.1f MiB",
                 dl->streaming ? "streamed" : "in memory", dl->split, share_mib, what, dl->streaming ? "over" : "within",
                 (double)opt->memory_budget / 1048576.0);
    else
        snprintf(dl->memory_note, sizeof dl->memory_note, "%s: the %s share is %.1f MiB%s%s", dl->streaming ? "streamed" : "in memory",
                 dl->split, share_mib, what, opt->in_memory == DL_MEMORY_AUTO ? " (no budget given)" : "");
    dl->epoch_n = ra ? ra_sampler_count(dl->n, opt->world_size) : dl->n;
    if (ra && (dl->streaming || dl->epoch_n == 0 || dl->n * (size_t)opt->ra_reps < (size_t)opt->world_size)) {
        free(sl);
        shardset_free(&set);
        if (!dl->streaming)
            return open_fail(dl, err, errlen, "%s: --ra_reps %d: the %s split's %zu samples leave no sample to a rank (RASampler "
                             "takes n // 256 * 256 / %d ranks each)", dl->data_dir, opt->ra_reps, dl->split, dl->n, opt->world_size);
        return open_fail(dl, err, errlen, "%s: --ra_reps %d needs the whole %s split in memory on every rank, but it would be "
                         "streamed (%s); pass --data_in_memory yes or drop --ra_reps", dl->data_dir, opt->ra_reps, dl->split,
                         dl->memory_note);
    }
    if (ra) dl->ra_perm = mallocCheck(dl->n * sizeof(uint32_t));
    if (dl->streaming) {
        dl->C = opt->chunk_images > 0 ? (size_t)opt->chunk_images : DL_CHUNK_IMAGES;
        dl->W = opt->window_chunks > 0 ? (size_t)opt->window_chunks : DL_WINDOW_CHUNKS;
        dl->num_chunks = (dl->n + dl->C - 1) / dl->C;
        dl->num_windows = (dl->num_chunks + dl->W - 1) / dl->W;
        size_t len = strlen(dl->memory_note);
        snprintf(dl->memory_note + len, sizeof dl->memory_note - len, " (%zu chunks of %zu images, windows of %zu chunks)",
                 dl->num_chunks, dl->C, dl->W);
        dl->chunk_perm = mallocCheck(dl->num_chunks * sizeof(uint32_t));
        dl->chunk_win = mallocCheck(dl->num_chunks * sizeof(uint32_t));
        dl->win_start = mallocCheck((dl->num_windows + 1) * sizeof(size_t));
        dl->chunk_data = callocCheck(dl->num_chunks, sizeof(uint8_t *));
    } else {
        dl->images = malloc(dl->share_bytes);
        if (!dl->images) {
            free(sl);
            shardset_free(&set);
            return open_fail(dl, err, errlen, "%s: rank %d's share of the %s split (%zu samples, %.2f GiB) does not fit in memory; use more ranks or --data_in_memory no",
                             dl->data_dir, opt->rank, dl->split, dl->n, (double)dl->share_bytes / (1u << 30));
        }
    }
    /* Read the share: the labels, and the images when held (a streamed JPEG share's labels were
     * read with its offsets). */
    if ((!dl->jpeg || !dl->streaming) && read_share(dl, &set, sl, ns, !dl->streaming, err, errlen) != 0) {
        free(sl);
        shardset_free(&set);
        return open_fail(dl, NULL, 0, NULL);
    }
    describe_share(dl, &set, sl, ns);
    free(sl);
    shardset_free(&set);

    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++)
            dl->lut[c][v] = ((float)v / 255.0f - dl->attrs.mean[c]) / dl->attrs.std[c];
    size_t B = (size_t)opt->batch_size;
    dl->num_batches = opt->drop_last ? dl->epoch_n / B : (dl->epoch_n + B - 1) / B;
    dl->plan = mallocCheck(B * sizeof(SamplePlan));
    dl->box = mallocCheck(B * sizeof(PixelBox));
    dl->pool = workpool_create(dl->opt.workers);
    dl->scratch = callocCheck((size_t)dl->opt.workers, sizeof(TransformScratch));

    if (opt->prefetch) {
        dl->pre_x = mallocCheck(B * dl->out_floats * sizeof(float));
        dl->pre_labels = mallocCheck(B * sizeof(int));
        dl->pre_plan = mallocCheck(B * sizeof(SamplePlan));
        dl->pre_box = mallocCheck(B * sizeof(PixelBox));
        CHECK(pthread_mutex_init(&dl->mu, NULL) == 0);
        CHECK(pthread_cond_init(&dl->cv, NULL) == 0);
        CHECK(helper_thread_create(&dl->thread, worker_main, dl) == 0);
        dl->has_thread = 1;
    }
    return dl;
}

size_t dataloader_num_samples(const DataLoader *dl) { return dl->n; }
size_t dataloader_num_batches(const DataLoader *dl) { return dl->num_batches; }
size_t dataloader_global_samples(const DataLoader *dl) { return dl->global_n; }
int dataloader_num_shards(const DataLoader *dl) { return dl->num_shards; }
const char *dataloader_describe(const DataLoader *dl) { return dl->describe; }
uint64_t dataloader_shard_list_hash(const DataLoader *dl) { return dl->shard_list_hash; }
int dataloader_num_classes(const DataLoader *dl) { return dl->attrs.num_classes; }
int dataloader_image_size(const DataLoader *dl) { return dl->S; }
int dataloader_batch_size(const DataLoader *dl) { return dl->opt.batch_size; }
const uint8_t *dataloader_images(const DataLoader *dl) {
    return dl->jpeg || dl->tf.mode != TF_PAD_CROP || dl->pixaug ? NULL : dl->images;
}
int dataloader_output_size(const DataLoader *dl) { return dl->tf.out; }
int dataloader_jpeg(const DataLoader *dl) { return dl->jpeg; }
const float *dataloader_lut(const DataLoader *dl) { return &dl->lut[0][0]; }
int dataloader_streaming(const DataLoader *dl) { return dl->streaming; }
void dataloader_order_shape(const DataLoader *dl, long *chunk_images, long *window_chunks) {
    *chunk_images = dl->streaming ? (long)dl->C : 0;
    *window_chunks = dl->streaming ? (long)dl->W : 0;
}

int dataloader_pad_reflect(const DataLoader *dl) { return dl->tf.mode == TF_PAD_CROP && dl->tf.reflect; }
const char *dataloader_memory_note(const DataLoader *dl) { return dl->memory_note; }
size_t dataloader_bytes_held(const DataLoader *dl) {
    return dl->streaming ? __atomic_load_n(&dl->held, __ATOMIC_RELAXED) : dl->share_bytes;
}
size_t dataloader_peak_bytes_held(const DataLoader *dl) {
    return dl->streaming ? __atomic_load_n(&dl->peak, __ATOMIC_RELAXED) : dl->share_bytes;
}

const char *dataloader_class_name(const DataLoader *dl, int k) {
    if (!dl->attrs.class_names || k < 0 || k >= dl->attrs.num_classes) return NULL;
    return dl->attrs.class_names[k];
}

void dataloader_norm(const DataLoader *dl, float mean[3], float std[3]) {
    for (int c = 0; c < 3; c++) {
        mean[c] = dl->attrs.mean[c];
        std[c] = dl->attrs.std[c];
    }
}

void dataloader_start_epoch(DataLoader *dl, int epoch, size_t start_batch) {
    if (dl->has_thread) {
        pthread_mutex_lock(&dl->mu);
        dl->gen++;
        /* The worker reads order/epoch while busy: change them only once it is idle. */
        while (dl->busy) pthread_cond_wait(&dl->cv, &dl->mu);
        dl->ready = 0;
    }
    dl->epoch = epoch;
    if (dl->streaming) {
        for (uint32_t c = 0; c < (uint32_t)dl->num_chunks; c++) dl->chunk_perm[c] = c;
        Rng r;
        if (dl->opt.shuffle) {
            rng_init(&r, dl->opt.seed ^ CHUNK_SALT, (uint64_t)(uint32_t)epoch, (uint64_t)(uint32_t)dl->opt.rank);
            rng_shuffle_u32(&r, dl->chunk_perm, (uint32_t)dl->num_chunks);
        }
        size_t pos = 0;
        for (size_t w = 0; w < dl->num_windows; w++) {
            dl->win_start[w] = pos;
            size_t j1 = (w + 1) * dl->W < dl->num_chunks ? (w + 1) * dl->W : dl->num_chunks;
            for (size_t j = w * dl->W; j < j1; j++) {
                size_t c = dl->chunk_perm[j];
                dl->chunk_win[c] = (uint32_t)w;
                size_t a = c * dl->C, z = a + dl->C < dl->n ? a + dl->C : dl->n;
                for (size_t i = a; i < z; i++) dl->order[pos++] = (uint32_t)i;
            }
            if (dl->opt.shuffle) {
                rng_init(&r, dl->opt.seed ^ WINDOW_SALT, ((uint64_t)(uint32_t)epoch << 32) | (uint32_t)dl->opt.rank, (uint64_t)w);
                rng_shuffle_u32(&r, dl->order + dl->win_start[w], (uint32_t)(pos - dl->win_start[w]));
            }
        }
        CHECK(pos == dl->n);
        dl->win_start[dl->num_windows] = pos;
    } else {
        for (uint32_t i = 0; i < (uint32_t)dl->n; i++) dl->order[i] = i;
    }
    if (dl->ra_perm) {   /* RASampler: this rank's share of the repeated permutation of the split */
        if (dl->opt.shuffle) ra_sampler_perm(dl->opt.seed, epoch, dl->n, dl->ra_perm);
        else for (uint32_t i = 0; i < (uint32_t)dl->n; i++) dl->ra_perm[i] = i;
        CHECK(ra_sampler_indices(dl->ra_perm, dl->n, dl->opt.ra_reps, dl->opt.rank, dl->opt.world_size, dl->order) == dl->epoch_n);
    } else if (dl->opt.shuffle && !dl->streaming) {
        Rng r;
        rng_init(&r, dl->opt.seed, (uint64_t)(uint32_t)epoch, (uint64_t)(uint32_t)dl->opt.rank);
        rng_shuffle_u32(&r, dl->order, (uint32_t)dl->n);
    }
    dl->next_batch = start_batch;
    dl->started = 1;
    if (dl->has_thread) {
        dl->want = start_batch;
        pthread_cond_broadcast(&dl->cv);
        pthread_mutex_unlock(&dl->mu);
    }
}

void dataloader_set_output_size(DataLoader *dl, int size) {
    CHECK(dl->tf.mode != TF_PAD_CROP && size >= 1 && size <= dl->max_out);
    if (size == dl->tf.out) return;
    if (dl->has_thread) {   /* as dataloader_start_epoch: the worker idle, its batch dropped */
        pthread_mutex_lock(&dl->mu);
        dl->gen++;
        while (dl->busy) pthread_cond_wait(&dl->cv, &dl->mu);
        dl->ready = 0;
        dl->want = dl->num_batches;   /* idle until dataloader_start_epoch */
    }
    dl->tf.out = size;
    if (dl->tf.mode == TF_CENTRE && dl->opt.resize_size <= 0) dl->tf.resize = size;
    dl->out_floats = (size_t)size * size * 3;
    if (dl->has_thread) pthread_mutex_unlock(&dl->mu);
}

int dataloader_next(DataLoader *dl, float *x, int *labels) {
    if (!dl->started) dataloader_start_epoch(dl, 0, 0);
    if (dl->next_batch >= dl->num_batches) return 0;
    double t0 = now_sec();
    int n;
    if (!dl->has_thread) {
        n = produce(dl, dl->next_batch, dl->plan, dl->box, x, labels, &dl->lam);
        dl->wait += now_sec() - t0;
    } else {
        pthread_mutex_lock(&dl->mu);
        while (!(dl->ready && dl->ready_batch == dl->next_batch)) pthread_cond_wait(&dl->cv, &dl->mu);
        dl->wait += now_sec() - t0;
        n = dl->pre_n;
        dl->lam = dl->pre_lam;
        memcpy(x, dl->pre_x, (size_t)n * dl->out_floats * sizeof(float));
        memcpy(labels, dl->pre_labels, (size_t)n * sizeof(int));
        dl->ready = 0;
        pthread_cond_broadcast(&dl->cv);
        pthread_mutex_unlock(&dl->mu);
    }
    dl->next_batch++;
    return n;
}

/* Ends the worker (after the batch it may be making) and releases its buffers; the loader
 * then makes each batch in the caller's thread. */
static void stop_prefetch(DataLoader *dl) {
    if (!dl->has_thread) return;
    pthread_mutex_lock(&dl->mu);
    dl->quit = 1;
    pthread_cond_broadcast(&dl->cv);
    pthread_mutex_unlock(&dl->mu);
    pthread_join(dl->thread, NULL);
    pthread_cond_destroy(&dl->cv);
    pthread_mutex_destroy(&dl->mu);
    dl->has_thread = 0;
    dl->ready = dl->busy = 0;
    free(dl->pre_x);
    free(dl->pre_labels);
    free(dl->pre_plan);
    free(dl->pre_box);
    dl->pre_x = NULL;
    dl->pre_labels = NULL;
    dl->pre_plan = NULL;
    dl->pre_box = NULL;
}

int dataloader_next_plan(DataLoader *dl, SamplePlan *plan, int *labels) {
    stop_prefetch(dl);
    if (!dl->started) dataloader_start_epoch(dl, 0, 0);
    if (dl->next_batch >= dl->num_batches) return 0;
    double t0 = now_sec();
    CHECK(dl->tf.mode != TF_RRC);   /* a plan holds no box (dataloader.h) */
    CHECK(dl->opt.random_erase <= 0 && dl->opt.mixup_alpha <= 0 && dl->opt.cutmix_alpha <= 0);   /* host-made only */
    if (dl->streaming) loader_stream_batch(dl, dl->next_batch);
    int n = make_plan(dl, dl->next_batch, plan, NULL, labels);
    dl->wait += now_sec() - t0;
    dl->next_batch++;
    return n;
}

double dataloader_batch_lambda(const DataLoader *dl) { return dl->lam; }

double dataloader_take_wait_time(DataLoader *dl) {
    double w = dl->wait;
    dl->wait = 0.0;
    return w;
}

void dataloader_free(DataLoader *dl) {
    if (!dl) return;
    stop_prefetch(dl);
    shard_attrs_free(&dl->attrs);
    free(dl->images);
    free(dl->labels);
    free(dl->order);
    free(dl->ra_perm);
    free(dl->plan);
    free(dl->box);
    free(dl->off);
    free(dl->dims);
    workpool_free(dl->pool);
    for (int w = 0; dl->scratch && w < dl->opt.workers; w++) transform_scratch_free(&dl->scratch[w]);
    free(dl->scratch);
    for (size_t c = 0; dl->chunk_data && c < dl->num_chunks; c++) free(dl->chunk_data[c]);
    free(dl->chunk_data);
    for (int k = 0; dl->slices && k < dl->num_slices; k++) free(dl->slices[k].path);
    free(dl->slices);
    free(dl->chunk_perm);
    free(dl->chunk_win);
    free(dl->win_start);
    free(dl->data_dir);
    free(dl->split);
    free(dl);
}
