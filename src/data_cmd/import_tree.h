/* SPDX-License-Identifier: BSD-3-Clause */
/* import_tree.h - the image tree of ddptrain-data import: its class folders and image files in
 * torchvision's ImageFolder order, every folder listed and checked before any image is read.
 *
 * Layouts: class folders in DIR/train/ and in DIR/test/ (or DIR/val/), the same in both; or
 * one tree of class folders in DIR, split by --test_fraction. Symbolic links are followed as
 * ImageFolder follows them; a link loop is an error rather than a walk that never ends. */
#ifndef DDP_DATA_CMD_IMPORT_TREE_H
#define DDP_DATA_CMD_IMPORT_TREE_H

#include <stddef.h>
#include <stdint.h>

typedef struct { char *path; int32_t label; } ImgFile;
typedef struct { ImgFile *v; size_t n, cap; } ImgList;

/* Appends (path, label); the list takes path. */
void imglist_push(ImgList *l, char *path, int32_t label);

/* A fixed permutation of the list from (seed, split). */
void imglist_shuffle(ImgList *l, uint64_t seed, uint64_t split);

typedef struct {
    ImgList train, test;   /* the files with their labels, in ImageFolder's order */
    char **classes;        /* [ncls], in byte order: class c is label c */
    int ncls;
} ImageTree;

/* Lists the tree at in: with ppm > 0 (--test_fraction in millionths) one tree of class folders
 * whose k-th file of a class is a test image when floor((k+1)ppm/1e6) > floor(k ppm/1e6);
 * else in/train/ and in/test/ (or in/val/) with the same class folders. The folder `out`
 * (--out; may be NULL or not exist yet) is left out wherever the walk meets it, with a line
 * on stdout saying so. Dies with one line naming the folder on anything wrong. */
void image_tree_list(ImageTree *t, const char *in, long long ppm, const char *out);

void image_tree_free(ImageTree *t);

#endif
