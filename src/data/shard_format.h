/* SPDX-License-Identifier: BSD-3-Clause */
/* shard_format.h - what every piece of the dataset format shares (data/README.md): its limits,
 * the encodings, the dataset-wide attributes and one shard's header, and the shards' names.
 * The names are shard_format.c's, the attributes' copies shard_attrs.c's. */
#ifndef DDP_SHARD_FORMAT_H
#define DDP_SHARD_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define SHARD_PATH_MAX 4096
#define SHARD_MAX_SHARDS 99999      /* five digits in the name */
#define SHARD_MAX_CLASSES 100000
#define SHARD_ATTR_MAX_CLASS_NAMES 1024 /* more class names go to a dataset (shard_class_names.h) */
#define SHARD_MAX_CLASS_NAME 1024   /* bytes of one class name */
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
    char **class_names;       /* num_classes strings, or NULL when the file has none (attribute or
                               * dataset `class_names`: shard_class_names.h) */
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

/* Silence HDF5's automatic error stack printing (idempotent; every entry point calls it). */
void shards_quiet_hdf5(void);

/* "<split>-NNNNN-of-MMMMM.h5" into buf. */
void shard_name(char *buf, size_t len, const char *split, int index, int count);
/* Parses a base name; returns 1 and sets index/count when it is a shard of `split`. */
int shard_parse_name(const char *name, const char *split, int *index, int *count);

/* A deep copy of the attributes, and its release. */
void shard_attrs_copy(ShardAttrs *dst, const ShardAttrs *src);
void shard_attrs_free(ShardAttrs *a);

#endif
