/* SPDX-License-Identifier: BSD-3-Clause */
/* crops_dump.c - prints what src/data/crops.c and src/data/resample.c compute, for tests/crops_torch.py
 * to recompute with torchvision (tests/test_crops_torch.sh).
 *
 * usage: crops_dump boxes N SEED [--wrong_order]
 *          N RandomResizedCrop boxes of random image sizes (1x1 to 500x300, very elongated ones,
 *          scale ranges 0.08-1, 0.35-1, 1-1 and 0.5-0.5), each with the draws it took, floats
 *          in C's %a so that nothing is lost; --wrong_order prints the two offset draws in the
 *          wrong order (left before top), a mistake the check must catch
 *        crops_dump sizes N SEED
 *          N cases of resize_shorter and of centre_crop
 *        crops_dump pixels DIR N SEED
 *          N random RGB images DIR/I.src and the windows resample_box makes of them, DIR/I.out,
 *          listed in DIR/index.txt: random boxes and output sizes, RandomResizedCrop boxes,
 *          and Resize(R) + CenterCrop(V)
 *        crops_dump padcrop DIR N SEED
 *          N random RGB images DIR/I.src of 4x4 to 40x40 pixels and transform.c's CIFAR view of
 *          each with reflected padding (1 to 4 pixels, below the size), a random offset within it
 *          and a random flip, DIR/I.out as float32 pixel values (an identity table), listed in
 *          DIR/index.txt as "S PAD OX OY FLIP" */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/crops.h"
#include "data/transform.h"
#include "data/resample.h"
#include "base/rng.h"
#include "base/util.h"

/* An integer in [lo, hi]. */
static int between(Rng *r, int lo, int hi) {
    return lo + (int)rng_below(r, (uint32_t)(hi - lo + 1));
}

/* A random image size: mostly up to 500 x 300, a quarter very elongated either way, and 1 x 1. */
static void random_size(Rng *r, int *w, int *h) {
    const int kind = (int)rng_below(r, 8);
    if (kind == 0) {
        *w = between(r, 1, 4);
        *h = between(r, 100, 3000);
    } else if (kind == 1) {
        *w = between(r, 100, 3000);
        *h = between(r, 1, 4);
    } else if (kind == 2) {
        *w = *h = 1;
    } else {
        *w = between(r, 1, 500);
        *h = between(r, 1, 300);
    }
}

static int boxes(int n, uint64_t seed, int wrong_order) {
    static const double ranges[4][2] = {{0.08, 1.0}, {0.35, 1.0}, {1.0, 1.0}, {0.5, 0.5}};
    printf("bounds %a %a\n", (double)logf((float)RRC_RATIO_MIN), (double)logf((float)RRC_RATIO_MAX));
    for (int i = 0; i < n; i++) {
        Rng r;
        rng_init(&r, seed, (uint64_t)i, 1);
        int w, h;
        random_size(&r, &w, &h);
        const double *sc = ranges[i % 4];
        RrcDraws d;
        const PixelBox b = rrc_box(&r, w, h, sc[0], sc[1], &d);
        const int drawn = d.tries <= RRC_TRIES ? d.tries : RRC_TRIES;
        /* box W H LO HI TRIES then per try scale log_ratio exp(log_ratio), then the offsets
         * drawn (none after the fallback), then the box as top left h w */
        printf("box %d %d %a %a %d", w, h, sc[0], sc[1], d.tries);
        for (int t = 0; t < drawn; t++)
            printf(" %a %a %a", (double)d.scale[t], (double)d.log_ratio[t], (double)expf(d.log_ratio[t]));
        if (d.tries <= RRC_TRIES) printf(" %d %d", wrong_order ? d.left : d.top, wrong_order ? d.top : d.left);
        printf(" = %" PRId64 " %" PRId64 " %d %d\n", b.y, b.x, b.h, b.w);
    }
    return 0;
}

static int sizes(int n, uint64_t seed) {
    for (int i = 0; i < n; i++) {
        Rng r;
        rng_init(&r, seed, (uint64_t)i, 2);
        int w, h, size = between(&r, 1, 1024), ow, oh;
        random_size(&r, &w, &h);
        if (i % 50 == 0) w = between(&r, 1, 3), h = between(&r, 500000, 2000000);   /* long products */
        resize_shorter(w, h, size, &ow, &oh);
        printf("resize %d %d %d = %d %d\n", w, h, size, ow, oh);
        random_size(&r, &w, &h);
        const int crop = between(&r, 1, w < h ? w : h);
        const PixelBox c = centre_crop(w, h, crop);
        printf("centre %d %d %d = %" PRId64 " %" PRId64 " %d %d\n", w, h, crop, c.y, c.x, c.h, c.w);
    }
    return 0;
}

static void write_file(const char *dir, int i, const char *ext, const uint8_t *p, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%d.%s", dir, i, ext);
    FILE *f = fopenCheck(path, "wb");
    CHECK(fwrite(p, 1, n, f) == n);
    CHECK(fclose(f) == 0);
}

static int pixels(const char *dir, int n, uint64_t seed) {
    char path[4096];
    snprintf(path, sizeof path, "%s/index.txt", dir);
    FILE *idx = fopenCheck(path, "w");
    ResampleScratch s = {0};
    for (int i = 0; i < n; i++) {
        Rng r;
        rng_init(&r, seed, (uint64_t)i, 3);
        int w, h;
        if (rng_below(&r, 6) == 0) {   /* elongated */
            w = between(&r, 1, 3);
            h = between(&r, 50, 600);
            if (rng_below(&r, 2)) { const int t = w; w = h; h = t; }
        } else {
            w = between(&r, 1, 300);
            h = between(&r, 1, 200);
        }
        uint8_t *src = mallocCheck((size_t)w * h * 3);
        for (size_t k = 0; k < (size_t)w * h * 3; k++) src[k] = (uint8_t)(rng_u64(&r) >> 56);
        /* kind 0: any box, any output size (shrinking, enlarging, or the box's own size on one
         * side or both), any window; kind 1: a RandomResizedCrop box to S x S; kind 2: Resize(R)
         * then CenterCrop(V) */
        const int kind = i % 3;
        PixelBox box = {0, 0, w, h}, win;
        int out_w, out_h, rsz = 0, crop = 0;
        if (kind == 0) {
            box.w = between(&r, 1, w);
            box.h = between(&r, 1, h);
            box.x = between(&r, 0, w - box.w);
            box.y = between(&r, 0, h - box.h);
            const int same = (int)rng_below(&r, 4);   /* 1: width kept, 2: height, 3: both */
            out_w = same & 1 ? box.w : between(&r, 1, 2 * box.w + 8);
            out_h = same & 2 ? box.h : between(&r, 1, 2 * box.h + 8);
            win.w = between(&r, 1, out_w);
            win.h = between(&r, 1, out_h);
            win.x = between(&r, 0, out_w - win.w);
            win.y = between(&r, 0, out_h - win.h);
        } else if (kind == 1) {
            box = rrc_box(&r, w, h, 0.08, 1.0, NULL);
            out_w = out_h = between(&r, 1, 96);
            win = (PixelBox){0, 0, out_w, out_h};
        } else {
            rsz = between(&r, 1, 120);
            crop = between(&r, 1, rsz);
            resize_shorter(w, h, rsz, &out_w, &out_h);
            win = centre_crop(out_w, out_h, crop);
        }
        uint8_t *dst = mallocCheck((size_t)win.w * win.h * 3);
        resample_box(src, w, h, box, out_w, out_h, win, dst, &s);
        write_file(dir, i, "src", src, (size_t)w * h * 3);
        write_file(dir, i, "out", dst, (size_t)win.w * win.h * 3);
        /* I KIND W H, box x y w h, output w h, window x y w h, R V (kind 2) */
        fprintf(idx, "%d %d %d %d %" PRId64 " %" PRId64 " %d %d %d %d %" PRId64 " %" PRId64 " %d %d %d %d\n", i, kind, w, h,
                box.x, box.y, box.w, box.h, out_w, out_h, win.x, win.y, win.w, win.h, rsz, crop);
        free(src);
        free(dst);
    }
    resample_scratch_free(&s);
    CHECK(fclose(idx) == 0);
    return 0;
}

static int padcrop(const char *dir, int n, uint64_t seed) {
    Rng r;
    rng_init(&r, seed, 0, 3);
    float lut[3 * 256];
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++) lut[c * 256 + v] = (float)v;
    char path[4096];
    snprintf(path, sizeof path, "%s/index.txt", dir);
    FILE *idx = fopen(path, "w");
    CHECK(idx != NULL);
    for (int i = 0; i < n; i++) {
        const int S = between(&r, 4, 40), maxpad = S - 1 < 4 ? S - 1 : 4, pad = between(&r, 1, maxpad);
        const int ox = between(&r, -pad, pad), oy = between(&r, -pad, pad), flip = (int)rng_below(&r, 2);
        uint8_t *src = mallocCheck((size_t)S * S * 3);
        float *out = mallocCheck((size_t)S * S * 3 * sizeof *out);
        for (size_t k = 0; k < (size_t)S * S * 3; k++) src[k] = (uint8_t)rng_below(&r, 256);
        const Transform t = {TF_PAD_CROP, S, 0, lut, 1};
        const ImageView v = {src, S, S, (size_t)S * 3};
        TransformScratch sc = {0};
        transform_apply(&t, &v, ox, oy, flip, (PixelBox){0, 0, S, S}, out, &sc);
        transform_scratch_free(&sc);
        write_file(dir, i, "src", src, (size_t)S * S * 3);
        write_file(dir, i, "out", (const uint8_t *)out, (size_t)S * S * 3 * sizeof *out);
        fprintf(idx, "%d %d %d %d %d\n", S, pad, ox, oy, flip);
        free(src);
        free(out);
    }
    fclose(idx);
    return 0;
}

int main(int argc, char **argv) {
    g_progname = "crops_dump";
    if (argc >= 4 && !strcmp(argv[1], "boxes"))
        return boxes(atoi(argv[2]), strtoull(argv[3], NULL, 10), argc > 4 && !strcmp(argv[4], "--wrong_order"));
    if (argc == 4 && !strcmp(argv[1], "sizes")) return sizes(atoi(argv[2]), strtoull(argv[3], NULL, 10));
    if (argc == 5 && !strcmp(argv[1], "pixels")) return pixels(argv[2], atoi(argv[3]), strtoull(argv[4], NULL, 10));
    if (argc == 5 && !strcmp(argv[1], "padcrop")) return padcrop(argv[2], atoi(argv[3]), strtoull(argv[4], NULL, 10));
    die_code(2, "usage: crops_dump boxes N SEED [--wrong_order] | sizes N SEED | pixels DIR N SEED | padcrop DIR N SEED");
}
