/* SPDX-License-Identifier: BSD-3-Clause */
/* autoaug.c - see autoaug.h. The policies, op lists, magnitude bins and draw order are
 * torchvision 0.14's (transforms/autoaugment.py, ColorJitter in transforms.py); every
 * torch.randint(n) is an rng_below(n), every torch.rand or uniform_ an rng_uniform. */
#include "autoaug.h"

#include <math.h>
#include <string.h>

#include "augmix.h"
#include "pil_ops.h"
#include "base/util.h"

int autoaug_policy(const char *name) {
    static const char *const names[] = {"none", "imagenet", "cifar10", "svhn", "ra", "ta_wide", "augmix"};
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}

int autoaug_active(const PixelAug *a) {
    return a && (a->policy != AA_NONE || a->jitter[0] > 0 || a->jitter[1] > 0 || a->jitter[2] > 0 || a->jitter[3] > 0);
}

/* One (op, probability, magnitude bin or -1) of an AutoAugment sub-policy. */
typedef struct {
    signed char op;
    float p;
    signed char bin;
} Step;

#define S_(o, p, b) {PIL_##o, p, b}
static const Step IMAGENET[25][2] = {
    {S_(POSTERIZE, 0.4f, 8), S_(ROTATE, 0.6f, 9)},       {S_(SOLARIZE, 0.6f, 5), S_(AUTOCONTRAST, 0.6f, -1)},
    {S_(EQUALIZE, 0.8f, -1), S_(EQUALIZE, 0.6f, -1)},    {S_(POSTERIZE, 0.6f, 7), S_(POSTERIZE, 0.6f, 6)},
    {S_(EQUALIZE, 0.4f, -1), S_(SOLARIZE, 0.2f, 4)},     {S_(EQUALIZE, 0.4f, -1), S_(ROTATE, 0.8f, 8)},
    {S_(SOLARIZE, 0.6f, 3), S_(EQUALIZE, 0.6f, -1)},     {S_(POSTERIZE, 0.8f, 5), S_(EQUALIZE, 1.0f, -1)},
    {S_(ROTATE, 0.2f, 3), S_(SOLARIZE, 0.6f, 8)},        {S_(EQUALIZE, 0.6f, -1), S_(POSTERIZE, 0.4f, 6)},
    {S_(ROTATE, 0.8f, 8), S_(COLOR, 0.4f, 0)},           {S_(ROTATE, 0.4f, 9), S_(EQUALIZE, 0.6f, -1)},
    {S_(EQUALIZE, 0.0f, -1), S_(EQUALIZE, 0.8f, -1)},    {S_(INVERT, 0.6f, -1), S_(EQUALIZE, 1.0f, -1)},
    {S_(COLOR, 0.6f, 4), S_(CONTRAST, 1.0f, 8)},         {S_(ROTATE, 0.8f, 8), S_(COLOR, 1.0f, 2)},
    {S_(COLOR, 0.8f, 8), S_(SOLARIZE, 0.8f, 7)},         {S_(SHARPNESS, 0.4f, 7), S_(INVERT, 0.6f, -1)},
    {S_(SHEAR_X, 0.6f, 5), S_(EQUALIZE, 1.0f, -1)},      {S_(COLOR, 0.4f, 0), S_(EQUALIZE, 0.6f, -1)},
    {S_(EQUALIZE, 0.4f, -1), S_(SOLARIZE, 0.2f, 4)},     {S_(SOLARIZE, 0.6f, 5), S_(AUTOCONTRAST, 0.6f, -1)},
    {S_(INVERT, 0.6f, -1), S_(EQUALIZE, 1.0f, -1)},      {S_(COLOR, 0.6f, 4), S_(CONTRAST, 1.0f, 8)},
    {S_(EQUALIZE, 0.8f, -1), S_(EQUALIZE, 0.6f, -1)},
};
static const Step CIFAR10[25][2] = {
    {S_(INVERT, 0.1f, -1), S_(CONTRAST, 0.2f, 6)},       {S_(ROTATE, 0.7f, 2), S_(TRANSLATE_X, 0.3f, 9)},
    {S_(SHARPNESS, 0.8f, 1), S_(SHARPNESS, 0.9f, 3)},    {S_(SHEAR_Y, 0.5f, 8), S_(TRANSLATE_Y, 0.7f, 9)},
    {S_(AUTOCONTRAST, 0.5f, -1), S_(EQUALIZE, 0.9f, -1)}, {S_(SHEAR_Y, 0.2f, 7), S_(POSTERIZE, 0.3f, 7)},
    {S_(COLOR, 0.4f, 3), S_(BRIGHTNESS, 0.6f, 7)},       {S_(SHARPNESS, 0.3f, 9), S_(BRIGHTNESS, 0.7f, 9)},
    {S_(EQUALIZE, 0.6f, -1), S_(EQUALIZE, 0.5f, -1)},    {S_(CONTRAST, 0.6f, 7), S_(SHARPNESS, 0.6f, 5)},
    {S_(COLOR, 0.7f, 7), S_(TRANSLATE_X, 0.5f, 8)},      {S_(EQUALIZE, 0.3f, -1), S_(AUTOCONTRAST, 0.4f, -1)},
    {S_(TRANSLATE_Y, 0.4f, 3), S_(SHARPNESS, 0.2f, 6)},  {S_(BRIGHTNESS, 0.9f, 6), S_(COLOR, 0.2f, 8)},
    {S_(SOLARIZE, 0.5f, 2), S_(INVERT, 0.0f, -1)},       {S_(EQUALIZE, 0.2f, -1), S_(AUTOCONTRAST, 0.6f, -1)},
    {S_(EQUALIZE, 0.2f, -1), S_(EQUALIZE, 0.6f, -1)},    {S_(COLOR, 0.9f, 9), S_(EQUALIZE, 0.6f, -1)},
    {S_(AUTOCONTRAST, 0.8f, -1), S_(SOLARIZE, 0.2f, 8)}, {S_(BRIGHTNESS, 0.1f, 3), S_(COLOR, 0.7f, 0)},
    {S_(SOLARIZE, 0.4f, 5), S_(AUTOCONTRAST, 0.9f, -1)}, {S_(TRANSLATE_Y, 0.9f, 9), S_(TRANSLATE_Y, 0.7f, 9)},
    {S_(AUTOCONTRAST, 0.9f, -1), S_(SOLARIZE, 0.8f, 3)}, {S_(EQUALIZE, 0.8f, -1), S_(INVERT, 0.1f, -1)},
    {S_(TRANSLATE_Y, 0.7f, 9), S_(AUTOCONTRAST, 0.9f, -1)},
};
static const Step SVHN[25][2] = {
    {S_(SHEAR_X, 0.9f, 4), S_(INVERT, 0.2f, -1)},        {S_(SHEAR_Y, 0.9f, 8), S_(INVERT, 0.7f, -1)},
    {S_(EQUALIZE, 0.6f, -1), S_(SOLARIZE, 0.6f, 6)},     {S_(INVERT, 0.9f, -1), S_(EQUALIZE, 0.6f, -1)},
    {S_(EQUALIZE, 0.6f, -1), S_(ROTATE, 0.9f, 3)},       {S_(SHEAR_X, 0.9f, 4), S_(AUTOCONTRAST, 0.8f, -1)},
    {S_(SHEAR_Y, 0.9f, 8), S_(INVERT, 0.4f, -1)},        {S_(SHEAR_Y, 0.9f, 5), S_(SOLARIZE, 0.2f, 6)},
    {S_(INVERT, 0.9f, -1), S_(AUTOCONTRAST, 0.8f, -1)},  {S_(EQUALIZE, 0.6f, -1), S_(ROTATE, 0.9f, 3)},
    {S_(SHEAR_X, 0.9f, 4), S_(SOLARIZE, 0.3f, 3)},       {S_(SHEAR_Y, 0.8f, 8), S_(INVERT, 0.7f, -1)},
    {S_(EQUALIZE, 0.9f, -1), S_(TRANSLATE_Y, 0.6f, 6)},  {S_(INVERT, 0.9f, -1), S_(EQUALIZE, 0.6f, -1)},
    {S_(CONTRAST, 0.3f, 3), S_(ROTATE, 0.8f, 4)},        {S_(INVERT, 0.8f, -1), S_(TRANSLATE_Y, 0.0f, 2)},
    {S_(SHEAR_Y, 0.7f, 6), S_(SOLARIZE, 0.4f, 8)},       {S_(INVERT, 0.6f, -1), S_(ROTATE, 0.8f, 4)},
    {S_(SHEAR_Y, 0.3f, 7), S_(TRANSLATE_X, 0.9f, 3)},    {S_(SHEAR_X, 0.1f, 6), S_(INVERT, 0.6f, -1)},
    {S_(SOLARIZE, 0.7f, 2), S_(TRANSLATE_Y, 0.6f, 7)},   {S_(SHEAR_Y, 0.8f, 4), S_(INVERT, 0.8f, -1)},
    {S_(SHEAR_X, 0.7f, 9), S_(TRANSLATE_Y, 0.8f, 3)},    {S_(SHEAR_Y, 0.8f, 5), S_(AUTOCONTRAST, 0.7f, -1)},
    {S_(SHEAR_X, 0.7f, 2), S_(INVERT, 0.1f, -1)},
};
#undef S_

static int draw_int(Rng *r, int bound, AutoAugTrace *t) {
    const int v = (int)rng_below(r, (uint32_t)bound);
    if (t && t->n < AUTOAUG_TRACE_MAX) t->kind[t->n] = 'i', t->bound[t->n] = bound, t->value[t->n++] = v;
    return v;
}

static float draw_float(Rng *r, AutoAugTrace *t) {
    const float v = rng_uniform(r);
    if (t && t->n < AUTOAUG_TRACE_MAX) t->kind[t->n] = 'f', t->bound[t->n] = 0, t->value[t->n++] = v;
    return v;
}

static void apply(int op, double mag, uint8_t *img, int w, int h, uint8_t *tmp, AutoAugTrace *t) {
    if (t && t->nops < AUTOAUG_TRACE_MAX) t->op[t->nops] = op, t->mag[t->nops++] = mag;
    pil_apply_op(op, mag, img, w, h, tmp);
}

/* AutoAugment.forward: policy_id = randint(25), probs = rand(2), signs = randint(2, (2,));
 * step i runs when probs[i] <= p (in float32), negated when signed and signs[i] == 0. */
static void auto_augment(const Step (*pol)[2], int policy, Rng *r, uint8_t *img, int w, int h, uint8_t *tmp,
                         AutoAugTrace *t) {
    const int id = draw_int(r, 25, t);
    float probs[2];
    int signs[2];
    for (int i = 0; i < 2; i++) probs[i] = draw_float(r, t);
    for (int i = 0; i < 2; i++) signs[i] = draw_int(r, 2, t);
    for (int i = 0; i < 2; i++) {
        const Step *s = &pol[id][i];
        if (!(probs[i] <= s->p)) continue;
        double mag = s->bin >= 0 ? autoaug_magnitude(policy, s->op, s->bin, 10, w, h) : 0.0;
        if (aug_is_signed(s->op) && signs[i] == 0) mag = -mag;
        apply(s->op, mag, img, w, h, tmp, t);
    }
}

/* RandAugment.forward: num_ops times op = randint(14), the magnitude of bin ra_magnitude of 31,
 * negated when signed and randint(2) is 1 (drawn only for signed ops). TrivialAugmentWide: one
 * op = randint(14), its bin randint(31) (drawn only for ops with bins), then the sign alike. */
static void rand_or_trivial(const PixelAug *a, Rng *r, uint8_t *img, int w, int h, uint8_t *tmp, AutoAugTrace *t) {
    const int n = a->policy == AA_RA ? a->ra_num_ops : 1;
    for (int k = 0; k < n; k++) {
        const int op = draw_int(r, 14, t);
        double mag = 0.0;
        if (aug_has_bins(op)) {
            const int bin = a->policy == AA_RA ? a->ra_magnitude : draw_int(r, 31, t);
            mag = autoaug_magnitude(a->policy, op, bin, 31, w, h);
        }
        if (aug_is_signed(op) && draw_int(r, 2, t)) mag = -mag;
        apply(op, mag, img, w, h, tmp, t);
    }
}

/* ColorJitter.forward: fn_idx = randperm(4), then one factor per component that is on, in the
 * order brightness, contrast, saturation, hue, uniform in [max(0, 1 - v), 1 + v] ([-v, v] for
 * hue) as u * (hi - lo) + lo in float32; applied in fn_idx's order. */
static void color_jitter(const double j[4], Rng *r, uint8_t *img, int w, int h, uint8_t *tmp, AutoAugTrace *t) {
    int perm[4] = {0, 1, 2, 3};
    for (int i = 3; i > 0; i--) {   /* Fisher-Yates: any uniform permutation will do */
        const int k = (int)rng_below(r, (uint32_t)i + 1), v = perm[i];
        perm[i] = perm[k], perm[k] = v;
    }
    for (int i = 0; i < 4 && t && t->n < AUTOAUG_TRACE_MAX; i++) t->kind[t->n] = 'p', t->bound[t->n] = 4, t->value[t->n++] = perm[i];
    double f[4] = {0, 0, 0, 0};
    for (int c = 0; c < 4; c++) {
        if (!(j[c] > 0)) continue;
        const float lo = c == 3 ? (float)-j[c] : (float)fmax(0.0, 1.0 - j[c]), hi = (float)(c == 3 ? j[c] : 1.0 + j[c]);
        const float u = rng_uniform(r), v = u * (hi - lo) + lo;
        if (t && t->n < AUTOAUG_TRACE_MAX) t->kind[t->n] = 'f', t->bound[t->n] = c + 1, t->value[t->n++] = v;
        f[c] = v;
    }
    for (int i = 0; i < 4; i++) {
        const int c = perm[i];
        if (!(j[c] > 0)) continue;
        if (c == 0) pil_brightness(img, w, h, f[0], tmp);
        else if (c == 1) pil_contrast(img, w, h, f[1], tmp);
        else if (c == 2) pil_color(img, w, h, f[2], tmp);
        else pil_hue(img, w, h, f[3]);
    }
}

void autoaug_apply(const PixelAug *a, Rng *r, uint8_t *img, int w, int h, uint8_t *tmp, AutoAugTrace *t) {
    if (t) memset(t, 0, sizeof *t);
    switch (a->policy) {
    case AA_NONE: break;
    case AA_IMAGENET: auto_augment(IMAGENET, a->policy, r, img, w, h, tmp, t); break;
    case AA_CIFAR10: auto_augment(CIFAR10, a->policy, r, img, w, h, tmp, t); break;
    case AA_SVHN: auto_augment(SVHN, a->policy, r, img, w, h, tmp, t); break;
    case AA_RA:
    case AA_TA_WIDE: rand_or_trivial(a, r, img, w, h, tmp, t); break;
    case AA_AUGMIX: augmix_apply(a->augmix_severity > 0 ? a->augmix_severity : 3, r, img, w, h, t); break;
    default: CHECK(!"a policy autoaug.h does not have");
    }
    if (a->jitter[0] > 0 || a->jitter[1] > 0 || a->jitter[2] > 0 || a->jitter[3] > 0) color_jitter(a->jitter, r, img, w, h, tmp, t);
}
