/* SPDX-License-Identifier: BSD-3-Clause */
/* image_fit.c - see image_fit.h. The resampling is PIL's (libImaging/Resample.c's rules, as
 * image.c states them): for n inputs resized to m, output i is centred at (i + 0.5) * n / m,
 * the triangle filter widened to max(n / m, 1) each way, the weights normalised and rounded to
 * 22-bit fixed point; the horizontal pass first, rounded to uint8, over the rows the vertical
 * pass reads. Only the kept window of the resized image is computed. */
#include "image_fit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define PRECISION_BITS (32 - 8 - 2)

/* Weights of outputs [first, first + count) of in_size inputs resized to out_size: bounds
 * [count][2] (first input, taps), kk [count][ksize]; returns ksize. */
static int fit_coeffs(int64_t in_size, int64_t out_size, int64_t first, int count, int **bounds_out,
                      int32_t **kk_out) {
    const double scale = (double)in_size / (double)out_size;
    const double filterscale = scale < 1.0 ? 1.0 : scale, support = filterscale;
    const int ksize = (int)ceil(support) * 2 + 1;
    int *bounds = mallocCheck((size_t)count * 2 * sizeof(int));
    int32_t *kk = mallocCheck((size_t)count * (size_t)ksize * sizeof(int32_t));
    double *k = mallocCheck((size_t)ksize * sizeof(double));
    for (int i = 0; i < count; i++) {
        const double center = ((double)(first + i) + 0.5) * scale, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size) xmax = (int)in_size;
        xmax -= xmin;
        double ww = 0.0;
        int x;
        for (x = 0; x < xmax; x++) {
            const double t = fabs((x + xmin - center + 0.5) * ss);
            k[x] = t < 1.0 ? 1.0 - t : 0.0;
            ww += k[x];
        }
        for (x = 0; x < xmax; x++)
            if (ww != 0.0) k[x] /= ww;
        for (; x < ksize; x++) k[x] = 0;
        for (x = 0; x < ksize; x++)
            kk[(size_t)i * (size_t)ksize + (size_t)x] = k[x] < 0 ? (int32_t)(-0.5 + k[x] * (1 << PRECISION_BITS))
                                                                : (int32_t)(0.5 + k[x] * (1 << PRECISION_BITS));
        bounds[2 * i] = xmin;
        bounds[2 * i + 1] = xmax;
    }
    free(k);
    *bounds_out = bounds;
    *kk_out = kk;
    return ksize;
}

static inline uint8_t clip8(int32_t v) {
    v >>= PRECISION_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* One RGB pixel: n taps k over p, p + step, ... (step in bytes). */
static void tap(const uint8_t *p, size_t step, const int32_t *k, int n, uint8_t *o) {
    int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
    for (int i = 0; i < n; i++, p += step) {
        s0 += p[0] * k[i];
        s1 += p[1] * k[i];
        s2 += p[2] * k[i];
    }
    o[0] = clip8(s0);
    o[1] = clip8(s1);
    o[2] = clip8(s2);
}

/* Python's int(round(x / 2.0)) for x >= 0: half to even. */
static int64_t half_round_even(int64_t x) {
    int64_t q = x / 2;
    return (x % 2 == 0 || q % 2 == 0) ? q : q + 1;
}

/* The resized size (64-bit: a 1 x 2^20 image at S = 4096 passes 2^31 along its length). */
static void resized(int64_t w, int64_t h, int S, int64_t *nw, int64_t *nh) {
    if (w <= h) {
        *nw = S;
        *nh = (int64_t)S * h / w;
    } else {
        *nh = S;
        *nw = (int64_t)S * w / h;
    }
}

void image_fit_size(int w, int h, int S, int *ow, int *oh) {
    int64_t nw, nh;
    resized(w, h, S, &nw, &nh);
    *ow = (int)(nw < 2 * (int64_t)S ? nw : 2 * (int64_t)S);
    *oh = (int)(nh < 2 * (int64_t)S ? nh : 2 * (int64_t)S);
}

void image_fit(const ImageRGB *in, int S, ImageRGB *out) {
    const int64_t w = in->w, h = in->h;
    int64_t nw, nh;
    resized(w, h, S, &nw, &nh);
    int OW, OH;
    image_fit_size(in->w, in->h, S, &OW, &OH);
    const int64_t left = half_round_even(nw - OW), top = half_round_even(nh - OH);
    uint8_t *dst = mallocCheck((size_t)OW * (size_t)OH * 3);
    out->w = OW;
    out->h = OH;
    out->rgb = dst;
    /* The input rows [y0, y1) the kept output rows read. */
    int *vb = NULL;
    int32_t *vkk = NULL;
    int vks = 0;
    int64_t y0 = top, y1 = top + OH;
    if (nh != h) {
        vks = fit_coeffs(h, nh, top, OH, &vb, &vkk);
        y0 = h;
        y1 = 0;
        for (int yo = 0; yo < OH; yo++) {
            if (vb[2 * yo] < y0) y0 = vb[2 * yo];
            if (vb[2 * yo] + vb[2 * yo + 1] > y1) y1 = vb[2 * yo] + vb[2 * yo + 1];
        }
        if (y1 < y0) y1 = y0;
    }
    /* Horizontal pass over rows [y0, y1), the OW kept columns only, into tmp; without one,
     * the input itself from column `left`. */
    const uint8_t *src = in->rgb;
    int64_t src_w = w, src_y0 = 0, cols_off = 0;
    uint8_t *tmp = NULL;
    if (nw != w) {
        int *b;
        int32_t *kk;
        const int ks = fit_coeffs(w, nw, left, OW, &b, &kk);
        tmp = mallocCheck((size_t)(y1 - y0) * (size_t)OW * 3 + 1);
        for (int64_t y = y0; y < y1; y++) {
            const uint8_t *row = in->rgb + (size_t)y * (size_t)w * 3;
            for (int xo = 0; xo < OW; xo++)
                tap(row + (size_t)b[2 * xo] * 3, 3, kk + (size_t)xo * (size_t)ks, b[2 * xo + 1],
                    tmp + ((size_t)(y - y0) * (size_t)OW + (size_t)xo) * 3);
        }
        free(b);
        free(kk);
        src = tmp;
        src_w = OW;
        src_y0 = y0;
    } else {
        cols_off = left;
    }
    if (nh != h) {
        for (int yo = 0; yo < OH; yo++) {
            const int64_t ymin = vb[2 * yo];
            const int32_t *k = vkk + (size_t)yo * (size_t)vks;
            for (int xo = 0; xo < OW; xo++)
                tap(src + ((size_t)(ymin - src_y0) * (size_t)src_w + (size_t)(xo + cols_off)) * 3, (size_t)src_w * 3, k,
                    vb[2 * yo + 1], dst + ((size_t)yo * (size_t)OW + (size_t)xo) * 3);
        }
    } else {
        for (int y = 0; y < OH; y++)
            memcpy(dst + (size_t)y * (size_t)OW * 3,
                   src + ((size_t)(y + top - src_y0) * (size_t)src_w + (size_t)cols_off) * 3, (size_t)OW * 3);
    }
    free(vb);
    free(vkk);
    free(tmp);
}
