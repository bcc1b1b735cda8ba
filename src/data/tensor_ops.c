/* SPDX-License-Identifier: BSD-3-Clause */
/* tensor_ops.c - see tensor_ops.h. Every float expression is written in the order and the
 * precision torch evaluates it (a Python float meeting a tensor is cast to float32 first);
 * -std=c11 keeps GCC from fusing a multiply and an add except where fmaf says so. */
#include "tensor_ops.h"

#include <math.h>
#include <string.h>

#include "pil_ops.h"
#include "base/util.h"

/* .clamp(0, 255).to(torch.uint8): truncation toward zero. */
static inline uint8_t clamp_trunc(float v) { return (uint8_t)(v <= 0.0f ? 0.0f : v >= 255.0f ? 255.0f : v); }

/* ---- geometry: _gen_affine_grid and grid_sample ---- */

void tensor_affine(uint8_t *img, int w, int h, const double m[6], uint8_t *tmp) {
    /* theta.transpose(1, 2) / [0.5 w, 0.5 h], each entry divided in float32 */
    const float hw = (float)(0.5 * w), hh = (float)(0.5 * h);
    const float r00 = (float)m[0] / hw, r10 = (float)m[1] / hw, r20 = (float)m[2] / hw;
    const float r01 = (float)m[3] / hh, r11 = (float)m[4] / hh, r21 = (float)m[5] / hh;
    /* grid_sample's unnormalisation (in + 1) * size / 2 - 0.5, fused by its AVX2 kernel */
    const float sx = (float)w / 2.0f, sy = (float)h / 2.0f;
    for (int y = 0; y < h; y++) {
        const float by = (float)y - (float)h * 0.5f + 0.5f;   /* linspace(-h/2 + 0.5, h/2 - 0.5, h): exact */
        for (int x = 0; x < w; x++) {
            const float bx = (float)x - (float)w * 0.5f + 0.5f;
            /* base_grid.bmm(rescaled_theta): x r0 + y r1 + 1 r2, left to right */
            const float gx = bx * r00 + by * r10 + r20, gy = bx * r01 + by * r11 + r21;
            const float ix = fmaf(gx + 1.0f, sx, -0.5f), iy = fmaf(gy + 1.0f, sy, -0.5f);
            const float fx = floorf(ix), fy = floorf(iy);
            const float we = ix - fx, e = 1.0f - we, n = iy - fy, s = 1.0f - n;
            const float wts[4] = {s * e, s * we, n * e, n * we};   /* nw, ne, sw, se */
            const long x0 = (long)fx, y0 = (long)fy;
            const long cx[4] = {x0, x0 + 1, x0, x0 + 1}, cy[4] = {y0, y0, y0 + 1, y0 + 1};
            uint8_t *d = tmp + ((size_t)y * w + x) * 3;
            for (int c = 0; c < 3; c++) {
                float v[4];
                for (int k = 0; k < 4; k++)   /* zeros outside */
                    v[k] = cx[k] >= 0 && cx[k] < w && cy[k] >= 0 && cy[k] < h ? (float)img[((size_t)cy[k] * w + cx[k]) * 3 + c] : 0.0f;
                float acc = v[0] * wts[0];
                acc = fmaf(v[1], wts[1], acc);
                acc = fmaf(v[2], wts[2], acc);
                acc = fmaf(v[3], wts[3], acc);
                d[c] = clamp_trunc(nearbyintf(acc));   /* _cast_squeeze_out: round, then uint8 */
            }
        }
    }
    memcpy(img, tmp, (size_t)w * h * 3);
}

/* ---- colour: _blend(img1, img2, ratio) ---- */

/* (ratio * img1 + (1.0 - ratio) * img2).clamp(0, 255).to(uint8), img2 a float per pixel and
 * channel from deg(), the ratio and 1 - ratio (taken in double) cast to float32. */
static void blend(uint8_t *img, size_t n, double ratio, const float *deg, int deg_step) {
    const float a = (float)ratio, b = (float)(1.0 - ratio);
    for (size_t i = 0; i < n; i++) img[i] = clamp_trunc(a * (float)img[i] + b * deg[deg_step ? i : 0]);
}

/* rgb_to_grayscale: (0.2989 r + 0.587 g + 0.114 b).to(uint8) in float32. */
static inline uint8_t grey(const uint8_t *p) {
    return (uint8_t)(0.2989f * (float)p[0] + 0.587f * (float)p[1] + 0.114f * (float)p[2]);
}

static void brightness(uint8_t *img, int w, int h, double f) {
    const float zero = 0.0f;   /* torch.zeros_like(img) */
    blend(img, (size_t)w * h * 3, f, &zero, 0);
}

static void saturation(uint8_t *img, int w, int h, double f) {
    const float a = (float)f, b = (float)(1.0 - f);
    for (size_t i = 0; i < (size_t)w * h; i++) {
        uint8_t *p = img + 3 * i;
        const float g = (float)grey(p);
        for (int c = 0; c < 3; c++) p[c] = clamp_trunc(a * (float)p[c] + b * g);
    }
}

/* mean(rgb_to_grayscale(img).to(float32)): a sum of integers, exact below 2^24, over the count. */
static void contrast(uint8_t *img, int w, int h, double f) {
    const size_t n = (size_t)w * h;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += grey(img + 3 * i);
    const float mean = (float)sum / (float)n;
    blend(img, n * 3, f, &mean, 0);
}

/* _blurred_degenerate_image: the depthwise 3x3 kernel [1 1 1; 1 5 1; 1 1 1] / 13 on the
 * interior, rounded half to even (a sum of k/13 is never near a half, so the order of
 * conv2d's additions cannot move it), the border rows and columns kept; nothing when a side is
 * 2 or less. */
static void sharpness(uint8_t *img, int w, int h, double f, uint8_t *tmp) {
    if (w <= 2 || h <= 2) return;
    const size_t n = (size_t)w * h * 3;
    memcpy(tmp, img, n);
    const float k1 = 1.0f / 13.0f, k5 = 5.0f / 13.0f;
    for (int y = 1; y < h - 1; y++)
        for (int x = 1; x < w - 1; x++)
            for (int c = 0; c < 3; c++) {
                float acc = 0.0f;
                for (int dy = -1; dy <= 1; dy++)
                    for (int dx = -1; dx <= 1; dx++)
                        acc += (float)img[((size_t)(y + dy) * w + (x + dx)) * 3 + c] * (dx || dy ? k1 : k5);
                tmp[((size_t)y * w + x) * 3 + c] = clamp_trunc(nearbyintf(acc));
            }
    const float a = (float)f, b = (float)(1.0 - f);
    for (size_t i = 0; i < n; i++) img[i] = clamp_trunc(a * (float)img[i] + b * (float)tmp[i]);
}

/* ---- F_t.posterize, solarize, autocontrast, equalize, invert ---- */

static void posterize(uint8_t *img, size_t n, int bits) {
    const uint8_t mask = (uint8_t)-(1 << (8 - bits));   /* img & -int(2 ** (8 - bits)), in uint8 */
    for (size_t i = 0; i < n; i++) img[i] &= mask;
}

/* torch.where(img >= threshold, 255 - img, img), compared in float32. */
static void solarize(uint8_t *img, size_t n, double threshold) {
    const float t = (float)threshold;
    for (size_t i = 0; i < n; i++)
        if ((float)img[i] >= t) img[i] = (uint8_t)(255 - img[i]);
}

/* Per channel: ((img - min) * (255 / (max - min))).clamp(0, 255).to(uint8) in float32, the
 * scale as torch's __rtruediv__ takes it, (max - min).reciprocal() * 255; a constant channel
 * (the scale not finite) stays. */
static void autocontrast(uint8_t *img, int w, int h) {
    const size_t n = (size_t)w * h;
    for (int c = 0; c < 3; c++) {
        int lo = 255, hi = 0;
        for (size_t i = 0; i < n; i++) {
            const int v = img[3 * i + c];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        if (hi == lo) continue;
        const float mn = (float)lo, scale = (1.0f / ((float)hi - mn)) * 255.0f;
        for (size_t i = 0; i < n; i++) img[3 * i + c] = clamp_trunc(((float)img[3 * i + c] - mn) * scale);
    }
}

/* _scale_channel per channel: step = (the histogram's sum less its last non-zero bin) // 255;
 * none when 0; else lut[i] = (cumsum[i - 1] + step // 2) // step, lut[0] = 0, clamped to 255. */
static void equalize(uint8_t *img, int w, int h) {
    const size_t n = (size_t)w * h;
    for (int c = 0; c < 3; c++) {
        size_t hist[256] = {0};
        for (size_t i = 0; i < n; i++) hist[img[3 * i + c]]++;
        size_t last = 0;
        for (int v = 0; v < 256; v++)
            if (hist[v]) last = hist[v];
        const size_t step = (n - last) / 255;
        if (!step) continue;
        uint8_t lut[256];
        size_t cum = 0;
        for (int v = 0; v < 256; v++) {
            const size_t l = v ? (cum + step / 2) / step : 0;
            lut[v] = (uint8_t)(l > 255 ? 255 : l);
            cum += hist[v];
        }
        for (size_t i = 0; i < n; i++) img[3 * i + c] = lut[img[3 * i + c]];
    }
}

void tensor_apply_op(int op, double mag, uint8_t *img, int w, int h, uint8_t *tmp) {
    const size_t n = (size_t)w * h * 3;
    double m[6];
    switch (op) {
    case PIL_IDENTITY: return;
    case PIL_SHEAR_X:
    case PIL_SHEAR_Y: {   /* center=[0, 0]: relative to the image's centre, (-w/2, -h/2) */
        const double deg = atan(mag) * (180.0 / M_PI);
        pil_inverse_affine(-w * 0.5, -h * 0.5, 0.0, 0.0, 0.0, op == PIL_SHEAR_X ? deg : 0.0, op == PIL_SHEAR_Y ? deg : 0.0, m);
        tensor_affine(img, w, h, m, tmp);
        return;
    }
    case PIL_TRANSLATE_X:
    case PIL_TRANSLATE_Y: {
        const double t = (double)(long)mag;   /* int(magnitude) */
        pil_inverse_affine(0.0, 0.0, 0.0, op == PIL_TRANSLATE_X ? t : 0.0, op == PIL_TRANSLATE_Y ? t : 0.0, 0.0, 0.0, m);
        tensor_affine(img, w, h, m, tmp);
        return;
    }
    case PIL_ROTATE:   /* F.rotate: the inverse matrix of -angle about the centre */
        pil_inverse_affine(0.0, 0.0, -mag, 0.0, 0.0, 0.0, 0.0, m);
        tensor_affine(img, w, h, m, tmp);
        return;
    case PIL_BRIGHTNESS: brightness(img, w, h, 1.0 + mag); return;
    case PIL_COLOR: saturation(img, w, h, 1.0 + mag); return;
    case PIL_CONTRAST: contrast(img, w, h, 1.0 + mag); return;
    case PIL_SHARPNESS: sharpness(img, w, h, 1.0 + mag, tmp); return;
    case PIL_POSTERIZE: posterize(img, n, (int)mag); return;
    case PIL_SOLARIZE: solarize(img, n, mag); return;
    case PIL_AUTOCONTRAST: autocontrast(img, w, h); return;
    case PIL_EQUALIZE: equalize(img, w, h); return;
    case PIL_INVERT:
        for (size_t i = 0; i < n; i++) img[i] = (uint8_t)(255 - img[i]);
        return;
    default: CHECK(!"an op tensor_ops.h does not have");
    }
}
