/* SPDX-License-Identifier: BSD-3-Clause */
/* shards.c - a split's set of shards: finding and checking the complete
 * set in a directory, and which samples each rank of a job reads. One shard is read in
 * shard_read.c and written in shard_write.c; the format is data/README.md's. */
#include "shards.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "base/util.h"

/* ---- discovery ----------------------------------------------------------------------------- */

typedef struct { int index, count; char name[64]; } Found;

static int cmp_found(const void *a, const void *b) {
    const Found *x = a, *y = b;
    if (x->count != y->count) return x->count < y->count ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Lists the files named like shards of `split`; returns the count or -1 (errno). */
static int list_split(const char *dir, const char *split, Found **out) {
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0, cap = 0;
    Found *f = NULL;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int i, c;
        if (!shard_parse_name(e->d_name, split, &i, &c)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            Found *g = realloc(f, (size_t)cap * sizeof *f);
            CHECK(g != NULL);
            f = g;
        }
        f[n].index = i;
        f[n].count = c;
        snprintf_check(f[n].name, sizeof f[n].name, "%s", e->d_name);
        n++;
    }
    closedir(d);
    if (n) qsort(f, (size_t)n, sizeof *f, cmp_found);
    *out = f;
    return n;
}

int shards_dir_has_split(const char *dir, const char *split) {
    Found *f;
    int n = list_split(dir, split, &f);
    free(f);
    return n > 0;
}

void shardset_free(ShardSet *set) {
    if (set->shards)
        for (int i = 0; i < set->num_shards; i++) shard_info_free(&set->shards[i]);
    free(set->shards);
    set->shards = NULL;
    set->num_shards = 0;
}

static void join_path(char *buf, size_t len, const char *dir, const char *name) {
    size_t l = strlen(dir);
    snprintf_check(buf, len, "%s%s%s", dir, (l && dir[l - 1] == '/') ? "" : "/", name);
}

int shardset_open(ShardSet *set, const char *dir, const char *split, int expected_image_size,
                  int expected_num_classes, char *err, size_t errlen) {
    memset(set, 0, sizeof *set);
    shards_quiet_hdf5();
    if (strlen(dir) >= sizeof set->dir - 80) return errf(err, errlen, "%s: path too long", QUOTED(dir));
    if (strlen(split) >= sizeof set->split) return errf(err, errlen, "%s: split name '%s' too long", QUOTED(dir), QUOTED(split));
    strcpy(set->dir, dir);
    strcpy(set->split, split);

    struct stat st;
    if (stat(dir, &st) != 0) return errf(err, errlen, "%s: cannot open data directory: %s", QUOTED(dir), strerror(errno));
    if (!S_ISDIR(st.st_mode)) return errf(err, errlen, "%s: not a directory (a directory of %s-NNNNN-of-MMMMM.h5 shards is expected)", QUOTED(dir), split);
    Found *f;
    int n = list_split(dir, split, &f);
    if (n < 0) return errf(err, errlen, "%s: cannot read data directory: %s", QUOTED(dir), strerror(errno));
    char p1[SHARD_PATH_MAX], p2[SHARD_PATH_MAX];
    if (n == 0) {
        free(f);
        return errf(err, errlen, "%s: no %s shards found (files named %s-NNNNN-of-MMMMM.h5 are expected; see ddptrain-data --help)",
                    QUOTED(dir), split, split);
    }
    /* One shard count for the whole split: a mix means a stale set was left behind. */
    for (int i = 1; i < n; i++)
        if (f[i].count != f[0].count) {
            join_path(p1, sizeof p1, dir, f[i].name);
            join_path(p2, sizeof p2, dir, f[0].name);
            errf(err, errlen, "%s: shard count %d in the name differs from %d in %s (all %s shards must be -of-<same count>)",
                 QUOTED(p1), f[i].count, f[0].count, QUOTED(p2), split);
            free(f);
            return -1;
        }
    int M = f[0].count;
    for (int i = 0; i < n; i++)
        if (f[i].index >= M || M < 1) {
            join_path(p1, sizeof p1, dir, f[i].name);
            errf(err, errlen, "%s: shard index %d is not below the shard count %d in its name", QUOTED(p1), f[i].index, M);
            free(f);
            return -1;
        }
    for (int i = 0; i < M; i++)
        if (i >= n || f[i].index != i) {
            char nm[64];
            shard_name(nm, sizeof nm, split, i, M);
            join_path(p1, sizeof p1, dir, nm);
            errf(err, errlen, "%s: missing (the %s shard set is incomplete: %d of %d shards present)", QUOTED(p1), split, n, M);
            free(f);
            return -1;
        }
    set->num_shards = M;
    set->shards = callocCheck((size_t)M, sizeof(ShardInfo));
    int rc = 0;
    for (int i = 0; i < M && rc == 0; i++) {
        join_path(p1, sizeof p1, dir, f[i].name);
        ShardInfo *s = &set->shards[i];
        if (shard_read_info(s, p1, expected_image_size, expected_num_classes, NULL, err, errlen) != 0) { rc = -1; break; }
        const ShardInfo *s0 = &set->shards[0];
        static const char *const enc_name[2] = {"raw", "jpeg"};
        if (s->encoding != s0->encoding)
            rc = errf(err, errlen, "%s: encoding %s but %s has encoding %s (all shards of a split must have one encoding)",
                      QUOTED(p1), enc_name[s->encoding], QUOTED(s0->path), enc_name[s0->encoding]);
        else if (s->encoding == SHARD_ENC_JPEG && s->image_size != s0->image_size)
            rc = errf(err, errlen, "%s: attribute 'image_size' is %d but %s says %d (all shards of a split must have one image size)",
                      QUOTED(p1), s->image_size, QUOTED(s0->path), s0->image_size);
        else if (s->image_size != s0->image_size)
            rc = errf(err, errlen, "%s: images are %dx%d but %s has %dx%d (all shards must have one image size)",
                      QUOTED(p1), s->image_size, s->image_size, QUOTED(s0->path), s0->image_size, s0->image_size);
        else if (s->attrs.num_classes != s0->attrs.num_classes)
            rc = errf(err, errlen, "%s: attribute 'num_classes' is %d but %s says %d (all shards must agree)",
                      QUOTED(p1), s->attrs.num_classes, QUOTED(s0->path), s0->attrs.num_classes);
        /* The loader numbers a split's samples in 32 bits. */
        if (rc == 0 && s->n > (size_t)SHARDSET_MAX_SAMPLES - set->total)
            rc = errf(err, errlen, "%s: the %s shards hold more than %lu samples, the most one split may have",
                      QUOTED(p1), split, (unsigned long)SHARDSET_MAX_SAMPLES);
        set->total += s->n;
    }
    free(f);
    if (rc != 0) shardset_free(set);
    return rc;
}

/* ---- assignment ---------------------------------------------------------------------------- */

int shards_assign(const size_t *counts, int num_shards, int rank, int world, ShardSlice *out,
                  int max_out) {
    CHECK(world >= 1 && rank >= 0 && rank < world && num_shards >= 0);
    int k = 0;
    if (num_shards >= world) {
        for (int i = rank; i < num_shards; i += world) {
            if (k < max_out) out[k] = (ShardSlice){i, 0, counts[i]};
            k++;
        }
        return k;
    }
    size_t total = 0;
    for (int i = 0; i < num_shards; i++) total += counts[i];
    /* Floor of T*r/W in 64 bits: exact while T*W < 2^64, i.e. for any real dataset. */
    size_t lo = (size_t)((uint64_t)total * (uint64_t)rank / (uint64_t)world);
    size_t hi = (size_t)((uint64_t)total * (uint64_t)(rank + 1) / (uint64_t)world);
    size_t off = 0;
    for (int i = 0; i < num_shards; i++) {
        size_t a = off, b = off + counts[i];
        off = b;
        size_t s = a > lo ? a : lo, e = b < hi ? b : hi;
        if (s >= e) continue;
        if (k < max_out) out[k] = (ShardSlice){i, s - a, e - a};
        k++;
    }
    return k;
}
