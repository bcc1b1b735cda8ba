/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_cifar.c - ddptrain-data cifar10 and cifar100: the CIFAR binary releases into shards.
 *
 * Both releases are records of label bytes and 3072 bytes of R, G and B planes of 32x32; they
 * differ in the label bytes and in where the class names come from. Each split fits in memory
 * (at most 50000 x 3072 bytes), so it is read whole, then written like any other dataset. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/flags.h"
#include "base/util.h"
#include "data/shards.h"
#include "data_cmd.h"
#include "output.h"

static const char *USAGE_CIFAR10 =
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

static const char *USAGE_CIFAR100 =
    "usage: ddptrain-data cifar100 --in DIR --out DIR [--shards S] [--coarse] [--force]\n"
    "\n"
    "Converts the CIFAR-100 binary version (train.bin, test.bin: records of 1 coarse label byte,\n"
    "1 fine label byte and 3072 bytes of R, G, B planes) into train and test shards with the 100\n"
    "fine labels, or the 20 coarse ones, their class names (fine_label_names.txt,\n"
    "coarse_label_names.txt) and the per-channel mean/std of the training images.\n"
    "\n"
    "  --in DIR      directory with the files (or its parent holding cifar-100-binary/)\n"
    "  --out DIR     output directory (created if missing)\n"
    "  --shards S    shards per split (default 1)\n"
    "  --coarse      the 20 coarse labels (superclasses) instead of the 100 fine ones\n"
    "  --force       replace shards already in --out\n";

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

/* A CIFAR binary release: records of nlabels label bytes (label byte k below max[k], called
 * what[k]), then 3072 bytes of R, G and B planes of 32x32. */
typedef struct {
    const char *name;      /* "CIFAR-10" */
    int nlabels;
    int max[2];
    const char *what[2];   /* "", or "coarse " and "fine " */
} CifarFormat;

static const CifarFormat k_cifar10 = {"CIFAR-10", 1, {10, 0}, {"", ""}};
static const CifarFormat k_cifar100 = {"CIFAR-100", 2, {20, 100}, {"coarse ", "fine "}};

/* Appends the records of one file of `fmt` to m, planar RGB turned into HWC, with label byte
 * `keep` as the label. */
static void cifar_load(Memory *m, const char *dir, const char *file, const CifarFormat *fmt, int keep) {
    const int rec_size = fmt->nlabels + 3072;
    char path[SHARD_PATH_MAX];
    snprintf_check(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "rb");
    if (!f) die("%s: cannot open: %s (the %s binary version is expected)", path, strerror(errno), fmt->name);
    struct stat st;
    if (fstat(fileno(f), &st) != 0) die("%s: cannot stat: %s", path, strerror(errno));
    if (st.st_size <= 0 || st.st_size % rec_size != 0)
        die("%s: size %lld is not a positive multiple of %d bytes (%d label byte%s + 3072 pixel bytes per record)",
            path, (long long)st.st_size, rec_size, fmt->nlabels, fmt->nlabels > 1 ? "s" : "");
    size_t recs = (size_t)st.st_size / (size_t)rec_size;
    m->images = realloc(m->images, (m->n + recs) * 3072);
    m->labels = realloc(m->labels, (m->n + recs) * sizeof(int32_t));
    CHECK(m->images != NULL && m->labels != NULL);
    uint8_t rec[2 + 3072];
    for (size_t r = 0; r < recs; r++) {
        if (fread(rec, 1, (size_t)rec_size, f) != (size_t)rec_size) die("%s: read failed at record %zu", path, r);
        for (int k = 0; k < fmt->nlabels; k++)
            if (rec[k] >= fmt->max[k])
                die("%s: record %zu has %slabel %d but %s's %slabels are 0..%d", path, r, fmt->what[k], rec[k],
                    fmt->name, fmt->what[k], fmt->max[k] - 1);
        const uint8_t *planes = rec + fmt->nlabels;
        uint8_t *dst = m->images + (m->n + r) * 3072;
        for (int p = 0; p < 1024; p++)
            for (int c = 0; c < 3; c++) dst[p * 3 + c] = planes[c * 1024 + p];
        m->labels[m->n + r] = rec[keep];
    }
    fclose(f);
    m->n += recs;
}

/* The folder of a binary release: IN when it holds FIRST, else IN/SUB when that does (the
 * official archives unpack into SUB; users name either). A missing file is reported later,
 * by the reader, with its full path. */
static void release_dir(char *dir, size_t n, const char *in, const char *sub, const char *first) {
    char probe[SHARD_PATH_MAX];
    snprintf_check(dir, n, "%s", in);
    snprintf_check(probe, sizeof probe, "%s/%s", in, first);
    if (access(probe, F_OK) != 0) {
        snprintf_check(probe, sizeof probe, "%s/%s/%s", in, sub, first);
        if (access(probe, F_OK) == 0) snprintf_check(dir, n, "%s/%s", in, sub);
    }
}

/* The end both commands share: the splits read from IN written to OUT with the training
 * images' mean/std, then freed. */
static void cifar_write(const char *in, const char *out, int nshards, int force, Memory *train,
                        Memory *test, int num_classes, char **class_names) {
    check_split_size(in, "train", train->n, nshards);
    check_split_size(in, "test", test->n, nshards);
    ensure_out_dir(out, "train", force);
    ensure_out_dir(out, "test", force);
    ShardAttrs attrs = {.num_classes = num_classes, .class_names = class_names};
    PixelStats st = {0};
    stats_add(&st, train->images, train->n * 1024);
    stats_finish(&st, &attrs);
    Output o = {.dir = out};
    write_split(&o, "train", train->n, nshards, 32, &attrs, memory_produce, train);
    write_split(&o, "test", test->n, nshards, 32, &attrs, memory_produce, test);
    output_commit(&o);
    print_mean_std(&attrs);
    free(train->images); free(train->labels); free(test->images); free(test->labels);
}

int cmd_cifar10(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    long long nshards = 1;
    int force = 0;
    Flag flags[] = {
        {STRING_FLAG("in", &in), .value = "DIR", .required = 1},
        {STRING_FLAG("out", &out), .value = "DIR", .required = 1},
        {INT_FLAG("shards", &nshards, 1, SHARD_MAX_SHARDS)},
        {SWITCH_FLAG("force", &force)},
    };
    flags_parse(&(FlagSpec){.cmd = "cifar10", .usage = USAGE_CIFAR10, .flags = flags, .nflags = NFLAGS(flags)}, argc, argv, NULL);
    char dir[SHARD_PATH_MAX];
    release_dir(dir, sizeof dir, in, "cifar-10-batches-bin", "data_batch_1.bin");
    Memory train = {0}, test = {0};
    char file[32];
    for (int b = 1; b <= 5; b++) {
        snprintf_check(file, sizeof file, "data_batch_%d.bin", b);
        cifar_load(&train, dir, file, &k_cifar10, 0);
    }
    cifar_load(&test, dir, "test_batch.bin", &k_cifar10, 0);
    cifar_write(in, out, (int)nshards, force, &train, &test, 10, cifar_names);
    return 0;
}

/* The n class names of a label-names file: one a line, blank lines at the end ignored. */
static char **cifar100_names(const char *dir, const char *file, int n) {
    char path[SHARD_PATH_MAX];
    snprintf_check(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "r");
    if (!f) die("%s: cannot open: %s (the CIFAR-100 binary version is expected)", path, strerror(errno));
    char **names = callocCheck((size_t)n, sizeof(char *));
    char line[256];
    int k = 0;
    long lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') die("%s: line %ld is too long for a class name", path, lineno);
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ')) line[--len] = '\0';
        if (!len) continue;
        if (k == n) die("%s: more than %d class names", path, n);
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
                die("%s: line %ld holds a control character (0x%02x)", path, lineno, (unsigned char)line[i]);
        names[k] = strdup(line);
        CHECK(names[k] != NULL);
        k++;
    }
    fclose(f);
    if (k != n) die("%s: %d class names, but CIFAR-100 has %d", path, k, n);
    return names;
}

int cmd_cifar100(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    long long nshards = 1;
    int force = 0, coarse = 0;
    Flag flags[] = {
        {STRING_FLAG("in", &in), .value = "DIR", .required = 1},
        {STRING_FLAG("out", &out), .value = "DIR", .required = 1},
        {INT_FLAG("shards", &nshards, 1, SHARD_MAX_SHARDS)},
        {SWITCH_FLAG("coarse", &coarse)},
        {SWITCH_FLAG("force", &force)},
    };
    flags_parse(&(FlagSpec){.cmd = "cifar100", .usage = USAGE_CIFAR100, .flags = flags, .nflags = NFLAGS(flags)}, argc, argv, NULL);
    char dir[SHARD_PATH_MAX];
    release_dir(dir, sizeof dir, in, "cifar-100-binary", "train.bin");
    int nc = coarse ? 20 : 100;
    char **names = cifar100_names(dir, coarse ? "coarse_label_names.txt" : "fine_label_names.txt", nc);
    Memory train = {0}, test = {0};
    cifar_load(&train, dir, "train.bin", &k_cifar100, coarse ? 0 : 1);
    cifar_load(&test, dir, "test.bin", &k_cifar100, coarse ? 0 : 1);
    cifar_write(in, out, (int)nshards, force, &train, &test, nc, names);
    for (int k = 0; k < nc; k++) free(names[k]);
    free(names);
    return 0;
}
