/* SPDX-License-Identifier: BSD-3-Clause */
/* ra_sampler.h - torchvision's RASampler (references/classification/sampler.py), repeated
 * augmentation: each epoch one permutation of the whole split, the same on every rank, each
 * index repeated `reps` times in a row, padded with its own start to a multiple of the world
 * size; rank r takes positions r, r + world, ... and keeps only the first
 * floor(n // 256 * 256 / world) of them (the sampler's num_selected_samples), so an epoch
 * sees as many images as without repetition, rounded down to 256. The copies of an image land
 * on neighbouring ranks, each with its own augmentation. */
#ifndef DDP_RA_SAMPLER_H
#define DDP_RA_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

/* Indices per rank and epoch: int(math.floor(n // 256 * 256 / world)). */
size_t ra_sampler_count(size_t n, int world);

/* The permutation of 0..n-1 for epoch `epoch` (the sampler's torch.randperm with the
 * generator seeded seed + epoch; the same on every rank), into perm [n]. */
void ra_sampler_perm(uint64_t seed, int epoch, size_t n, uint32_t *perm);

/* Rank `rank`'s indices of the epoch from its permutation: ra_sampler_count(n, world) of them
 * into out. */
size_t ra_sampler_indices(const uint32_t *perm, size_t n, int reps, int rank, int world, uint32_t *out);

#endif
