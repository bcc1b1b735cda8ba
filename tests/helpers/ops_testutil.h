/* SPDX-License-Identifier: BSD-3-Clause */
/* ops_testutil.h - random data, allocation and the error measure of the kernel tests (test_ops,
 * test_conv, test_ops_cuda).
 * Define OPS_TEST_SEED before including it to choose the data. */
#ifndef DDP_OPS_TESTUTIL_H
#define DDP_OPS_TESTUTIL_H

#include <math.h>
#include <stdint.h>

#include "base/util.h"

#ifndef OPS_TEST_SEED
#define OPS_TEST_SEED 0x9E3779B97F4A7C15ull
#endif

static uint64_t g_rng = OPS_TEST_SEED;
static double urand(void) {   /* uniform in [-1, 1) */
    g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}
static float *frand(size_t n, double scale) {
    float *p = mallocCheck(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = (float)(urand() * scale);
    return p;
}
/* max|got - want| / max|want| (the absolute error when want is all zeros), NaN when any
 * difference is: the measure every kernel test reports. */
static double rel_err(const double *got, const double *want, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs(got[i] - want[i]);
        if (isnan(e)) return NAN;
        num = fmax(num, e);
        den = fmax(den, fabs(want[i]));
    }
    return den > 0.0 ? num / den : num;
}
static double *dalloc(size_t n) { return callocCheck(n, sizeof(double)); }
static float *falloc(size_t n) { return callocCheck(n, sizeof(float)); }

#endif
