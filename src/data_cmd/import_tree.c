/* SPDX-License-Identifier: BSD-3-Clause */
/* import_tree.c - the image tree of ddptrain-data import (import_tree.h). */
#include "import_tree.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/rng.h"
#include "base/util.h"
#include "data/shards.h"

void imglist_push(ImgList *l, char *path, int32_t label) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1024;
        ImgFile *v = realloc(l->v, l->cap * sizeof *v);
        CHECK(v != NULL);
        l->v = v;
    }
    l->v[l->n++] = (ImgFile){path, label};
}

/* Fisher-Yates with rng.h's generator, so that the order is the same on every machine. */
void imglist_shuffle(ImgList *l, uint64_t seed, uint64_t split) {
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

/* A folder by identity, so that a path through a symbolic link is recognised too. */
typedef struct { dev_t dev; ino_t ino; } DirId;

/* The walk's context: the --out folder, when it exists, is left out wherever the walk meets
 * it. Inside the tree (--out data/shards with --in data) it would otherwise be listed as a
 * class of its own shards, or its shards as images of a class, on every later import. */
typedef struct {
    DirId out;
    int has_out;            /* 0: no --out folder yet, nothing to leave out */
    int noted;              /* the line saying so is printed once */
} Walk;

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
static char **list_entries(Walk *w, const char *dir, int want_dirs, int *count) {
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
        if (is_dir && w->has_out && st.st_dev == w->out.dev && st.st_ino == w->out.ino) {
            if (!w->noted) {
                printf("note: %s is the --out folder: left out of the image tree\n", QUOTED(path));
                fflush(stdout);   /* before any line on stderr */
            }
            w->noted = 1;
            continue;
        }
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

static void walk_folders(Walk *w, const char *dir, NameList *out, DirId up[MAX_FOLDER_DEPTH], int depth) {
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
    char **subs = list_entries(w, dir, 1, &n);
    for (int k = 0; k < n; k++) {
        char path[SHARD_PATH_MAX];
        snprintf_check(path, sizeof path, "%s/%s", dir, subs[k]);
        walk_folders(w, path, out, up, depth + 1);
    }
    free_names(subs, n);
}

/* Appends the image files of class folder dir with the label, in ImageFolder's order: the
 * folders under it (itself included) in byte order of their paths, as sorted(os.walk(dir)), and
 * in each its files in byte order. The test split's files go to test when ppm > 0 (see
 * --test_fraction): every k-th file of the class in that order. */
static void add_class(Walk *w, const char *dir, int32_t label, ImgList *train, ImgList *test, long long ppm) {
    NameList folders = {0};
    DirId up[MAX_FOLDER_DEPTH];
    walk_folders(w, dir, &folders, up, 0);
    qsort(folders.v, (size_t)folders.n, sizeof *folders.v, cmp_name);
    long long k = 0;
    for (int f = 0; f < folders.n; f++) {
        int n;
        char **files = list_entries(w, folders.v[f], 0, &n);
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

static int is_folder(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* train_dir and test_dir of the two-tree layout, dying when the layout does not match the
 * command line (one_tree: --test_fraction). */
static void split_folders(const char *in, int one_tree, char *train_dir, char *test_dir) {
    char path[SHARD_PATH_MAX];
    struct stat st;
    if (stat(in, &st) != 0 || !S_ISDIR(st.st_mode))
        die("%s: cannot open the image tree: %s", QUOTED(in), stat(in, &st) != 0 ? strerror(errno) : "not a folder");
    snprintf_check(train_dir, SHARD_PATH_MAX, "%s/train", in);
    /* test/, or val/ as ImageNet and many other sets name their held-out split */
    snprintf_check(test_dir, SHARD_PATH_MAX, "%s/test", in);
    if (!is_folder(test_dir)) {
        snprintf_check(path, sizeof path, "%s/val", in);
        if (is_folder(path)) snprintf_check(test_dir, SHARD_PATH_MAX, "%s", path);
    }
    int has_train = is_folder(train_dir);
    if (one_tree && has_train)
        die("%s: holds a train/ folder: --test_fraction splits one tree of class folders (drop it to use train/ and test/)", QUOTED(in));
    if (!one_tree && !has_train)
        die("%s: no train/ folder (DIR/train/<class>/* and DIR/test/<class>/* or DIR/val/<class>/* are expected, or one tree DIR/<class>/* with --test_fraction F)", QUOTED(in));
    if (!one_tree && !is_folder(test_dir))
        die("%s: no test/ or val/ folder beside train/ (DIR/test/<class>/* is expected, or one tree DIR/<class>/* with --test_fraction F)", QUOTED(in));
}

/* The test split's class folders, listed in tcls, must be train/'s: the one named is the
 * first in byte order that only one split has. */
static void check_same_classes(const char *test_dir, char **classes, int ncls, char **tcls, int ntc) {
    for (int c = 0; c < ncls || c < ntc; c++)
        if (c >= ntc || c >= ncls || strcmp(classes[c], tcls[c]) != 0) {
            int in_train = c < ncls && (c >= ntc || strcmp(classes[c], tcls[c]) < 0);
            die("%s: the class folders differ from train/'s (class '%s' is in %s/ only): both splits need the same classes",
                QUOTED(test_dir), QUOTED(in_train ? classes[c] : tcls[c]), in_train ? "train" : QUOTED(strrchr(test_dir, '/') + 1));
        }
}

void image_tree_list(ImageTree *t, const char *in, long long ppm, const char *out) {
    const int one_tree = ppm > 0;
    char train_dir[SHARD_PATH_MAX], test_dir[SHARD_PATH_MAX], path[SHARD_PATH_MAX];
    *t = (ImageTree){0};
    split_folders(in, one_tree, train_dir, test_dir);
    Walk w = {0};
    struct stat st;
    if (out && stat(out, &st) == 0 && S_ISDIR(st.st_mode)) w = (Walk){{st.st_dev, st.st_ino}, 1, 0};
    const char *class_root = one_tree ? in : train_dir;
    t->classes = list_entries(&w, class_root, 1, &t->ncls);
    if (t->ncls == 0) die("%s: no class folders (<class>/ folders holding the images are expected)", QUOTED(class_root));
    if (t->ncls > SHARD_MAX_CLASSES)
        die("%s: %d class folders, more than the %d supported", QUOTED(class_root), t->ncls, SHARD_MAX_CLASSES);
    for (int c = 0; c < t->ncls; c++) {
        snprintf_check(path, sizeof path, "%s/%s", class_root, t->classes[c]);
        check_class_name(path, t->classes[c]);
        add_class(&w, path, c, &t->train, one_tree ? &t->test : NULL, ppm);
    }
    if (one_tree) return;
    int ntc;
    char **tcls = list_entries(&w, test_dir, 1, &ntc);
    check_same_classes(test_dir, t->classes, t->ncls, tcls, ntc);
    for (int c = 0; c < t->ncls; c++) {
        snprintf_check(path, sizeof path, "%s/%s", test_dir, t->classes[c]);
        add_class(&w, path, c, &t->test, NULL, 0);
    }
    free_names(tcls, ntc);
}

void image_tree_free(ImageTree *t) {
    for (size_t i = 0; i < t->train.n; i++) free(t->train.v[i].path);
    for (size_t i = 0; i < t->test.n; i++) free(t->test.v[i].path);
    free(t->train.v);
    free(t->test.v);
    free_names(t->classes, t->ncls);
    *t = (ImageTree){0};
}
