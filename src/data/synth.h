/* SPDX-License-Identifier: BSD-3-Clause */
/* synth.h - a procedural image-classification dataset for tests, benchmarks and demos.
 *
 * Ten classes of shapes and textures (synth_class_names) drawn at a random position, scale and
 * rotation or phase, in a random foreground colour over a random background gradient, plus
 * Gaussian pixel noise: easy enough that a small ResNet passes 90% test accuracy in a few
 * epochs of 5000 images, hard enough that it has to learn shapes rather than colours.
 *
 * Sample i of a split depends only on (seed, split, i), never on how the split is sharded or on
 * the order of generation, so shards can be produced in any order or in parallel. */
#ifndef DDP_SYNTH_H
#define DDP_SYNTH_H

#include <stdint.h>

#define SYNTH_NUM_CLASSES 10
#define SYNTH_SPLIT_TRAIN 0
#define SYNTH_SPLIT_TEST 1

extern const char *const synth_class_names[SYNTH_NUM_CLASSES];

/* Draws sample `index` of split `split_id` (SYNTH_SPLIT_TRAIN or _TEST) as uint8 HWC
 * [size, size, 3] into img and returns its label in [0, SYNTH_NUM_CLASSES). size >= 8. */
int synth_sample(uint64_t seed, int split_id, uint64_t index, int size, uint8_t *img);

#endif
