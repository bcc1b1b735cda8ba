/* SPDX-License-Identifier: BSD-3-Clause */
/* walk.c - the files under a folder (walk.h). The rules are import_tree.c's, written again
 * here because a program's pieces (floor 8) do not share code with ddptrain-data's. */
#include "walk.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/util.h"

void pathlist_push(PathList *l, const char *path) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        char **v = realloc(l->v, l->cap * sizeof *v);
        CHECK(v != NULL);
        l->v = v;
    }
    l->v[l->n] = strdup(path);
    CHECK(l->v[l->n] != NULL);
    l->n++;
}

void pathlist_free(PathList *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* "dir/name" into a new string. */
static char *join(const char *dir, const char *name) {
    const size_t a = strlen(dir), b = strlen(name);
    char *p = mallocCheck(a + b + 2);
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

/* The paths of dir's entries that are folders (want_dirs) or not, hidden names left out, in
 * byte order, appended to out. */
static int list_entries(const char *dir, int want_dirs, PathList *out, char *err, size_t errlen) {
    DIR *d = opendir(dir);
    if (!d) return errf(err, errlen, "%s: cannot list the folder: %s", QUOTED(dir), strerror(errno));
    PathList names = {0};
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char *path = join(dir, e->d_name);
        struct stat st;
        int is_dir = 0;
        if (stat(path, &st) == 0) is_dir = S_ISDIR(st.st_mode) != 0;
        else if ((errno == ENOENT || errno == ELOOP) && lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) is_dir = 0;
        else rc = errf(err, errlen, "%s: cannot stat: %s", QUOTED(path), strerror(errno));
        if (rc == 0 && is_dir == want_dirs) pathlist_push(&names, e->d_name);
        free(path);
    }
    closedir(d);
    if (names.n) qsort(names.v, names.n, sizeof *names.v, cmp_str);
    for (size_t i = 0; rc == 0 && i < names.n; i++) {
        char *path = join(dir, names.v[i]);
        pathlist_push(out, path);
        free(path);
    }
    pathlist_free(&names);
    return rc;
}

typedef struct { dev_t dev; ino_t ino; } DirId;

/* dir and every folder below it into out; up[0..depth) are its parents. */
static int walk_folders(const char *dir, PathList *out, DirId *up, int depth, char *err, size_t errlen) {
    struct stat st;
    if (stat(dir, &st) != 0) return errf(err, errlen, "%s: cannot stat: %s", QUOTED(dir), strerror(errno));
    for (int i = 0; i < depth; i++)
        if (up[i].dev == st.st_dev && up[i].ino == st.st_ino)
            return errf(err, errlen, "%s: a symbolic link loop (the folder is one of its own parents)", QUOTED(dir));
    if (depth == WALK_MAX_DEPTH) return errf(err, errlen, "%s: folders nested more than %d deep", QUOTED(dir), WALK_MAX_DEPTH);
    up[depth] = (DirId){st.st_dev, st.st_ino};
    pathlist_push(out, dir);
    PathList subs = {0};
    int rc = list_entries(dir, 1, &subs, err, errlen);
    for (size_t k = 0; rc == 0 && k < subs.n; k++) rc = walk_folders(subs.v[k], out, up, depth + 1, err, errlen);
    pathlist_free(&subs);
    return rc;
}

int walk_files(const char *dir, PathList *out, char *err, size_t errlen) {
    PathList folders = {0};
    DirId up[WALK_MAX_DEPTH];
    int rc = walk_folders(dir, &folders, up, 0, err, errlen);
    /* sorted(os.walk(dir)): by the folders' paths, not depth first */
    if (rc == 0 && folders.n) qsort(folders.v, folders.n, sizeof *folders.v, cmp_str);
    for (size_t f = 0; rc == 0 && f < folders.n; f++) rc = list_entries(folders.v[f], 0, out, err, errlen);
    pathlist_free(&folders);
    return rc;
}
