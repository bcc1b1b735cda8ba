/* SPDX-License-Identifier: BSD-3-Clause */
/* augmix.c - see augmix.h. AugMix.forward's draws, in order: m = _sample_dirichlet([1, 1]) (a
 * Beta(1, 1) and its complement), the chains' weights _sample_dirichlet([1, 1, 1]); then per
 * chain its depth randint(1, 4), and per op of the chain op = randint(13), the bin
 * randint(severity) of 10 (drawn only for ops with magnitudes), and for signed ops randint(2),
 * the magnitude negated when 1. The mix is m[0] * img + sum_i (w_i * m[1]) * chain_i in
 * float32, accumulated in that order, then .to(uint8): truncated. */
#include "augmix.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pil_ops.h"
#include "tensor_ops.h"
#include "base/util.h"

static const int OPS[AUGMIX_NUM_OPS] = {
    PIL_SHEAR_X,   PIL_SHEAR_Y,      PIL_TRANSLATE_X, PIL_TRANSLATE_Y, PIL_ROTATE,   PIL_POSTERIZE, PIL_SOLARIZE,
    PIL_AUTOCONTRAST, PIL_EQUALIZE,  PIL_BRIGHTNESS,  PIL_COLOR,       PIL_CONTRAST, PIL_SHARPNESS,
};

int augmix_op(int i) { return OPS[i]; }

static void record(AutoAugTrace *t, char kind, int bound, double v) {
    if (t && t->n < AUTOAUG_TRACE_MAX) t->kind[t->n] = kind, t->bound[t->n] = bound, t->value[t->n++] = v;
}

static int draw_int(Rng *r, int lo, int hi, AutoAugTrace *t) {
    const int v = lo + (int)rng_below(r, (uint32_t)(hi - lo));
    record(t, 'i', hi, v);
    return v;
}

void augmix_dirichlet(Rng *r, int n, float *out) {
    double g[AUGMIX_WIDTH > 2 ? AUGMIX_WIDTH : 2], sum = 0.0;
    CHECK(n <= (int)(sizeof g / sizeof g[0]));
    for (int i = 0; i < n; i++) {
        const double u = (double)(rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);   /* [0, 1), 53 bits */
        g[i] = -log1p(-u);   /* Gamma(1, 1) = Exp(1) */
        sum += g[i];
    }
    for (int i = 0; i < n; i++) out[i] = (float)(sum > 0.0 ? g[i] / sum : 1.0 / n);
}

static void dirichlet(Rng *r, int n, float *out, AutoAugTrace *t) {
    augmix_dirichlet(r, n, out);
    for (int i = 0; i < n; i++) record(t, 'd', n, out[i]);
}

void augmix_apply(int severity, Rng *r, uint8_t *img, int w, int h, AutoAugTrace *t) {
    const size_t n = (size_t)w * h * 3;
    uint8_t *aug = mallocCheck(n), *tmp = mallocCheck(n);
    float *mix = mallocCheck(n * sizeof *mix);
    float m[2], wt[AUGMIX_WIDTH];
    dirichlet(r, 2, m, t);
    dirichlet(r, AUGMIX_WIDTH, wt, t);
    for (size_t i = 0; i < n; i++) mix[i] = m[0] * (float)img[i];
    for (int c = 0; c < AUGMIX_WIDTH; c++) {
        memcpy(aug, img, n);
        const int depth = draw_int(r, 1, 4, t);
        for (int d = 0; d < depth; d++) {
            const int op = OPS[draw_int(r, 0, AUGMIX_NUM_OPS, t)];
            double mag = aug_has_bins(op) ? autoaug_magnitude(AA_AUGMIX, op, draw_int(r, 0, severity, t), 10, w, h) : 0.0;
            if (aug_is_signed(op) && draw_int(r, 0, 2, t)) mag = -mag;
            if (t && t->nops < AUTOAUG_TRACE_MAX) t->op[t->nops] = op, t->mag[t->nops++] = mag;
            tensor_apply_op(op, mag, aug, w, h, tmp);
        }
        const float cw = wt[c] * m[1];   /* combined_weights[:, c] */
        for (size_t i = 0; i < n; i++) mix[i] = mix[i] + cw * (float)aug[i];
    }
    for (size_t i = 0; i < n; i++) img[i] = (uint8_t)(mix[i] >= 255.0f ? 255.0f : mix[i]);
    free(aug);
    free(tmp);
    free(mix);
}
