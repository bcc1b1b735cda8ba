/* SPDX-License-Identifier: BSD-3-Clause */
/* output.h - the dataset a ddptrain-data command writes: each split cut into near-equal shards
 * (data/README.md), written and synced under temporary names, then all renamed into place
 * together once every split is complete; and the per-channel mean/std stored with them.
 *
 * A failure in a later split (a file that became unreadable, a full disk) so leaves no shard
 * of an earlier one, alone in a new folder or (--force) beside an older dataset's other split.
 * Samples are produced a chunk at a time, so the memory held is bounded for any dataset. */
#ifndef DDP_DATA_CMD_OUTPUT_H
#define DDP_DATA_CMD_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include "data/shards.h"

#define CHUNK 1024   /* samples per write: bounded memory for any dataset size */
#define CHUNK_BYTES ((size_t)64 << 20)   /* ... and for any image size */

/* Creates dir, and dies when it already holds shards of split unless force. */
void ensure_out_dir(const char *dir, const char *split, int force);

/* Dies when total samples cannot make nshards shards. Called before anything is written, so
 * that a bad request leaves no partial output. */
void check_split_size(const char *dir, const char *split, size_t total, int nshards);

typedef struct { char *tmp, *path; } Pending;
typedef struct {
    const char *dir;
    Pending *p;          /* finished shards, not yet renamed */
    int n, cap;
    struct { const char *split; int nshards; size_t total; } split[2];
    int nsplits;
} Output;

/* Fills images/labels with samples [start, start+count) of the split; 0 or -1 with err. */
typedef int (*ProduceFn)(void *ctx, size_t start, size_t count, uint8_t *images, int32_t *labels,
                         char *err, size_t errlen);

/* Writes `total` samples of image_size x image_size as `nshards` contiguous near-equal shards
 * under temporary names into o (at most two splits per Output). On a failure every temporary
 * file of o is removed before dying. */
void write_split(Output *o, const char *split, size_t total, int nshards, int image_size,
                 const ShardAttrs *attrs, ProduceFn produce, void *ctx);

/* Samples of a JPEG shard on their way to shard_writer_append_jpeg: their files end to end
 * (offsets [n+1] from 0), their sizes [n][2] (height, width) and labels. */
typedef struct {
    uint8_t *bytes;
    size_t len, cap;
    uint64_t *offsets;
    uint16_t *sizes;
    int32_t *labels;
    size_t n, ncap;
} JpegBatch;

void jpeg_batch_reset(JpegBatch *b);
void jpeg_batch_add(JpegBatch *b, const uint8_t *data, size_t len, int h, int w, int32_t label);
void jpeg_batch_free(JpegBatch *b);

/* Fills b (after jpeg_batch_reset) with samples [start, start+count) of the split. */
typedef int (*JpegProduceFn)(void *ctx, size_t start, size_t count, JpegBatch *b, char *err, size_t errlen);

/* write_split for JPEG shards of shorter side S. */
void write_split_jpeg(Output *o, const char *split, size_t total, int nshards, int S,
                      const ShardAttrs *attrs, JpegProduceFn produce, void *ctx);

/* Renames every shard of o into place, removes the shards of an older set of another shard
 * count (--force) and prints a line per split. */
void output_commit(Output *o);

/* Per-channel mean and std (units of pixel/255) accumulated over images. */
typedef struct { double sum[3], sq[3]; size_t n; } PixelStats;

void stats_add(PixelStats *st, const uint8_t *img, size_t pixels);
/* Sets a's mean and std (and has_norm). */
void stats_finish(const PixelStats *st, ShardAttrs *a);

/* The summary line "mean M M M  std S S S" of a's normalisation. */
void print_mean_std(const ShardAttrs *a);

#endif
