/* SPDX-License-Identifier: BSD-3-Clause */
/* data_tool.c - ddptrain-data: make, convert, check and reshard datasets in the shard format
 * of data/README.md.
 *
 *   ddptrain-data synth   --out DIR [--train N] [--test N] [--shards S] [--seed X] [--size P]
 *   ddptrain-data cifar10 --in DIR --out DIR [--shards S]
 *   ddptrain-data inspect FILE|DIR...
 *   ddptrain-data reshard --in DIR --out DIR --shards S
 *
 * Exit status: 0 success, 1 bad data or I/O failure, 2 bad command line. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shards.h"
#include "synth.h"
#include "util.h"

#define CHUNK 1024   /* samples per write: bounded memory for any dataset size */

static const char *USAGE_MAIN =
    "usage: ddptrain-data COMMAND [flags]\n"
    "\n"
    "Datasets for ddptrain: directories of HDF5 shards <split>-NNNNN-of-MMMMM.h5 (split = train\n"
    "or test) holding 'images' uint8 [N,S,S,3] and 'labels' [N]; see data/README.md.\n"
    "\n"
    "commands:\n"
    "  synth    generate the procedural 10-class dataset\n"
    "  cifar10  convert the CIFAR-10 binary batches\n"
    "  inspect  validate shard files (or directories) and print a summary\n"
    "  reshard  rewrite a dataset into a different number of shards\n"
    "\n"
    "'ddptrain-data COMMAND --help' describes a command's flags.\n";

static const char *USAGE_SYNTH =
    "usage: ddptrain-data synth --out DIR [--train N] [--test N] [--shards S] [--seed X] [--size P] [--force]\n"
    "\n"
    "Writes a procedural dataset of 10 classes of shapes and textures (circle, square, triangle,\n"
    "cross, ring, horizontal/vertical/diagonal stripes, checkerboard, dots) in random positions and\n"
    "colours with pixel noise. The same seed gives byte-identical files.\n"
    "\n"
    "  --out DIR     output directory (created if missing)\n"
    "  --train N     training samples (default 5000)\n"
    "  --test N      test samples (default 1000)\n"
    "  --shards S    shards per split (default 2)\n"
    "  --seed X      random seed (default 1)\n"
    "  --size P      image size P x P (default 32)\n"
    "  --force       replace shards already in DIR\n";

static const char *USAGE_CIFAR =
    "usage: ddptrain-data cifar10 --in DIR --out DIR [--shards S] [--force]\n"
    "\n"
    "Converts the CIFAR-10 binary version (data_batch_1.bin .. data_batch_5.bin, test_batch.bin;\n"
    "records of 1 label byte + 3072 bytes of R, G, B planes) into train and test shards with class\n"
    "names and the per-channel mean/std of the training images.\n"
    "\n"
    "  --in DIR      directory with the .bin files (or its parent holding cifar-10-batches-bin/)\n"
    "  --out DIR     output directory (created if missing)\n"
    "  --shards S    shards per split (default 1)\n"
    "  --force       replace shards already in --out\n";

static const char *USAGE_INSPECT =
    "usage: ddptrain-data inspect FILE|DIR...\n"
    "\n"
    "Validates each shard file (every check ddptrain makes, and that all images are readable) and\n"
    "prints its sample count, image shape, num_classes, class names, label histogram and mean/std.\n"
    "A directory is checked as a dataset: both splits' shard sets must be complete and consistent.\n"
    "Exits 1 with one line naming the file if anything is wrong.\n";

static const char *USAGE_RESHARD =
    "usage: ddptrain-data reshard --in DIR --out DIR --shards S [--force]\n"
    "\n"
    "Rewrites the train and test splits of DIR into S shards each, keeping the sample order and\n"
    "the attributes (num_classes, class_names, mean, std). --out must differ from --in.\n"
    "\n"
    "  --in DIR      input dataset directory\n"
    "  --out DIR     output directory (created if missing)\n"
    "  --shards S    shards per split\n"
    "  --force       replace shards already in --out\n";

/* ---- command line ------------------------------------------------------------------------- */

typedef enum { F_STR, F_COUNT, F_U64, F_BOOL } FlagKind;
typedef struct {
    const char *name;     /* without the dashes */
    FlagKind kind;
    void *dst;            /* const char **, long long *, uint64_t *, int * */
    long long lo, hi;     /* F_COUNT range */
} Flag;

__attribute__((format(printf, 2, 3), noreturn))
static void usage_error(const char *cmd, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    die_code(2, "%s: %s (see 'ddptrain-data %s --help')", cmd, msg, cmd);
}

/* Parses --name VALUE / --name=VALUE flags; other arguments go to positional (if allowed). */
static int parse_flags(const char *cmd, const char *usage, int argc, char **argv, Flag *flags,
                       int nflags, char ***positional) {
    int npos = 0;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            fputs(usage, stdout);
            exit(0);
        }
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            if (!positional) usage_error(cmd, "unexpected argument '%s'", arg);
            (*positional)[npos++] = argv[i];
            continue;
        }
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t nl = eq ? (size_t)(eq - name) : strlen(name);
        Flag *f = NULL;
        for (int k = 0; k < nflags; k++)
            if (strlen(flags[k].name) == nl && strncmp(flags[k].name, name, nl) == 0) f = &flags[k];
        if (!f) usage_error(cmd, "unknown flag '%s'", arg);
        if (f->kind == F_BOOL) {
            if (eq) usage_error(cmd, "flag --%s takes no value", f->name);
            *(int *)f->dst = 1;
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val) usage_error(cmd, "flag --%s needs a value", f->name);
        if (f->kind == F_STR) {
            if (!*val) usage_error(cmd, "flag --%s needs a non-empty value", f->name);
            *(const char **)f->dst = val;
            continue;
        }
        char *end;
        errno = 0;
        unsigned long long v = strtoull(val, &end, 10);
        if (val[0] < '0' || val[0] > '9' || *end || errno)
            usage_error(cmd, "flag --%s: '%s' is not a non-negative integer", f->name, val);
        if (f->kind == F_U64) {
            *(uint64_t *)f->dst = (uint64_t)v;
        } else {
            if (v < (unsigned long long)f->lo || v > (unsigned long long)f->hi)
                usage_error(cmd, "flag --%s: %s is out of range [%lld, %lld]", f->name, val, f->lo, f->hi);
            *(long long *)f->dst = (long long)v;
        }
    }
    return npos;
}

/* ---- writing a split ---------------------------------------------------------------------- */

/* Fills images/labels with samples [start, start+count) of the split; 0 or -1 with err. */
typedef int (*ProduceFn)(void *ctx, size_t start, size_t count, uint8_t *images, int32_t *labels,
                         char *err, size_t errlen);

static void ensure_out_dir(const char *dir, const char *split, int force) {
    if (mkdir_p(dir) != 0) die("%s: cannot create output directory: %s", dir, strerror(errno));
    if (!force && shards_dir_has_split(dir, split))
        die("%s: already holds %s shards (use --force to replace them)", dir, split);
}

/* Checked before anything is written, so a bad request leaves no partial output. */
static void check_split_size(const char *dir, const char *split, size_t total, int nshards) {
    if ((size_t)nshards > total)
        die("%s: cannot cut %zu %s samples into %d shards (every shard needs at least one sample)",
            dir, total, split, nshards);
}

/* Writes `total` samples as `nshards` contiguous near-equal shards, then (with --force) removes
 * shards of an older set with a different shard count, which would make the directory
 * inconsistent. */
static void write_split(const char *dir, const char *split, size_t total, int nshards, int image_size,
                        const ShardAttrs *attrs, ProduceFn produce, void *ctx) {
    check_split_size(dir, split, total, nshards);
    size_t per = (size_t)image_size * (size_t)image_size * 3;
    uint8_t *img = mallocCheck(CHUNK * per);
    int32_t *lab = mallocCheck(CHUNK * sizeof(int32_t));
    char err[2 * SHARD_PATH_MAX], path[SHARD_PATH_MAX], name[64];
    for (int k = 0; k < nshards; k++) {
        size_t a = total * (size_t)k / (size_t)nshards, b = total * (size_t)(k + 1) / (size_t)nshards;
        shard_name(name, sizeof name, split, k, nshards);
        snprintf_check(path, sizeof path, "%s/%s", dir, name);
        ShardWriter w;
        if (shard_writer_open(&w, path, b - a, image_size, attrs, err, sizeof err) != 0) die("%s", err);
        for (size_t s = a; s < b; s += CHUNK) {
            size_t n = b - s < CHUNK ? b - s : CHUNK;
            if (produce(ctx, s, n, img, lab, err, sizeof err) != 0) {
                shard_writer_abort(&w);
                die("%s", err);
            }
            if (shard_writer_append(&w, img, lab, n, err, sizeof err) != 0) die("%s", err);
        }
        if (shard_writer_close(&w, err, sizeof err) != 0) die("%s", err);
    }
    free(img);
    free(lab);
    DIR *d = opendir(dir);
    if (!d) die("%s: cannot list: %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int i, c;
        if (shard_parse_name(e->d_name, split, &i, &c) && c != nshards) {
            snprintf_check(path, sizeof path, "%s/%s", dir, e->d_name);
            if (unlink(path) != 0) die("%s: cannot remove the old shard: %s", path, strerror(errno));
        }
    }
    closedir(d);
    printf("wrote %d %s shard%s (%zu samples) to %s\n", nshards, split, nshards == 1 ? "" : "s", total, dir);
}

/* Per-channel mean and std (units of pixel/255) accumulated over images. */
typedef struct { double sum[3], sq[3]; size_t n; } PixelStats;

static void stats_add(PixelStats *st, const uint8_t *img, size_t pixels) {
    for (size_t p = 0; p < pixels; p++)
        for (int c = 0; c < 3; c++) {
            double v = img[p * 3 + (size_t)c] / 255.0;
            st->sum[c] += v;
            st->sq[c] += v * v;
        }
    st->n += pixels;
}

static void stats_finish(const PixelStats *st, ShardAttrs *a) {
    a->has_norm = 1;
    for (int c = 0; c < 3; c++) {
        double m = st->sum[c] / (double)st->n, var = st->sq[c] / (double)st->n - m * m;
        a->mean[c] = (float)m;
        a->std[c] = (float)sqrt(var > 1e-6 ? var : 1e-6);   /* constant images: keep x finite */
    }
}

/* ---- synth -------------------------------------------------------------------------------- */

typedef struct { uint64_t seed; int split_id, size; } SynthCtx;

static int synth_produce(void *vctx, size_t start, size_t count, uint8_t *images, int32_t *labels,
                         char *err, size_t errlen) {
    (void)err; (void)errlen;
    const SynthCtx *c = vctx;
    size_t per = (size_t)c->size * (size_t)c->size * 3;
    /* Each sample depends only on (seed, split, index): the parallel loop is deterministic. */
    #pragma omp parallel for schedule(static)
    for (long long i = 0; i < (long long)count; i++)
        labels[i] = synth_sample(c->seed, c->split_id, start + (size_t)i, c->size, images + (size_t)i * per);
    return 0;
}

static int cmd_synth(int argc, char **argv) {
    const char *out = NULL;
    long long ntrain = 5000, ntest = 1000, nshards = 2, size = 32;
    uint64_t seed = 1;
    int force = 0;
    Flag flags[] = {
        {"out", F_STR, &out, 0, 0},
        {"train", F_COUNT, &ntrain, 1, 100000000},
        {"test", F_COUNT, &ntest, 1, 100000000},
        {"shards", F_COUNT, &nshards, 1, SHARD_MAX_SHARDS},
        {"seed", F_U64, &seed, 0, 0},
        {"size", F_COUNT, &size, 8, 1024},
        {"force", F_BOOL, &force, 0, 0},
    };
    parse_flags("synth", USAGE_SYNTH, argc, argv, flags, (int)(sizeof flags / sizeof flags[0]), NULL);
    if (!out) usage_error("synth", "--out DIR is required");
    if (nshards > ntrain || nshards > ntest)
        usage_error("synth", "--shards %lld exceeds the %s samples (%lld); every shard needs one",
                    nshards, nshards > ntrain ? "--train" : "--test", nshards > ntrain ? ntrain : ntest);
    ensure_out_dir(out, "train", force);
    ensure_out_dir(out, "test", force);

    ShardAttrs attrs = {.num_classes = SYNTH_NUM_CLASSES, .class_names = (char **)synth_class_names};
    /* mean/std of the training images: one extra generation pass, cheaper than holding them. */
    SynthCtx train = {seed, SYNTH_SPLIT_TRAIN, (int)size}, test = {seed, SYNTH_SPLIT_TEST, (int)size};
    size_t per = (size_t)size * (size_t)size * 3;
    uint8_t *img = mallocCheck(CHUNK * per);
    int32_t lab[CHUNK];
    PixelStats st = {0};
    for (size_t s = 0; s < (size_t)ntrain; s += CHUNK) {
        size_t n = (size_t)ntrain - s < CHUNK ? (size_t)ntrain - s : CHUNK;
        synth_produce(&train, s, n, img, lab, NULL, 0);
        stats_add(&st, img, n * (size_t)size * (size_t)size);
    }
    free(img);
    stats_finish(&st, &attrs);
    write_split(out, "train", (size_t)ntrain, (int)nshards, (int)size, &attrs, synth_produce, &train);
    write_split(out, "test", (size_t)ntest, (int)nshards, (int)size, &attrs, synth_produce, &test);
    printf("mean %.4f %.4f %.4f  std %.4f %.4f %.4f\n", (double)attrs.mean[0], (double)attrs.mean[1],
           (double)attrs.mean[2], (double)attrs.std[0], (double)attrs.std[1], (double)attrs.std[2]);
    return 0;
}

/* ---- cifar10 ------------------------------------------------------------------------------ */

#define CIFAR_REC 3073
static char *cifar_names[10] = {"airplane", "automobile", "bird", "cat", "deer",
                                "dog", "frog", "horse", "ship", "truck"};

typedef struct { uint8_t *images; int32_t *labels; size_t n; } Memory;

static int memory_produce(void *vctx, size_t start, size_t count, uint8_t *images, int32_t *labels,
                          char *err, size_t errlen) {
    (void)err; (void)errlen;
    const Memory *m = vctx;
    memcpy(images, m->images + start * 3072, count * 3072);
    memcpy(labels, m->labels + start, count * sizeof(int32_t));
    return 0;
}

/* Appends the records of one CIFAR-10 batch file to m, converting planar RGB to HWC. */
static void cifar_load(Memory *m, const char *dir, const char *file) {
    char path[SHARD_PATH_MAX];
    snprintf_check(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "rb");
    if (!f) die("%s: cannot open: %s (the CIFAR-10 binary version is expected)", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0) die("%s: cannot stat: %s", path, strerror(errno));
    if (st.st_size <= 0 || st.st_size % CIFAR_REC != 0)
        die("%s: size %lld is not a positive multiple of %d bytes (1 label byte + 3072 pixel bytes per record)",
            path, (long long)st.st_size, CIFAR_REC);
    size_t recs = (size_t)st.st_size / CIFAR_REC;
    m->images = realloc(m->images, (m->n + recs) * 3072);
    m->labels = realloc(m->labels, (m->n + recs) * sizeof(int32_t));
    CHECK(m->images != NULL && m->labels != NULL);
    uint8_t rec[CIFAR_REC];
    for (size_t r = 0; r < recs; r++) {
        if (fread(rec, 1, CIFAR_REC, f) != CIFAR_REC) die("%s: read failed at record %zu", path, r);
        if (rec[0] > 9) die("%s: record %zu has label %d but CIFAR-10 labels are 0..9", path, r, rec[0]);
        uint8_t *dst = m->images + (m->n + r) * 3072;
        for (int p = 0; p < 1024; p++)
            for (int c = 0; c < 3; c++) dst[p * 3 + c] = rec[1 + c * 1024 + p];
        m->labels[m->n + r] = rec[0];
    }
    fclose(f);
    m->n += recs;
}

static int cmd_cifar10(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    long long nshards = 1;
    int force = 0;
    Flag flags[] = {
        {"in", F_STR, &in, 0, 0},
        {"out", F_STR, &out, 0, 0},
        {"shards", F_COUNT, &nshards, 1, SHARD_MAX_SHARDS},
        {"force", F_BOOL, &force, 0, 0},
    };
    parse_flags("cifar10", USAGE_CIFAR, argc, argv, flags, (int)(sizeof flags / sizeof flags[0]), NULL);
    if (!in) usage_error("cifar10", "--in DIR is required");
    if (!out) usage_error("cifar10", "--out DIR is required");
    /* The official archive unpacks to cifar-10-batches-bin/; accept its parent too. */
    char dir[SHARD_PATH_MAX], probe[SHARD_PATH_MAX];
    snprintf_check(dir, sizeof dir, "%s", in);
    snprintf_check(probe, sizeof probe, "%s/data_batch_1.bin", in);
    if (access(probe, F_OK) != 0) {
        snprintf_check(probe, sizeof probe, "%s/cifar-10-batches-bin/data_batch_1.bin", in);
        if (access(probe, F_OK) == 0) snprintf_check(dir, sizeof dir, "%s/cifar-10-batches-bin", in);
    }
    Memory train = {0}, test = {0};
    char file[32];
    for (int b = 1; b <= 5; b++) {
        snprintf_check(file, sizeof file, "data_batch_%d.bin", b);
        cifar_load(&train, dir, file);
    }
    cifar_load(&test, dir, "test_batch.bin");
    check_split_size(in, "train", train.n, (int)nshards);
    check_split_size(in, "test", test.n, (int)nshards);
    ensure_out_dir(out, "train", force);
    ensure_out_dir(out, "test", force);
    ShardAttrs attrs = {.num_classes = 10, .class_names = cifar_names};
    PixelStats st = {0};
    stats_add(&st, train.images, train.n * 1024);
    stats_finish(&st, &attrs);
    write_split(out, "train", train.n, (int)nshards, 32, &attrs, memory_produce, &train);
    write_split(out, "test", test.n, (int)nshards, 32, &attrs, memory_produce, &test);
    printf("mean %.4f %.4f %.4f  std %.4f %.4f %.4f\n", (double)attrs.mean[0], (double)attrs.mean[1],
           (double)attrs.mean[2], (double)attrs.std[0], (double)attrs.std[1], (double)attrs.std[2]);
    free(train.images); free(train.labels); free(test.images); free(test.labels);
    return 0;
}

/* ---- inspect ------------------------------------------------------------------------------ */

/* Validates one file fully (header, labels, every image chunk) and prints its summary.
 * Returns 0, or -1 after printing the one-line error. */
static int inspect_file(const char *path) {
    char err[2 * SHARD_PATH_MAX];
    ShardInfo info;
    int32_t *labels;
    if (shard_read_info(&info, path, 0, 0, &labels, err, sizeof err) != 0) {
        fflush(stdout);
        fprintf(stderr, "%s: error: %s\n", g_progname, err);
        return -1;
    }
    size_t per = (size_t)info.image_size * (size_t)info.image_size * 3;
    size_t step = (64u << 20) / per + 1;   /* ~64 MiB at a time */
    uint8_t *buf = mallocCheck(step * per);
    int rc = 0;
    for (size_t s = 0; s < info.n && rc == 0; s += step) {
        size_t n = info.n - s < step ? info.n - s : step;
        if (shard_read_range(path, s, n, info.image_size, buf, NULL, err, sizeof err) != 0) {
            fflush(stdout);
            fprintf(stderr, "%s: error: %s\n", g_progname, err);
            rc = -1;
        }
    }
    free(buf);
    if (rc == 0) {
        const ShardAttrs *a = &info.attrs;
        printf("%s\n", path);
        printf("  samples      %zu\n", info.n);
        printf("  images       [%zu,%d,%d,3] uint8\n", info.n, info.image_size, info.image_size);
        printf("  num_classes  %d\n", a->num_classes);
        printf("  class_names ");
        if (a->class_names)
            for (int k = 0; k < a->num_classes; k++) printf(" %s", a->class_names[k]);
        else
            printf(" (none)");
        printf("\n  labels      ");
        size_t *hist = callocCheck((size_t)a->num_classes, sizeof(size_t));
        for (size_t i = 0; i < info.n; i++) hist[labels[i]]++;
        for (int k = 0; k < a->num_classes; k++) printf(" %d:%zu", k, hist[k]);
        free(hist);
        if (a->has_norm)
            printf("\n  mean         %.4f %.4f %.4f\n  std          %.4f %.4f %.4f\n",
                   (double)a->mean[0], (double)a->mean[1], (double)a->mean[2],
                   (double)a->std[0], (double)a->std[1], (double)a->std[2]);
        else
            printf("\n  mean/std     (absent: ddptrain uses mean %.2f, std %.2f per channel)\n",
                   (double)SHARD_DEFAULT_MEAN, (double)SHARD_DEFAULT_STD);
    }
    free(labels);
    shard_info_free(&info);
    return rc;
}

static int inspect_dir(const char *dir) {
    const char *splits[2] = {"train", "test"};
    int any = 0, rc = 0;
    char err[2 * SHARD_PATH_MAX];
    for (int k = 0; k < 2; k++) {
        if (!shards_dir_has_split(dir, splits[k])) continue;
        any = 1;
        ShardSet set;
        if (shardset_open(&set, dir, splits[k], 0, 0, err, sizeof err) != 0) {
            fflush(stdout);
            fprintf(stderr, "%s: error: %s\n", g_progname, err);
            rc = -1;
            continue;
        }
        for (int i = 0; i < set.num_shards; i++)
            if (inspect_file(set.shards[i].path) != 0) rc = -1;
        if (rc == 0)
            printf("%s: %s split: %d shard%s, %zu samples\n", dir, splits[k], set.num_shards,
                   set.num_shards == 1 ? "" : "s", set.total);
        shardset_free(&set);
    }
    if (!any) {
        fflush(stdout);
        fprintf(stderr, "%s: error: %s: no train or test shards found (files named train-NNNNN-of-MMMMM.h5 are expected)\n",
                g_progname, dir);
        return -1;
    }
    return rc;
}

static int cmd_inspect(int argc, char **argv) {
    char **pos = callocCheck((size_t)argc + 1, sizeof(char *));
    int n = parse_flags("inspect", USAGE_INSPECT, argc, argv, NULL, 0, &pos);
    if (n == 0) usage_error("inspect", "no FILE or DIR given");
    int rc = 0;
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(pos[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            if (inspect_dir(pos[i]) != 0) rc = 1;
        } else if (inspect_file(pos[i]) != 0) {
            rc = 1;
        }
    }
    free(pos);
    return rc;
}

/* ---- reshard ------------------------------------------------------------------------------ */

typedef struct { const ShardSet *set; int image_size, num_classes; } ReshardCtx;

static int reshard_produce(void *vctx, size_t start, size_t count, uint8_t *images, int32_t *labels,
                           char *err, size_t errlen) {
    const ReshardCtx *c = vctx;
    size_t per = (size_t)c->image_size * (size_t)c->image_size * 3, off = 0, done = 0;
    for (int i = 0; i < c->set->num_shards && done < count; i++) {
        const ShardInfo *s = &c->set->shards[i];
        size_t a = off, b = off + s->n;
        off = b;
        size_t lo = start + done;
        if (lo >= b) continue;
        size_t n = b - lo < count - done ? b - lo : count - done;
        if (shard_read_range(s->path, lo - a, n, c->image_size, images + done * per, labels + done,
                             err, errlen) != 0)
            return -1;
        for (size_t j = 0; j < n; j++)
            if (labels[done + j] < 0 || labels[done + j] >= c->num_classes) {
                snprintf(err, errlen, "%s: label %d at index %zu is outside [0, %d) (num_classes is %d)",
                         s->path, labels[done + j], lo - a + j, c->num_classes, c->num_classes);
                return -1;
            }
        done += n;
    }
    CHECK(done == count);
    return 0;
}

static int cmd_reshard(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    long long nshards = 0;
    int force = 0;
    Flag flags[] = {
        {"in", F_STR, &in, 0, 0},
        {"out", F_STR, &out, 0, 0},
        {"shards", F_COUNT, &nshards, 1, SHARD_MAX_SHARDS},
        {"force", F_BOOL, &force, 0, 0},
    };
    parse_flags("reshard", USAGE_RESHARD, argc, argv, flags, (int)(sizeof flags / sizeof flags[0]), NULL);
    if (!in) usage_error("reshard", "--in DIR is required");
    if (!out) usage_error("reshard", "--out DIR is required");
    if (!nshards) usage_error("reshard", "--shards S is required");
    const char *splits[2] = {"train", "test"};
    ShardSet sets[2];
    int have[2] = {0, 0};
    char err[2 * SHARD_PATH_MAX];
    /* Validate everything before writing anything. */
    for (int k = 0; k < 2; k++) {
        if (!shards_dir_has_split(in, splits[k])) continue;
        if (shardset_open(&sets[k], in, splits[k], 0, 0, err, sizeof err) != 0) die("%s", err);
        have[k] = 1;
    }
    if (!have[0] && !have[1]) {
        struct stat st;
        if (stat(in, &st) != 0) die("%s: cannot open input directory: %s", in, strerror(errno));
        die("%s: no train or test shards found (files named train-NNNNN-of-MMMMM.h5 are expected)", in);
    }
    for (int k = 0; k < 2; k++)
        if (have[k]) check_split_size(in, splits[k], sets[k].total, (int)nshards);
    if (mkdir_p(out) != 0) die("%s: cannot create output directory: %s", out, strerror(errno));
    char rin[PATH_MAX], rout[PATH_MAX];
    if (realpath(in, rin) && realpath(out, rout) && strcmp(rin, rout) == 0)
        die("%s: --out is the same directory as --in (write to a new directory, then replace)", out);
    for (int k = 0; k < 2; k++)
        if (have[k]) ensure_out_dir(out, splits[k], force);
    for (int k = 0; k < 2; k++) {
        if (!have[k]) continue;
        const ShardInfo *s0 = &sets[k].shards[0];
        ReshardCtx ctx = {&sets[k], s0->image_size, s0->attrs.num_classes};
        write_split(out, splits[k], sets[k].total, (int)nshards, s0->image_size, &s0->attrs, reshard_produce, &ctx);
        shardset_free(&sets[k]);
    }
    return 0;
}

int main(int argc, char **argv) {
    g_progname = "ddptrain-data";
    shards_quiet_hdf5();
    if (argc < 2) {
        fputs(USAGE_MAIN, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(USAGE_MAIN, stdout);
        return 0;
    }
    if (strcmp(cmd, "synth") == 0) return cmd_synth(argc - 2, argv + 2);
    if (strcmp(cmd, "cifar10") == 0) return cmd_cifar10(argc - 2, argv + 2);
    if (strcmp(cmd, "inspect") == 0) return cmd_inspect(argc - 2, argv + 2);
    if (strcmp(cmd, "reshard") == 0) return cmd_reshard(argc - 2, argv + 2);
    die_code(2, "unknown command '%s' (commands: synth, cifar10, inspect, reshard; see ddptrain-data --help)", cmd);
}
