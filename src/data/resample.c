/* SPDX-License-Identifier: BSD-3-Clause */
/* resample.c - see resample.h.
 *
 * The arithmetic is Pillow's (libImaging/Resample.c, read for its rounding rules, not copied):
 * for an input of n pixels resized to m, scale = n / m and the filter is widened to
 * max(scale, 1) pixels each way (n as a float: Pillow's box is four floats, so a side past 2^24
 * pixels is rounded there; the clamping below uses the exact n); output pixel i is centred at
 * (i + 0.5) * scale, takes the source pixels from (int)(centre - support + 0.5) to
 * (int)(centre + support + 0.5) (C casts, clamped to the image), weighs each with the
 * triangle filter at its distance over the widening, and divides by their sum. The weights are
 * rounded to 22-bit fixed point; a pixel is the sum of weight x value plus a half, shifted right
 * and clamped to 0-255. The rows a vertical pass needs are resampled horizontally first, into
 * uint8. n is the box's size, not the image's: torchvision crops before it resizes. */
#include "resample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

#define PRECISION_BITS 22   /* Pillow's for 8-bit channels: 32 - 8 - 2 */

static double triangle(double x) {
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

static void *grow(void *p, size_t *cap, size_t need) {
    if (need <= *cap) return p;
    free(p);
    *cap = need;
    return mallocCheck(need);
}

void resample_scratch_free(ResampleScratch *s) {
    free(s->kx);
    free(s->ky);
    free(s->bx);
    free(s->by);
    free(s->w);
    free(s->tmp);
    memset(s, 0, sizeof *s);
}

/* Pillow's scale, (double)(in1 - in0) / outSize with in0 = 0.0f and in1 = (float)n. */
static double scale_of(int n, int64_t m) {
    return (double)(float)n / (double)m;
}

/* Taps per output pixel for n inputs resized to m. */
static int taps(int n, int64_t m) {
    const double scale = scale_of(n, m), support = scale < 1.0 ? 1.0 : scale;
    return (int)ceil(support) * 2 + 1;
}

/* Weights of outputs [first, first + count) of n inputs resized to m: bounds[2i] is the first
 * input of output first + i and bounds[2i + 1] how many follow; k[i * ks + t] their weights. */
static void coeffs(int n, int64_t m, int64_t first, int count, int ks, int32_t *k, int *bounds, double *w) {
    const double scale = scale_of(n, m), filterscale = scale < 1.0 ? 1.0 : scale;
    const double support = filterscale, ss = 1.0 / filterscale;
    for (int i = 0; i < count; i++) {
        const double centre = ((double)(first + i) + 0.5) * scale;
        int xmin = (int)(centre - support + 0.5), xmax = (int)(centre + support + 0.5);
        if (xmin < 0) xmin = 0;
        if (xmax > n) xmax = n;
        xmax -= xmin;
        double sum = 0.0;
        for (int x = 0; x < xmax; x++) {
            w[x] = triangle((x + xmin - centre + 0.5) * ss);
            sum += w[x];
        }
        int32_t *kk = k + (size_t)i * ks;
        for (int x = 0; x < ks; x++) {
            const double v = x < xmax && sum != 0.0 ? w[x] / sum : 0.0;
            /* the triangle is never negative: Pillow's rounding for positive weights */
            kk[x] = (int32_t)(0.5 + v * (1 << PRECISION_BITS));
        }
        bounds[2 * i] = xmin;
        bounds[2 * i + 1] = xmax;
    }
}

static inline uint8_t clip8(int32_t v) {
    v >>= PRECISION_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

void resample_box(const uint8_t *src, int src_w, int src_h, PixelBox box, int64_t out_w, int64_t out_h,
                  PixelBox win, uint8_t *dst, ResampleScratch *s) {
    CHECK(box.x >= 0 && box.y >= 0 && box.w > 0 && box.h > 0 && box.x + box.w <= src_w && box.y + box.h <= src_h);
    CHECK(out_w > 0 && out_h > 0 && win.x >= 0 && win.y >= 0 && win.w > 0 && win.h > 0 &&
          win.x + win.w <= out_w && win.y + win.h <= out_h);
    const int ksx = taps(box.w, out_w), ksy = taps(box.h, out_h);
    s->kx = grow(s->kx, &s->cap_kx, (size_t)win.w * ksx * sizeof(int32_t));
    s->ky = grow(s->ky, &s->cap_ky, (size_t)win.h * ksy * sizeof(int32_t));
    const size_t nb = (size_t)2 * (win.w > win.h ? win.w : win.h) * sizeof(int);
    if (nb > s->cap_b) {
        free(s->bx);
        free(s->by);
        s->bx = mallocCheck(nb);
        s->by = mallocCheck(nb);
        s->cap_b = nb;
    }
    s->w = grow(s->w, &s->cap_w, (size_t)(ksx > ksy ? ksx : ksy) * sizeof(double));
    coeffs(box.w, out_w, win.x, win.w, ksx, s->kx, s->bx, s->w);
    coeffs(box.h, out_h, win.y, win.h, ksy, s->ky, s->by, s->w);

    /* Rows [y0, y1) of the box feed the window's rows. */
    const int y0 = s->by[0], y1 = s->by[2 * (win.h - 1)] + s->by[2 * (win.h - 1) + 1];
    const size_t row = (size_t)win.w * 3;
    s->tmp = grow(s->tmp, &s->cap_tmp, (size_t)(y1 - y0) * row);
    const int32_t half = 1 << (PRECISION_BITS - 1);
    for (int y = y0; y < y1; y++) {
        const uint8_t *in = src + ((size_t)(box.y + y) * src_w + box.x) * 3;
        uint8_t *o = s->tmp + (size_t)(y - y0) * row;
        if (box.w == out_w) {   /* no horizontal pass: Pillow skips it, its weights would be 1 */
            memcpy(o, in + (size_t)win.x * 3, row);
            continue;
        }
        for (int c = 0; c < win.w; c++) {
            const int32_t *k = s->kx + (size_t)c * ksx;
            const uint8_t *p = in + (size_t)s->bx[2 * c] * 3;
            int32_t a0 = half, a1 = half, a2 = half;
            for (int t = 0; t < s->bx[2 * c + 1]; t++) {
                a0 += p[3 * t] * k[t];
                a1 += p[3 * t + 1] * k[t];
                a2 += p[3 * t + 2] * k[t];
            }
            o[3 * c] = clip8(a0);
            o[3 * c + 1] = clip8(a1);
            o[3 * c + 2] = clip8(a2);
        }
    }
    for (int r = 0; r < win.h; r++) {
        uint8_t *o = dst + (size_t)r * row;
        const int first = s->by[2 * r] - y0, n = s->by[2 * r + 1];
        if (box.h == out_h) {   /* no vertical pass */
            memcpy(o, s->tmp + (size_t)first * row, row);
            continue;
        }
        const int32_t *k = s->ky + (size_t)r * ksy;
        for (size_t i = 0; i < row; i++) {
            int32_t a = half;
            for (int t = 0; t < n; t++) a += s->tmp[(size_t)(first + t) * row + i] * k[t];
            o[i] = clip8(a);
        }
    }
}
