/* SPDX-License-Identifier: BSD-3-Clause */
/* rng.h - a small deterministic random number generator (SplitMix64).
 * One 64-bit word of state, so it is trivial to derive independent streams from
 * (seed, epoch, rank, ...) and to store in a checkpoint. */
#ifndef DDP_RNG_H
#define DDP_RNG_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Rng { uint64_t state; } Rng;

static inline uint64_t rng_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A stream determined by up to three integers, e.g. (seed, epoch, rank). */
static inline void rng_init(Rng *r, uint64_t a, uint64_t b, uint64_t c) {
    r->state = rng_mix64(a + 0x9e3779b97f4a7c15ULL * (rng_mix64(b + 0x632be59bd9b4e019ULL) ^ rng_mix64(c)));
}

static inline uint64_t rng_u64(Rng *r) {
    r->state += 0x9e3779b97f4a7c15ULL;
    return rng_mix64(r->state);
}

/* Uniform in [0, n) without modulo bias worth caring about for n < 2^32. */
static inline uint32_t rng_below(Rng *r, uint32_t n) {
    return (uint32_t)(((rng_u64(r) >> 32) * (uint64_t)n) >> 32);
}

/* Uniform float in [0, 1). */
static inline float rng_uniform(Rng *r) { return (float)(rng_u64(r) >> 40) * (1.0f / 16777216.0f); }

/* torch.empty(1).uniform_(lo, hi) on a float32 tensor: u * (hi - lo) + lo in float, the bounds
 * cast to float first (RandomResizedCrop's and RandomErasing's draws). -std=c11 keeps GCC from
 * fusing the multiply and add. */
static inline float rng_uniform_f32(Rng *r, float lo, float hi) {
    const float u = rng_uniform(r);
    return u * (hi - lo) + lo;
}

/* Uniform float in [0, 1) as a pure function of (key, i): the i-th draw of a stream that needs
 * no state, so that threads may draw any part of it in any order (dropout's masks). */
static inline float rng_hash_uniform(uint64_t key, uint64_t i) {
    return (float)(rng_mix64(key ^ rng_mix64(i + 0x9e3779b97f4a7c15ULL)) >> 40) * (1.0f / 16777216.0f);
}

/* Standard normal (Box-Muller; one value per call, simple over fast). */
static inline float rng_normal(Rng *r) {
    double u1 = ((double)(rng_u64(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (double)(rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* n floats uniform in [-bound, bound) (PyTorch's kaiming_uniform_ and nn.Linear's defaults),
 * or normal with standard deviation std (kaiming_normal_), drawn in order. */
static inline void rng_fill_uniform(Rng *r, float *p, size_t n, float bound) {
    for (size_t i = 0; i < n; i++) p[i] = (2.0f * rng_uniform(r) - 1.0f) * bound;
}
static inline void rng_fill_normal(Rng *r, float *p, size_t n, float std) {
    for (size_t i = 0; i < n; i++) p[i] = rng_normal(r) * std;
}

/* Fisher-Yates shuffle of an index array. */
static inline void rng_shuffle_u32(Rng *r, uint32_t *a, uint32_t n) {
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = rng_below(r, i);
        uint32_t t = a[i - 1]; a[i - 1] = a[j]; a[j] = t;
    }
}

#endif
