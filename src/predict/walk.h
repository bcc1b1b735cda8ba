/* SPDX-License-Identifier: BSD-3-Clause */
/* walk.h - the files under a folder, at any depth, in the order in which ddptrain-data import
 * lists a class folder's (data_cmd/import_tree.c; torchvision's ImageFolder, sorted(os.walk)):
 * the folder and every folder below it in byte order of their paths, and in each its files in
 * byte order. Names that begin with '.' are left out; symbolic links are followed, and one that
 * leads nowhere (dangling, a loop of links) is listed as a file, whose reading then fails as
 * an image; a folder that is one of its own parents (a loop through a link) is refused, as is
 * a tree deeper than WALK_MAX_DEPTH. */
#ifndef DDP_PREDICT_WALK_H
#define DDP_PREDICT_WALK_H

#include <stddef.h>

#define WALK_MAX_DEPTH 64

/* A growing list of paths the list owns. */
typedef struct {
    char **v;
    size_t n, cap;
} PathList;

void pathlist_push(PathList *l, const char *path);
void pathlist_free(PathList *l);

/* Appends the files under dir to out. 0, or -1 with one line in err naming the folder. */
int walk_files(const char *dir, PathList *out, char *err, size_t errlen);

#endif
