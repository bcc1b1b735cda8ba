/* SPDX-License-Identifier: BSD-3-Clause */
/* pil_ops.c - see pil_ops.h. Written from the arithmetic of Pillow 9.4's libImaging (Geometry.c,
 * Blend.c, Filter.c, Convert.c) and ImageOps.py / ImageEnhance.py, and of torchvision 0.14's
 * functional.py: the types of every intermediate (float where Pillow computes in float, double
 * where Python or C promotion does) are kept, so that the results are Pillow's bit for bit. */
#include "pil_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

static const char *const NAMES[PIL_NUM_OPS] = {
    "Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color",
    "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize", "Invert",
};

const char *pil_op_name(int op) { return op >= 0 && op < PIL_NUM_OPS ? NAMES[op] : "?"; }

static inline uint8_t clip8i(int v) { return (uint8_t)(v <= 0 ? 0 : v < 256 ? v : 255); }

/* ---- geometry: Geometry.c's nearest-neighbour affine transform ---- */

/* Geometry.c's COORD and FLOOR: truncation, with everything below 0 outside. */
static inline int coord(double v) { return v < 0.0 ? -1 : (int)v; }
static inline int fix16(double v) {
    v = v * 65536.0 + 0.5;
    return v < 0.0 ? (int)floor(v) : (int)v;
}
static inline int fits_fixed(const double a[6], int x, int y) {
    return fabs(x * a[0] + y * a[1] + a[2]) < 32768.0 && fabs(x * a[3] + y * a[4] + a[5]) < 32768.0;
}

static inline void put(uint8_t *out, const uint8_t *in, int w, int x, int y, int xin, int yin) {
    memcpy(out + ((size_t)y * w + x) * 3, in + ((size_t)yin * w + xin) * 3, 3);
}

void pil_affine(uint8_t *img, int w, int h, const double a[6], uint8_t *tmp) {
    const uint8_t *in = img;
    uint8_t *out = tmp;
    memset(out, 0, (size_t)w * h * 3);   /* fillcolor 0 */
    if (a[1] == 0 && a[3] == 0) {
        /* ImagingScaleAffine: columns tabulated once, the span of valid ones copied per row */
        int *xin = callocCheck((size_t)w, sizeof(int));
        double xo = a[2] + a[0] * 0.5, yo = a[5] + a[4] * 0.5;
        int xmin = w, xmax = 0;
        for (int x = 0; x < w; x++, xo += a[0]) {
            const int xi = coord(xo);
            if (xi >= 0 && xi < w) {
                xmax = x + 1;
                if (x < xmin) xmin = x;
                xin[x] = xi;
            }
        }
        for (int y = 0; y < h; y++, yo += a[4]) {
            const int yi = coord(yo);
            if (yi < 0 || yi >= h) continue;
            for (int x = xmin; x < xmax; x++) put(out, in, w, x, y, xin[x], yi);
        }
        free(xin);
    } else if (fits_fixed(a, 0, 0) && fits_fixed(a, w, h) && fits_fixed(a, 0, h) && fits_fixed(a, w, 0)) {
        /* affine_fixed: 16.16 fixed point, the half-pixel offset folded into the origin */
        const int a0 = fix16(a[0]), a1 = fix16(a[1]), a3 = fix16(a[3]), a4 = fix16(a[4]);
        int a2 = fix16(a[2] + a[0] * 0.5 + a[1] * 0.5), a5 = fix16(a[5] + a[3] * 0.5 + a[4] * 0.5);
        for (int y = 0; y < h; y++, a2 += a1, a5 += a4) {
            int xx = a2, yy = a5;
            for (int x = 0; x < w; x++, xx += a0, yy += a3) {
                const int xi = xx >> 16, yi = yy >> 16;   /* arithmetic shift: floor */
                if (xi >= 0 && xi < w && yi >= 0 && yi < h) put(out, in, w, x, y, xi, yi);
            }
        }
    } else {
        double xo = a[2] + a[1] * 0.5 + a[0] * 0.5, yo = a[5] + a[4] * 0.5 + a[3] * 0.5;
        for (int y = 0; y < h; y++, xo += a[1], yo += a[4]) {
            double xx = xo, yy = yo;
            for (int x = 0; x < w; x++, xx += a[0], yy += a[3]) {
                const int xi = coord(xx), yi = coord(yy);
                if (xi >= 0 && xi < w && yi >= 0 && yi < h) put(out, in, w, x, y, xi, yi);
            }
        }
    }
    memcpy(img, out, (size_t)w * h * 3);
}

/* Python's round(x, 15): the decimal rounding of the exact binary value, as printf's. */
static double round15(double x) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.15f", x);
    return strtod(buf, NULL);
}

/* Python's float %: the sign of the divisor. */
static double pymod(double a, double b) {
    double m = fmod(a, b);
    if (m != 0.0) {
        if ((b < 0) != (m < 0)) m += b;
    } else {
        m = copysign(0.0, b);
    }
    return m;
}

void pil_rotate(uint8_t *img, int w, int h, double angle, uint8_t *tmp) {
    angle = pymod(angle, 360.0);
    /* Image.rotate's exact paths: a copy, and transposes (90 and 270 on a square only) */
    if (angle == 0) return;
    if (angle == 180 || ((angle == 90 || angle == 270) && w == h)) {
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                int xi, yi;
                if (angle == 180) xi = w - 1 - x, yi = h - 1 - y;
                else if (angle == 90) xi = w - 1 - y, yi = x;      /* counter-clockwise */
                else xi = y, yi = h - 1 - x;
                put(tmp, img, w, x, y, xi, yi);
            }
        memcpy(img, tmp, (size_t)w * h * 3);
        return;
    }
    const double rad = -(angle * (M_PI / 180.0));   /* -math.radians(angle) */
    const double cx = w / 2.0, cy = h / 2.0;
    double m[6] = {round15(cos(rad)), round15(sin(rad)), 0.0, round15(-sin(rad)), round15(cos(rad)), 0.0};
    const double x0 = -cx - 0, y0 = -cy - 0;
    m[2] = m[0] * x0 + m[1] * y0 + m[2];
    m[5] = m[3] * x0 + m[4] * y0 + m[5];
    m[2] += cx;
    m[5] += cy;
    pil_affine(img, w, h, m, tmp);
}

void pil_inverse_affine(double cx, double cy, double angle, double tx, double ty, double shx, double shy, double m[6]) {
    const double rot = angle * (M_PI / 180.0), sx = shx * (M_PI / 180.0), sy = shy * (M_PI / 180.0);
    const double a = cos(rot - sy) / cos(sy);
    const double b = -cos(rot - sy) * tan(sx) / cos(sy) - sin(rot);
    const double c = sin(rot - sy) / cos(sy);
    const double d = -sin(rot - sy) * tan(sx) / cos(sy) + cos(rot);
    m[0] = d / 1.0, m[1] = -b / 1.0, m[2] = 0.0 / 1.0, m[3] = -c / 1.0, m[4] = a / 1.0, m[5] = 0.0 / 1.0;
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
    m[2] += cx;
    m[5] += cy;
}

/* ---- colour: Image.blend against a degenerate image ---- */

/* Blend.c: out = deg + alpha (img - deg) in single precision, truncated (clipped outside [0, 1]). */
static void blend(const uint8_t *deg, uint8_t *img, size_t n, float alpha) {
    if (alpha == 0.0f) {
        memcpy(img, deg, n);
        return;
    }
    if (alpha == 1.0f) return;
    if (alpha >= 0 && alpha <= 1.0f) {
        for (size_t i = 0; i < n; i++) img[i] = (uint8_t)((int)deg[i] + alpha * ((int)img[i] - (int)deg[i]));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const float t = (float)((int)deg[i] + alpha * ((int)img[i] - (int)deg[i]));
        img[i] = t <= 0.0f ? 0 : t >= 255.0f ? 255 : (uint8_t)t;
    }
}

/* convert("L"): ITU-R 601-2 luma in 16-bit fixed point, rounded. */
static inline uint8_t grey(const uint8_t *p) {
    return (uint8_t)((p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16);
}

void pil_brightness(uint8_t *img, int w, int h, double factor, uint8_t *tmp) {
    const size_t n = (size_t)w * h * 3;
    memset(tmp, 0, n);
    blend(tmp, img, n, (float)factor);
}

void pil_color(uint8_t *img, int w, int h, double factor, uint8_t *tmp) {
    const size_t n = (size_t)w * h;
    for (size_t i = 0; i < n; i++) tmp[3 * i] = tmp[3 * i + 1] = tmp[3 * i + 2] = grey(img + 3 * i);
    blend(tmp, img, 3 * n, (float)factor);
}

void pil_contrast(uint8_t *img, int w, int h, double factor, uint8_t *tmp) {
    const size_t n = (size_t)w * h;
    /* ImageStat's mean of the grey image, from its histogram, rounded half up */
    size_t hist[256] = {0};
    for (size_t i = 0; i < n; i++) hist[grey(img + 3 * i)]++;
    double sum = 0.0;
    for (int j = 0; j < 256; j++) sum += (double)j * (double)hist[j];
    const int mean = (int)(sum / (double)n + 0.5);
    memset(tmp, mean, 3 * n);
    blend(tmp, img, 3 * n, (float)factor);
}

void pil_sharpness(uint8_t *img, int w, int h, double factor, uint8_t *tmp) {
    const size_t n = (size_t)w * h * 3;
    memcpy(tmp, img, n);   /* the border keeps its pixels; an image under 3 x 3 is copied whole */
    if (w >= 3 && h >= 3) {
        /* ImageFilter.SMOOTH: (1 1 1 / 1 5 1 / 1 1 1) / 13 in single precision, + 0.5, truncated */
        const float k1 = 1.0f / 13.0f, k5 = 5.0f / 13.0f;
        const size_t row = (size_t)w * 3;
        for (int y = 1; y < h - 1; y++) {
            const uint8_t *up = img + (size_t)(y - 1) * row, *mid = img + (size_t)y * row, *dn = img + (size_t)(y + 1) * row;
            uint8_t *o = tmp + (size_t)y * row;
            for (int x = 1; x < w - 1; x++)
                for (int c = 0; c < 3; c++) {
                    const size_t i = (size_t)x * 3 + c;
                    float ss = 0.5f;
                    ss += (float)dn[i - 3] * k1 + (float)dn[i] * k1 + (float)dn[i + 3] * k1;
                    ss += (float)mid[i - 3] * k1 + (float)mid[i] * k5 + (float)mid[i + 3] * k1;
                    ss += (float)up[i - 3] * k1 + (float)up[i] * k1 + (float)up[i + 3] * k1;
                    o[i] = ss <= 0.0f ? 0 : ss >= 255.0f ? 255 : (uint8_t)ss;
                }
        }
    }
    blend(tmp, img, n, (float)factor);
}

/* ---- ImageOps: per-band look-up tables ---- */

static void apply_luts(uint8_t *img, int w, int h, const uint8_t lut[3][256]) {
    const size_t n = (size_t)w * h;
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++) img[3 * i + c] = lut[c][img[3 * i + c]];
}

static void histograms(const uint8_t *img, int w, int h, size_t hist[3][256]) {
    memset(hist, 0, 3 * 256 * sizeof(size_t));
    const size_t n = (size_t)w * h;
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++) hist[c][img[3 * i + c]]++;
}

void pil_posterize(uint8_t *img, int w, int h, int bits) {
    uint8_t lut[3][256];
    const int mask = ~((1 << (8 - bits)) - 1);
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 256; i++) lut[c][i] = (uint8_t)(i & mask);
    apply_luts(img, w, h, lut);
}

void pil_solarize(uint8_t *img, int w, int h, double threshold) {
    uint8_t lut[3][256];
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 256; i++) lut[c][i] = (uint8_t)(i < threshold ? i : 255 - i);
    apply_luts(img, w, h, lut);
}

void pil_invert(uint8_t *img, int w, int h) {
    const size_t n = (size_t)w * h * 3;
    for (size_t i = 0; i < n; i++) img[i] = (uint8_t)(255 - img[i]);
}

void pil_autocontrast(uint8_t *img, int w, int h) {
    size_t hist[3][256];
    uint8_t lut[3][256];
    histograms(img, w, h, hist);
    for (int c = 0; c < 3; c++) {
        int lo = 0, hi = 255;
        while (lo < 255 && !hist[c][lo]) lo++;
        while (hi > 0 && !hist[c][hi]) hi--;
        if (hi <= lo) {
            for (int i = 0; i < 256; i++) lut[c][i] = (uint8_t)i;
            continue;
        }
        const double scale = 255.0 / (hi - lo), offset = -lo * scale;
        for (int i = 0; i < 256; i++) lut[c][i] = clip8i((int)(i * scale + offset));
    }
    apply_luts(img, w, h, lut);
}

void pil_equalize(uint8_t *img, int w, int h) {
    size_t hist[3][256];
    uint8_t lut[3][256];
    histograms(img, w, h, hist);
    for (int c = 0; c < 3; c++) {
        /* the step: the pixels less those of the last value present, over 255 */
        size_t total = 0, last = 0;
        int values = 0;
        for (int i = 0; i < 256; i++)
            if (hist[c][i]) total += hist[c][i], last = hist[c][i], values++;
        const size_t step = values > 1 ? (total - last) / 255 : 0;
        if (!step) {
            for (int i = 0; i < 256; i++) lut[c][i] = (uint8_t)i;
            continue;
        }
        size_t acc = step / 2;
        for (int i = 0; i < 256; i++) {
            const size_t v = acc / step;
            lut[c][i] = (uint8_t)(v > 255 ? 255 : v);   /* Image.point clips its table */
            acc += hist[c][i];
        }
    }
    apply_luts(img, w, h, lut);
}

/* ---- hue: Convert.c's RGB <-> HSV, 8 bits per component ---- */

static void rgb_to_hsv(const uint8_t *in, uint8_t *out) {
    const uint8_t r = in[0], g = in[1], b = in[2];
    const uint8_t mx = r > g ? (r > b ? r : b) : (g > b ? g : b), mn = r < g ? (r < b ? r : b) : (g < b ? g : b);
    out[2] = mx;
    if (mx == mn) {
        out[0] = out[1] = 0;
        return;
    }
    const float cr = (float)(mx - mn), s = cr / (float)mx;
    const float rc = (float)(mx - r) / cr, gc = (float)(mx - g) / cr, bc = (float)(mx - b) / cr;
    float hh;
    if (r == mx) hh = bc - gc;
    else if (g == mx) hh = (float)(2.0 + rc - bc);
    else hh = (float)(4.0 + gc - rc);
    hh = (float)fmod(hh / 6.0 + 1.0, 1.0);
    out[0] = clip8i((int)(hh * 255.0));
    out[1] = clip8i((int)(s * 255.0));
}

static void hsv_to_rgb(const uint8_t *in, uint8_t *out) {
    const uint8_t hh = in[0], s = in[1], v = in[2];
    if (s == 0) {
        out[0] = out[1] = out[2] = v;
        return;
    }
    const int i = (int)floor((float)hh * 6.0 / 255.0);
    const float f = (float)((float)hh * 6.0 / 255.0 - (float)i);
    const float fs = (float)((float)s / 255.0);
    const uint8_t p = clip8i((int)round((float)v * (1.0 - fs)));
    const uint8_t q = clip8i((int)round((float)v * (1.0 - fs * f)));
    const uint8_t t = clip8i((int)round((float)v * (1.0 - fs * (1.0 - f))));
    const uint8_t sext[6][3] = {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}};
    memcpy(out, sext[i % 6], 3);
}

void pil_hue(uint8_t *img, int w, int h, double hue_factor) {
    /* np.uint8(hue_factor * 255): truncated toward 0, then modulo 256 */
    const uint8_t shift = (uint8_t)(int)(hue_factor * 255);
    const size_t n = (size_t)w * h;
    for (size_t i = 0; i < n; i++) {
        uint8_t hsv[3];
        rgb_to_hsv(img + 3 * i, hsv);
        hsv[0] = (uint8_t)(hsv[0] + shift);
        hsv_to_rgb(hsv, img + 3 * i);
    }
}

/* ---- torchvision's _apply_op ---- */

void pil_apply_op(int op, double mag, uint8_t *img, int w, int h, uint8_t *tmp) {
    double m[6];
    switch (op) {
    case PIL_IDENTITY: return;
    case PIL_SHEAR_X:
    case PIL_SHEAR_Y: {
        const double deg = atan(mag) * (180.0 / M_PI);   /* math.degrees(math.atan(magnitude)) */
        pil_inverse_affine(0.0, 0.0, 0.0, 0.0, 0.0, op == PIL_SHEAR_X ? deg : 0.0, op == PIL_SHEAR_Y ? deg : 0.0, m);
        pil_affine(img, w, h, m, tmp);
        return;
    }
    case PIL_TRANSLATE_X:
    case PIL_TRANSLATE_Y: {
        const double t = (double)(long)mag;   /* int(magnitude) */
        pil_inverse_affine(w * 0.5, h * 0.5, 0.0, op == PIL_TRANSLATE_X ? t : 0.0, op == PIL_TRANSLATE_Y ? t : 0.0, 0.0, 0.0, m);
        pil_affine(img, w, h, m, tmp);
        return;
    }
    case PIL_ROTATE: pil_rotate(img, w, h, mag, tmp); return;
    case PIL_BRIGHTNESS: pil_brightness(img, w, h, 1.0 + mag, tmp); return;
    case PIL_COLOR: pil_color(img, w, h, 1.0 + mag, tmp); return;
    case PIL_CONTRAST: pil_contrast(img, w, h, 1.0 + mag, tmp); return;
    case PIL_SHARPNESS: pil_sharpness(img, w, h, 1.0 + mag, tmp); return;
    case PIL_POSTERIZE: pil_posterize(img, w, h, (int)mag); return;
    case PIL_SOLARIZE: pil_solarize(img, w, h, mag); return;
    case PIL_AUTOCONTRAST: pil_autocontrast(img, w, h); return;
    case PIL_EQUALIZE: pil_equalize(img, w, h); return;
    case PIL_INVERT: pil_invert(img, w, h); return;
    default: CHECK(!"an op pil_ops.h does not have");
    }
}
