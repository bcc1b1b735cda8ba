/* SPDX-License-Identifier: BSD-3-Clause */
/* mix.c - see mix.h.
 *
 * The pixels follow torchvision's float32 arithmetic: mixup is batch.mul_(lambda) then
 * .add_(rolled.mul_(1 - lambda)), each product rounded to float32 with lambda and 1 - lambda
 * (computed in double, as Python does) cast to float; cutmix copies pixels. Gamma draws use
 * Marsaglia and Tsang's method (alpha >= 1), and Gamma(alpha + 1) * U^(1 / alpha) below 1. */
#include "mix.h"

#include <math.h>
#include <string.h>

#include "base/util.h"

#define MIX_SALT 0x6d69787570303031ULL   /* "mixup001": separates the batches' mixing streams */

void mix_stream(Rng *r, uint64_t seed, int epoch, int rank, size_t b) {
    rng_init(r, seed ^ MIX_SALT, ((uint64_t)(uint32_t)epoch << 32) | (uint32_t)rank, (uint64_t)b);
}

/* Uniform double in (0, 1): never 0, whose log is needed. */
static double open_uniform(Rng *r) {
    return ((double)(rng_u64(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* Standard normal in double (Box-Muller). */
static double normal(Rng *r) {
    const double u1 = open_uniform(r), u2 = open_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* log of a Gamma(alpha, 1) draw. */
static double log_gamma_draw(Rng *r, double alpha) {
    if (alpha < 1.0) {   /* Gamma(a) = Gamma(a + 1) * U^(1/a): in logs, no underflow */
        const double lu = log(open_uniform(r));
        return log_gamma_draw(r, alpha + 1.0) + lu / alpha;
    }
    const double d = alpha - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        const double z = normal(r);
        double v = 1.0 + c * z;
        if (v <= 0.0) continue;
        v = v * v * v;
        const double u = open_uniform(r);
        if (u < 1.0 - 0.0331 * z * z * z * z || log(u) < 0.5 * z * z + d * (1.0 - v + log(v))) return log(d * v);
    }
}

double mix_beta(Rng *r, double alpha) {
    CHECK(alpha > 0.0);
    const double l1 = log_gamma_draw(r, alpha), l2 = log_gamma_draw(r, alpha);
    /* G1 / (G1 + G2) = 1 / (1 + exp(l2 - l1)) */
    return 1.0 / (1.0 + exp(l2 - l1));
}

MixDraws mix_draw(Rng *r, double mixup_alpha, double cutmix_alpha, int w, int h) {
    MixDraws d;
    memset(&d, 0, sizeof d);
    d.lambda = 1.0;
    if (mixup_alpha > 0.0 && cutmix_alpha > 0.0) d.kind = rng_below(r, 2) ? MIX_CUTMIX : MIX_MIXUP;
    else if (mixup_alpha > 0.0) d.kind = MIX_MIXUP;
    else if (cutmix_alpha > 0.0) d.kind = MIX_CUTMIX;
    else return d;
    /* float(torch._sample_dirichlet(torch.tensor([a, a]))[0]): a float32 sample, widened */
    d.lambda_drawn = (double)(float)mix_beta(r, d.kind == MIX_MIXUP ? mixup_alpha : cutmix_alpha);
    d.lambda = d.lambda_drawn;
    if (d.kind == MIX_MIXUP) return d;
    /* torch.randint(W) for the centre's column, then torch.randint(H) for its row */
    d.rx = (int)rng_below(r, (uint32_t)w);
    d.ry = (int)rng_below(r, (uint32_t)h);
    const double rr = 0.5 * sqrt(1.0 - d.lambda_drawn);
    const int rw = (int)(rr * w), rh = (int)(rr * h);   /* int() truncates, as Python's */
    d.x1 = d.rx - rw < 0 ? 0 : d.rx - rw;
    d.y1 = d.ry - rh < 0 ? 0 : d.ry - rh;
    d.x2 = d.rx + rw > w ? w : d.rx + rw;
    d.y2 = d.ry + rh > h ? h : d.ry + rh;
    /* the labels weighted by the area actually pasted, not by the draw */
    d.lambda = 1.0 - (double)((d.x2 - d.x1) * (d.y2 - d.y1)) / (double)(w * h);
    return d;
}

void mix_apply(const MixDraws *d, float *x, int n, int w, int h) {
    if (d->kind == MIX_NONE || n < 1) return;
    const size_t img = (size_t)w * h * 3;
    /* sample i takes from sample i - 1: walk down so that i - 1 is still unmixed, with the last
     * image kept aside for sample 0 */
    float *last = mallocCheck(img * sizeof(float));
    memcpy(last, x + (size_t)(n - 1) * img, img * sizeof(float));
    const float lam = (float)d->lambda, rest = (float)(1.0 - d->lambda);
    for (int i = n - 1; i >= 0; i--) {
        float *dst = x + (size_t)i * img;
        const float *src = i > 0 ? x + (size_t)(i - 1) * img : last;
        if (d->kind == MIX_MIXUP) {
            for (size_t k = 0; k < img; k++) {
                const float a = dst[k] * lam, b = src[k] * rest;
                dst[k] = a + b;
            }
        } else {
            for (int y = d->y1; y < d->y2; y++)
                memcpy(dst + ((size_t)y * w + d->x1) * 3, src + ((size_t)y * w + d->x1) * 3,
                       (size_t)(d->x2 - d->x1) * 3 * sizeof(float));
        }
    }
    free(last);
}
