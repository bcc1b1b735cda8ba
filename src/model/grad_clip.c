/* SPDX-License-Identifier: BSD-3-Clause */
/* grad_clip.c - see grad_clip.h. */
#include "grad_clip.h"

#include <math.h>
#include <string.h>

#include "base/util.h"

void grad_clip_init(GradClip *c, const Backend *be, double max_norm) {
    memset(c, 0, sizeof *c);
    if (max_norm <= 0.0) return;
    CHECK(be->sumsq != NULL && be->scale_inplace != NULL);
    c->be = be;
    c->max_norm = max_norm;
    c->sum = be->alloc(sizeof(double));
    c->coef = be->alloc(sizeof(float));
}

float grad_clip(GradClip *c, float *grads, size_t n) {
    CHECK(c->be != NULL);
    double sq = 0.0;
    c->be->sumsq(grads, n, c->sum);
    c->be->download(&sq, c->sum, sizeof sq);
    const float total = (float)sqrt(sq);
    /* clip_coef = max_norm / (total_norm + 1e-6), a Python float over a float32 tensor: the
     * tensor's reciprocal times max_norm; then clamp(max=1.0), which keeps a NaN */
    const float r = 1.0f / (total + (float)1e-6);
    float coef = r * (float)c->max_norm;
    if (coef > 1.0f) coef = 1.0f;
    if (!(coef == 1.0f)) {
        c->be->upload(c->coef, &coef, sizeof coef);
        c->be->scale_inplace(grads, n, c->coef);
    }
    return total;
}

void grad_clip_free(GradClip *c) {
    if (c->be) {
        c->be->release(c->sum);
        c->be->release(c->coef);
    }
    memset(c, 0, sizeof *c);
}
