/* SPDX-License-Identifier: BSD-3-Clause */
/* shard_write.h - one shard written (shard_write.c), raw or JPEG, under a temporary name until
 * it is complete. Every function takes the HDF5 lock and returns 0, or -1 with one line in err. */
#ifndef DDP_SHARD_WRITE_H
#define DDP_SHARD_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include <hdf5.h>

#include "shard_format.h"

/* Streaming writer: the file is written under a hidden temporary name in the same directory
 * and renamed to `path` only by shard_writer_close after all n samples arrived, so an
 * interrupted run never leaves a half shard under a real shard name. */
typedef struct {
    char path[SHARD_PATH_MAX];
    char tmp_path[SHARD_PATH_MAX + 64];
    hid_t file, images, labels;
    hid_t jpeg, offsets, sizes;   /* JPEG shards (images is -1 then) */
    size_t n, written;
    int image_size;
    int encoding;
    uint64_t jpeg_written;        /* bytes of `jpeg` so far */
} ShardWriter;

/* A raw shard of n samples of S x S (shard_writer_append), or a JPEG shard of n samples
 * whose shorter side is S (shard_writer_append_jpeg). */
int shard_writer_open(ShardWriter *w, const char *path, size_t n, int image_size,
                      const ShardAttrs *attrs, char *err, size_t errlen);
int shard_writer_open_jpeg(ShardWriter *w, const char *path, size_t n, int image_size,
                           const ShardAttrs *attrs, char *err, size_t errlen);
int shard_writer_append(ShardWriter *w, const uint8_t *images, const int32_t *labels,
                        size_t count, char *err, size_t errlen);
/* Appends count samples to a JPEG shard: bytes holds their JPEG files end to end, sample i
 * being bytes [offsets[i], offsets[i+1]) (offsets [count+1], offsets[0] == 0, strictly
 * increasing), sizes [count][2] their (height, width) as decoded (the shorter side S, the
 * longer at most 2S: checked, as a programming error). */
int shard_writer_append_jpeg(ShardWriter *w, const uint8_t *bytes, const uint64_t *offsets,
                             const uint16_t *sizes, const int32_t *labels, size_t count,
                             char *err, size_t errlen);
int shard_writer_close(ShardWriter *w, char *err, size_t errlen);
/* shard_writer_close in two steps, so that several files can appear together:
 * shard_writer_finish closes the temporary file and syncs it to disk (w->tmp_path names it,
 * the writer holds nothing else); shard_commit renames such a file to its shard name and
 * syncs the directory (on failure the temporary file is removed); unlinking it instead
 * discards it. */
int shard_writer_finish(ShardWriter *w, char *err, size_t errlen);
int shard_commit(const char *tmp_path, const char *path, char *err, size_t errlen);
/* Closes and removes the temporary file (after an error; a finished, uncommitted one too).
 * Safe to call twice. */
void shard_writer_abort(ShardWriter *w);

#endif
