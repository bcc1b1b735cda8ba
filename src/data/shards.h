/* SPDX-License-Identifier: BSD-3-Clause */
/* shards.h - the on-disk dataset format (data/README.md): the discovery of a split's
 * <split>-NNNNN-of-MMMMM.h5 files and the assignment of their samples to the ranks of a
 * data-parallel job; with the headers of one shard's format, reading and writing
 * (shard_format.h, shard_read.h, shard_write.h), the data wing's one door to the format.
 *
 * Every function that can fail on user data returns 0 on success and -1 on failure with ONE
 * line in err that starts with the offending file (or directory) path, says what is wrong and
 * what was expected. HDF5's own error stack printing is switched off so that line is all the
 * user sees. */
#ifndef DDP_SHARDS_H
#define DDP_SHARDS_H

#include <stddef.h>
#include <stdint.h>

#include "shard_format.h"
#include "shard_read.h"
#include "shard_write.h"

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

/* Finds and validates all shards of `split` in `dir`: the set must be complete (indices
 * 0..M-1 of one M) and every header consistent (encoding, image size, num_classes). Labels
 * are not read. */
int shardset_open(ShardSet *set, const char *dir, const char *split, int expected_image_size,
                  int expected_num_classes, char *err, size_t errlen);
void shardset_free(ShardSet *set);
/* Returns 1 if `dir` contains at least one file named like a shard of `split`. */
int shards_dir_has_split(const char *dir, const char *split);

/* Which samples rank `rank` of `world` reads, given the per-shard sample counts:
 *  - num_shards >= world: shard i goes to rank i % world, whole (round robin);
 *  - num_shards <  world: the concatenation of all shards is cut into `world` contiguous
 *    near-equal slices [T*r/W, T*(r+1)/W) and the rank reads the parts of the shards its slice
 *    touches.
 * Writes up to max_out slices into out (in global order) and returns how many there are. */
int shards_assign(const size_t *counts, int num_shards, int rank, int world, ShardSlice *out,
                  int max_out);

#endif
