/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_import.c - ddptrain-data import: JPEG and PNG images in torchvision's ImageFolder layout
 * into shards, raw S x S pixels or JPEG files of shorter side S. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/rng.h"
#include "base/util.h"
#include "data/image.h"
#include "data/image_fit.h"
#include "data/jpegs.h"
#include "data/shards.h"
#include "data_cmd.h"
#include "flags.h"
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
    "  --out DIR           output directory (created if missing)\n"
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

typedef struct { char *path; int32_t label; } ImgFile;
typedef struct { ImgFile *v; size_t n, cap; } ImgList;

static void imglist_push(ImgList *l, char *path, int32_t label) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1024;
        ImgFile *v = realloc(l->v, l->cap * sizeof *v);
        CHECK(v != NULL);
        l->v = v;
    }
    l->v[l->n++] = (ImgFile){path, label};
}

/* A fixed permutation of the list from (seed, split): Fisher-Yates with rng.h's generator. */
static void imglist_shuffle(ImgList *l, uint64_t seed, uint64_t split) {
    Rng r;
    rng_init(&r, seed, split, 0x696d706f7274ULL);   /* "import" */
    for (size_t i = l->n; i > 1; i--) {
        size_t j = (size_t)(((unsigned __int128)rng_u64(&r) * i) >> 64);   /* below i */
        ImgFile tmp = l->v[i - 1];
        l->v[i - 1] = l->v[j];
        l->v[j] = tmp;
    }
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A growing list of strings the list owns (names, paths). */
typedef struct { char **v; int n, cap; } NameList;

static void namelist_push(NameList *l, const char *str) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        char **v = realloc(l->v, (size_t)l->cap * sizeof *v);
        CHECK(v != NULL);
        l->v = v;
    }
    l->v[l->n] = strdup(str);
    CHECK(l->v[l->n] != NULL);
    l->n++;
}

/* The entries of dir that are folders (want_dirs) or not, without hidden names, in byte order.
 * Symbolic links are followed, as torchvision's ImageFolder follows them; one that leads
 * nowhere (dangling, or a loop of links) is not a folder: it is listed as a file, which its
 * reading then refuses with one line (or --skip_bad skips), as os.walk lists it. */
static char **list_entries(const char *dir, int want_dirs, int *count) {
    DIR *d = opendir(dir);
    if (!d) die("%s: cannot list: %s", QUOTED(dir), strerror(errno));
    NameList names = {0};
    struct dirent *e;
    char path[SHARD_PATH_MAX];
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        snprintf_check(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        int is_dir;
        if (stat(path, &st) == 0) is_dir = S_ISDIR(st.st_mode) != 0;
        else if ((errno == ENOENT || errno == ELOOP) && lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) is_dir = 0;
        else die("%s: cannot stat: %s", QUOTED(path), strerror(errno));
        if (is_dir != want_dirs) continue;
        namelist_push(&names, e->d_name);
    }
    closedir(d);
    if (names.n) qsort(names.v, (size_t)names.n, sizeof *names.v, cmp_name);
    *count = names.n;
    return names.v;
}

static void free_names(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* A class name ddptrain's reader accepts: no C0/C1 control character, valid as a string. */
static void check_class_name(const char *dir, const char *name) {
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
            die("%s: the class folder name holds a control character (0x%02x at byte %ld); rename it",
                QUOTED(dir), p[0] == 0xc2 ? p[1] : p[0], (long)(p - (const unsigned char *)name));
}

/* dir and every folder below it (symbolic links followed, hidden names skipped) into out. A
 * folder that is its own ancestor (a link loop) is an error: the walk would never end. */
enum { MAX_FOLDER_DEPTH = 64 };
typedef struct { dev_t dev; ino_t ino; } DirId;

static void walk_folders(const char *dir, NameList *out, DirId up[MAX_FOLDER_DEPTH], int depth) {
    struct stat st;
    if (stat(dir, &st) != 0) die("%s: cannot stat: %s", QUOTED(dir), strerror(errno));
    for (int i = 0; i < depth; i++)
        if (up[i].dev == st.st_dev && up[i].ino == st.st_ino)
            die("%s: a symbolic link loop (the folder is one of its own parents)", QUOTED(dir));
    if (depth == MAX_FOLDER_DEPTH)
        die("%s: folders nested more than %d deep in a class folder", QUOTED(dir), MAX_FOLDER_DEPTH);
    up[depth] = (DirId){st.st_dev, st.st_ino};
    namelist_push(out, dir);
    int n;
    char **subs = list_entries(dir, 1, &n);
    for (int k = 0; k < n; k++) {
        char path[SHARD_PATH_MAX];
        snprintf_check(path, sizeof path, "%s/%s", dir, subs[k]);
        walk_folders(path, out, up, depth + 1);
    }
    free_names(subs, n);
}

/* Appends the image files of class folder dir with the label, in ImageFolder's order: the
 * folders under it (itself included) in byte order of their paths, as sorted(os.walk(dir)), and
 * in each its files in byte order. The test split's files go to test when ppm > 0 (see
 * --test_fraction): every k-th file of the class in that order. */
static void add_class(const char *dir, int32_t label, ImgList *train, ImgList *test, long long ppm) {
    NameList folders = {0};
    DirId up[MAX_FOLDER_DEPTH];
    walk_folders(dir, &folders, up, 0);
    qsort(folders.v, (size_t)folders.n, sizeof *folders.v, cmp_name);
    long long k = 0;
    for (int f = 0; f < folders.n; f++) {
        int n;
        char **files = list_entries(folders.v[f], 0, &n);
        for (int i = 0; i < n; i++, k++) {
            char path[SHARD_PATH_MAX];
            snprintf_check(path, sizeof path, "%s/%s", folders.v[f], files[i]);
            char *p = strdup(path);
            CHECK(p != NULL);
            int to_test = test && ppm > 0 && ((k + 1) * ppm) / 1000000 > (k * ppm) / 1000000;
            imglist_push(to_test ? test : train, p, label);
        }
        free_names(files, n);
        free(folders.v[f]);
    }
    free(folders.v);
    if (k == 0) die("%s: an empty class folder (every class needs at least one image)", QUOTED(dir));
}

/* What kind of file st is, for "not a regular file (...)". */
static const char *file_kind(mode_t m) {
    return S_ISFIFO(m) ? "a FIFO" : S_ISDIR(m) ? "a folder" : S_ISCHR(m) ? "a character device" :
           S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a file";
}

/* Opens an image file for reading. What is not a regular file is refused before it is opened:
 * opening a FIFO for reading waits for a writer, forever, and opening a device may act on it.
 * O_NONBLOCK and the fstat after the open cover a file replaced by one of those in between.
 * Returns the stream, or NULL with one line in err naming the file. */
static FILE *open_image_file(const char *path, char *err, size_t errlen) {
    char ebuf[128];   /* strerror's buffer is shared between threads */
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        if (e == ENOENT && lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
            errf(err, errlen, "%s: a symbolic link to a missing file", QUOTED(path));
        else
            errf(err, errlen, "%s: cannot read: %s", QUOTED(path), strerror_r(e, ebuf, sizeof ebuf));
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        errf(err, errlen, "%s: not a regular file (%s)", QUOTED(path), file_kind(st.st_mode));
        return NULL;
    }
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        errf(err, errlen, "%s: cannot read: %s", QUOTED(path), strerror_r(errno, ebuf, sizeof ebuf));
        return NULL;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        errf(err, errlen, "%s: not a regular file (%s)", QUOTED(path), file_kind(st.st_mode));
        close(fd);
        return NULL;
    }
    /* A regular file never blocks: the flag is dropped so reads behave as usual. */
    CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0);
    FILE *f = fdopen(fd, "rb");
    CHECK(f != NULL);
    /* The decoders read 4 kB at a time: 64 kB per system call for shared file systems. */
    CHECK(setvbuf(f, NULL, _IOFBF, (size_t)1 << 16) == 0);
    return f;
}

/* Reads, decodes and (S > 0) resizes/crops one file into out (S*S*3 bytes); 0, or -1 with err
 * naming the file. S == 0: the decoded image is returned in *img (the caller frees img->rgb). */
static int load_image(const char *path, int S, uint8_t *out, ImageRGB *img, char *err, size_t errlen) {
    FILE *f = open_image_file(path, err, errlen);
    if (!f) return -1;
    char e[512];
    ImageRGB im;
    int rc = image_decode_file(f, IMAGE_MAX_PIXELS, &im, e, sizeof e);
    fclose(f);
    if (rc != 0) return errf(err, errlen, "%s: %s", QUOTED(path), e);
    if (S > 0) {
        image_resize_crop(&im, S, out);
        free(im.rgb);
    } else {
        *img = im;
    }
    return 0;
}

/* A progress bar on a terminal (stdout), nothing otherwise: the passes print a line each. */
typedef struct {
    int tty;
    size_t total;
    atomic_size_t done;
    double t0, last;
    pthread_mutex_t mu;
} Progress;

static void progress_show(Progress *p, const char *what, int final) {
    if (!p->tty) return;
    if (final) pthread_mutex_lock(&p->mu);
    else if (pthread_mutex_trylock(&p->mu) != 0) return;   /* another thread is printing */
    double t = now_sec();
    if (final || t - p->last >= 0.1) {
        p->last = t;
        size_t d = atomic_load(&p->done);
        double frac = p->total ? (double)d / (double)p->total : 1.0, rate = d / (t - p->t0 + 1e-9);
        char bar[33];
        int fill = (int)(frac * 30 + 0.5);
        bar[0] = '[';
        for (int i = 0; i < 30; i++) bar[1 + i] = i < fill ? '#' : '-';
        bar[31] = ']';
        bar[32] = '\0';
        printf("\r%-6s %s %3.0f%% %zu/%zu %.0f img/s ", what, bar, 100.0 * frac, d, p->total, rate);
        g_console_line_open = 1;
        if (final) {
            printf("\n");
            g_console_line_open = 0;
        }
        fflush(stdout);
    }
    pthread_mutex_unlock(&p->mu);
}

/* One parallel pass over files [0, n): decode (and resize to S when S > 0); per file, its size
 * (w/h, when given), its error (errs, when given; else the first error in file order is kept
 * in err), the exact sums of its pixels (when sums is given, for files with train set). */
typedef struct {
    const ImgFile *files;
    size_t n;
    int S, threads;
    uint8_t *out;                 /* [n][S][S][3], or NULL: scratch per thread */
    int *w, *h;                   /* [n] or NULL */
    char **errs;                  /* [n] or NULL */
    uint64_t *sums;               /* [threads][6]: sum and sum of squares per channel, or NULL */
    atomic_size_t next;
    size_t first_bad;             /* the lowest index that failed (when errs is NULL) */
    char err[2 * SHARD_PATH_MAX];
    pthread_mutex_t mu;
    Progress *prog;
    const char *what;
    atomic_size_t *reads;         /* the test hook's count of reads (see fail_read), or NULL */
    size_t fail_read;
    int fit;                      /* --encoding jpeg: image_fit to S (aspect kept), not S x S */
    int quality;                  /* with fit: encode as JPEG into jpg/jlen at this quality */
    uint8_t **jpg;                /* [n] malloc'd JPEG files, or NULL */
    size_t *jlen;                 /* [n] */
} Pass;

typedef struct { Pass *p; int id; } Worker;

static void *pass_worker(void *arg) {
    Worker *wk = arg;
    Pass *p = wk->p;
    uint8_t *scratch = (p->out || p->S == 0 || p->fit) ? NULL : mallocCheck((size_t)p->S * (size_t)p->S * 3);
    uint64_t acc[6] = {0};
    for (;;) {
        size_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n) break;
        char err[2 * SHARD_PATH_MAX];
        ImageRGB im = {0, 0, NULL};
        uint8_t *dst = p->out ? p->out + i * (size_t)p->S * (size_t)p->S * 3 : scratch;
        int injected = p->reads && atomic_fetch_add(p->reads, 1) + 1 == p->fail_read;
        if (injected) snprintf(err, sizeof err, "%s: cannot read: failure injected by DDPTRAIN_DATA_TEST_FAIL_READ=%zu",
                               p->files[i].path, p->fail_read);
        int bad = injected || load_image(p->files[i].path, p->fit ? 0 : p->S, dst, &im, err, sizeof err) != 0;
        if (!bad && p->fit) {   /* the whole image, resized with its aspect kept */
            ImageRGB fitted;
            image_fit(&im, p->S, &fitted);
            free(im.rgb);
            im = fitted;
            char e[JPEG_ERR_LEN];
            if (p->jpg && jpeg_encode_rgb(im.rgb, im.w, im.h, p->quality, &p->jpg[i], &p->jlen[i], e, sizeof e) != 0) {
                snprintf(err, sizeof err, "%s: %s", QUOTED(p->files[i].path), e);
                free(im.rgb);
                im.rgb = NULL;
                bad = 1;
            }
        }
        if (bad) {
            if (p->errs) {
                p->errs[i] = strdup(err);
                CHECK(p->errs[i] != NULL);
            } else {
                pthread_mutex_lock(&p->mu);
                if (i < p->first_bad) {
                    p->first_bad = i;
                    snprintf(p->err, sizeof p->err, "%s", err);
                }
                pthread_mutex_unlock(&p->mu);
            }
        } else {
            const int square = p->S > 0 && !p->fit;   /* else the pixels are im's */
            const uint8_t *px = square ? dst : im.rgb;
            size_t npx = square ? (size_t)p->S * (size_t)p->S : (size_t)im.w * (size_t)im.h;
            if (p->w) {
                p->w[i] = square ? p->S : im.w;
                p->h[i] = square ? p->S : im.h;
            }
            if (p->sums && p->files[i].label >= 0)
                for (size_t q = 0; q < npx; q++)
                    for (int c = 0; c < 3; c++) {
                        uint64_t v = px[q * 3 + (size_t)c];
                        acc[c] += v;
                        acc[3 + c] += v * v;
                    }
            free(im.rgb);
        }
        if (p->prog) {
            atomic_fetch_add(&p->prog->done, 1);
            progress_show(p->prog, p->what, 0);
        }
    }
    if (p->sums) memcpy(p->sums + 6 * (size_t)wk->id, acc, sizeof acc);
    free(scratch);
    return NULL;
}

static void run_pass(Pass *p) {
    atomic_init(&p->next, 0);
    p->first_bad = (size_t)-1;
    p->err[0] = '\0';
    pthread_mutex_init(&p->mu, NULL);
    int nt = p->threads < 1 ? 1 : p->threads;
    if ((size_t)nt > p->n && p->n > 0) nt = (int)p->n;
    pthread_t *th = mallocCheck((size_t)nt * sizeof *th);
    Worker *wk = mallocCheck((size_t)nt * sizeof *wk);
    for (int t = 0; t < nt; t++) {
        wk[t] = (Worker){p, t};
        CHECK(helper_thread_create(&th[t], pass_worker, &wk[t]) == 0);
    }
    for (int t = 0; t < nt; t++) CHECK(pthread_join(th[t], NULL) == 0);
    free(th);
    free(wk);
    pthread_mutex_destroy(&p->mu);
}

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
    if (c->prog->tty && start + count == c->list->n) {   /* the next split's bar, or output_commit's lines */
        printf("\r\033[K");
        g_console_line_open = 0;
    }
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
    if (rc == 0 && c->prog->tty && start + count == c->list->n) {
        printf("\r\033[K");
        g_console_line_open = 0;
    }
    return rc;
}

static int default_threads(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int cmd_import(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *fraction = NULL, *encoding = "raw";
    long long nshards = 1, size = 0, threads = 0, quality = 0;
    uint64_t seed = 1;
    int skip_bad = 0, force = 0;
    Flag flags[] = {
        {"in", F_STR, &in, 0, 0},
        {"out", F_STR, &out, 0, 0},
        {"seed", F_U64, &seed, 0, 0},
        {"size", F_COUNT, &size, 8, 4096},
        {"encoding", F_STR, &encoding, 0, 0},
        {"quality", F_COUNT, &quality, 1, 100},
        {"test_fraction", F_STR, &fraction, 0, 0},
        {"shards", F_COUNT, &nshards, 1, SHARD_MAX_SHARDS},
        {"threads", F_COUNT, &threads, 1, 1024},
        {"skip_bad", F_BOOL, &skip_bad, 0, 0},
        {"force", F_BOOL, &force, 0, 0},
    };
    parse_flags("import", USAGE_IMPORT, argc, argv, flags, NFLAGS(flags), NULL);
    if (!in) usage_error("import", "--in DIR is required");
    if (!out) usage_error("import", "--out DIR is required");
    long long ppm = 0;
    if (fraction) {
        char *end;
        errno = 0;
        double f = strtod(fraction, &end);
        if (*end || errno || !(f > 0.0 && f < 1.0))
            usage_error("import", "flag --test_fraction: '%s' is not a number between 0 and 1", fraction);
        ppm = llround(f * 1e6);
        if (ppm < 1 || ppm > 999999)
            usage_error("import", "flag --test_fraction: %s is too close to 0 or 1 (steps of 0.000001)", fraction);
    }
    const int jpeg = strcmp(encoding, "jpeg") == 0;
    if (!jpeg && strcmp(encoding, "raw") != 0)
        usage_error("import", "flag --encoding: '%s' is neither raw nor jpeg", QUOTED(encoding));
    if (jpeg && !size)
        usage_error("import", "--encoding jpeg needs --size S (the shorter side every image is resized to)");
    if (!jpeg && quality)
        usage_error("import", "flag --quality applies to --encoding jpeg only");
    if (!quality) quality = JPEG_QUALITY_DEFAULT;
    if (!threads) threads = default_threads();
    if (jpeg && !jpegs_available())
        die("import: --encoding jpeg: this ddptrain-data was built without libjpeg (libjpeg-turbo) (install the -dev package and configure again, or pass --with-jpeg=DIR)");
    if (*image_missing_libs())
        die("import: this ddptrain-data was built without %s (install the -dev package and configure again, or pass --with-jpeg=DIR --with-png=DIR)",
            image_missing_libs());
    double t0 = now_sec();

    /* The file lists, every folder checked before any image is read. */
    char train_dir[SHARD_PATH_MAX], test_dir[SHARD_PATH_MAX], path[SHARD_PATH_MAX];
    struct stat st;
    if (stat(in, &st) != 0 || !S_ISDIR(st.st_mode))
        die("%s: cannot open the image tree: %s", QUOTED(in), stat(in, &st) != 0 ? strerror(errno) : "not a folder");
    snprintf_check(train_dir, sizeof train_dir, "%s/train", in);
    /* test/, or val/ as ImageNet and many other sets name their held-out split */
    snprintf_check(test_dir, sizeof test_dir, "%s/test", in);
    if (!(stat(test_dir, &st) == 0 && S_ISDIR(st.st_mode))) {
        snprintf_check(path, sizeof path, "%s/val", in);
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) snprintf_check(test_dir, sizeof test_dir, "%s", path);
    }
    int has_train = stat(train_dir, &st) == 0 && S_ISDIR(st.st_mode);
    if (fraction && has_train)
        die("%s: holds a train/ folder: --test_fraction splits one tree of class folders (drop it to use train/ and test/)", QUOTED(in));
    if (!fraction && !has_train)
        die("%s: no train/ folder (DIR/train/<class>/* and DIR/test/<class>/* or DIR/val/<class>/* are expected, or one tree DIR/<class>/* with --test_fraction F)", QUOTED(in));
    if (!fraction && !(stat(test_dir, &st) == 0 && S_ISDIR(st.st_mode)))
        die("%s: no test/ or val/ folder beside train/ (DIR/test/<class>/* is expected, or one tree DIR/<class>/* with --test_fraction F)", QUOTED(in));
    const char *class_root = fraction ? in : train_dir;
    int ncls;
    char **classes = list_entries(class_root, 1, &ncls);
    if (ncls == 0) die("%s: no class folders (<class>/ folders holding the images are expected)", QUOTED(class_root));
    if (ncls > SHARD_MAX_CLASSES) die("%s: %d class folders, more than the %d supported", QUOTED(class_root), ncls, SHARD_MAX_CLASSES);
    ImgList train = {0}, test = {0};
    for (int c = 0; c < ncls; c++) {
        snprintf_check(path, sizeof path, "%s/%s", class_root, classes[c]);
        check_class_name(path, classes[c]);
        add_class(path, c, &train, fraction ? &test : NULL, ppm);
    }
    if (!fraction) {
        int ntc;
        char **tcls = list_entries(test_dir, 1, &ntc);
        for (int c = 0; c < ncls || c < ntc; c++)
            if (c >= ntc || c >= ncls || strcmp(classes[c], tcls[c]) != 0) {
                int in_train = c < ncls && (c >= ntc || strcmp(classes[c], tcls[c]) < 0);
                die("%s: the class folders differ from train/'s (class '%s' is in %s/ only): both splits need the same classes",
                    QUOTED(test_dir), QUOTED(in_train ? classes[c] : tcls[c]), in_train ? "train" : QUOTED(strrchr(test_dir, '/') + 1));
            }
        for (int c = 0; c < ncls; c++) {
            snprintf_check(path, sizeof path, "%s/%s", test_dir, classes[c]);
            add_class(path, c, &test, NULL, 0);
        }
        free_names(tcls, ntc);
    }

    /* Pass 1: every image decoded (and resized when --size is given), the bad ones found, the
     * training images' exact pixel sums taken. Nothing is written before it succeeds. */
    size_t all = train.n + test.n;
    ImgFile *files = mallocCheck(all * sizeof *files);
    memcpy(files, train.v, train.n * sizeof *files);
    for (size_t i = 0; i < test.n; i++) files[train.n + i] = (ImgFile){test.v[i].path, -1};   /* -1: no sums */
    Progress prog = {.tty = isatty(fileno(stdout)), .total = train.n + all, .t0 = t0};
    atomic_init(&prog.done, 0);
    pthread_mutex_init(&prog.mu, NULL);
    Pass p1 = {.files = files, .n = all, .S = (int)size, .threads = (int)threads,
               .w = mallocCheck(all * sizeof(int)), .h = mallocCheck(all * sizeof(int)),
               .errs = callocCheck(all, sizeof(char *)), .sums = callocCheck((size_t)threads * 6, sizeof(uint64_t)),
               .prog = &prog, .what = "check", .fit = jpeg};
    run_pass(&p1);
    size_t nbad = 0;
    for (size_t i = 0; i < all; i++) {
        if (!p1.errs[i]) continue;
        if (!skip_bad) die("%s (--skip_bad skips unreadable images)", p1.errs[i]);
        fflush(stdout);
        fprintf(stderr, "%s: skipped %s\n", g_progname, p1.errs[i]);
        nbad++;
    }
    /* The kept files, and the image size. */
    ImgList keep[2] = {{0}, {0}};
    size_t first = (size_t)-1;
    for (size_t i = 0; i < all; i++) {
        if (p1.errs[i]) continue;
        if (first == (size_t)-1) first = i;
        if (!size && p1.w[i] != p1.h[i])
            die("%s is %dx%d, not square: pass --size S (the shorter side is resized to S, then the centre S x S is cropped)",
                QUOTED(files[i].path), p1.w[i], p1.h[i]);
        if (!size && p1.w[i] != p1.w[first])
            die("%s is %dx%d but %s is %dx%d: pass --size S (the shorter side is resized to S, then the centre S x S is cropped)",
                QUOTED(files[first].path), p1.w[first], p1.h[first], QUOTED(files[i].path), p1.w[i], p1.h[i]);
        imglist_push(&keep[i >= train.n], files[i].path, i < train.n ? files[i].label : test.v[i - train.n].label);
    }
    if (first == (size_t)-1) die("%s: no readable image", QUOTED(in));
    int S = size ? (int)size : p1.w[first];
    if (S < 8) die("%s: the images are %dx%d, smaller than 8x8: pass --size S", QUOTED(in), S, S);
    check_split_size(in, "train", keep[0].n, (int)nshards);
    check_split_size(in, "test", keep[1].n, (int)nshards);
    uint64_t tot[6] = {0};
    for (int t = 0; t < threads; t++)
        for (int k = 0; k < 6; k++) tot[k] += p1.sums[6 * (size_t)t + (size_t)k];
    ShardAttrs attrs = {.num_classes = ncls, .class_names = classes, .has_norm = 1};
    double npx = (double)keep[0].n * S * S;
    if (jpeg) {   /* the sums are of each image as stored: its pixels, not S x S */
        npx = 0;
        for (size_t i = 0; i < train.n; i++)
            if (!p1.errs[i]) npx += (double)p1.w[i] * (double)p1.h[i];
    }
    for (int c = 0; c < 3; c++) {
        double m = (double)tot[c] / 255.0 / npx, var = (double)tot[3 + c] / (255.0 * 255.0) / npx - m * m;
        attrs.mean[c] = (float)m;
        attrs.std[c] = (float)sqrt(var > 1e-6 ? var : 1e-6);
    }
    if (!prog.tty)
        printf("checked %zu images (%zu train, %zu test) in %.1f s\n", all, train.n, test.n, now_sec() - t0);

    /* Class folders are read one after the other: in that order a shard, a rank's share of the
     * shards and a streamed chunk would each hold a few classes only (each rank's batch-norm
     * statistics then of its classes alone). Shuffled, each holds all of them. */
    imglist_shuffle(&keep[0], seed, 0);
    imglist_shuffle(&keep[1], seed, 1);

    /* Pass 2: decoded again, a chunk at a time, into the shards. */
    ensure_out_dir(out, "train", force);
    ensure_out_dir(out, "test", force);
    prog.total = all + keep[0].n + keep[1].n;   /* pass 1's files, then pass 2's */
    /* A test hook: DDPTRAIN_DATA_TEST_FAIL_READ=N makes the N-th image read of this writing
     * pass (counted from 1 over both splits, train first) fail as an unreadable file does,
     * as if the file had changed since the first pass checked it; tests/test_hostile_trees.sh
     * uses it to fail the test split after the train split is written. Read here only. */
    const char *hook = getenv("DDPTRAIN_DATA_TEST_FAIL_READ");
    atomic_size_t reads;
    atomic_init(&reads, 0);
    size_t fail_read = hook ? (size_t)strtoull(hook, NULL, 10) : 0;
    ImportCtx c0 = {&keep[0], S, (int)threads, &prog, fail_read ? &reads : NULL, fail_read, (int)quality};
    ImportCtx c1 = {&keep[1], S, (int)threads, &prog, fail_read ? &reads : NULL, fail_read, (int)quality};
    Output o = {.dir = out};
    if (jpeg) {
        write_split_jpeg(&o, "train", keep[0].n, (int)nshards, S, &attrs, import_produce_jpeg, &c0);
        write_split_jpeg(&o, "test", keep[1].n, (int)nshards, S, &attrs, import_produce_jpeg, &c1);
    } else {
        write_split(&o, "train", keep[0].n, (int)nshards, S, &attrs, import_produce, &c0);
        write_split(&o, "test", keep[1].n, (int)nshards, S, &attrs, import_produce, &c1);
    }
    output_commit(&o);
    progress_show(&prog, "done", 1);
    double dt = now_sec() - t0;
    printf("mean %.4f %.4f %.4f  std %.4f %.4f %.4f\n", (double)attrs.mean[0], (double)attrs.mean[1],
           (double)attrs.mean[2], (double)attrs.std[0], (double)attrs.std[1], (double)attrs.std[2]);
    char at[64];
    if (jpeg) snprintf(at, sizeof at, "as JPEG (quality %lld) of shorter side %d", quality, S);
    else snprintf(at, sizeof at, "at %dx%d", S, S);
    printf("imported %zu train and %zu test images of %d classes %s, %zu bad file%s skipped, in %.1f s (%.0f images/s, %lld thread%s)\n",
           keep[0].n, keep[1].n, ncls, at, nbad, nbad == 1 ? "" : "s", dt, (double)(keep[0].n + keep[1].n) / dt,
           threads, threads == 1 ? "" : "s");
    for (size_t i = 0; i < all; i++) free(p1.errs[i]);
    free(p1.errs); free(p1.w); free(p1.h); free(p1.sums);
    for (size_t i = 0; i < train.n; i++) free(train.v[i].path);
    for (size_t i = 0; i < test.n; i++) free(test.v[i].path);
    free(train.v); free(test.v); free(keep[0].v); free(keep[1].v); free(files);
    free_names(classes, ncls);
    return 0;
}
