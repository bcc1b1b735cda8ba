/* SPDX-License-Identifier: BSD-3-Clause */
/* shard_read.h - one shard read (shard_read.c): its header checked into a ShardInfo, and ranges
 * of its samples, pixels or JPEG bytes. Every function takes the HDF5 lock and returns 0, or -1
 * with one line in err that starts with the file's path. */
#ifndef DDP_SHARD_READ_H
#define DDP_SHARD_READ_H

#include <stddef.h>
#include <stdint.h>

#include "shard_format.h"

/* Opens `path`, checks it is a well-formed shard (see data/README.md) and fills `info`.
 * expected_image_size / expected_num_classes: 0 accepts what the file says. When labels_out
 * is non-NULL the labels are read (as int32, malloc'd, [info->n]) and range-checked, and of a
 * JPEG shard all offsets and sizes too (12 bytes a sample). */
int shard_read_info(ShardInfo *info, const char *path, int expected_image_size,
                    int expected_num_classes, int32_t **labels_out, char *err, size_t errlen);
void shard_info_free(ShardInfo *info);

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

#endif
