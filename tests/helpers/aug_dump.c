/* SPDX-License-Identifier: BSD-3-Clause */
/* aug_dump.c - real batches of the loader with random erasing, mixup and cutmix, with the draws
 * they took, the repeated-augmentation sampler's per-rank order, Beta draws and the mixed loss,
 * for tests/helpers/aug_torch.py to recompute with torch (tests/test_mixup_torch.sh).
 *
 * usage: aug_dump batches DATA OUT EPOCHS BATCHES P MIXUP CUTMIX SEED
 *          the first BATCHES training batches (of 16) of each epoch, made twice: by a loader
 *          without erasing and mixing (OUT/E_B.plain) and by one with them (OUT/E_B.aug, its
 *          prefetch thread on), float32 NHWC; OUT/index.txt holds per batch its labels, the
 *          mixing draws and lambda the loader gave, and per sample the erasing draws
 *        aug_dump ra DATA OUT REPS WORLD EPOCHS SEED
 *          per epoch and rank: the permutation drawn (OUT/ra.txt "perm E ...") and the loader's
 *          sample indices and labels in batch order ("rank E R ..." and "labels E R ...")
 *        aug_dump beta N ALPHA SEED
 *          N Beta(ALPHA, ALPHA) draws of mix_beta, one a line
 *        aug_dump xent N K MIX SMOOTH SEED
 *          random logits and labels, then softmax_xent's loss and d(loss)/dlogits with the
 *          targets mixed at MIX and label smoothing SMOOTH, and the correct count */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataloader.h"
#include "data/mix.h"
#include "data/ra_sampler.h"
#include "data/random_erase.h"
#include "ops/ops_cpu.h"
#include "base/rng.h"
#include "base/util.h"

#define BATCH 16

static DataLoader *open_train(const char *data, int rank, int world, uint64_t seed, double p, double mixup,
                              double cutmix, int reps, int augment, int prefetch) {
    DataLoaderOptions o = {.data_dir = data, .split = "train", .rank = rank, .world_size = world, .batch_size = BATCH,
                           .augment = augment, .shuffle = 1, .drop_last = 1, .seed = seed, .prefetch = prefetch,
                           .workers = 2, .random_erase = p, .mixup_alpha = mixup, .cutmix_alpha = cutmix, .ra_reps = reps};
    char err[1024];
    DataLoader *dl = dataloader_open(&o, err, sizeof err);
    if (!dl) die("%s", err);
    return dl;
}

static void write_floats(const char *dir, int e, int b, const char *ext, const float *x, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%d_%d.%s", dir, e, b, ext);
    FILE *f = fopenCheck(path, "wb");
    CHECK(fwrite(x, sizeof(float), n, f) == n);
    CHECK(fclose(f) == 0);
}

static int batches(const char *data, const char *out, int epochs, int nb, double p, double mixup, double cutmix,
                   uint64_t seed) {
    DataLoader *plain = open_train(data, 0, 1, seed, 0.0, 0.0, 0.0, 0, 1, 0);
    DataLoader *aug = open_train(data, 0, 1, seed, p, mixup, cutmix, 0, 1, 1);
    const int S = dataloader_output_size(aug);
    const size_t img = (size_t)S * S * 3;
    float *x0 = mallocCheck(BATCH * img * sizeof(float)), *x1 = mallocCheck(BATCH * img * sizeof(float));
    int y0[BATCH], y1[BATCH];
    char path[4096];
    snprintf(path, sizeof path, "%s/index.txt", out);
    FILE *idx = fopenCheck(path, "w");
    fprintf(idx, "size %d p %a mixup %a cutmix %a\n", S, p, mixup, cutmix);
    for (int e = 0; e < epochs; e++) {
        dataloader_start_epoch(plain, e, 0);
        dataloader_start_epoch(aug, e, 0);
        for (int b = 0; b < nb; b++) {
            const int n0 = dataloader_next(plain, x0, y0), n1 = dataloader_next(aug, x1, y1);
            CHECK(n0 == BATCH && n1 == BATCH);
            write_floats(out, e, b, "plain", x0, BATCH * img);
            write_floats(out, e, b, "aug", x1, BATCH * img);
            /* batch E B lambda-given labels...; the draws replayed from the batch's stream */
            fprintf(idx, "batch %d %d %a", e, b, dataloader_batch_lambda(aug));
            for (int i = 0; i < BATCH; i++) fprintf(idx, " %d", y1[i]);
            fprintf(idx, "\n");
            for (int i = 0; i < BATCH; i++) CHECK(y0[i] == y1[i]);
            Rng r;
            mix_stream(&r, seed, e, 0, (size_t)b);
            const MixDraws d = mix_draw(&r, mixup, cutmix, S, S);
            /* mix KIND LAMBDA-DRAWN RX RY LAMBDA */
            fprintf(idx, "mix %d %a %d %d %a\n", d.kind, d.lambda_drawn, d.rx, d.ry, d.lambda);
            for (int i = 0; i < BATCH; i++) {
                EraseDraws ed;
                random_erase_stream(&r, seed, e, 0, (size_t)b * BATCH + (size_t)i);
                const PixelBox box = random_erase_box(&r, S, S, p, &ed);
                /* erase COIN TRIES (scale log_ratio)... top left = y x h w */
                fprintf(idx, "erase %a %d", (double)ed.coin, ed.tries);
                const int drawn = ed.tries <= ERASE_TRIES ? ed.tries : ERASE_TRIES;
                for (int t = 0; t < drawn; t++) fprintf(idx, " %a %a", (double)ed.scale[t], (double)ed.log_ratio[t]);
                if (ed.tries >= 1 && ed.tries <= ERASE_TRIES) fprintf(idx, " %d %d", ed.top, ed.left);
                fprintf(idx, " = %" PRId64 " %" PRId64 " %d %d\n", box.y, box.x, box.h, box.w);
            }
        }
    }
    CHECK(fclose(idx) == 0);
    free(x0);
    free(x1);
    dataloader_free(plain);
    dataloader_free(aug);
    return 0;
}

static int ra(const char *data, const char *out, int reps, int world, int epochs, uint64_t seed) {
    char path[4096];
    snprintf(path, sizeof path, "%s/ra.txt", out);
    FILE *f = fopenCheck(path, "w");
    SamplePlan plan[BATCH];
    int labels[BATCH];
    for (int rank = 0; rank < world; rank++) {
        DataLoader *dl = open_train(data, rank, world, seed, 0.0, 0.0, 0.0, reps, 0, 0);
        const size_t n = dataloader_num_samples(dl);
        uint32_t *perm = mallocCheck(n * sizeof(uint32_t));
        for (int e = 0; e < epochs; e++) {
            if (rank == 0) {
                ra_sampler_perm(seed, e, n, perm);
                fprintf(f, "perm %d", e);
                for (size_t i = 0; i < n; i++) fprintf(f, " %" PRIu32, perm[i]);
                fprintf(f, "\n");
            }
            dataloader_start_epoch(dl, e, 0);
            fprintf(f, "rank %d %d", e, rank);
            int k;
            char *labs = NULL;
            size_t labs_len = 0;
            FILE *ls = open_memstream(&labs, &labs_len);
            while ((k = dataloader_next_plan(dl, plan, labels)) > 0)
                for (int i = 0; i < k; i++) {
                    fprintf(f, " %d", plan[i].index);
                    fprintf(ls, " %d", labels[i]);
                }
            fclose(ls);
            fprintf(f, "\nlabels %d %d%s\n", e, rank, labs);
            free(labs);
        }
        free(perm);
        dataloader_free(dl);
    }
    CHECK(fclose(f) == 0);
    return 0;
}

static int beta(int n, double alpha, uint64_t seed) {
    Rng r;
    rng_init(&r, seed, 0, 0);
    for (int i = 0; i < n; i++) printf("%a\n", mix_beta(&r, alpha));
    return 0;
}

static int xent(int n, int k, double mix, double smooth, uint64_t seed) {
    Rng r;
    rng_init(&r, seed, 1, 0);
    float *z = mallocCheck((size_t)n * k * sizeof(float)), *dz = mallocCheck((size_t)n * k * sizeof(float));
    int *lab = mallocCheck((size_t)n * sizeof(int));
    for (size_t i = 0; i < (size_t)n * k; i++) z[i] = 3.0f * rng_normal(&r);
    for (int i = 0; i < n; i++) lab[i] = (int)rng_below(&r, (uint32_t)k);
    int correct;
    const float loss = softmax_xent(z, lab, n, k, 1.0f, (float)smooth, (float)mix, dz, &correct);
    printf("xent %d %d %a %a\n", n, k, (double)(float)mix, (double)(float)smooth);
    printf("labels");
    for (int i = 0; i < n; i++) printf(" %d", lab[i]);
    printf("\nlogits");
    for (size_t i = 0; i < (size_t)n * k; i++) printf(" %a", (double)z[i]);
    printf("\nloss %a correct %d\ngrad", (double)loss, correct);
    for (size_t i = 0; i < (size_t)n * k; i++) printf(" %a", (double)dz[i]);
    printf("\n");
    free(z);
    free(dz);
    free(lab);
    return 0;
}

int main(int argc, char **argv) {
    g_progname = "aug_dump";
    if (argc == 10 && !strcmp(argv[1], "batches"))
        return batches(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]), atof(argv[6]), atof(argv[7]), atof(argv[8]),
                       strtoull(argv[9], NULL, 10));
    if (argc == 8 && !strcmp(argv[1], "ra"))
        return ra(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]), atoi(argv[6]), strtoull(argv[7], NULL, 10));
    if (argc == 5 && !strcmp(argv[1], "beta")) return beta(atoi(argv[2]), atof(argv[3]), strtoull(argv[4], NULL, 10));
    if (argc == 7 && !strcmp(argv[1], "xent"))
        return xent(atoi(argv[2]), atoi(argv[3]), atof(argv[4]), atof(argv[5]), strtoull(argv[6], NULL, 10));
    die_code(2, "usage: aug_dump batches DATA OUT EPOCHS BATCHES P MIXUP CUTMIX SEED | ra DATA OUT REPS WORLD EPOCHS SEED | "
                "beta N ALPHA SEED | xent N K MIX SMOOTH SEED");
}
