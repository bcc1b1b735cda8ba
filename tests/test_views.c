/* SPDX-License-Identifier: BSD-3-Clause */
/* test_views.c - the loader's ImageNet-style views (transform.h) on raw and JPEG shards:
 * RandomResizedCrop batches are a function of (seed, epoch, rank, batch) alone (prefetch on or
 * off, one worker or three, a resume at any batch); the evaluation view is Resize + CenterCrop
 * of the stored image, pixel for pixel what crops.h and resample.h make of it; JPEG shards give
 * the batches of their decoded images, held in memory or streamed; a JPEG that does not decode
 * ends the run with one line naming its shard and sample. Writes its own shards. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/crops.h"
#include "data/dataloader.h"
#include "data/image.h"
#include "data/jpegs.h"
#include "data/resample.h"
#include "base/rng.h"
#include "data/shards.h"
#include "base/util.h"
#include "helpers/tmpdir_testutil.h"
#include "helpers/expect_testutil.h"

#define S 40          /* stored side (raw: S x S; JPEG: the shorter side) */
#define CROP 24
#define N 37          /* samples: batches of 8 leave a short last one */
#define B 8

static char g_tmp[256];

/* Smooth random images (JPEG keeps them close), one per global index. */
static void image_of(size_t g, int w, int h, uint8_t *img) {
    Rng r;
    rng_init(&r, 7, g, 0);
    const float a = rng_uniform(&r) * 6.0f, b = rng_uniform(&r) * 6.0f, c = rng_uniform(&r) * 255.0f;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int k = 0; k < 3; k++)
                img[((size_t)y * w + x) * 3 + k] =
                    (uint8_t)(127.5f + 120.0f * sinf(a * x / w + b * y / h + (float)k + c));
}

/* JPEG sample g's shape: the shorter side S, the longer up to 2S. */
static void shape_of(size_t g, int *w, int *h) {
    const int longer = S + (int)(g * 7 % (S + 1));
    if (g % 2) { *w = longer; *h = S; } else { *w = S; *h = longer; }
}

static ShardAttrs attrs(void) {
    ShardAttrs a = {.num_classes = 10, .has_norm = 1};
    for (int c = 0; c < 3; c++) { a.mean[c] = 0.5f; a.std[c] = 0.25f; }
    return a;
}

static void write_raw(const char *dir, const char *split) {
    char path[512], name[64], err[1024];
    shard_name(name, sizeof name, split, 0, 1);
    snprintf_check(path, sizeof path, "%s/%s", dir, name);
    ShardAttrs a = attrs();
    ShardWriter w;
    CHECK(shard_writer_open(&w, path, N, S, &a, err, sizeof err) == 0);
    uint8_t img[S * S * 3];
    for (size_t g = 0; g < N; g++) {
        image_of(g, S, S, img);
        int32_t lab = (int32_t)(g % 10);
        CHECK(shard_writer_append(&w, img, &lab, 1, err, sizeof err) == 0);
    }
    CHECK(shard_writer_close(&w, err, sizeof err) == 0);
}

/* Sample `garble` (if >= 0) gets bytes that are no JPEG. */
static void write_jpeg(const char *dir, const char *split, int nshards, long garble) {
    char path[512], name[64], err[1024];
    ShardAttrs a = attrs();
    size_t g = 0;
    for (int k = 0; k < nshards; k++) {
        const size_t count = N / nshards + (k < N % nshards);
        shard_name(name, sizeof name, split, k, nshards);
        snprintf_check(path, sizeof path, "%s/%s", dir, name);
        ShardWriter w;
        CHECK(shard_writer_open_jpeg(&w, path, count, S, &a, err, sizeof err) == 0);
        for (size_t i = 0; i < count; i++, g++) {
            int wd, ht;
            shape_of(g, &wd, &ht);
            uint8_t *img = mallocCheck((size_t)wd * ht * 3), *bytes;
            image_of(g, wd, ht, img);
            size_t len;
            CHECK(jpeg_encode_rgb(img, wd, ht, 95, &bytes, &len, err, sizeof err) == 0);
            if ((long)g == garble)
                for (size_t j = len / 3; j < len - 2; j++) bytes[j] = (uint8_t)(j * 131);
            uint64_t off[2] = {0, len};
            uint16_t sz[2] = {(uint16_t)ht, (uint16_t)wd};
            int32_t lab = (int32_t)(g % 10);
            CHECK(shard_writer_append_jpeg(&w, bytes, off, sz, &lab, 1, err, sizeof err) == 0);
            free(bytes);
            free(img);
        }
        CHECK(shard_writer_close(&w, err, sizeof err) == 0);
    }
}

static DataLoaderOptions opts(const char *dir, int train) {
    DataLoaderOptions o = {
        .data_dir = dir, .split = train ? "train" : "test", .rank = 0, .world_size = 1, .batch_size = B,
        .augment = train, .shuffle = train, .drop_last = 0, .seed = 42, .num_classes = 10, .image_size = S,
        .crop_size = train ? CROP : 0, .rrc_scale_lo = 0.08, .rrc_scale_hi = 1.0,
        .resize_size = train ? 0 : 30, .out_size = CROP, .workers = 1,
    };
    return o;
}

static DataLoader *must_open(const DataLoaderOptions *o) {
    char err[1024];
    DataLoader *dl = dataloader_open(o, err, sizeof err);
    if (!dl) {
        fprintf(stderr, "FAIL dataloader_open: %s\n", err);
        exit(1);
    }
    return dl;
}

#define PLANE ((size_t)CROP * CROP * 3)

/* Batches [start, end) of an epoch, concatenated; returns the images. */
static size_t epoch_batches(DataLoader *dl, int epoch, size_t start, float *xs, int *ls) {
    dataloader_start_epoch(dl, epoch, start);
    size_t got = 0;
    int n;
    while ((n = dataloader_next(dl, xs + got * PLANE, ls + got)) > 0) got += (size_t)n;
    return got;
}

/* The same epoch under other loader settings must give the same bits. */
static void check_same(const char *what, const DataLoaderOptions *a, const DataLoaderOptions *b, int epoch) {
    float *x1 = mallocCheck(N * PLANE * sizeof(float)), *x2 = mallocCheck(N * PLANE * sizeof(float));
    int l1[N], l2[N];
    DataLoader *d1 = must_open(a), *d2 = must_open(b);
    size_t n1 = epoch_batches(d1, epoch, 0, x1, l1), n2 = epoch_batches(d2, epoch, 0, x2, l2);
    EXPECT(n1 == N && n2 == N && !memcmp(x1, x2, N * PLANE * sizeof(float)) && !memcmp(l1, l2, sizeof l1),
           "%s: %zu and %zu images, the batches differ", what, n1, n2);
    dataloader_free(d1);
    dataloader_free(d2);
    free(x1);
    free(x2);
}

static void test_rrc_determinism(const char *dir, const char *kind) {
    char what[128];
    DataLoaderOptions a = opts(dir, 1), b = a;
    b.prefetch = 1;
    b.workers = 3;
    snprintf(what, sizeof what, "%s: prefetch and 3 workers", kind);
    check_same(what, &a, &b, 2);
    float *x1 = mallocCheck(N * PLANE * sizeof(float)), *x2 = mallocCheck(N * PLANE * sizeof(float));
    int l1[N], l2[N];
    /* resumed at batch 3: the same batches 3.. as the whole epoch */
    DataLoader *d = must_open(&a);
    size_t n1 = epoch_batches(d, 1, 0, x1, l1);
    size_t n2 = epoch_batches(d, 1, 3, x2, l2);
    EXPECT(n1 == N && n2 == N - 3 * B && !memcmp(x1 + 3 * B * PLANE, x2, n2 * PLANE * sizeof(float)),
           "%s: resumed at batch 3, other batches", kind);
    /* another epoch: other boxes */
    n2 = epoch_batches(d, 2, 0, x2, l2);
    EXPECT(n2 == N && memcmp(x1, x2, N * PLANE * sizeof(float)) != 0, "%s: epochs 1 and 2 gave the same batches", kind);
    EXPECT(dataloader_output_size(d) == CROP, "%s: output size %d", kind, dataloader_output_size(d));
    /* normalised pixels of an image of values 0..255: within the table's range */
    int bad = 0;
    for (size_t i = 0; i < N * PLANE; i++) bad += !(x1[i] >= -2.0f - 1e-6f && x1[i] <= 2.0f + 1e-6f);
    EXPECT(bad == 0, "%s: %d values outside the normalised range", kind, bad);
    dataloader_free(d);
    free(x1);
    free(x2);
}

/* The evaluation view of sample g, made by hand from the image. */
static void centre_by_hand(const uint8_t *img, int w, int h, int resize, float *dst) {
    int rw, rh;
    resize_shorter(w, h, resize, &rw, &rh);
    PixelBox win = centre_crop(rw, rh, CROP);
    uint8_t pix[CROP * CROP * 3];
    ResampleScratch rs = {0};
    resample_box(img, w, h, (PixelBox){0, 0, w, h}, rw, rh, win, pix, &rs);
    resample_scratch_free(&rs);
    for (size_t i = 0; i < PLANE; i++) dst[i] = ((float)pix[i] / 255.0f - 0.5f) / 0.25f;
}

static void test_centre(const char *dir, int jpeg) {
    DataLoaderOptions o = opts(dir, 0);
    DataLoader *d = must_open(&o);
    float *x = mallocCheck(N * PLANE * sizeof(float)), ref[PLANE];
    int l[N];
    size_t n = epoch_batches(d, 0, 0, x, l);
    EXPECT(n == N, "centre: %zu images", n);
    int worst = 0;
    for (size_t g = 0; g < n; g++) {
        int w = S, h = S;
        uint8_t *img;
        if (jpeg) {   /* the stored JPEG decoded, as the loader sees it */
            shape_of(g, &w, &h);
            uint8_t *raw = mallocCheck((size_t)w * h * 3), *bytes;
            image_of(g, w, h, raw);
            size_t len;
            char err[256];
            CHECK(jpeg_encode_rgb(raw, w, h, 95, &bytes, &len, err, sizeof err) == 0);
            ImageRGB dec;
            CHECK(jpeg_decode_scaled(bytes, len, 1, w, h, &dec, err, sizeof err) == 0);
            img = dec.rgb;
            free(raw);
            free(bytes);
        } else {
            img = mallocCheck((size_t)S * S * 3);
            image_of(g, S, S, img);
        }
        centre_by_hand(img, w, h, 30, ref);
        for (size_t i = 0; i < PLANE; i++) {
            int dv = (int)lrintf(fabsf(ref[i] - x[g * PLANE + i]) * 0.25f * 255.0f);
            if (dv > worst) worst = dv;
        }
        EXPECT(l[g] == (int)(g % 10), "centre: label of %zu", g);
        free(img);
    }
    EXPECT(worst == 0, "%s centre view: differs from Resize(30) + CenterCrop(%d) by hand by %d levels",
           jpeg ? "JPEG" : "raw", CROP, worst);
    printf("  %s: evaluation view = Resize(30) + CenterCrop(%d) by hand on %zu images (largest difference %d)\n",
           jpeg ? "JPEG" : "raw", CROP, n, worst);
    dataloader_free(d);
    free(x);
}

/* A loader over a split whose sample `bad` is garbled, in a child: it must end with status 1
 * and one line naming the shard and the sample. */
static void test_corrupt(const char *dir) {
    char log[512];
    snprintf_check(log, sizeof log, "%s/corrupt.err", g_tmp);
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        CHECK(freopen(log, "w", stderr) != NULL);
        DataLoaderOptions o = opts(dir, 0);
        o.shuffle = 0;
        DataLoader *d = must_open(&o);
        float *x = mallocCheck(N * PLANE * sizeof(float));
        int l[N];
        epoch_batches(d, 0, 0, x, l);
        _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    char line[1024] = "";
    FILE *f = fopen(log, "r");
    if (f) {
        if (!fgets(line, sizeof line, f)) line[0] = 0;
        fclose(f);
    }
    EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(line, "test-00001-of-00002.h5: sample 5: "),
           "a garbled JPEG: status %d, message '%s'", st, line);
    printf("  a garbled JPEG: %s", line);
}

int main(void) {
    test_tmpdir(g_tmp, sizeof g_tmp, "views");
    char raw[600], jpg[600], bad[600];
    snprintf_check(raw, sizeof raw, "%s/raw", g_tmp);
    snprintf_check(jpg, sizeof jpg, "%s/jpeg", g_tmp);
    snprintf_check(bad, sizeof bad, "%s/bad", g_tmp);
    CHECK(mkdir_p(raw) == 0 && mkdir_p(jpg) == 0 && mkdir_p(bad) == 0);
    write_raw(raw, "train");
    write_raw(raw, "test");
    write_jpeg(jpg, "train", 2, -1);
    write_jpeg(jpg, "test", 1, -1);
    write_jpeg(bad, "test", 2, 5 + (N / 2 + 1));   /* the second shard's sample 5 */

    printf("-- RandomResizedCrop: deterministic\n");
    test_rrc_determinism(raw, "raw");
    test_rrc_determinism(jpg, "JPEG");
    printf("-- JPEG shards: in memory and streamed alike\n");
    DataLoaderOptions a = opts(jpg, 1), b = a;
    b.in_memory = DL_MEMORY_NO;
    b.chunk_images = 4;
    b.window_chunks = 2;
    DataLoader *dm = must_open(&a), *ds = must_open(&b);
    EXPECT(dataloader_jpeg(dm) && dataloader_images(dm) == NULL && dataloader_streaming(ds), "JPEG loader flags");
    EXPECT(dataloader_bytes_held(dm) > 0 && dataloader_bytes_held(dm) < (size_t)N * S * S * 3,
           "JPEG share in memory: %zu bytes (raw would be %d)", dataloader_bytes_held(dm), N * S * S * 3);
    dataloader_free(dm);
    dataloader_free(ds);
    a.augment = b.augment = 0;   /* streaming shuffles otherwise: the unaugmented, unshuffled order */
    a.shuffle = b.shuffle = 0;
    check_same("JPEG in memory and streamed", &a, &b, 0);
    printf("-- the evaluation view\n");
    test_centre(raw, 0);
    test_centre(jpg, 1);
    printf("-- a JPEG that does not decode\n");
    test_corrupt(bad);
    printf("-- a crop larger than the stored images\n");
    DataLoaderOptions big = opts(raw, 1);
    big.crop_size = S + 1;
    char err[1024];
    DataLoader *dbig = dataloader_open(&big, err, sizeof err);
    EXPECT(dbig == NULL && strstr(err, "smaller than the 41-pixel crop"), "crop %d of %d: '%s'", S + 1, S, err);
    dataloader_free(dbig);

    test_rm_tree(g_tmp);
    if (g_failures) {
        printf("FAIL test_views: %d checks failed\n", g_failures);
        return 1;
    }
    printf("PASS test_views\n");
    return 0;
}
