/* SPDX-License-Identifier: BSD-3-Clause */
/* shards.h - the on-disk dataset format (data/README.md): naming and discovery of
 * <split>-NNNNN-of-MMMMM.h5 files, validation, reading, writing, and the assignment of shards
 * to the ranks of a data-parallel job.
 *
 * Every function that can fail on user data returns 0 on success and -1 on failure with ONE
 * line in err that starts with the offending file (or directory) path, says what is wrong and
 * what was expected. HDF5's own error stack printing is switched off so that line is all the
 * user sees. */
#ifndef DDP_SHARDS_H
#define DDP_SHARDS_H

#include <stddef.h>
#include <stdint.h>

#include <hdf5.h>

#define SHARD_PATH_MAX 4096
#define SHARD_MAX_SHARDS 99999      /* five digits in the name */
#define SHARD_MAX_CLASSES 100000
#define SHARD_MAX_SAMPLES 2147483647 /* per shard: 2^31 - 1 */
#define SHARDSET_MAX_SAMPLES 4294967294u /* per split: the loader counts in 32 bits */
#define SHARD_DEFAULT_MEAN 0.5f     /* normalisation when a dataset carries no mean/std */
#define SHARD_DEFAULT_STD 0.25f
#define SHARD_MAX_JPEG_SIZE 32767   /* S of a JPEG shard: its images' sides (up to 2S) are uint16 */

/* How a shard stores its images (file attribute `encoding`, data/README.md):
 *  SHARD_ENC_RAW: `images` uint8 [N,S,S,3] (no attribute, or "raw");
 *  SHARD_ENC_JPEG: "jpeg": `jpeg` uint8 [B], the N JPEG files end to end; `offsets` uint64
 *    [N+1], sample i being bytes [offsets[i], offsets[i+1]); `sizes` uint16 [N,2], the (height,
 *    width) each decodes to, the shorter side S (attribute `image_size`), the longer at most
 *    2S (aspect kept, "stored above the crop"). */
#define SHARD_ENC_RAW 0
#define SHARD_ENC_JPEG 1

/* Dataset-wide attributes, stored on every shard (so any one shard describes the dataset). */
typedef struct {
    int num_classes;
    char **class_names;       /* num_classes strings, or NULL when the file has none */
    int has_norm;             /* mean/std present */
    float mean[3], std[3];    /* per channel, in units of pixel/255 */
} ShardAttrs;

/* What one shard's header says (nothing of the pixel data is read). */
typedef struct {
    char path[SHARD_PATH_MAX];
    const char *name;         /* points at the base name inside path */
    int index, count;         /* NNNNN and MMMMM of the name (-1 if the name is not canonical) */
    size_t n;                 /* samples */
    int image_size;           /* S of [N,S,S,3]; of a JPEG shard, every image's shorter side */
    int encoding;             /* SHARD_ENC_RAW or SHARD_ENC_JPEG */
    uint64_t jpeg_bytes;      /* B, the length of `jpeg` (0 for raw) */
    ShardAttrs attrs;
} ShardInfo;

/* All shards of one split in a directory, in index order. */
typedef struct {
    char dir[SHARD_PATH_MAX];
    char split[32];
    int num_shards;
    ShardInfo *shards;        /* [num_shards] */
    size_t total;             /* sum of n */
} ShardSet;

/* One contiguous range of samples [begin, end) of shard `shard` (index into ShardSet.shards). */
typedef struct {
    int shard;
    size_t begin, end;
} ShardSlice;

/* Silence HDF5's automatic error stack printing (idempotent; every entry point calls it). */
void shards_quiet_hdf5(void);

/* "<split>-NNNNN-of-MMMMM.h5" into buf. */
void shard_name(char *buf, size_t len, const char *split, int index, int count);
/* Parses a base name; returns 1 and sets index/count when it is a shard of `split`. */
int shard_parse_name(const char *name, const char *split, int *index, int *count);

/* Opens `path`, checks it is a well-formed shard (see data/README.md) and fills `info`.
 * expected_image_size / expected_num_classes: 0 accepts what the file says. When labels_out
 * is non-NULL the labels are read (as int32, malloc'd, [info->n]) and range-checked, and of a
 * JPEG shard all offsets and sizes too (12 bytes a sample). */
int shard_read_info(ShardInfo *info, const char *path, int expected_image_size,
                    int expected_num_classes, int32_t **labels_out, char *err, size_t errlen);
void shard_info_free(ShardInfo *info);

/* Finds and validates all shards of `split` in `dir`: the set must be complete (indices
 * 0..M-1 of one M) and every header consistent (encoding, image size, num_classes). Labels
 * are not read. */
int shardset_open(ShardSet *set, const char *dir, const char *split, int expected_image_size,
                  int expected_num_classes, char *err, size_t errlen);
void shardset_free(ShardSet *set);
/* Returns 1 if `dir` contains at least one file named like a shard of `split`. */
int shards_dir_has_split(const char *dir, const char *split);

/* Reads samples [start, start+count) of a raw shard: images uint8 NHWC into `images`
 * (count*S*S*3 bytes) and/or labels as int32 (either may be NULL). */
int shard_read_range(const char *path, size_t start, size_t count, int image_size,
                     uint8_t *images, int32_t *labels, char *err, size_t errlen);

/* Reads samples [start, start+count) of a JPEG shard (count >= 1):
 *  offsets [count+1]: their byte offsets, rebased so offsets[0] == 0 (sample start+i is bytes
 *    [offsets[i], offsets[i+1]) of *bytes);
 *  sizes [count][2] (may be NULL): (height, width) of each as decoded;
 *  bytes (may be NULL: offsets and sizes only): *bytes malloc'd, offsets[count] bytes, the
 *    samples' JPEG files end to end (free it with free());
 *  labels [count] (may be NULL) as int32.
 * The offsets read must increase strictly and stay within `jpeg` (offsets[0] == 0 and
 * offsets[N] == B where the range reaches them), the sizes have the shorter side S and the
 * longer at most 2S: else one line naming the file and the sample index. The JPEG data itself
 * is not decoded (jpegs.h). Under the HDF5 lock, as every entry point here. */
int shard_read_jpeg_range(const char *path, size_t start, size_t count, uint64_t *offsets,
                          uint16_t *sizes, uint8_t **bytes, int32_t *labels, char *err,
                          size_t errlen);

/* Which samples rank `rank` of `world` reads, given the per-shard sample counts:
 *  - num_shards >= world: shard i goes to rank i % world, whole (round robin);
 *  - num_shards <  world: the concatenation of all shards is cut into `world` contiguous
 *    near-equal slices [T*r/W, T*(r+1)/W) and the rank reads the parts of the shards its slice
 *    touches.
 * Writes up to max_out slices into out (in global order) and returns how many there are. */
int shards_assign(const size_t *counts, int num_shards, int rank, int world, ShardSlice *out,
                  int max_out);

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

/* Attribute helpers. */
void shard_attrs_copy(ShardAttrs *dst, const ShardAttrs *src);
void shard_attrs_free(ShardAttrs *a);

#endif
