/* SPDX-License-Identifier: BSD-3-Clause */
/* test_device_data.c - batches made on the GPU (device_data.h) against the CPU loader's
 * (dataloader_next), byte for byte. Exits 77 (skipped) when there is no CUDA device.
 *
 * Writes a small dataset of procedural 32x32 images (synth.h) with non-trivial normalisation
 * into a temporary directory, then, with augmentation and shuffling on:
 *  - a training split (drop_last) over 2 epochs, each epoch's batches queued back to back into
 *    one device buffer with no synchronisation in between, so the ring of pinned plan buffers
 *    wraps several times while copies may still be in flight;
 *  - a resume at batch 5 of epoch 1;
 *  - a test split (drop_last off) whose last batch is short, with and without augmentation.
 * The device buffers start as 0xFF bytes (a NaN no batch contains), so an element the kernel
 * misses, or one it writes past a short batch, shows up. Exit 0 when every check passes. */
#include "build_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/dataloader.h"
#include "cuda/device_data.h"
#include "cuda/ops_cuda.h"
#include "data/shards.h"
#include "data/synth.h"
#include "base/util.h"
#include "helpers/tmpdir_testutil.h"
#include "helpers/expect_testutil.h"

#define S_IMG 32
#define PLANE ((size_t)S_IMG * S_IMG * 3)
#define BATCH 64
#define N_TRAIN 1000   /* 15 full batches of 64: the ring of 4 slots wraps 3 times an epoch */
#define N_TEST 101     /* 64 + a short batch of 37 */

static char g_tmp[256];

/* `split` as `nshards` shards of synth images; mean/std far from the 0.5/0.25 defaults so
 * that a table other than the loader's would show. */
static void write_split(const char *split, int split_id, size_t n, int nshards) {
    ShardAttrs a = {.num_classes = SYNTH_NUM_CLASSES, .class_names = (char **)synth_class_names,
                    .has_norm = 1, .mean = {0.41f, 0.52f, 0.37f}, .std = {0.21f, 0.33f, 0.17f}};
    char path[512], name[64], err[1024];
    uint8_t img[PLANE];
    size_t g = 0;
    for (int k = 0; k < nshards; k++) {
        size_t cnt = n / (size_t)nshards + ((size_t)k < n % (size_t)nshards);
        shard_name(name, sizeof name, split, k, nshards);
        snprintf_check(path, sizeof path, "%s/%s", g_tmp, name);
        ShardWriter w;
        CHECK(shard_writer_open(&w, path, cnt, S_IMG, &a, err, sizeof err) == 0);
        for (size_t i = 0; i < cnt; i++, g++) {
            int32_t lab = synth_sample(7, split_id, g, S_IMG, img);
            CHECK(shard_writer_append(&w, img, &lab, 1, err, sizeof err) == 0);
        }
        CHECK(shard_writer_close(&w, err, sizeof err) == 0);
    }
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

/* Device buffers for `samples` samples, filled with 0xFF bytes. */
static void poison(float *x_dev, int *l_dev, size_t samples) {
    unsigned char *h = mallocCheck(samples * PLANE * sizeof(float));
    memset(h, 0xFF, samples * PLANE * sizeof(float));
    cuda_upload(x_dev, h, samples * PLANE * sizeof(float));
    cuda_upload(l_dev, h, samples * sizeof(int));
    free(h);
}

static int all_ff(const void *p, size_t bytes) {
    const unsigned char *b = p;
    for (size_t i = 0; i < bytes; i++)
        if (b[i] != 0xFF) return 0;
    return 1;
}

/* Epoch `epoch` from batch `start` through both paths: the GPU's batches queued back to back
 * into consecutive parts of x_dev/l_dev (capacity `cap` samples), then downloaded once.
 * Returns the samples compared; xg receives the GPU's batches for further checks. */
static size_t compare_epoch(const char *what, DataLoader *cpu, DataLoader *gpu, DeviceData *d,
                            float *x_dev, int *l_dev, size_t cap, int epoch, size_t start,
                            float *xc, int *lc, float *xg, int *lg) {
    poison(x_dev, l_dev, cap);
    dataloader_start_epoch(cpu, epoch, start);
    dataloader_start_epoch(gpu, epoch, start);
    size_t got = 0, batches = 0;
    int sizes[64] = {0}, n;
    do {
        CHECK(got + BATCH <= cap && batches < 64);
        device_data_next(d, gpu, x_dev + got * PLANE, l_dev + got, &n);
        sizes[batches++] = n;
        got += (size_t)n;
    } while (n > 0);
    cuda_download(xg, x_dev, cap * PLANE * sizeof(float));
    cuda_download(lg, l_dev, cap * sizeof(int));

    size_t want = 0, b = 0;
    while ((n = dataloader_next(cpu, xc + want * PLANE, lc + want)) > 0) {
        EXPECT(b < batches && sizes[b] == n, "%s epoch %d batch %zu: GPU gave %d samples, CPU %d", what, epoch,
               start + b, b < batches ? sizes[b] : -1, n);
        want += (size_t)n;
        b++;
    }
    EXPECT(b + 1 == batches, "%s epoch %d: GPU gave %zu batches, CPU %zu", what, epoch, batches - 1, b);
    EXPECT(got == want, "%s epoch %d: GPU %zu samples, CPU %zu", what, epoch, got, want);
    size_t m = got < want ? got : want;
    int same_x = memcmp(xg, xc, m * PLANE * sizeof(float)) == 0, same_l = memcmp(lg, lc, m * sizeof(int)) == 0;
    if (!same_x) {
        size_t i = 0;
        while (i < m * PLANE && !memcmp(&xg[i], &xc[i], sizeof(float))) i++;
        EXPECT(same_x, "%s epoch %d: first difference at sample %zu element %zu: GPU %.9g, CPU %.9g", what,
               epoch, i / PLANE, i % PLANE, (double)xg[i], (double)xc[i]);
    }
    EXPECT(same_l, "%s epoch %d: labels differ", what, epoch);
    EXPECT(all_ff(xg + got * PLANE, (cap - got) * PLANE * sizeof(float)) && all_ff(lg + got, (cap - got) * sizeof(int)),
           "%s epoch %d: the GPU wrote past the %zu samples of the epoch", what, epoch, got);
    printf("   %s, epoch %d from batch %zu: %zu batches, %zu samples identical%s\n", what, epoch, start, b, m,
           same_x && same_l ? "" : " NOT");
    return m;
}

/* A split through both paths: `epochs` epochs, then epoch 1 again from batch `resume`. */
static void compare_split(const char *what, const char *split, int augment, int drop_last, int epochs,
                          size_t resume) {
    DataLoaderOptions o = {
        .data_dir = g_tmp, .split = split, .rank = 0, .world_size = 1, .batch_size = BATCH,
        .augment = augment, .shuffle = 1, .drop_last = drop_last, .seed = 42,
        .num_classes = SYNTH_NUM_CLASSES, .image_size = S_IMG, .prefetch = 1,
    };
    DataLoader *cpu = must_open(&o), *gpu = must_open(&o);
    char err[512];
    DeviceData *d = device_data_open(gpu, BATCH, err, sizeof err);
    EXPECT(d != NULL, "%s: device_data_open: %s", what, err);
    if (!d) {
        dataloader_free(cpu);
        dataloader_free(gpu);
        return;
    }
    size_t n = dataloader_num_samples(gpu);
    EXPECT(device_data_bytes(d) >= n * PLANE, "device_data_bytes %zu", device_data_bytes(d));
    size_t cap = n + BATCH;   /* room for a whole epoch and an unused batch past it */
    float *x_dev = cuda_malloc(cap * PLANE * sizeof(float));
    int *l_dev = cuda_malloc(cap * sizeof(int));
    float *xc = mallocCheck(cap * PLANE * sizeof(float)), *xg = mallocCheck(cap * PLANE * sizeof(float));
    float *xg0 = mallocCheck(cap * PLANE * sizeof(float));
    int *lc = mallocCheck(cap * sizeof(int)), *lg = mallocCheck(cap * sizeof(int));

    size_t m0 = 0;
    for (int e = 0; e < epochs; e++) {
        size_t m = compare_epoch(what, cpu, gpu, d, x_dev, l_dev, cap, e, 0, xc, lc, xg, lg);
        if (e == 0) {
            memcpy(xg0, xg, m * PLANE * sizeof(float));
            m0 = m;
        } else {
            /* Not vacuous: another epoch is another order and other crops. */
            EXPECT(m != m0 || memcmp(xg0, xg, m * PLANE * sizeof(float)) != 0, "%s: epochs 0 and %d are identical", what, e);
        }
    }
    compare_epoch(what, cpu, gpu, d, x_dev, l_dev, cap, 1, resume, xc, lc, xg, lg);

    device_data_free(d);
    cuda_free(x_dev);
    cuda_free(l_dev);
    free(xc); free(xg); free(xg0); free(lc); free(lg);
    dataloader_free(cpu);
    dataloader_free(gpu);
}

int main(void) {
    g_progname = "test_device_data";
    char err[512];
    if (cuda_backend_init(0, err, sizeof err) != 0) {
        printf("SKIP: no CUDA device (%s)\n", err);
        return 77;
    }
    printf("%s\n", cuda_describe());
    test_tmpdir(g_tmp, sizeof g_tmp, "ddp_test_device_data");
    write_split("train", SYNTH_SPLIT_TRAIN, N_TRAIN, 2);
    write_split("test", SYNTH_SPLIT_TEST, N_TEST, 1);

    printf("-- GPU batches == CPU batches, byte for byte\n");
    compare_split("train, augmented, drop_last", "train", 1, 1, 2, 5);
    compare_split("test, augmented, short last batch", "test", 1, 0, 2, 1);
    compare_split("test, plain, short last batch", "test", 0, 0, 2, 1);

    printf("-- open refuses a max_batch below the batch size\n");
    {
        DataLoaderOptions o = {
            .data_dir = g_tmp, .split = "test", .rank = 0, .world_size = 1, .batch_size = BATCH,
            .augment = 1, .shuffle = 1, .drop_last = 0, .seed = 42,
            .num_classes = SYNTH_NUM_CLASSES, .image_size = S_IMG, .prefetch = 0,
        };
        DataLoader *dl = must_open(&o);
        err[0] = 0;
        EXPECT(device_data_open(dl, BATCH - 1, err, sizeof err) == NULL && strstr(err, "max_batch"), "%s", err);
        printf("   %s\n", err);
        dataloader_free(dl);
    }

    cuda_sync("end of tests");
    cuda_backend_free();
    test_rm_tree(g_tmp);
    if (g_failures) {
        printf("test_device_data: %d check(s) FAILED\n", g_failures);
        return 1;
    }
    printf("test_device_data: all checks passed\n");
    return 0;
}
