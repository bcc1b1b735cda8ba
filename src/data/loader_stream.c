/* SPDX-License-Identifier: BSD-3-Clause */
/* loader_stream.c - the streamed loader's chunks (loader_state.h, data/README.md "Streaming"):
 * which chunks a batch needs, reading them from their shards, freeing the others, and the
 * check that a shard is still the file the loader opened. */
#include "loader_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "shard_read.h"
#include "base/util.h"

/* The window holding position p of this epoch's order. */
static size_t window_of(const DataLoader *dl, size_t p) {
    size_t lo = 0, hi = dl->num_windows;   /* win_start[lo] <= p < win_start[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (dl->win_start[mid] <= p) lo = mid; else hi = mid;
    }
    return lo;
}

static void add_held(DataLoader *dl, size_t bytes, int sign) {
    size_t h = __atomic_load_n(&dl->held, __ATOMIC_RELAXED);
    h = sign > 0 ? h + bytes : h - bytes;
    __atomic_store_n(&dl->held, h, __ATOMIC_RELAXED);
    if (h > __atomic_load_n(&dl->peak, __ATOMIC_RELAXED)) __atomic_store_n(&dl->peak, h, __ATOMIC_RELAXED);
}

static int same_file(const ShardId *id, const struct stat *st) {
    return st->st_dev == id->dev && st->st_ino == id->ino && st->st_size == id->size &&
           st->st_mtim.tv_sec == id->mtime.tv_sec && st->st_mtim.tv_nsec == id->mtime.tv_nsec;
}

/* Ends the process with one line naming the shard when it is not the file the loader opened
 * (checked before and after each read: a file replaced during the read is caught too). */
static void check_shard_unchanged(const Slice *s) {
    struct stat st;
    if (stat(s->path, &st) != 0) {
        char ebuf[128];   /* strerror's buffer is shared between threads (this is the prefetch one) */
        die("%s: the shard changed since it was opened: %s now (it held %zu samples); restart the run to use the new files",
            s->path, strerror_r(errno, ebuf, sizeof ebuf), s->id.n);
    }
    if (same_file(&s->id, &st)) return;
    char err[512], now[96];
    ShardInfo info;
    if (shard_read_info(&info, s->path, 0, 0, NULL, err, sizeof err) == 0) {
        snprintf(now, sizeof now, "%zu samples now", info.n);
        shard_info_free(&info);
    } else {
        snprintf(now, sizeof now, "no readable shard now");
    }
    die("%s: the shard changed since it was opened (replaced or rewritten during the run: %zu samples then, %s); restart the run to use the new files",
        s->path, s->id.n, now);
}

/* Bytes chunk c takes in memory. */
static size_t chunk_bytes(const DataLoader *dl, size_t c) {
    if (!dl->jpeg) return dl->C * dl->per;
    const size_t a = c * dl->C, z = a + dl->C < dl->n ? a + dl->C : dl->n;
    return (size_t)(dl->off[z] - dl->off[a]);
}

/* Samples [a, a + count) of slice s (assignment order) into buf: their raw images, or their
 * JPEG files, which must be the bytes the loader recorded at open. */
static int read_samples(const DataLoader *dl, const Slice *s, size_t a, size_t count, uint8_t *buf, char *err,
                        size_t errlen) {
    const size_t first = s->begin + (a - s->off);
    if (!dl->jpeg) return shard_read_range(s->path, first, count, dl->S, buf, NULL, err, errlen);
    uint64_t *off = mallocCheck((count + 1) * sizeof(uint64_t));
    uint8_t *bytes = NULL;
    int rc = shard_read_jpeg_range(s->path, first, count, off, NULL, &bytes, NULL, err, errlen);
    if (rc == 0 && off[count] != dl->off[a + count] - dl->off[a])
        rc = errf(err, errlen, "%s: samples %zu to %zu hold %llu bytes, %llu when the shard was opened (rewritten?)",
                  s->path, first, first + count - 1, (unsigned long long)off[count],
                  (unsigned long long)(dl->off[a + count] - dl->off[a]));
    if (rc == 0) memcpy(buf, bytes, (size_t)off[count]);
    free(bytes);
    free(off);
    return rc;
}

void loader_stream_batch(DataLoader *dl, size_t b) {
    size_t B = (size_t)dl->opt.batch_size, start = b * B;
    size_t end = start + B < dl->n ? start + B : dl->n;
    size_t wf = window_of(dl, start), wl = window_of(dl, end - 1);
    for (size_t c = 0; c < dl->num_chunks; c++)
        if (dl->chunk_data[c] && (dl->chunk_win[c] < wf || dl->chunk_win[c] > wl)) {
            free(dl->chunk_data[c]);
            dl->chunk_data[c] = NULL;
            add_held(dl, chunk_bytes(dl, c), -1);
        }
    size_t j1 = (wl + 1) * dl->W < dl->num_chunks ? (wl + 1) * dl->W : dl->num_chunks;
    for (size_t j = wf * dl->W; j < j1; j++) {
        size_t c = dl->chunk_perm[j];
        if (dl->chunk_data[c]) continue;
        uint8_t *buf = mallocCheck(chunk_bytes(dl, c));
        size_t a = c * dl->C, z = a + dl->C < dl->n ? a + dl->C : dl->n;
        for (int k = 0; k < dl->num_slices; k++) {
            const Slice *s = &dl->slices[k];
            size_t sa = s->off > a ? s->off : a, sz = s->off + s->count < z ? s->off + s->count : z;
            if (sa >= sz) continue;
            char err[512];
            check_shard_unchanged(s);
            const size_t at = dl->jpeg ? (size_t)(dl->off[sa] - dl->off[a]) : (sa - a) * dl->per;
            int rc = read_samples(dl, s, sa, sz - sa, buf + at, err, sizeof err);
            check_shard_unchanged(s);
            if (rc != 0) die("%s", err);
        }
        dl->chunk_data[c] = buf;
        add_held(dl, chunk_bytes(dl, c), +1);
    }
}
