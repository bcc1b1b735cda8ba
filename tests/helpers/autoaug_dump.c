/* SPDX-License-Identifier: BSD-3-Clause */
/* autoaug_dump.c - writes what src/data/pil_ops.c and src/data/autoaug.c make of random images,
 * for tests/helpers/autoaug_torch.py to recompute with torchvision (tests/test_autoaug_torch.sh).
 *
 * usage: autoaug_dump ops DIR N SEED [--wrong_sign]
 *          N random images (1x1 to 48x40: noise, gradients of a narrow range, few values,
 *          constant), each through every op of pil_ops.h at a random magnitude (the rotations
 *          0, +-90, 180, 270 among them) and through the hue of ColorJitter: DIR/index.txt lists
 *          "K W H OP MAGNITUDE" (OP torchvision's name or Hue, the magnitude in %a), DIR/K.src
 *          and DIR/K.out the images before and after; --wrong_sign applies the negated
 *          magnitude of the signed ops, a mistake the check must catch
 *        autoaug_dump tensor_ops DIR N SEED
 *          as ops, through tensor_ops.h (AugMix's ops on a tensor: bilinear geometry), no hue
 *        autoaug_dump policy DIR N SEED POLICY RA_MAGNITUDE RA_NUM_OPS B,C,S,H
 *          N random images through autoaug_apply: index.txt lists "K W H" then the draws
 *          ("i:BOUND:V", "f:WHICH:V", "p:4:V", AugMix's Dirichlet weights "d:GROUP:V") then
 *          "|" and the ops with their magnitudes; for augmix RA_MAGNITUDE is the severity
 *        autoaug_dump dirichlet N SEED
 *          N draws of AugMix's Beta(1, 1) and Dirichlet(1, 1, 1) weights, one draw a line
 *        autoaug_dump tables
 *          every magnitude of every policy's ops at 32x24 and 128x128 images, for the tables' check
 *        autoaug_dump loader DATA OUT POLICY B,C,S,H
 *          the first training batch of epoch 1 the loader makes of the 32x32 shards in DATA with
 *          --crop_padding 4 and the policy: OUT/index.txt lists "K OX OY FLIP" and the sample's
 *          draws as above (the draws do not depend on the pixels: they are taken again from the
 *          sample's stream on a scratch image), OUT/K.src the stored image, OUT/K.out the batch's
 *          float32 pixels; OUT/norm.txt the normalisation's mean and std; the plan (offsets,
 *          flip) from a second loader without the policy, whose draws are the same */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/augmix.h"
#include "data/autoaug.h"
#include "data/dataloader.h"
#include "data/pil_ops.h"
#include "data/tensor_ops.h"
#include "base/rng.h"
#include "base/util.h"

static int between(Rng *r, int lo, int hi) { return lo + (int)rng_below(r, (uint32_t)(hi - lo + 1)); }

/* A random test image of one of four kinds. */
static uint8_t *random_image(Rng *r, int *w, int *h) {
    *w = between(r, 1, 48);
    *h = between(r, 1, 40);
    if (rng_below(r, 6) == 0) *w = *h = between(r, 3, 40);   /* squares: Rotate's transposes */
    const size_t n = (size_t)*w * *h * 3;
    uint8_t *p = mallocCheck(n);
    const int kind = (int)rng_below(r, 4), lo = between(r, 0, 200), span = between(r, 1, 55);
    for (size_t i = 0; i < n; i++) {
        const size_t px = i / 3, x = px % (size_t)*w, y = px / (size_t)*w;
        if (kind == 0) p[i] = (uint8_t)rng_below(r, 256);
        else if (kind == 1) p[i] = (uint8_t)(lo + (int)((x * 7 + y * 3 + (i % 3) * 11) % (size_t)span));
        else if (kind == 2) p[i] = rng_below(r, 3) == 0 ? 255 : (uint8_t)lo;
        else p[i] = (uint8_t)(lo + (int)(i % 3));
    }
    return p;
}

static void write_file(const char *dir, int k, const char *ext, const uint8_t *p, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%d.%s", dir, k, ext);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) die("%s: cannot write", path);
}

/* A magnitude for op, over and past the ranges the policies use. */
static double random_magnitude(Rng *r, int op, int w, int h) {
    const double u = 2.0 * rng_uniform(r) - 1.0;
    switch (op) {
    case PIL_SHEAR_X:
    case PIL_SHEAR_Y: return u * 0.99;
    case PIL_TRANSLATE_X: return u * (w + 4);
    case PIL_TRANSLATE_Y: return u * (h + 4);
    case PIL_ROTATE: {
        static const double exact[] = {0.0, 90.0, -90.0, 180.0, 270.0, -0.0, 360.0};
        return rng_below(r, 3) == 0 ? exact[rng_below(r, 7)] : u * 180.0;
    }
    case PIL_POSTERIZE: return between(r, 0, 8);   /* 0: AugMix's severity 10 (Pillow's path never asks) */
    case PIL_SOLARIZE: return rng_below(r, 2) ? (double)between(r, 0, 256) : 256.0 * rng_uniform(r);
    case PIL_NUM_OPS: return u * 0.5;   /* hue */
    default: return rng_below(r, 8) == 0 ? (double)between(r, -1, 1) : u;   /* enhancements: factor 1 + u */
    }
}

static int ops(const char *dir, int n, uint64_t seed, int wrong_sign, int tensor) {
    char path[4096];
    snprintf(path, sizeof path, "%s/index.txt", dir);
    FILE *idx = fopen(path, "w");
    if (!idx) die("%s: cannot write", path);
    int k = 0;
    for (int i = 0; i < n; i++) {
        Rng r;
        rng_init(&r, seed, (uint64_t)i, 2);
        int w, h;
        uint8_t *src = random_image(&r, &w, &h);
        const size_t bytes = (size_t)w * h * 3;
        uint8_t *img = mallocCheck(bytes), *tmp = mallocCheck(bytes);
        for (int op = 0; op <= PIL_NUM_OPS - tensor; op++, k++) {   /* PIL_NUM_OPS: the hue */
            double mag = random_magnitude(&r, op, w, h);
            if (op == PIL_POSTERIZE && !tensor && mag == 0) mag = 1;
            if (op == PIL_SOLARIZE && tensor && mag > 255) mag = 255;   /* F_t.solarize refuses more */
            const int flip = wrong_sign && op >= PIL_SHEAR_X && op <= PIL_ROTATE;
            memcpy(img, src, bytes);
            if (op == PIL_NUM_OPS) pil_hue(img, w, h, mag);
            else if (tensor) tensor_apply_op(op, flip ? -mag : mag, img, w, h, tmp);
            else pil_apply_op(op, flip ? -mag : mag, img, w, h, tmp);
            fprintf(idx, "%d %d %d %s %a\n", k, w, h, op == PIL_NUM_OPS ? "Hue" : pil_op_name(op), mag);
            write_file(dir, k, "src", src, bytes);
            write_file(dir, k, "out", img, bytes);
        }
        free(src);
        free(img);
        free(tmp);
    }
    return fclose(idx) == 0 ? 0 : 1;
}

static int policy(const char *dir, int n, uint64_t seed, const char *name, int mag, int nops, const char *jitter) {
    PixelAug a = {autoaug_policy(name), mag, nops, {0, 0, 0, 0}, mag};
    if (a.policy < 0 || sscanf(jitter, "%lf,%lf,%lf,%lf", &a.jitter[0], &a.jitter[1], &a.jitter[2], &a.jitter[3]) != 4)
        die("autoaug_dump: bad policy or jitter");
    char path[4096];
    snprintf(path, sizeof path, "%s/index.txt", dir);
    FILE *idx = fopen(path, "w");
    if (!idx) die("%s: cannot write", path);
    for (int i = 0; i < n; i++) {
        Rng r;
        rng_init(&r, seed, (uint64_t)i, 3);
        int w, h;
        uint8_t *src = random_image(&r, &w, &h);
        const size_t bytes = (size_t)w * h * 3;
        uint8_t *img = mallocCheck(bytes), *tmp = mallocCheck(bytes);
        memcpy(img, src, bytes);
        AutoAugTrace t;
        autoaug_apply(&a, &r, img, w, h, tmp, &t);
        fprintf(idx, "%d %d %d", i, w, h);
        for (int d = 0; d < t.n; d++) fprintf(idx, " %c:%d:%a", t.kind[d], t.bound[d], t.value[d]);
        fprintf(idx, " |");
        for (int d = 0; d < t.nops; d++) fprintf(idx, " %s:%a", pil_op_name(t.op[d]), t.mag[d]);
        fprintf(idx, "\n");
        write_file(dir, i, "src", src, bytes);
        write_file(dir, i, "out", img, bytes);
        free(src);
        free(img);
        free(tmp);
    }
    return fclose(idx) == 0 ? 0 : 1;
}

static int tables(void) {
    static const int sizes[2][2] = {{32, 24}, {128, 128}};
    for (int p = AA_IMAGENET; p <= AA_AUGMIX; p += (p == AA_IMAGENET ? AA_RA - AA_IMAGENET : 1))
        for (int s = 0; s < 2; s++)
            for (int op = PIL_SHEAR_X; op <= PIL_SOLARIZE; op++) {
                const int bins = p == AA_IMAGENET || p == AA_AUGMIX ? 10 : 31;
                printf("%s %d %d %s", p == AA_IMAGENET ? "aa" : p == AA_RA ? "ra" : p == AA_AUGMIX ? "augmix" : "ta_wide",
                       sizes[s][0], sizes[s][1], pil_op_name(op));
                for (int b = 0; b < bins; b++) printf(" %a", autoaug_magnitude(p, op, b, bins, sizes[s][0], sizes[s][1]));
                printf("\n");
            }
    return 0;
}

#define PIXAUG_SALT 0x7069786175673031ULL   /* dataloader.c's: a sample's pixel augmentations */

static int loader(const char *data, const char *out, const char *name, const char *jitter, int reflect) {
    DataLoaderOptions o = {.data_dir = data, .split = "train", .rank = 0, .world_size = 1, .batch_size = 64,
                           .augment = 1, .crop_pad = 4, .shuffle = 1, .drop_last = 1, .seed = 5, .num_classes = 10,
                           .image_size = 32, .prefetch = 1, .workers = 2, .ra_magnitude = 9, .ra_num_ops = 2};
    o.crop_pad_reflect = reflect;
    DataLoaderOptions plain = o;
    o.auto_augment = autoaug_policy(name);
    if (o.auto_augment < 0 || sscanf(jitter, "%lf,%lf,%lf,%lf", &o.color_jitter[0], &o.color_jitter[1],
                                     &o.color_jitter[2], &o.color_jitter[3]) != 4)
        die("autoaug_dump: bad policy or jitter");
    char err[512];
    DataLoader *dl = dataloader_open(&o, err, sizeof err), *pl = dataloader_open(&plain, err, sizeof err);
    if (!dl || !pl) die("%s", err);
    const int S = 32, B = 64;
    float *x = mallocCheck((size_t)B * S * S * 3 * sizeof(float));
    int labels[64];
    SamplePlan plan[64];
    dataloader_start_epoch(dl, 1, 0);
    dataloader_start_epoch(pl, 1, 0);
    if (dataloader_next(dl, x, labels) != B || dataloader_next_plan(pl, plan, labels) != B) die("autoaug_dump: short batch");
    const uint8_t *images = dataloader_images(pl);
    CHECK(images != NULL && dataloader_images(dl) == NULL);
    char path[4096];
    float mean[3], std[3];
    dataloader_norm(pl, mean, std);
    snprintf(path, sizeof path, "%s/norm.txt", out);
    FILE *f = fopen(path, "w");
    if (!f) die("%s: cannot write", path);
    fprintf(f, "%a %a %a %a %a %a\n", mean[0], mean[1], mean[2], std[0], std[1], std[2]);
    fclose(f);
    snprintf(path, sizeof path, "%s/index.txt", out);
    FILE *idx = fopen(path, "w");
    if (!idx) die("%s: cannot write", path);
    PixelAug a = {o.auto_augment, o.ra_magnitude, o.ra_num_ops,
                  {o.color_jitter[0], o.color_jitter[1], o.color_jitter[2], o.color_jitter[3]}, 3};
    uint8_t scratch[32 * 32 * 3], tmp[32 * 32 * 3];
    for (int i = 0; i < B; i++) {
        Rng r;
        rng_init(&r, o.seed ^ PIXAUG_SALT, (uint64_t)1 << 32, (uint64_t)i);
        memset(scratch, 0, sizeof scratch);
        AutoAugTrace t;
        autoaug_apply(&a, &r, scratch, S, S, tmp, &t);
        fprintf(idx, "%d %d %d %d", i, plan[i].ox, plan[i].oy, plan[i].flip);
        for (int d = 0; d < t.n; d++) fprintf(idx, " %c:%d:%a", t.kind[d], t.bound[d], t.value[d]);
        fprintf(idx, " |\n");
        write_file(out, i, "src", images + (size_t)plan[i].index * S * S * 3, (size_t)S * S * 3);
        write_file(out, i, "out", (const uint8_t *)(x + (size_t)i * S * S * 3), (size_t)S * S * 3 * sizeof(float));
    }
    fclose(idx);
    free(x);
    dataloader_free(dl);
    dataloader_free(pl);
    return 0;
}

static int dirichlet(int n, uint64_t seed) {
    Rng r;
    rng_init(&r, seed, 4, 0);
    for (int i = 0; i < n; i++) {
        float m[2], w[AUGMIX_WIDTH];
        augmix_dirichlet(&r, 2, m);
        augmix_dirichlet(&r, AUGMIX_WIDTH, w);
        printf("%a %a %a %a %a\n", m[0], m[1], w[0], w[1], w[2]);
    }
    return 0;
}

int main(int argc, char **argv) {
    if ((argc == 6 || (argc == 7 && !strcmp(argv[6], "reflect"))) && !strcmp(argv[1], "loader"))
        return loader(argv[2], argv[3], argv[4], argv[5], argc == 7);
    if (argc >= 5 && !strcmp(argv[1], "ops"))
        return ops(argv[2], atoi(argv[3]), strtoull(argv[4], NULL, 10), argc > 5 && !strcmp(argv[5], "--wrong_sign"), 0);
    if (argc == 5 && !strcmp(argv[1], "tensor_ops")) return ops(argv[2], atoi(argv[3]), strtoull(argv[4], NULL, 10), 0, 1);
    if (argc == 4 && !strcmp(argv[1], "dirichlet")) return dirichlet(atoi(argv[2]), strtoull(argv[3], NULL, 10));
    if (argc == 9 && !strcmp(argv[1], "policy"))
        return policy(argv[2], atoi(argv[3]), strtoull(argv[4], NULL, 10), argv[5], atoi(argv[6]), atoi(argv[7]), argv[8]);
    if (argc == 2 && !strcmp(argv[1], "tables")) return tables();
    fprintf(stderr, "usage: autoaug_dump ops DIR N SEED [--wrong_sign] | tensor_ops DIR N SEED | dirichlet N SEED | policy DIR N SEED POLICY MAG NUM_OPS B,C,S,H | tables | loader DATA OUT POLICY B,C,S,H [reflect]\n");
    return 2;
}
