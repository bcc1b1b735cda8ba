/* SPDX-License-Identifier: BSD-3-Clause */
/* synth.c - see synth.h.
 *
 * Each image is a coverage map a(x, y) in [0, 1] (the shape or texture, anti-aliased from a
 * signed distance so that small shapes stay recognisable) blended between a background
 * gradient and a foreground colour, then noise. Geometry is expressed in units of a 32-pixel
 * image so other sizes look the same, only finer. */
#include "synth.h"

#include <math.h>
#include <string.h>

#include "base/rng.h"
#include "base/util.h"

const char *const synth_class_names[SYNTH_NUM_CLASSES] = {
    "circle", "square", "triangle", "cross", "ring",
    "horizontal_stripes", "vertical_stripes", "checkerboard", "diagonal_stripes", "dots",
};

enum { C_CIRCLE, C_SQUARE, C_TRIANGLE, C_CROSS, C_RING, C_HSTRIPES, C_VSTRIPES, C_CHECKER, C_DIAG, C_DOTS };

#define PI_F 3.14159265358979f
#define MAX_DOTS 12

typedef struct {
    int cls;
    float cx, cy, r, r2, rot, cr, sr;   /* centre, sizes, rotation (cos, sin) */
    float period, phase;                /* textures */
    int region;                         /* textures: 0 disc, 1 square, 2 whole image */
    int ndots;
    float dx[MAX_DOTS], dy[MAX_DOTS], dr[MAX_DOTS];
} Shape;

static float uni(Rng *r, float lo, float hi) { return lo + (hi - lo) * rng_uniform(r); }
static float clamp01(float v) { return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v; }

/* Signed distance to an axis-aligned box of half-sizes (hx, hy) around the origin (inside < 0;
 * the max-norm approximation outside is fine for one pixel of anti-aliasing). */
static float box_sd(float x, float y, float hx, float hy) {
    float qx = fabsf(x) - hx, qy = fabsf(y) - hy;
    return qx > qy ? qx : qy;
}

static void make_shape(Shape *s, int cls, Rng *r) {
    memset(s, 0, sizeof *s);
    s->cls = cls;
    s->cx = uni(r, 13.0f, 19.0f);
    s->cy = uni(r, 13.0f, 19.0f);
    s->rot = uni(r, 0.0f, 2.0f * PI_F);
    switch (cls) {
    case C_CIRCLE:   s->r = uni(r, 7.0f, 11.5f); break;
    case C_SQUARE:   s->r = uni(r, 7.0f, 10.5f); s->rot = uni(r, -0.35f, 0.35f); break;   /* near axis-aligned */
    case C_TRIANGLE: s->r = uni(r, 10.0f, 15.0f); break;                         /* circumradius */
    case C_CROSS:    s->r = uni(r, 7.0f, 12.0f); s->r2 = uni(r, 1.8f, 3.0f); break;  /* arm, half-width */
    case C_RING:     s->r = uni(r, 6.0f, 11.0f); s->r2 = uni(r, 1.2f, 2.5f); break;  /* radius, half-width */
    case C_HSTRIPES: case C_VSTRIPES: case C_DIAG: case C_CHECKER: {
        /* Stripe classes are told apart by orientation, so only a little jitter. */
        float base = cls == C_HSTRIPES ? 0.0f : cls == C_VSTRIPES ? 0.5f * PI_F
                   : cls == C_DIAG ? (rng_below(r, 2) ? 0.25f : 0.75f) * PI_F : 0.0f;
        s->rot = base + uni(r, -0.2f, 0.2f);
        s->period = cls == C_CHECKER ? uni(r, 5.0f, 10.0f) : uni(r, 4.0f, 8.0f);
        s->phase = uni(r, 0.0f, 2.0f * PI_F);
        s->region = (int)rng_below(r, 3);
        s->r = uni(r, 8.0f, 13.0f);
        break;
    }
    case C_DOTS:
        s->ndots = 6 + (int)rng_below(r, MAX_DOTS - 5);
        for (int k = 0; k < s->ndots; k++) {
            s->dx[k] = uni(r, 4.0f, 28.0f);
            s->dy[k] = uni(r, 4.0f, 28.0f);
            s->dr[k] = uni(r, 1.2f, 2.0f);
        }
        break;
    }
    s->cr = cosf(s->rot);
    s->sr = sinf(s->rot);
}

/* Coverage of the point (u, v) (units of a 32-pixel image); ppu = pixels per unit. */
static float coverage(const Shape *s, float u, float v, float ppu) {
    float x = u - s->cx, y = v - s->cy;
    float xr = s->cr * x + s->sr * y, yr = -s->sr * x + s->cr * y;   /* shape frame */
    float d, rad = sqrtf(x * x + y * y);
    switch (s->cls) {
    case C_CIRCLE: d = rad - s->r; break;
    case C_SQUARE: d = box_sd(xr, yr, s->r, s->r); break;
    case C_TRIANGLE: {
        d = -1e9f;
        for (int k = 0; k < 3; k++) {                     /* three edges at inradius r/2 */
            float a = s->rot + (float)k * (2.0f * PI_F / 3.0f);
            float e = cosf(a) * x + sinf(a) * y - 0.5f * s->r;
            if (e > d) d = e;
        }
        break;
    }
    case C_CROSS: {
        float a = box_sd(xr, yr, s->r, s->r2), b = box_sd(xr, yr, s->r2, s->r);
        d = a < b ? a : b;
        break;
    }
    case C_RING: d = fabsf(rad - s->r) - s->r2; break;
    case C_DOTS:
        d = 1e9f;
        for (int k = 0; k < s->ndots; k++) {
            float ex = u - s->dx[k], ey = v - s->dy[k];
            float e = sqrtf(ex * ex + ey * ey) - s->dr[k];
            if (e < d) d = e;
        }
        break;
    default: {
        /* Textures: a pattern inside a region (disc, square, or the whole image). */
        float m = s->region == 0 ? clamp01(0.5f - (rad - s->r) * ppu)
                : s->region == 1 ? clamp01(0.5f - box_sd(x, y, s->r * 0.85f, s->r * 0.85f) * ppu) : 1.0f;
        float w = 2.0f * PI_F / s->period, p;
        if (s->cls == C_CHECKER) p = sinf(w * xr + s->phase) * sinf(w * yr + 0.5f * s->phase);
        else p = sinf(w * yr + s->phase);   /* rot 0: stripes along x, i.e. horizontal */
        return m * clamp01(0.5f + 2.0f * p);
    }
    }
    return clamp01(0.5f - d * ppu);
}

int synth_sample(uint64_t seed, int split_id, uint64_t index, int size, uint8_t *img) {
    CHECK(size >= 8);
    Rng r;
    rng_init(&r, seed, (uint64_t)split_id, index);
    int cls = (int)rng_below(&r, SYNTH_NUM_CLASSES);
    Shape s;
    make_shape(&s, cls, &r);

    /* Colours: background gradient between two nearby colours, foreground far enough from the
     * background that the shape is visible, but otherwise random so colour carries no label. */
    float bg0[3], bg1[3], fg[3];
    for (;;) {
        float diff = 0.0f;
        for (int c = 0; c < 3; c++) {
            bg0[c] = uni(&r, 0.0f, 255.0f);
            fg[c] = uni(&r, 0.0f, 255.0f);
            diff += fabsf(fg[c] - bg0[c]);
        }
        if (diff >= 180.0f) break;
    }
    for (int c = 0; c < 3; c++) bg1[c] = bg0[c] + uni(&r, -50.0f, 50.0f);
    float ga = uni(&r, 0.0f, 2.0f * PI_F), gx = cosf(ga), gy = sinf(ga);
    float sigma = uni(&r, 2.0f, 8.0f);

    float ppu = (float)size / 32.0f;
    for (int yy = 0; yy < size; yy++)
        for (int xx = 0; xx < size; xx++) {
            float u = ((float)xx + 0.5f) / ppu, v = ((float)yy + 0.5f) / ppu;
            float a = coverage(&s, u, v, ppu);
            float t = clamp01(0.5f + ((u - 16.0f) * gx + (v - 16.0f) * gy) / 32.0f);
            uint8_t *px = img + ((size_t)yy * (size_t)size + (size_t)xx) * 3;
            for (int c = 0; c < 3; c++) {
                float bg = bg0[c] + (bg1[c] - bg0[c]) * t;
                float val = bg + (fg[c] - bg) * a + sigma * rng_normal(&r);
                val = val < 0.0f ? 0.0f : val > 255.0f ? 255.0f : val;
                px[c] = (uint8_t)lrintf(val);
            }
        }
    return cls;
}
