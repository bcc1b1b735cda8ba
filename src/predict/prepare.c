/* SPDX-License-Identifier: BSD-3-Clause */
/* prepare.c - an item's network input (prepare.h). */
#include "prepare.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "data/crops.h"
#include "data/image.h"
#include "data/jpegs.h"
#include "data/shards.h"

void preparer_init(Preparer *p, const Config *c, const float *file_lut, int threads) {
    memset(p, 0, sizeof *p);
    p->out = (int)config_eval_size(c);
    p->image_size = (int)c->image_size;
    p->file_lut = file_lut;
    if (c->train_crop_size) {   /* splits.c: the test split's centre crop of --val_resize_size */
        p->shard_mode = TF_CENTRE;
        p->file_resize = p->shard_resize = c->val_resize_size ? (int)c->val_resize_size : p->out;
    } else {                    /* the stored images as they are, which import made Resize(S) + CenterCrop(S) */
        p->shard_mode = TF_PAD_CROP;
        p->file_resize = p->out;
    }
    if (threads < 1) threads = 1;
    p->pool = workpool_create(threads);
    p->scratch = callocCheck((size_t)threads, sizeof *p->scratch);
}

void preparer_free(Preparer *p) {
    for (int w = 0; p->pool && w < workpool_threads(p->pool); w++) transform_scratch_free(&p->scratch[w]);
    free(p->scratch);
    workpool_free(p->pool);
    memset(p, 0, sizeof *p);
}

/* One shard sample's stored bytes, read before the workers start (the HDF5 lock would
 * serialise them anyway). */
typedef struct {
    const uint8_t *bytes;
    size_t len;
    int h, w;                /* a JPEG's size as decoded at full scale */
} Stored;

typedef struct {
    const Preparer *p;
    const Inputs *in;
    size_t first;
    float *x;
    Prepared *res;
    const Stored *stored;    /* [n] */
} Job;

static void make_file_item(const Job *job, const Source *s, float *dst, Prepared *r, TransformScratch *scratch) {
    const Preparer *p = job->p;
    ImageRGB im;   /* decoded as import decodes it */
    if (image_decode_path(s->path, IMAGE_MAX_PIXELS, &im, r->err, sizeof r->err) != 0) return;
    const Transform tf = {TF_CENTRE, p->out, p->file_resize, p->file_lut, 0};
    const ImageView v = {im.rgb, im.w, im.h, (size_t)im.w * 3};
    transform_apply(&tf, &v, 0, 0, 0, (PixelBox){0, 0, im.w, im.h}, dst, scratch);
    free(im.rgb);
    r->ok = 1;
}

/* dataloader.c's make_sample for the evaluation's view (no plan: no offset, no flip). */
static void make_shard_item(const Job *job, const Source *s, size_t k, const Stored *st, float *dst, Prepared *r,
                            TransformScratch *scratch) {
    const Preparer *p = job->p;
    const Transform tf = {p->shard_mode, p->out, p->shard_resize, s->lut, 0};
    const int S = p->image_size;
    if (s->encoding != SHARD_ENC_JPEG) {
        const ImageView v = {st->bytes, S, S, (size_t)S * 3};
        transform_apply(&tf, &v, 0, 0, 0, (PixelBox){0, 0, S, S}, dst, scratch);
        r->ok = 1;
        return;
    }
    const PixelBox box = {0, 0, st->w, st->h};
    const int d = transform_jpeg_denom(&tf, box, st->w, st->h);
    ImageRGB dec = {0, 0, NULL};
    char e[JPEG_ERR_LEN];
    if (jpeg_decode_scaled(st->bytes, st->len, d, st->w, st->h, &dec, e, sizeof e) != 0) {
        errf(r->err, sizeof r->err, "%s: sample %zu: %s", QUOTED(s->path), k, e);
        return;
    }
    ImageView v = {dec.rgb, dec.w, dec.h, (size_t)dec.w * 3};
    if (tf.mode == TF_PAD_CROP) {   /* the centre S x S, as Resize(S) + CenterCrop(S) */
        const PixelBox c = centre_crop(dec.w, dec.h, S);
        v.rgb += (size_t)c.y * v.stride + (size_t)c.x * 3;
        v.w = v.h = S;
    }
    transform_apply(&tf, &v, 0, 0, 0, (PixelBox){0, 0, v.w, v.h}, dst, scratch);
    free(dec.rgb);
    r->ok = 1;
}

static void make_item(void *ctx, int i, int worker) {
    const Job *job = ctx;
    Prepared *r = &job->res[i];
    if (r->err[0]) return;   /* its shard could not be read */
    const size_t item = job->first + (size_t)i;
    const Source *s = inputs_source(job->in, item);
    float *dst = job->x + (size_t)i * job->p->out * job->p->out * 3;
    TransformScratch *scratch = &job->p->scratch[worker];
    if (s->kind == SRC_IMAGE) make_file_item(job, s, dst, r, scratch);
    else make_shard_item(job, s, item - s->first, &job->stored[i], dst, r, scratch);
}

/* The stored bytes of items [i, i + cnt) of the group, samples [k, k + cnt) of shard s, into
 * st; the buffer read is appended to bufs. On failure every one of them is marked bad. */
static void read_shard_range(const Preparer *p, const Source *s, size_t k, int i, int cnt, Stored *st, Prepared *res,
                             uint8_t **buf) {
    char err[PREPARE_ERR_MAX];
    int rc;
    if (s->encoding != SHARD_ENC_JPEG) {
        const size_t per = (size_t)p->image_size * p->image_size * 3;
        *buf = mallocCheck((size_t)cnt * per);
        rc = shard_read_range(s->path, k, (size_t)cnt, p->image_size, *buf, NULL, err, sizeof err);
        for (int j = 0; rc == 0 && j < cnt; j++) st[i + j] = (Stored){*buf + (size_t)j * per, per, p->image_size, p->image_size};
    } else {
        uint64_t *off = mallocCheck(((size_t)cnt + 1) * sizeof *off);
        uint16_t *dims = mallocCheck((size_t)cnt * 2 * sizeof *dims);
        rc = shard_read_jpeg_range(s->path, k, (size_t)cnt, off, dims, buf, NULL, err, sizeof err);
        for (int j = 0; rc == 0 && j < cnt; j++)
            st[i + j] = (Stored){*buf + off[j], (size_t)(off[j + 1] - off[j]), dims[2 * j], dims[2 * j + 1]};
        free(off);
        free(dims);
    }
    if (rc != 0)
        for (int j = 0; j < cnt; j++) snprintf(res[i + j].err, sizeof res[i + j].err, "%s", err);
}

void prepare_items(Preparer *p, const Inputs *in, size_t first, int n, float *x, Prepared *res) {
    Stored *stored = callocCheck((size_t)n, sizeof *stored);
    uint8_t **bufs = callocCheck((size_t)n, sizeof *bufs);
    int nbufs = 0;
    for (int i = 0; i < n;) {
        const Source *s = inputs_source(in, first + (size_t)i);
        const size_t k = first + (size_t)i - s->first;
        const int cnt = s->n - k < (size_t)(n - i) ? (int)(s->n - k) : n - i;
        for (int j = 0; j < cnt; j++) {
            res[i + j] = (Prepared){0, s->labels ? s->labels[k + (size_t)j] : -1, ""};
        }
        if (s->kind == SRC_SHARD) read_shard_range(p, s, k, i, cnt, stored, res, &bufs[nbufs++]);
        i += cnt;
    }
    Job job = {p, in, first, x, res, stored};
    workpool_run(p->pool, n, make_item, &job);
    for (int b = 0; b < nbufs; b++) free(bufs[b]);
    free(bufs);
    free(stored);
}
