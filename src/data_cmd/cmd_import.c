/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_import.c - ddptrain-data import: JPEG and PNG images in torchvision's ImageFolder layout
 * into shards, raw S x S pixels or JPEG files of shorter side S.
 *
 * The outline: the tree listed (import_tree.c); pass 1 decodes every image to find the bad
 * ones, the image size and the training images' mean/std, before anything is written; the
 * kept files shuffled; pass 2 decodes them again, a chunk at a time, into the shards
 * (import_pass.c), all renamed into place at the end (output.c). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/flags.h"
#include "base/util.h"
#include "data/image.h"
#include "data/jpegs.h"
#include "data/shards.h"
#include "data_cmd.h"
#include "import_pass.h"
#include "import_tree.h"
#include "output.h"

static const char *USAGE_IMPORT =
    "usage: ddptrain-data import --in DIR --out DIR [--size S] [--test_fraction F] [--shards S]\n"
    "                            [--encoding raw|jpeg] [--quality Q]\n"
    "                            [--seed N] [--threads N] [--skip_bad] [--force]\n"
    "\n"
    "Converts JPEG and PNG images in torchvision's ImageFolder layout, DIR/train/<class>/* and\n"
    "DIR/test/<class>/* (or DIR/val/<class>/* where there is no test/; or one tree\n"
    "DIR/<class>/* with --test_fraction), into train and test shards. Classes are numbered in\n"
    "the byte order of the folder names and their names stored; the files of a class, its\n"
    "subfolders walked, are taken in ImageFolder's order, then each split is shuffled from\n"
    "--seed, so that every shard (and every rank's share) holds every class; mean/std come from\n"
    "the training images. Every image becomes RGB (grey replicated, palettes looked up, alpha\n"
    "dropped, 16-bit PNG samples keep their high byte), its shorter side is resized to S and\n"
    "the centre S x S cropped, as torchvision's Resize(S) + CenterCrop(S) do on a PIL image.\n"
    "With --encoding jpeg the shards keep JPEG files instead, each image's aspect kept: its\n"
    "shorter side resized to S as Resize(S) does, a longer side past 2S cut to its centre 2S,\n"
    "then encoded at --quality (for training crops of the whole image; data/README.md).\n"
    "The output does not depend on --threads.\n"
    "\n"
    "  --in DIR            the image tree\n"
    "  --out DIR           output directory (created if missing; inside --in, it is left\n"
    "                      out of the image tree)\n"
    "  --size S            image size S x S (default: that of the images, when all are the\n"
    "                      same square size)\n"
    "  --test_fraction F   split one tree DIR/<class>/* (0 < F < 1): of each class's files\n"
    "                      in that order, file k is a test image when\n"
    "                      floor((k+1)F) > floor(kF)\n"
    "  --shards S          shards per split (default 1)\n"
    "  --encoding E        raw: S x S pixels (default); jpeg: JPEG files of shorter side S\n"
    "                      (--size required)\n"
    "  --quality Q         JPEG quality 1..100 with --encoding jpeg (default 90)\n"
    "  --seed N            the order of the images in the shards (default 1)\n"
    "  --threads N         decoding threads (default: the cores this process may use)\n"
    "  --skip_bad          skip unreadable images (counted in the summary) instead of failing\n"
    "  --force             replace shards already in --out\n";

/* What the command line asked for. */
typedef struct {
    const char *in, *out, *fraction, *encoding;
    long long nshards, size, threads, quality;
    long long ppm;   /* --test_fraction in millionths, 0 without it */
    uint64_t seed;
    int skip_bad, force, jpeg;
} ImportOpts;

/* --test_fraction F in millionths: the split is made in integers, the same on every machine. */
static long long parse_test_fraction(const char *fraction) {
    char *end;
    errno = 0;
    double f = strtod(fraction, &end);
    if (*end || errno || !(f > 0.0 && f < 1.0))
        flags_usage_error("import", "flag --test_fraction: '%s' is not a number between 0 and 1", fraction);
    long long ppm = llround(f * 1e6);
    if (ppm < 1 || ppm > 999999)
        flags_usage_error("import", "flag --test_fraction: %s is too close to 0 or 1 (steps of 0.000001)", fraction);
    return ppm;
}

static int default_threads(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void import_options(int argc, char **argv, ImportOpts *o) {
    *o = (ImportOpts){.encoding = "raw", .nshards = 1, .seed = 1};
    Flag flags[] = {
        {STRING_FLAG("in", &o->in), .value = "DIR", .required = 1},
        {STRING_FLAG("out", &o->out), .value = "DIR", .required = 1},
        {U64_FLAG("seed", &o->seed)},
        {INT_FLAG("size", &o->size, 8, 4096)},
        {STRING_FLAG("encoding", &o->encoding)},
        {INT_FLAG("quality", &o->quality, 1, 100)},
        {STRING_FLAG("test_fraction", &o->fraction)},
        {INT_FLAG("shards", &o->nshards, 1, SHARD_MAX_SHARDS)},
        {INT_FLAG("threads", &o->threads, 1, 1024)},
        {SWITCH_FLAG("skip_bad", &o->skip_bad)},
        {SWITCH_FLAG("force", &o->force)},
    };
    flags_parse(&(FlagSpec){.cmd = "import", .usage = USAGE_IMPORT, .flags = flags, .nflags = NFLAGS(flags)}, argc, argv, NULL);
    if (o->fraction) o->ppm = parse_test_fraction(o->fraction);
    o->jpeg = strcmp(o->encoding, "jpeg") == 0;
    if (!o->jpeg && strcmp(o->encoding, "raw") != 0)
        flags_usage_error("import", "flag --encoding: '%s' is neither raw nor jpeg", QUOTED(o->encoding));
    if (o->jpeg && !o->size)
        flags_usage_error("import", "--encoding jpeg needs --size S (the shorter side every image is resized to)");
    if (!o->jpeg && o->quality)
        flags_usage_error("import", "flag --quality applies to --encoding jpeg only");
    if (!o->quality) o->quality = JPEG_QUALITY_DEFAULT;
    if (!o->threads) o->threads = default_threads();
    if (o->jpeg && !jpegs_available())
        die("import: --encoding jpeg: this ddptrain-data was built without libjpeg (libjpeg-turbo) (install the -dev package and configure again, or pass --with-jpeg=DIR)");
    if (*image_missing_libs())
        die("import: this ddptrain-data was built without %s (install the -dev package and configure again, or pass --with-jpeg=DIR --with-png=DIR)",
            image_missing_libs());
}

/* What pass 1 found, per file of the tree: train's files, then test's. */
typedef struct {
    ImgFile *files;      /* [all], test's with label -1: no pixel sums for them */
    size_t all, ntrain;
    int *w, *h;          /* [all]: the decoded (or resized, or fitted) size */
    char **errs;         /* [all]: why the file is unreadable, or NULL */
    uint64_t *sums;      /* [threads][6]: the training pixels' sums and sums of squares */
    size_t nbad;         /* unreadable files skipped (--skip_bad) */
    ImgList keep[2];     /* the readable files of train and test, with their labels */
    int S;               /* the image size (the shorter side with --encoding jpeg) */
} Checked;

/* Pass 1: every image decoded (and resized when --size is given), the bad ones found, the
 * training images' exact pixel sums taken. Nothing is written before it succeeds. */
static void check_images(const ImportOpts *o, const ImageTree *t, Progress *prog, Checked *k) {
    *k = (Checked){.all = t->train.n + t->test.n, .ntrain = t->train.n};
    const size_t all = k->all;
    k->files = mallocCheck(all * sizeof *k->files);
    memcpy(k->files, t->train.v, t->train.n * sizeof *k->files);
    for (size_t i = 0; i < t->test.n; i++) k->files[t->train.n + i] = (ImgFile){t->test.v[i].path, -1};
    Pass p1 = {.files = k->files, .n = all, .S = (int)o->size, .threads = (int)o->threads,
               .w = mallocCheck(all * sizeof(int)), .h = mallocCheck(all * sizeof(int)),
               .errs = callocCheck(all, sizeof(char *)), .sums = callocCheck((size_t)o->threads * 6, sizeof(uint64_t)),
               .prog = prog, .what = "check", .fit = o->jpeg};
    run_pass(&p1);
    k->w = p1.w;
    k->h = p1.h;
    k->errs = p1.errs;
    k->sums = p1.sums;
    for (size_t i = 0; i < all; i++) {
        if (!k->errs[i]) continue;
        if (!o->skip_bad) die("%s (--skip_bad skips unreadable images)", k->errs[i]);
        fflush(stdout);
        fprintf(stderr, "%s: skipped %s\n", g_progname, k->errs[i]);
        k->nbad++;
    }
}

/* The kept files of each split, and the image size: --size, else that of the images, which
 * must then all be the same square. */
static void keep_files(const ImportOpts *o, const ImageTree *t, Checked *k) {
    const ImgFile *files = k->files;
    size_t first = (size_t)-1;
    for (size_t i = 0; i < k->all; i++) {
        if (k->errs[i]) continue;
        if (first == (size_t)-1) first = i;
        if (!o->size && k->w[i] != k->h[i])
            die("%s is %dx%d, not square: pass --size S (the shorter side is resized to S, then the centre S x S is cropped)",
                QUOTED(files[i].path), k->w[i], k->h[i]);
        if (!o->size && k->w[i] != k->w[first])
            die("%s is %dx%d but %s is %dx%d: pass --size S (the shorter side is resized to S, then the centre S x S is cropped)",
                QUOTED(files[first].path), k->w[first], k->h[first], QUOTED(files[i].path), k->w[i], k->h[i]);
        imglist_push(&k->keep[i >= k->ntrain], files[i].path,
                     i < k->ntrain ? files[i].label : t->test.v[i - k->ntrain].label);
    }
    if (first == (size_t)-1) die("%s: no readable image", QUOTED(o->in));
    k->S = o->size ? (int)o->size : k->w[first];
    if (k->S < 8) die("%s: the images are %dx%d, smaller than 8x8: pass --size S", QUOTED(o->in), k->S, k->S);
    check_split_size(o->in, "train", k->keep[0].n, (int)o->nshards);
    check_split_size(o->in, "test", k->keep[1].n, (int)o->nshards);
}

/* attrs' mean/std from pass 1's exact sums of the kept training images. */
static void training_mean_std(const ImportOpts *o, const Checked *k, ShardAttrs *attrs) {
    uint64_t tot[6] = {0};
    for (int t = 0; t < o->threads; t++)
        for (int c = 0; c < 6; c++) tot[c] += k->sums[6 * (size_t)t + (size_t)c];
    double npx = (double)k->keep[0].n * k->S * k->S;
    if (o->jpeg) {   /* the sums are of each image as stored: its pixels, not S x S */
        npx = 0;
        for (size_t i = 0; i < k->ntrain; i++)
            if (!k->errs[i]) npx += (double)k->w[i] * (double)k->h[i];
    }
    for (int c = 0; c < 3; c++) {
        double m = (double)tot[c] / 255.0 / npx, var = (double)tot[3 + c] / (255.0 * 255.0) / npx - m * m;
        attrs->mean[c] = (float)m;
        attrs->std[c] = (float)sqrt(var > 1e-6 ? var : 1e-6);
    }
}

/* One split's kept files on their way into the shards (pass 2). */
typedef struct {
    const ImgList *list;
    int S, threads;
    Progress *prog;
    atomic_size_t *reads;   /* see fail_read */
    size_t fail_read;
    int quality;            /* --encoding jpeg */
} ImportCtx;

static int import_produce(void *vctx, size_t start, size_t count, uint8_t *images, int32_t *labels,
                          char *err, size_t errlen) {
    const ImportCtx *c = vctx;
    Pass p = {.files = c->list->v + start, .n = count, .S = c->S, .threads = c->threads, .out = images,
              .prog = c->prog, .what = "write", .reads = c->reads, .fail_read = c->fail_read};
    run_pass(&p);
    if (p.first_bad != (size_t)-1) {   /* the file changed since it was checked */
        snprintf(err, errlen, "%s", p.err);
        return -1;
    }
    for (size_t i = 0; i < count; i++) labels[i] = c->list->v[start + i].label;
    if (start + count == c->list->n) progress_clear(c->prog);   /* for the next split's bar, or output_commit's lines */
    return 0;
}

/* import_produce for --encoding jpeg: each file decoded, fitted to S and encoded by the
 * threads, then laid end to end in file order (so the bytes do not depend on --threads). */
static int import_produce_jpeg(void *vctx, size_t start, size_t count, JpegBatch *b, char *err, size_t errlen) {
    const ImportCtx *c = vctx;
    Pass p = {.files = c->list->v + start, .n = count, .S = c->S, .threads = c->threads,
              .w = mallocCheck(count * sizeof(int)), .h = mallocCheck(count * sizeof(int)),
              .prog = c->prog, .what = "write", .reads = c->reads, .fail_read = c->fail_read,
              .fit = 1, .quality = c->quality, .jpg = callocCheck(count, sizeof(uint8_t *)),
              .jlen = callocCheck(count, sizeof(size_t))};
    run_pass(&p);
    int rc = 0;
    if (p.first_bad != (size_t)-1) {   /* the file changed since it was checked */
        snprintf(err, errlen, "%s", p.err);
        rc = -1;
    } else {
        jpeg_batch_reset(b);
        for (size_t i = 0; i < count; i++)
            jpeg_batch_add(b, p.jpg[i], p.jlen[i], p.h[i], p.w[i], c->list->v[start + i].label);
    }
    for (size_t i = 0; i < count; i++) free(p.jpg[i]);
    free(p.jpg); free(p.jlen); free(p.w); free(p.h);
    if (rc == 0 && start + count == c->list->n) progress_clear(c->prog);
    return rc;
}

/* Pass 2: the kept files decoded again, a chunk at a time, into the shards. */
static void write_shards(const ImportOpts *o, const Checked *k, const ShardAttrs *attrs, Progress *prog) {
    ensure_out_dir(o->out, "train", o->force);
    ensure_out_dir(o->out, "test", o->force);
    prog->total = k->all + k->keep[0].n + k->keep[1].n;   /* pass 1's files, then pass 2's */
    /* A test hook: DDPTRAIN_DATA_TEST_FAIL_READ=N makes the N-th image read of this writing
     * pass (counted from 1 over both splits, train first) fail as an unreadable file does,
     * as if the file had changed since the first pass checked it; tests/test_hostile_trees.sh
     * uses it to fail the test split after the train split is written. Read here only. */
    const char *hook = getenv("DDPTRAIN_DATA_TEST_FAIL_READ");
    atomic_size_t reads;
    atomic_init(&reads, 0);
    size_t fail_read = hook ? (size_t)strtoull(hook, NULL, 10) : 0;
    const int S = k->S, nshards = (int)o->nshards;
    ImportCtx c0 = {&k->keep[0], S, (int)o->threads, prog, fail_read ? &reads : NULL, fail_read, (int)o->quality};
    ImportCtx c1 = {&k->keep[1], S, (int)o->threads, prog, fail_read ? &reads : NULL, fail_read, (int)o->quality};
    Output out = {.dir = o->out};
    if (o->jpeg) {
        write_split_jpeg(&out, "train", k->keep[0].n, nshards, S, attrs, import_produce_jpeg, &c0);
        write_split_jpeg(&out, "test", k->keep[1].n, nshards, S, attrs, import_produce_jpeg, &c1);
    } else {
        write_split(&out, "train", k->keep[0].n, nshards, S, attrs, import_produce, &c0);
        write_split(&out, "test", k->keep[1].n, nshards, S, attrs, import_produce, &c1);
    }
    output_commit(&out);
}

static void print_summary(const ImportOpts *o, const Checked *k, int ncls, const ShardAttrs *attrs, double dt) {
    print_mean_std(attrs);
    char at[64];
    if (o->jpeg) snprintf(at, sizeof at, "as JPEG (quality %lld) of shorter side %d", o->quality, k->S);
    else snprintf(at, sizeof at, "at %dx%d", k->S, k->S);
    printf("imported %zu train and %zu test images of %d classes %s, %zu bad file%s skipped, in %.1f s (%.0f images/s, %lld thread%s)\n",
           k->keep[0].n, k->keep[1].n, ncls, at, k->nbad, k->nbad == 1 ? "" : "s", dt,
           (double)(k->keep[0].n + k->keep[1].n) / dt, o->threads, o->threads == 1 ? "" : "s");
}

static void checked_free(Checked *k) {
    for (size_t i = 0; i < k->all; i++) free(k->errs[i]);
    free(k->errs); free(k->w); free(k->h); free(k->sums);
    free(k->keep[0].v); free(k->keep[1].v); free(k->files);
}

int cmd_import(int argc, char **argv) {
    ImportOpts o;
    import_options(argc, argv, &o);
    double t0 = now_sec();
    ImageTree tree;
    image_tree_list(&tree, o.in, o.ppm, o.out);
    const size_t all = tree.train.n + tree.test.n;
    Progress prog = {.tty = isatty(fileno(stdout)), .total = tree.train.n + all, .t0 = t0};
    atomic_init(&prog.done, 0);
    pthread_mutex_init(&prog.mu, NULL);
    Checked k;
    check_images(&o, &tree, &prog, &k);
    keep_files(&o, &tree, &k);
    ShardAttrs attrs = {.num_classes = tree.ncls, .class_names = tree.classes, .has_norm = 1};
    training_mean_std(&o, &k, &attrs);
    if (!prog.tty)
        printf("checked %zu images (%zu train, %zu test) in %.1f s\n", k.all, tree.train.n, tree.test.n, now_sec() - t0);
    /* Class folders are read one after the other: in that order a shard, a rank's share of the
     * shards and a streamed chunk would each hold a few classes only (each rank's batch-norm
     * statistics then of its classes alone). Shuffled, each holds all of them. */
    imglist_shuffle(&k.keep[0], o.seed, 0);
    imglist_shuffle(&k.keep[1], o.seed, 1);
    write_shards(&o, &k, &attrs, &prog);
    progress_show(&prog, "done", 1);
    print_summary(&o, &k, tree.ncls, &attrs, now_sec() - t0);
    checked_free(&k);
    image_tree_free(&tree);
    return 0;
}
