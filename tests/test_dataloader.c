/* SPDX-License-Identifier: BSD-3-Clause */
/* test_dataloader.c - the shard format, rank assignment and the data loader.
 * Writes its own small datasets (with the library's shard writer) into a temporary directory.
 * Exit 0 when every check passes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/dataloader.h"
#include "data/shards.h"
#include "base/util.h"
#include "helpers/tmpdir_testutil.h"
#include "helpers/expect_testutil.h"

static void section(const char *what) { printf("-- %s\n", what); fflush(stdout); }

static char g_tmp[256];

/* Pixel pattern of global sample g: R encodes the position (so crops and flips can be
 * recovered), G and B the sample id (so assignment and order can be recovered). */
#define S_IMG 8
static void pattern(size_t g, uint8_t *img) {
    for (int y = 0; y < S_IMG; y++)
        for (int x = 0; x < S_IMG; x++) {
            uint8_t *p = img + (y * S_IMG + x) * 3;
            p[0] = (uint8_t)(1 + y * S_IMG + x);   /* never 0: 0 is the padding */
            p[1] = (uint8_t)(g & 255);
            p[2] = (uint8_t)(1 + (g >> 8));
        }
}

static const float MEAN[3] = {0.4f, 0.5f, 0.6f}, STD[3] = {0.2f, 0.25f, 0.3f};

/* Writes `split` of a dataset into dir as shards of the given sizes; labels g % 10. */
static void write_dataset(const char *dir, const char *split, const size_t *counts, int nshards,
                          int with_norm, int label_bump_at) {
    static char *names[10] = {"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9"};
    ShardAttrs a = {.num_classes = 10, .class_names = names, .has_norm = with_norm};
    memcpy(a.mean, MEAN, sizeof MEAN);
    memcpy(a.std, STD, sizeof STD);
    char path[512], name[64], err[1024];
    size_t g = 0;
    uint8_t img[S_IMG * S_IMG * 3];
    for (int k = 0; k < nshards; k++) {
        shard_name(name, sizeof name, split, k, nshards);
        snprintf_check(path, sizeof path, "%s/%s", dir, name);
        ShardWriter w;
        CHECK(shard_writer_open(&w, path, counts[k], S_IMG, &a, err, sizeof err) == 0);
        for (size_t i = 0; i < counts[k]; i++, g++) {
            pattern(g, img);
            int32_t lab = (int32_t)(g % 10);
            if ((long)g == label_bump_at) lab = 10;
            CHECK(shard_writer_append(&w, img, &lab, 1, err, sizeof err) == 0);
        }
        CHECK(shard_writer_close(&w, err, sizeof err) == 0);
    }
}

static char *make_dir(const char *name) {
    static char p[8][512];
    static int k = 0;
    char *d = p[k++ & 7];
    snprintf_check(d, 512, "%s/%s", g_tmp, name);
    CHECK(mkdir_p(d) == 0);
    return d;
}

static DataLoaderOptions base_opts(const char *dir) {
    DataLoaderOptions o = {
        .data_dir = dir, .split = "train", .rank = 0, .world_size = 1, .batch_size = 8,
        .augment = 0, .shuffle = 0, .drop_last = 0, .seed = 42, .num_classes = 10,
        .image_size = S_IMG, .prefetch = 0,
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

/* Recovers the pixel value from a normalised float. */
static int unnorm(float v, int c, const float *mean, const float *std) {
    return (int)lrintf((v * std[c] + mean[c]) * 255.0f);
}

/* Sample id of an unaugmented image (from the G and B channels of pixel 0). */
static size_t sample_id(const float *x, const float *mean, const float *std) {
    return (size_t)unnorm(x[1], 1, mean, std) + 256u * (size_t)(unnorm(x[2], 2, mean, std) - 1);
}

#define PLANE (S_IMG * S_IMG * 3)

/* All batches of one epoch concatenated; returns the sample count. */
static size_t run_epoch(DataLoader *dl, int epoch, size_t start, float *xs, int *ls) {
    dataloader_start_epoch(dl, epoch, start);
    size_t got = 0;
    int n;
    while ((n = dataloader_next(dl, xs + got * PLANE, ls + got)) > 0) got += (size_t)n;
    return got;
}

/* The same through plans: dataloader_next_plan, then dataloader_apply_plan; plans [n] too. */
static size_t run_epoch_plans(DataLoader *dl, int epoch, size_t start, float *xs, int *ls, SamplePlan *plans) {
    dataloader_start_epoch(dl, epoch, start);
    size_t got = 0;
    int n;
    while ((n = dataloader_next_plan(dl, plans + got, ls + got)) > 0) {
        dataloader_apply_plan(dl, plans + got, n, xs + got * PLANE);
        got += (size_t)n;
    }
    return got;
}

/* ---- assignment -------------------------------------------------------------------------- */

static void test_assign(void) {
    section("assignment: every sample exactly once; round robin when S >= W, slices when S < W");
    size_t counts[7] = {37, 41, 29, 50, 3, 11, 20};
    int cases[][2] = {{1, 1}, {3, 2}, {2, 3}, {4, 4}, {5, 2}, {1, 4}, {7, 3}, {3, 7}, {2, 2}, {1, 2}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        int S = cases[t][0], W = cases[t][1];
        size_t off[8] = {0}, total = 0;
        for (int i = 0; i < S; i++) { off[i] = total; total += counts[i]; }
        int *seen = calloc(total, sizeof(int));
        size_t min_n = (size_t)-1, max_n = 0;
        for (int r = 0; r < W; r++) {
            ShardSlice sl[8];
            int ns = shards_assign(counts, S, r, W, sl, 8);
            size_t n = 0;
            for (int k = 0; k < ns; k++) {
                if (S >= W) {
                    EXPECT(sl[k].shard % W == r && sl[k].begin == 0 && sl[k].end == counts[sl[k].shard],
                           "S=%d W=%d rank %d got shard %d [%zu,%zu)", S, W, r, sl[k].shard, sl[k].begin, sl[k].end);
                } else if (k > 0) {   /* contiguous in global order */
                    EXPECT(off[sl[k].shard] + sl[k].begin == off[sl[k - 1].shard] + sl[k - 1].end,
                           "S=%d W=%d rank %d slices not contiguous", S, W, r);
                }
                for (size_t i = sl[k].begin; i < sl[k].end; i++) seen[off[sl[k].shard] + i]++;
                n += sl[k].end - sl[k].begin;
            }
            if (n < min_n) min_n = n;
            if (n > max_n) max_n = n;
        }
        for (size_t i = 0; i < total; i++) EXPECT(seen[i] == 1, "S=%d W=%d sample %zu assigned %d times", S, W, i, seen[i]);
        if (S < W) EXPECT(max_n - min_n <= 1, "S=%d W=%d slices uneven: %zu..%zu", S, W, min_n, max_n);
        printf("   S=%d W=%d: %zu samples, per rank %zu..%zu\n", S, W, total, min_n, max_n);
        free(seen);
    }
}

/* Opens every rank of a dataset and checks that the loaders together deliver each sample once. */
static void check_ranks(const char *dir, int W, size_t total) {
    int *seen = calloc(total, sizeof(int));
    float *xs = malloc(total * PLANE * sizeof(float));
    int *ls = malloc(total * sizeof(int));
    for (int r = 0; r < W; r++) {
        DataLoaderOptions o = base_opts(dir);
        o.rank = r;
        o.world_size = W;
        DataLoader *dl = must_open(&o);
        EXPECT(dataloader_global_samples(dl) == total, "global %zu", dataloader_global_samples(dl));
        size_t n = run_epoch(dl, 0, 0, xs, ls);
        EXPECT(n == dataloader_num_samples(dl), "rank %d delivered %zu of %zu", r, n, dataloader_num_samples(dl));
        float mean[3], std[3];
        dataloader_norm(dl, mean, std);
        for (size_t i = 0; i < n; i++) {
            size_t g = sample_id(xs + i * PLANE, mean, std);
            EXPECT(g < total && ls[i] == (int)(g % 10), "rank %d sample %zu id %zu label %d", r, i, g, ls[i]);
            if (g < total) seen[g]++;
        }
        printf("   %d ranks, rank %d: %s\n", W, r, dataloader_describe(dl));
        dataloader_free(dl);
    }
    for (size_t g = 0; g < total; g++) EXPECT(seen[g] == 1, "W=%d sample %zu seen %d times", W, g, seen[g]);
    free(seen);
    free(xs);
    free(ls);
}

/* ---- main ---------------------------------------------------------------------------------- */

/* Whether every thread of this process but the main one blocks SIGTERM and SIGUSR2 (from
 * /proc/self/task/<tid>/status, SigBlk); *n gets the number of other threads seen. */
static int helpers_block_signals(int *n) {
    *n = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int ok = 1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == getpid()) continue;
        char p[300], line[256];
        snprintf(p, sizeof p, "/proc/self/task/%s/status", e->d_name);
        FILE *f = fopen(p, "r");
        if (!f) continue;
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "SigBlk:", 7) == 0) {
                unsigned long long m = strtoull(line + 7, NULL, 16);
                (*n)++;
                if (!(m & (1ull << (SIGTERM - 1))) || !(m & (1ull << (SIGUSR2 - 1)))) ok = 0;
            }
        fclose(f);
    }
    closedir(d);
    return ok;
}

int main(void) {
    g_progname = "test_dataloader";
    test_tmpdir(g_tmp, sizeof g_tmp, "ddp_test_dataloader");

    test_assign();

    section("loaders of 2 ranks over 3 shards, and of 3 ranks over 2 shards");
    size_t c3[3] = {37, 41, 29}, c2[2] = {60, 47};
    char *d3 = make_dir("three");
    write_dataset(d3, "train", c3, 3, 1, -1);
    char *d2 = make_dir("two");
    write_dataset(d2, "train", c2, 2, 1, -1);
    check_ranks(d3, 1, 107);
    check_ranks(d3, 2, 107);
    check_ranks(d2, 3, 107);
    check_ranks(d3, 5, 107);

    size_t total = 107;
    float *xa = malloc(total * PLANE * sizeof(float)), *xb = malloc(total * PLANE * sizeof(float));
    int *la = malloc(total * sizeof(int)), *lb = malloc(total * sizeof(int));

    section("normalisation: (pixel/255 - mean) / std, from the attributes or 0.5/0.25");
    {
        DataLoaderOptions o = base_opts(d3);
        DataLoader *dl = must_open(&o);
        size_t n = run_epoch(dl, 0, 0, xa, la);
        double maxerr = 0;
        uint8_t img[PLANE];
        for (size_t i = 0; i < n; i++) {
            pattern(i, img);   /* no shuffle, one rank: sample i is global sample i */
            for (int p = 0; p < PLANE; p++) {
                double want = ((double)img[p] / 255.0 - MEAN[p % 3]) / STD[p % 3];
                double e = fabs(want - (double)xa[i * PLANE + (size_t)p]);
                if (e > maxerr) maxerr = e;
            }
        }
        EXPECT(n == total && maxerr < 1e-5, "n %zu max error %g", n, maxerr);
        printf("   %zu samples, max |x - expected| = %.2g\n", n, maxerr);
        EXPECT(dataloader_num_classes(dl) == 10 && dataloader_class_name(dl, 3) && !strcmp(dataloader_class_name(dl, 3), "c3") &&
               dataloader_class_name(dl, 10) == NULL && dataloader_image_size(dl) == S_IMG, "attributes");
        dataloader_free(dl);

        char *dn = make_dir("nonorm");
        write_dataset(dn, "train", c2, 1, 0, -1);
        DataLoaderOptions on = base_opts(dn);
        dl = must_open(&on);
        float mean[3], std[3];
        dataloader_norm(dl, mean, std);
        EXPECT(mean[0] == 0.5f && mean[2] == 0.5f && std[1] == 0.25f, "defaults %g %g", (double)mean[0], (double)std[1]);
        dataloader_next(dl, xa, la);
        pattern(0, img);
        EXPECT(fabsf(xa[0] - ((float)img[0] / 255.0f - 0.5f) / 0.25f) < 1e-6f, "default normalisation %g", (double)xa[0]);
        dataloader_free(dl);
    }

    section("batches: drop_last floors, evaluation keeps the short last batch");
    {
        DataLoaderOptions o = base_opts(d3);
        o.batch_size = 10;
        DataLoader *dl = must_open(&o);
        EXPECT(dataloader_num_batches(dl) == 11, "eval batches %zu", dataloader_num_batches(dl));
        dataloader_start_epoch(dl, 0, 10);
        EXPECT(dataloader_next(dl, xa, la) == 7, "short last batch");
        EXPECT(dataloader_next(dl, xa, la) == 0, "end of epoch");
        dataloader_free(dl);
        o.drop_last = 1;
        dl = must_open(&o);
        EXPECT(dataloader_num_batches(dl) == 10 && run_epoch(dl, 0, 0, xa, la) == 100, "drop_last");
        dataloader_free(dl);
    }

    section("shuffle: deterministic per (seed, epoch, rank), a permutation, different across epochs");
    {
        DataLoaderOptions o = base_opts(d3);
        o.shuffle = 1;
        DataLoader *a = must_open(&o), *b = must_open(&o);
        float mean[3], std[3];
        dataloader_norm(a, mean, std);
        size_t na = run_epoch(a, 3, 0, xa, la), nb = run_epoch(b, 3, 0, xb, lb);
        EXPECT(na == nb && memcmp(xa, xb, na * PLANE * sizeof(float)) == 0, "same epoch differs");
        int *seen = calloc(total, sizeof(int));
        size_t inorder = 0;
        for (size_t i = 0; i < na; i++) {
            size_t g = sample_id(xa + i * PLANE, mean, std);
            if (g < total) seen[g]++;
            inorder += g == i;
        }
        for (size_t g = 0; g < total; g++) EXPECT(seen[g] == 1, "sample %zu seen %d times", g, seen[g]);
        EXPECT(inorder < total / 4, "hardly shuffled: %zu in place", inorder);
        nb = run_epoch(b, 4, 0, xb, lb);
        EXPECT(memcmp(xa, xb, na * PLANE * sizeof(float)) != 0, "epochs 3 and 4 have the same order");
        o.seed = 43;
        DataLoader *c = must_open(&o);
        run_epoch(c, 3, 0, xb, lb);
        EXPECT(memcmp(xa, xb, na * PLANE * sizeof(float)) != 0, "seeds 42 and 43 have the same order");
        printf("   epoch 3: %zu of %zu samples in place; epoch 4 and seed 43 differ\n", inorder, total);
        free(seen);
        dataloader_free(a);
        dataloader_free(b);
        dataloader_free(c);
    }

    section("prefetch on == off, bit-identical, with shuffle and augmentation; resume mid-epoch");
    {
        DataLoaderOptions o = base_opts(d3);
        o.shuffle = o.augment = o.drop_last = 1;
        o.batch_size = 6;
        DataLoader *off = must_open(&o);
        o.prefetch = 1;
        DataLoader *on = must_open(&o);
        int nthreads = 0, blocked = helpers_block_signals(&nthreads);
        EXPECT(blocked == 1 && nthreads >= 1, "the prefetch thread blocks SIGTERM and SIGUSR2 (%d other thread(s), %s)",
               nthreads, blocked == 1 ? "all blocking" : "not all blocking");
        for (int e = 0; e < 3; e++) {
            size_t n1 = run_epoch(off, e, 0, xa, la), n2 = run_epoch(on, e, 0, xb, lb);
            EXPECT(n1 == 102 && n1 == n2 && memcmp(xa, xb, n1 * PLANE * sizeof(float)) == 0 &&
                   memcmp(la, lb, n1 * sizeof(int)) == 0, "epoch %d prefetch on/off differ", e);
        }
        /* Abandon an epoch part-way (prefetch holds a batch) and restart at batch 7 of epoch 2. */
        dataloader_start_epoch(on, 5, 0);
        dataloader_next(on, xb, lb);
        size_t full = run_epoch(off, 2, 0, xa, la);
        size_t tail = run_epoch(on, 2, 7, xb, lb);
        EXPECT(tail == full - 7 * 6 && memcmp(xa + 7 * 6 * PLANE, xb, tail * PLANE * sizeof(float)) == 0 &&
               memcmp(la + 7 * 6, lb, tail * sizeof(int)) == 0, "resume at batch 7 differs from the epoch's tail");
        /* A fresh loader (a restarted job) resuming at the same point. */
        DataLoader *fresh = must_open(&o);
        tail = run_epoch(fresh, 2, 7, xb, lb);
        EXPECT(memcmp(xa + 7 * 6 * PLANE, xb, tail * PLANE * sizeof(float)) == 0, "fresh loader resume differs");
        EXPECT(dataloader_take_wait_time(on) >= 0.0 && dataloader_take_wait_time(on) == 0.0, "wait time reset");
        printf("   3 epochs x %zu samples identical; resume at batch 7 reproduces %zu samples\n", full, tail);
        dataloader_free(off);
        dataloader_free(on);
        dataloader_free(fresh);
        /* Freeing while the worker holds a prepared batch, or right after opening. */
        DataLoader *q = must_open(&o);
        dataloader_start_epoch(q, 0, 0);
        dataloader_free(q);
        dataloader_free(must_open(&o));
    }

    section("plans: next_plan + apply_plan == next, byte for byte; epochs, resume, short batch");
    {
        SamplePlan *plans = malloc(total * sizeof(SamplePlan));
        for (int aug = 0; aug < 2; aug++)
            for (int drop = 0; drop < 2; drop++) {
                DataLoaderOptions o = base_opts(d3);
                o.shuffle = 1;
                o.augment = aug;
                o.drop_last = drop;
                o.batch_size = 6;   /* 107 samples: 17 full batches and a short one of 5 */
                o.prefetch = aug;   /* the reference both with and without its thread */
                DataLoader *ref = must_open(&o);
                o.prefetch = 1;     /* the plan loader stops its thread at the first plan */
                DataLoader *pl = must_open(&o);
                EXPECT(dataloader_batch_size(pl) == 6, "batch size %d", dataloader_batch_size(pl));
                float mean[3], std[3];
                dataloader_norm(pl, mean, std);
                const uint8_t *img = dataloader_images(pl);
                const float *lut = dataloader_lut(pl);
                for (int c = 0; c < 3; c++)
                    for (int v = 0; v < 256; v++)
                        EXPECT(lut[c * 256 + v] == ((float)v / 255.0f - mean[c]) / std[c], "lut[%d][%d]", c, v);
                size_t want_n = drop ? 102 : 107, moved = 0;
                for (int e = 0; e < 3; e++) {
                    size_t n1 = run_epoch(ref, e, 0, xa, la), n2 = run_epoch_plans(pl, e, 0, xb, lb, plans);
                    EXPECT(n1 == want_n && n2 == n1, "aug %d drop %d epoch %d: %zu and %zu samples", aug, drop, e, n1, n2);
                    EXPECT(memcmp(xa, xb, n1 * PLANE * sizeof(float)) == 0 && memcmp(la, lb, n1 * sizeof(int)) == 0,
                           "aug %d drop %d epoch %d: plans applied differ from dataloader_next", aug, drop, e);
                    int *seen = calloc(total, sizeof(int));
                    for (size_t i = 0; i < n2; i++) {
                        const SamplePlan *p = &plans[i];
                        int ok = p->index >= 0 && (size_t)p->index < total;
                        EXPECT(ok, "index %d", p->index);
                        if (!ok) continue;
                        seen[p->index]++;
                        /* The accessor's image is the one the plan names: its label, and its
                         * pixels through the table (no shuffle of pixels within an image). */
                        const uint8_t *im = img + (size_t)p->index * PLANE;
                        size_t g = (size_t)im[1] + 256u * (size_t)(im[2] - 1);
                        EXPECT(lb[i] == (int)(g % 10), "label %d of image %zu", lb[i], g);
                        if (aug) {
                            EXPECT(p->ox >= -4 && p->ox <= 4 && p->oy >= -4 && p->oy <= 4 && (p->flip == 0 || p->flip == 1),
                                   "plan %zu: ox %d oy %d flip %d", i, p->ox, p->oy, p->flip);
                            moved += p->ox != 0 || p->oy != 0 || p->flip;
                        } else {
                            EXPECT(p->ox == 0 && p->oy == 0 && p->flip == 0, "plan %zu without augmentation: ox %d oy %d flip %d",
                                   i, p->ox, p->oy, p->flip);
                            for (int q = 0; q < PLANE; q++)
                                if (xb[i * PLANE + (size_t)q] != lut[(q % 3) * 256 + im[q]]) {
                                    EXPECT(0, "sample %zu element %d is not lut[image]", i, q);
                                    break;
                                }
                        }
                    }
                    size_t once = 0;
                    for (size_t g = 0; g < total; g++) once += seen[g] == 1;
                    EXPECT(once == n2, "epoch %d: %zu of %zu indices distinct", e, once, n2);
                    free(seen);
                }
                if (aug) EXPECT(moved > 250, "only %zu of 3 epochs' plans crop or flip", moved);
                EXPECT(dataloader_take_wait_time(pl) >= 0.0 && dataloader_take_wait_time(pl) == 0.0, "plan wait time");

                /* Resume at batch 7 of epoch 2, in the loader and in a fresh one. */
                size_t full = run_epoch(ref, 2, 0, xa, la);
                DataLoader *fresh = must_open(&o);
                for (int f = 0; f < 2; f++) {
                    size_t tail = run_epoch_plans(f ? fresh : pl, 2, 7, xb, lb, plans);
                    EXPECT(tail == full - 7 * 6 && memcmp(xa + 7 * 6 * PLANE, xb, tail * PLANE * sizeof(float)) == 0 &&
                           memcmp(la + 7 * 6, lb, tail * sizeof(int)) == 0,
                           "aug %d drop %d: resume at batch 7 (%s loader) differs from the epoch's tail", aug, drop, f ? "fresh" : "same");
                }
                dataloader_free(fresh);

                /* Mixed calls share one position: next, plan, next. */
                dataloader_start_epoch(pl, 1, 0);
                run_epoch(ref, 1, 0, xa, la);
                int n0 = dataloader_next(pl, xb, lb);
                int n1 = dataloader_next_plan(pl, plans, lb + 6);
                dataloader_apply_plan(pl, plans, n1, xb + 6 * PLANE);
                int n2 = dataloader_next(pl, xb + 12 * PLANE, lb + 12);
                EXPECT(n0 == 6 && n1 == 6 && n2 == 6 && memcmp(xa, xb, 18 * PLANE * sizeof(float)) == 0 &&
                       memcmp(la, lb, 18 * sizeof(int)) == 0, "aug %d drop %d: next/plan/next differ", aug, drop);

                /* The comparison can fail: another flip of one sample changes the batch. */
                plans[0].flip ^= 1;
                dataloader_apply_plan(pl, plans, 1, xb + 6 * PLANE);
                EXPECT(memcmp(xa + 6 * PLANE, xb + 6 * PLANE, PLANE * sizeof(float)) != 0, "a flipped plan gave the same image");
                dataloader_free(ref);
                dataloader_free(pl);
            }
        printf("   augment off/on x drop_last off/on: 3 epochs, resume at batch 7 and mixed calls identical to dataloader_next\n");
        free(plans);
    }

    section("augmentation: shape kept, a crop with zero padding in [-P,P] and a flip with p=0.5 (P = 4, 2, none)");
    for (int c = 0; c < 3; c++) {
        const int crop_pad = c == 0 ? 0 : c == 1 ? 2 : -1, P = c == 0 ? 4 : c == 1 ? 2 : 0;
        DataLoaderOptions o = base_opts(d3);
        o.augment = 1;
        o.crop_pad = crop_pad;
        o.batch_size = 107;
        DataLoader *dl = must_open(&o);
        float mean[3], std[3];
        dataloader_norm(dl, mean, std);
        float *x = malloc((total * PLANE + 16) * sizeof(float));
        for (int i = 0; i < 16; i++) x[total * PLANE + (size_t)i] = 12345.0f;
        int n = dataloader_next(dl, x, la);
        EXPECT(n == 107, "n %d", n);
        for (int i = 0; i < 16; i++) EXPECT(x[total * PLANE + (size_t)i] == 12345.0f, "wrote past the batch");
        int flips = 0, bad = 0, offs[9][9] = {{0}};
        for (int i = 0; i < n; i++) {
            const float *im = x + (size_t)i * PLANE;
            /* Find the (ox, oy, flip) that explains every pixel; exactly one must. */
            int found = 0, fo = 0, fx = 0, fy = 0;
            for (int flip = 0; flip < 2; flip++)
                for (int oy = -4; oy <= 4; oy++)
                    for (int ox = -4; ox <= 4; ox++) {
                        int ok = 1;
                        for (int y = 0; y < S_IMG && ok; y++)
                            for (int xx = 0; xx < S_IMG && ok; xx++) {
                                int sy = y + oy, sx = (flip ? S_IMG - 1 - xx : xx) + ox;
                                int inside = sy >= 0 && sy < S_IMG && sx >= 0 && sx < S_IMG;
                                int want = inside ? 1 + sy * S_IMG + sx : 0;
                                const float *p = im + (y * S_IMG + xx) * 3;
                                ok = unnorm(p[0], 0, mean, std) == want &&
                                     (inside || (unnorm(p[1], 1, mean, std) == 0 && unnorm(p[2], 2, mean, std) == 0));
                            }
                        /* Offsets 0 with flip and the mirror offsets are distinct patterns here. */
                        if (ok) { found++; fo = flip; fx = ox; fy = oy; }
                    }
            if (found != 1 || fx < -P || fx > P || fy < -P || fy > P) { bad++; continue; }
            flips += fo;
            offs[fy + 4][fx + 4]++;
            EXPECT(la[i] == (int)((size_t)i % 10), "label moved with augmentation");
        }
        int distinct = 0;
        for (int a = 0; a < 9; a++)
            for (int b = 0; b < 9; b++) distinct += offs[a][b] > 0;
        const int corners = offs[4 - P][4 - P] + offs[4 + P][4 + P] > 0 || offs[4 - P][4 + P] + offs[4 + P][4 - P] > 0;
        EXPECT(bad == 0, "P %d: %d images are not a padded crop within [-P,P] + optional flip of their source", P, bad);
        EXPECT(flips > 30 && flips < 77, "P %d: flips %d of 107", P, flips);
        EXPECT(P == 0 ? distinct == 1 : distinct > (2 * P + 1) * (2 * P + 1) * 2 / 5 && corners,
               "P %d: %d distinct offsets (corners reached: %d)", P, distinct, corners);
        printf("   P %d: 107 images: each a crop (%d distinct offsets of %d) + flip (%d flipped)\n", P, distinct,
               (2 * P + 1) * (2 * P + 1), flips);
        free(x);
        dataloader_free(dl);
    }

    section("alternating flip: a coin per image, then the other side every epoch");
    for (int alt = 1; alt >= 0; alt--) {
        DataLoaderOptions o = base_opts(d3);
        o.augment = 1;
        o.shuffle = 1;
        o.alternating_flip = alt;
        o.batch_size = 107;
        DataLoader *dl = must_open(&o);
        SamplePlan plans[107];
        int flip[3][107], heads = 0, alternate = 0;
        for (int e = 0; e < 3; e++) {
            dataloader_start_epoch(dl, e, 0);
            int n = dataloader_next_plan(dl, plans, la);
            EXPECT(n == 107, "n %d", n);
            for (int i = 0; i < n; i++) flip[e][plans[i].index] = plans[i].flip;
        }
        for (int i = 0; i < 107; i++) {
            heads += flip[0][i];
            alternate += flip[1][i] == !flip[0][i] && flip[2][i] == flip[0][i];
        }
        EXPECT(heads > 30 && heads < 77, "alternating %d: %d of 107 flipped in epoch 0", alt, heads);
        /* without it, each epoch's flips are independent: about a quarter alternate */
        EXPECT(alt ? alternate == 107 : alternate < 60, "alternating %d: %d of 107 images alternate over 3 epochs", alt, alternate);
        printf("   alternating_flip %d: %d of 107 flipped in epoch 0, %d alternate in epochs 0-2\n", alt, heads, alternate);
        dataloader_free(dl);
    }

    section("errors: one line naming the file");
    {
        char err[1024];
        DataLoaderOptions o = base_opts(g_tmp);
        EXPECT(dataloader_open(&o, err, sizeof err) == NULL && strstr(err, g_tmp) && strstr(err, "no train shards"), "%s", err);
        printf("   %s\n", err);

        o = base_opts(d3);
        o.num_classes = 100;
        EXPECT(dataloader_open(&o, err, sizeof err) == NULL && strstr(err, "train-00000-of-00003.h5") && strstr(err, "num_classes"), "%s", err);
        printf("   %s\n", err);

        o = base_opts(d3);
        o.image_size = 32;
        EXPECT(dataloader_open(&o, err, sizeof err) == NULL && strstr(err, "train-00000-of-00003.h5") && strstr(err, "32"), "%s", err);
        printf("   %s\n", err);

        char *db = make_dir("badlabel");
        write_dataset(db, "train", c3, 3, 1, 50);
        o = base_opts(db);
        EXPECT(dataloader_open(&o, err, sizeof err) == NULL && strstr(err, "train-00001-of-00003.h5") && strstr(err, "label 10 at index 13"), "%s", err);
        printf("   %s\n", err);

        char *dm = make_dir("missing");
        write_dataset(dm, "train", c3, 3, 1, -1);
        char p[1024];
        snprintf_check(p, sizeof p, "%s/train-00001-of-00003.h5", dm);
        CHECK(unlink(p) == 0);
        o = base_opts(dm);
        EXPECT(dataloader_open(&o, err, sizeof err) == NULL && strstr(err, "train-00001-of-00003.h5: missing"), "%s", err);
        printf("   %s\n", err);
        write_dataset(dm, "train", c2, 2, 1, -1);   /* now a -of-00002 set beside -of-00003 */
        EXPECT(dataloader_open(&o, err, sizeof err) == NULL && strstr(err, "shard count"), "%s", err);
        printf("   %s\n", err);

        snprintf_check(p, sizeof p, "%s/test-00000-of-00001.h5", dm);
        FILE *f = fopenCheck(p, "wb");
        fputs("this is not an HDF5 file\n", f);
        fclose(f);
        o.split = "test";
        EXPECT(dataloader_open(&o, err, sizeof err) == NULL && strstr(err, p) && strstr(err, "not an HDF5 file"), "%s", err);
        printf("   %s\n", err);

        o = base_opts(d3);
        o.world_size = 200;
        o.rank = 0;
        EXPECT(dataloader_open(&o, err, sizeof err) == NULL && strstr(err, "too few"), "%s", err);
        printf("   %s\n", err);
    }

    section("streaming (in_memory NO): chunks of 5 images across shard boundaries, windows of 3 chunks");
    {
        DataLoaderOptions o = base_opts(d3);
        o.shuffle = 1;
        o.in_memory = DL_MEMORY_NO;
        o.chunk_images = 5;
        o.window_chunks = 3;
        DataLoader *a = must_open(&o);
        float mean[3], std[3];
        dataloader_norm(a, mean, std);
        EXPECT(dataloader_streaming(a) && dataloader_images(a) == NULL && dataloader_num_samples(a) == total &&
               dataloader_bytes_held(a) == 0, "streaming loader at open: %s", dataloader_memory_note(a));
        printf("   %s\n", dataloader_memory_note(a));
        size_t *pos = malloc(total * sizeof(size_t)), *first = malloc(total * sizeof(size_t));
        int *seen = calloc(total, sizeof(int));
        for (int epoch = 0; epoch < 3; epoch++) {
            memset(seen, 0, total * sizeof(int));
            size_t n = run_epoch(a, epoch, 0, xa, la), bad = 0, spread = 0;
            for (size_t i = 0; i < n; i++) {
                size_t id = sample_id(xa + i * PLANE, mean, std);
                if (id >= total || seen[id]++ || la[i] != (int)(id % 10)) bad++;
                else pos[id] = i;
                if (epoch == 0) first[i] = id;
            }
            /* Samples of one chunk lie within one window: less than 3 chunks apart. */
            for (size_t id = 0; id < total && !bad; id++)
                for (size_t j = id - id % 5; j < id; j++) {
                    size_t d = pos[id] > pos[j] ? pos[id] - pos[j] : pos[j] - pos[id];
                    if (d >= 15) spread++;
                }
            EXPECT(n == total && bad == 0, "epoch %d: %zu samples, %zu missing, repeated or mislabelled", epoch, n, bad);
            EXPECT(spread == 0, "epoch %d: %zu pairs of a chunk's samples 3 chunks or more apart", epoch, spread);
            if (epoch > 0) {
                size_t same = 0;
                for (size_t i = 0; i < n; i++) same += sample_id(xa + i * PLANE, mean, std) == first[i];
                EXPECT(same < total / 2, "epoch %d repeats epoch 0's order (%zu of %zu in place)", epoch, same, total);
            }
        }
        size_t in_place = 0;
        for (size_t i = 0; i < total; i++) in_place += first[i] == i;
        EXPECT(in_place < total / 2, "epoch 0 is nearly the stored order (%zu of %zu in place)", in_place, total);
        size_t peak = dataloader_peak_bytes_held(a), share = total * PLANE;
        EXPECT(peak > 0 && peak <= 2 * 3 * 5 * PLANE, "peak %zu bytes held, more than two windows (%d)", peak, 2 * 3 * 5 * PLANE);
        printf("   every sample once per epoch, a chunk's samples within a window; peak %zu bytes held of a %zu-byte share\n", peak, share);
        dataloader_free(a);

        /* The same batches with augmentation, again, with prefetch, through plans, and from batch 5 on. */
        o.augment = 1;
        a = must_open(&o);
        size_t na = run_epoch(a, 2, 0, xa, la);
        dataloader_free(a);
        o.prefetch = 1;
        a = must_open(&o);
        size_t nb = run_epoch(a, 2, 0, xb, lb);
        EXPECT(na == nb && memcmp(xa, xb, na * PLANE * sizeof(float)) == 0 && memcmp(la, lb, na * sizeof(int)) == 0,
               "prefetch changes the streamed batches");
        nb = run_epoch(a, 2, 5, xb, lb);
        EXPECT(nb == na - 40 && memcmp(xa + 40 * PLANE, xb, nb * PLANE * sizeof(float)) == 0, "resuming at batch 5 differs");
        dataloader_free(a);
        o.prefetch = 0;
        a = must_open(&o);
        SamplePlan *plans = malloc(total * sizeof(SamplePlan));
        nb = run_epoch_plans(a, 2, 0, xb, lb, plans);
        EXPECT(na == nb && memcmp(xa, xb, na * PLANE * sizeof(float)) == 0, "plans change the streamed batches");
        free(plans);
        dataloader_free(a);
        printf("   augmented epoch identical again, with prefetch, through plans, and resumed at batch 5\n");

        /* Evaluation: stored order, the in-memory loader's batches; and rank 1 of 2 with drop_last. */
        DataLoaderOptions e = base_opts(d3);
        e.batch_size = 10;
        DataLoader *m = must_open(&e);
        na = run_epoch(m, 0, 0, xa, la);
        dataloader_free(m);
        e.in_memory = DL_MEMORY_NO;
        e.chunk_images = 7;
        e.window_chunks = 2;
        m = must_open(&e);
        nb = run_epoch(m, 0, 0, xb, lb);
        EXPECT(na == nb && memcmp(xa, xb, na * PLANE * sizeof(float)) == 0, "streamed evaluation differs from in memory");
        dataloader_free(m);
        o = base_opts(d3);
        o.rank = 1;
        o.world_size = 2;
        o.drop_last = 1;
        o.shuffle = 1;
        o.in_memory = DL_MEMORY_NO;
        o.chunk_images = 4;
        DataLoader *r1 = must_open(&o);
        o.in_memory = DL_MEMORY_YES;
        DataLoader *r1m = must_open(&o);
        EXPECT(dataloader_num_batches(r1) == dataloader_num_batches(r1m) && run_epoch(r1, 1, 0, xa, la) == dataloader_num_batches(r1m) * 8,
               "rank 1 of 2: batches %zu streamed, %zu in memory", dataloader_num_batches(r1), dataloader_num_batches(r1m));
        dataloader_free(r1);
        dataloader_free(r1m);

        /* auto: in memory within the budget, streamed over it. */
        o = base_opts(d3);
        o.in_memory = DL_MEMORY_AUTO;
        o.memory_budget = total * PLANE;
        m = must_open(&o);
        EXPECT(!dataloader_streaming(m) && strstr(dataloader_memory_note(m), "within"), "%s", dataloader_memory_note(m));
        printf("   %s\n", dataloader_memory_note(m));
        dataloader_free(m);
        o.memory_budget = total * PLANE - 1;
        m = must_open(&o);
        EXPECT(dataloader_streaming(m) && strstr(dataloader_memory_note(m), "over"), "%s", dataloader_memory_note(m));
        printf("   %s\n", dataloader_memory_note(m));
        dataloader_free(m);
        free(pos);
        free(first);
        free(seen);
    }

    section("streaming: a shard replaced during the run (more, fewer or as many samples) is refused, naming it");
    {
        /* In a child, which the refusal ends: an epoch streamed, shard 1 of 2 replaced by
         * another file (rename, as a writer does), and the next epoch. */
        const size_t now[3] = {30, 10, 20};
        for (int c = 0; c < 3; c++) {
            char *ds = make_dir(c == 0 ? "replaced-more" : c == 1 ? "replaced-fewer" : "replaced-same");
            char *other = make_dir(c == 0 ? "new-more" : c == 1 ? "new-fewer" : "new-same");
            size_t c0[2] = {20, 20}, c1[2] = {20, now[c]};
            write_dataset(ds, "train", c0, 2, 1, -1);
            write_dataset(other, "train", c1, 2, 1, -1);
            char errpath[600], from[600], to[600];
            snprintf_check(errpath, sizeof errpath, "%s/stderr-%d.txt", g_tmp, c);
            snprintf_check(from, sizeof from, "%s/train-00001-of-00002.h5", other);
            snprintf_check(to, sizeof to, "%s/train-00001-of-00002.h5", ds);
            fflush(stdout);
            fflush(stderr);
            pid_t pid = fork();
            CHECK(pid >= 0);
            if (pid == 0) {
                CHECK(freopen(errpath, "w", stderr) != NULL);
                DataLoaderOptions o = base_opts(ds);
                o.in_memory = DL_MEMORY_NO;
                o.chunk_images = 5;
                o.window_chunks = 1;
                DataLoader *a = must_open(&o);
                size_t n0 = run_epoch(a, 0, 0, xa, la);
                CHECK(rename(from, to) == 0);
                size_t n1 = run_epoch(a, 1, 0, xa, la);
                fprintf(stderr, "no refusal: %zu then %zu samples\n", n0, n1);
                fflush(stderr);
                _exit(0);
            }
            int st;
            CHECK(waitpid(pid, &st, 0) == pid);
            char msg[2048] = "";
            FILE *f = fopenCheck(errpath, "r");
            size_t len = fread(msg, 1, sizeof msg - 1, f);
            msg[len] = '\0';
            fclose(f);
            EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(msg, to) && strstr(msg, "changed since it was opened") &&
                       strchr(msg, '\n') == msg + len - 1,
                   "a shard replaced by one of %zu samples: exit %d, %s", now[c], WIFEXITED(st) ? WEXITSTATUS(st) : -1, msg);
            printf("   %zu samples: %s", now[c], msg);
        }
    }

    free(xa); free(xb); free(la); free(lb);
    test_rm_tree(g_tmp);
    if (g_failures) {
        printf("test_dataloader: %d check(s) FAILED\n", g_failures);
        return 1;
    }
    printf("test_dataloader: all checks passed\n");
    return 0;
}
