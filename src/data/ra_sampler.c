/* SPDX-License-Identifier: BSD-3-Clause */
/* ra_sampler.c - see ra_sampler.h. */
#include "ra_sampler.h"

#include "base/rng.h"
#include "base/util.h"

#define RA_SALT 0x7261737061723031ULL   /* "raspar01": the repeated-augmentation permutations */

size_t ra_sampler_count(size_t n, int world) {
    CHECK(world >= 1);
    /* n // 256 * 256 / world in Python: an integer over an integer, a true division floored */
    return n / 256 * 256 / (size_t)world;
}

void ra_sampler_perm(uint64_t seed, int epoch, size_t n, uint32_t *perm) {
    CHECK(n < UINT32_MAX);
    for (size_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
    Rng r;
    /* no rank: every rank draws the same permutation */
    rng_init(&r, seed ^ RA_SALT, (uint64_t)(uint32_t)epoch, 0);
    rng_shuffle_u32(&r, perm, (uint32_t)n);
}

size_t ra_sampler_indices(const uint32_t *perm, size_t n, int reps, int rank, int world, uint32_t *out) {
    CHECK(reps >= 1 && world >= 1 && rank >= 0 && rank < world);
    /* the repeated list is perm[j / reps] at j < n * reps, then its own start again up to
     * total = ceil(n * reps / world) * world (padding shorter than the list: n >= world) */
    const size_t len = n * (size_t)reps;
    const size_t per = (len + (size_t)world - 1) / (size_t)world, total = per * (size_t)world;
    const size_t keep = ra_sampler_count(n, world);
    CHECK(keep <= per);
    size_t k = 0;
    for (size_t j = (size_t)rank; j < total && k < keep; j += (size_t)world) {
        const size_t q = j < len ? j : j - len;
        CHECK(q < len);
        out[k++] = perm[q / (size_t)reps];
    }
    return k;
}
