/* SPDX-License-Identifier: BSD-3-Clause */
/* output.c - the dataset a ddptrain-data command writes (output.h). */
#include "output.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"

void ensure_out_dir(const char *dir, const char *split, int force) {
    if (mkdir_p(dir) != 0) die("%s: cannot create output directory: %s", QUOTED(dir), strerror(errno));
    if (!force && shards_dir_has_split(dir, split))
        die("%s: already holds %s shards (use --force to replace them)", QUOTED(dir), split);
}

void check_split_size(const char *dir, const char *split, size_t total, int nshards) {
    if ((size_t)nshards > total)
        die("%s: cannot cut %zu %s samples into %d shards (every shard needs at least one sample)",
            QUOTED(dir), total, split, nshards);
}

/* Samples per write for images of at most `per` bytes: fewer for large images (import
 * --size), so that a chunk stays within CHUNK_BYTES. */
static size_t chunk_samples(size_t per) {
    return CHUNK * per <= CHUNK_BYTES ? CHUNK : CHUNK_BYTES / per ? CHUNK_BYTES / per : 1;
}

/* Removes every temporary file of o, then dies with err. */
__attribute__((noreturn)) static void output_fail(Output *o, const char *err) {
    for (int i = 0; i < o->n; i++) unlink(o->p[i].tmp);
    die("%s", err);
}

/* Records a finished shard of o (its temporary file, to be renamed by output_commit). */
static void output_add(Output *o, const ShardWriter *w) {
    if (o->n == o->cap) {
        o->cap = o->cap ? 2 * o->cap : 16;
        Pending *v = realloc(o->p, (size_t)o->cap * sizeof *v);
        CHECK(v != NULL);
        o->p = v;
    }
    o->p[o->n].tmp = strdup(w->tmp_path);
    o->p[o->n].path = strdup(w->path);
    CHECK(o->p[o->n].tmp && o->p[o->n].path);
    o->n++;
}

/* Records a split whose shards are all written, for output_commit. */
static void output_split_done(Output *o, const char *split, int nshards, size_t total) {
    o->split[o->nsplits].split = split;
    o->split[o->nsplits].nshards = nshards;
    o->split[o->nsplits].total = total;
    o->nsplits++;
}

void write_split(Output *o, const char *split, size_t total, int nshards, int image_size,
                 const ShardAttrs *attrs, ProduceFn produce, void *ctx) {
    const char *dir = o->dir;
    CHECK(o->nsplits < 2);
    check_split_size(dir, split, total, nshards);
    size_t per = (size_t)image_size * (size_t)image_size * 3;
    size_t chunk = chunk_samples(per);
    uint8_t *img = mallocCheck(chunk * per);
    int32_t *lab = mallocCheck(chunk * sizeof(int32_t));
    char err[2 * SHARD_PATH_MAX], path[SHARD_PATH_MAX], name[64];
    for (int k = 0; k < nshards; k++) {
        size_t a = total * (size_t)k / (size_t)nshards, b = total * (size_t)(k + 1) / (size_t)nshards;
        shard_name(name, sizeof name, split, k, nshards);
        snprintf_check(path, sizeof path, "%s/%s", dir, name);
        ShardWriter w;
        if (shard_writer_open(&w, path, b - a, image_size, attrs, err, sizeof err) != 0) output_fail(o, err);
        for (size_t s = a; s < b; s += chunk) {
            size_t n = b - s < chunk ? b - s : chunk;
            if (produce(ctx, s, n, img, lab, err, sizeof err) != 0) {
                shard_writer_abort(&w);
                output_fail(o, err);
            }
            if (shard_writer_append(&w, img, lab, n, err, sizeof err) != 0) output_fail(o, err);
        }
        if (shard_writer_finish(&w, err, sizeof err) != 0) output_fail(o, err);
        output_add(o, &w);
    }
    free(img);
    free(lab);
    output_split_done(o, split, nshards, total);
}

void jpeg_batch_reset(JpegBatch *b) {
    b->len = b->n = 0;
    if (!b->offsets) {
        b->ncap = 64;
        b->offsets = mallocCheck((b->ncap + 1) * sizeof *b->offsets);
        b->sizes = mallocCheck(b->ncap * 2 * sizeof *b->sizes);
        b->labels = mallocCheck(b->ncap * sizeof *b->labels);
    }
    b->offsets[0] = 0;
}

void jpeg_batch_add(JpegBatch *b, const uint8_t *data, size_t len, int h, int w, int32_t label) {
    if (b->n == b->ncap) {
        b->ncap *= 2;
        b->offsets = realloc(b->offsets, (b->ncap + 1) * sizeof *b->offsets);
        b->sizes = realloc(b->sizes, b->ncap * 2 * sizeof *b->sizes);
        b->labels = realloc(b->labels, b->ncap * sizeof *b->labels);
        CHECK(b->offsets && b->sizes && b->labels);
    }
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : (size_t)1 << 20;
        while (cap < b->len + len) cap *= 2;
        b->bytes = realloc(b->bytes, cap);
        CHECK(b->bytes != NULL);
        b->cap = cap;
    }
    memcpy(b->bytes + b->len, data, len);
    b->len += len;
    CHECK(h >= 1 && h <= 65535 && w >= 1 && w <= 65535);
    b->sizes[2 * b->n] = (uint16_t)h;
    b->sizes[2 * b->n + 1] = (uint16_t)w;
    b->labels[b->n] = label;
    b->n++;
    b->offsets[b->n] = b->len;
}

void jpeg_batch_free(JpegBatch *b) {
    free(b->bytes); free(b->offsets); free(b->sizes); free(b->labels);
    memset(b, 0, sizeof *b);
}

/* The decoded size bounds a JPEG's, at most 2S x S x 3 bytes: chunks sized on it keep the
 * memory held near CHUNK_BYTES however large the images. */
void write_split_jpeg(Output *o, const char *split, size_t total, int nshards, int S,
                      const ShardAttrs *attrs, JpegProduceFn produce, void *ctx) {
    const char *dir = o->dir;
    CHECK(o->nsplits < 2);
    check_split_size(dir, split, total, nshards);
    size_t chunk = chunk_samples((size_t)2 * (size_t)S * (size_t)S * 3);
    JpegBatch b = {0};
    char err[2 * SHARD_PATH_MAX], path[SHARD_PATH_MAX], name[64];
    for (int k = 0; k < nshards; k++) {
        size_t a = total * (size_t)k / (size_t)nshards, e = total * (size_t)(k + 1) / (size_t)nshards;
        shard_name(name, sizeof name, split, k, nshards);
        snprintf_check(path, sizeof path, "%s/%s", dir, name);
        ShardWriter w;
        if (shard_writer_open_jpeg(&w, path, e - a, S, attrs, err, sizeof err) != 0) output_fail(o, err);
        for (size_t s = a; s < e; s += chunk) {
            size_t n = e - s < chunk ? e - s : chunk;
            jpeg_batch_reset(&b);
            if (produce(ctx, s, n, &b, err, sizeof err) != 0) {
                shard_writer_abort(&w);
                output_fail(o, err);
            }
            CHECK(b.n == n);
            if (shard_writer_append_jpeg(&w, b.bytes, b.offsets, b.sizes, b.labels, n, err, sizeof err) != 0)
                output_fail(o, err);
        }
        if (shard_writer_finish(&w, err, sizeof err) != 0) output_fail(o, err);
        output_add(o, &w);
    }
    jpeg_batch_free(&b);
    output_split_done(o, split, nshards, total);
}

/* With --force, an older set of another shard count would leave the directory inconsistent
 * (two sets of one split): its shards go once the new ones are in place. */
static void remove_other_counts(const Output *o) {
    char path[SHARD_PATH_MAX];
    for (int k = 0; k < o->nsplits; k++) {
        DIR *d = opendir(o->dir);
        if (!d) die("%s: cannot list: %s", QUOTED(o->dir), strerror(errno));
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            int i, c;
            if (shard_parse_name(e->d_name, o->split[k].split, &i, &c) && c != o->split[k].nshards) {
                snprintf_check(path, sizeof path, "%s/%s", o->dir, e->d_name);
                if (unlink(path) != 0) die("%s: cannot remove the old shard: %s", QUOTED(path), strerror(errno));
            }
        }
        closedir(d);
    }
}

void output_commit(Output *o) {
    char err[2 * SHARD_PATH_MAX];
    for (int i = 0; i < o->n; i++)
        if (shard_commit(o->p[i].tmp, o->p[i].path, err, sizeof err) != 0) {
            for (int j = i + 1; j < o->n; j++) unlink(o->p[j].tmp);
            die("%s", err);
        }
    for (int i = 0; i < o->n; i++) {
        free(o->p[i].tmp);
        free(o->p[i].path);
    }
    free(o->p);
    o->p = NULL;
    o->n = o->cap = 0;
    remove_other_counts(o);
    for (int k = 0; k < o->nsplits; k++)
        printf("wrote %d %s shard%s (%zu samples) to %s\n", o->split[k].nshards, o->split[k].split,
               o->split[k].nshards == 1 ? "" : "s", o->split[k].total, o->dir);
}

void stats_add(PixelStats *st, const uint8_t *img, size_t pixels) {
    for (size_t p = 0; p < pixels; p++)
        for (int c = 0; c < 3; c++) {
            double v = img[p * 3 + (size_t)c] / 255.0;
            st->sum[c] += v;
            st->sq[c] += v * v;
        }
    st->n += pixels;
}

void stats_finish(const PixelStats *st, ShardAttrs *a) {
    a->has_norm = 1;
    for (int c = 0; c < 3; c++) {
        double m = st->sum[c] / (double)st->n, var = st->sq[c] / (double)st->n - m * m;
        a->mean[c] = (float)m;
        a->std[c] = (float)sqrt(var > 1e-6 ? var : 1e-6);   /* constant images: keep x finite */
    }
}

void print_mean_std(const ShardAttrs *a) {
    printf("mean %.4f %.4f %.4f  std %.4f %.4f %.4f\n", (double)a->mean[0], (double)a->mean[1],
           (double)a->mean[2], (double)a->std[0], (double)a->std[1], (double)a->std[2]);
}
