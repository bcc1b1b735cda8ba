/* SPDX-License-Identifier: BSD-3-Clause */
/* inputs.c - the images a prediction is asked about (inputs.h). */
#include "inputs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/util.h"
#include "data/shards.h"
#include "walk.h"

static Source *push(Inputs *in, SourceKind kind, const char *path, size_t n) {
    if (in->n == in->cap) {
        in->cap = in->cap ? 2 * in->cap : 64;
        Source *v = realloc(in->v, in->cap * sizeof *v);
        CHECK(v != NULL);
        in->v = v;
    }
    Source *s = &in->v[in->n++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->path = strdup(path);
    CHECK(s->path != NULL);
    s->first = in->total;
    s->n = n;
    in->total += n;
    return s;
}

static const float *new_lut(Inputs *in, const ShardAttrs *a) {
    float **v = realloc(in->luts, (in->n_luts + 1) * sizeof *v);
    CHECK(v != NULL);
    in->luts = v;
    float *lut = mallocCheck(3 * 256 * sizeof(float));
    class_list_lut(a->mean, a->std, lut);
    in->luts[in->n_luts++] = lut;
    return lut;
}

/* A shard's classes against the class list's: their number, and their names where both have
 * names (labels of another order would be scored against the wrong classes). */
static int check_classes(const ShardInfo *s, const ClassList *cl, char *err, size_t errlen) {
    if (s->attrs.num_classes != cl->num_classes)
        return errf(err, errlen, "%s: %d classes, but the network has %d", QUOTED(s->path), s->attrs.num_classes,
                    cl->num_classes);
    if (!s->attrs.class_names || !cl->names) return 0;
    for (int k = 0; k < cl->num_classes; k++)
        if (strcmp(s->attrs.class_names[k], cl->names[k]) != 0)
            return errf(err, errlen, "%s: the class names differ from the network's (class %d is '%s' here, '%s' in %s)",
                        QUOTED(s->path), k, QUOTED(s->attrs.class_names[k]), QUOTED(cl->names[k]), QUOTED(cl->from));
    return 0;
}

/* One shard, checked, with its labels; lut: its set's table, or NULL to make one of its own. */
static int add_shard(Inputs *in, const char *path, int image_size, const ClassList *cl, const float *lut, char *err,
                     size_t errlen) {
    ShardInfo info;
    int32_t *labels = NULL;
    /* the labels are checked against the shard's own num_classes, compared with the list's next */
    if (shard_read_info(&info, path, image_size, 0, &labels, err, errlen) != 0) return -1;
    int rc = check_classes(&info, cl, err, errlen);
    if (rc == 0) {
        Source *s = push(in, SRC_SHARD, path, info.n);
        s->labels = labels;
        s->encoding = info.encoding;
        s->lut = lut ? lut : new_lut(in, &info.attrs);
        labels = NULL;
        in->has_labels = 1;
    }
    free(labels);
    shard_info_free(&info);
    return rc;
}

/* A dataset directory's split, shard after shard, normalised by the first shard's attributes
 * as the loader normalises the whole split. */
static int add_shard_set(Inputs *in, const char *dir, const char *split, int image_size, const ClassList *cl,
                         char *err, size_t errlen) {
    ShardSet set;
    if (shardset_open(&set, dir, split, image_size, 0, err, errlen) != 0) return -1;
    const float *lut = new_lut(in, &set.shards[0].attrs);
    int rc = 0;
    for (int i = 0; i < set.num_shards && rc == 0; i++) rc = add_shard(in, set.shards[i].path, image_size, cl, lut, err, errlen);
    shardset_free(&set);
    return rc;
}

/* HDF5's signature at the start of the file: a shard (anything else is taken for an image). */
static int is_hdf5(const char *path) {
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    unsigned char b[8];
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    const int yes = fread(b, 1, 8, f) == 8 && !memcmp(b, sig, 8);
    fclose(f);
    return yes;
}

static int add_arg(Inputs *in, const char *arg, int image_size, const ClassList *cl, char *err, size_t errlen) {
    struct stat st;
    if (stat(arg, &st) != 0) return errf(err, errlen, "%s: cannot open the input: %s", QUOTED(arg), strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        if (S_ISREG(st.st_mode) && is_hdf5(arg)) return add_shard(in, arg, image_size, cl, NULL, err, errlen);
        push(in, SRC_IMAGE, arg, 1);
        return 0;
    }
    if (shards_dir_has_split(arg, "test")) return add_shard_set(in, arg, "test", image_size, cl, err, errlen);
    if (shards_dir_has_split(arg, "train")) return add_shard_set(in, arg, "train", image_size, cl, err, errlen);
    PathList files = {0};
    int rc = walk_files(arg, &files, err, errlen);
    for (size_t i = 0; rc == 0 && i < files.n; i++) push(in, SRC_IMAGE, files.v[i], 1);
    if (rc == 0 && files.n == 0) rc = errf(err, errlen, "%s: a folder without images (nor shards)", QUOTED(arg));
    pathlist_free(&files);
    return rc;
}

int inputs_list(Inputs *in, char *const *args, int nargs, int image_size, const ClassList *cl, char *err,
                size_t errlen) {
    memset(in, 0, sizeof *in);
    for (int a = 0; a < nargs; a++) {
        /* "imgs/" names the folder "imgs": its files are listed as "imgs/x.jpg" */
        char *arg = strdup(args[a]);
        CHECK(arg != NULL);
        for (size_t len = strlen(arg); len > 1 && arg[len - 1] == '/'; len--) arg[len - 1] = '\0';
        const int rc = add_arg(in, arg, image_size, cl, err, errlen);
        free(arg);
        if (rc != 0) {
            inputs_free(in);
            return -1;
        }
    }
    return 0;
}

const Source *inputs_source(const Inputs *in, size_t i) {
    CHECK(i < in->total && in->n > 0);
    size_t lo = 0, hi = in->n;   /* v[lo].first <= i < v[hi].first */
    while (hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2;
        if (in->v[mid].first <= i) lo = mid;
        else hi = mid;
    }
    return &in->v[lo];
}

void inputs_free(Inputs *in) {
    for (size_t i = 0; i < in->n; i++) {
        free(in->v[i].path);
        free(in->v[i].labels);
    }
    free(in->v);
    for (size_t i = 0; i < in->n_luts; i++) free(in->luts[i]);
    free(in->luts);
    memset(in, 0, sizeof *in);
}
