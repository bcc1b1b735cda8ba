/* SPDX-License-Identifier: BSD-3-Clause */
/* prepare.h - an item's network input, made as the run's evaluation made its test images.
 *
 * An image file: decoded as ddptrain-data import decodes one (image.h: PIL's
 * Image.open().convert("RGB")), then torchvision's Resize(R) + CenterCrop(V) on it (transform.h's
 * TF_CENTRE: Pillow's bilinear filter), normalised with the class list's mean and std. V and R
 * are the evaluation's: --val_crop_size and --val_resize_size with --train_crop_size, else
 * --image_size both (what import stores of an image, its Resize(S) + CenterCrop(S)).
 *
 * A shard's sample: the view the run's test loader made of it (splits.c's options for the test
 * split, dataloader.c's make_sample): with --train_crop_size, Resize(R) + CenterCrop(V) of the
 * stored image (a JPEG decoded at the DCT scale the view allows); without, the stored S x S (a
 * JPEG's centre S x S), normalised with its shard set's table.
 *
 * Items are made on a pool of threads, each independent of the others, so the pixels do not
 * depend on the thread count. A file that cannot be read or decoded, or a shard sample that
 * cannot, is marked bad with its one-line reason; nothing here ends the process. */
#ifndef DDP_PREDICT_PREPARE_H
#define DDP_PREDICT_PREPARE_H

#include <stddef.h>

#include "base/config.h"
#include "data/transform.h"
#include "data/workpool.h"
#include "inputs.h"

#define PREPARE_ERR_MAX 600

typedef struct {
    int out;                 /* the network's input: out x out */
    int file_resize;         /* an image file's Resize */
    int shard_mode;          /* TF_CENTRE or TF_PAD_CROP */
    int shard_resize;        /* TF_CENTRE's Resize of a stored image */
    int image_size;          /* S of the shards */
    const float *file_lut;   /* the class list's table */
    WorkPool *pool;
    TransformScratch *scratch;   /* one per worker */
} Preparer;

void preparer_init(Preparer *p, const Config *c, const float *file_lut, int threads);
void preparer_free(Preparer *p);

/* One item's outcome. */
typedef struct {
    int ok;
    int label;                      /* -1: none */
    char err[PREPARE_ERR_MAX];      /* when not ok: "FILE: what is wrong" */
} Prepared;

/* Items [first, first + n) of in into x [n][out][out][3] and res [n]. */
void prepare_items(Preparer *p, const Inputs *in, size_t first, int n, float *x, Prepared *res);

#endif
