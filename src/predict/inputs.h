/* SPDX-License-Identifier: BSD-3-Clause */
/* inputs.h - the images a prediction is asked about, from its INPUT arguments, in order: one
 * list of items numbered from 0, each an image file or a sample of a shard.
 *
 * An INPUT is
 *   - a folder holding shards (a dataset directory): its test split, or its train split when it
 *     has no test split, shard after shard, the set checked as the loader checks it;
 *   - any other folder: the files under it, at any depth (walk.h), each an image;
 *   - a file that begins with HDF5's signature: one shard;
 *   - any other file: an image.
 * Shards must hold images of the run's --image_size and the network's number of classes, and
 * their labels are read (and checked); a shard whose class names differ from the class list's
 * is refused. Which files are images is known only when they are decoded (image.h): a file that
 * is none is a bad image then, not a start-up error. A missing INPUT is. */
#ifndef DDP_PREDICT_INPUTS_H
#define DDP_PREDICT_INPUTS_H

#include <stddef.h>
#include <stdint.h>

#include "classes.h"

typedef enum { SRC_IMAGE = 0, SRC_SHARD = 1 } SourceKind;

/* Items [first, first + n) of the list. */
typedef struct {
    SourceKind kind;
    char *path;               /* the image file or the shard file */
    size_t first, n;          /* an image: n = 1 */
    int32_t *labels;          /* a shard: [n], else NULL */
    int encoding;             /* a shard: SHARD_ENC_RAW or SHARD_ENC_JPEG */
    const float *lut;         /* a shard: its set's normalisation table [3 * 256], as the loader's */
} Source;

typedef struct {
    Source *v;
    size_t n, cap;
    float **luts;             /* the tables the shards point at, one per set (owned) */
    size_t n_luts;
    size_t total;             /* items */
    int has_labels;           /* some item has a label */
} Inputs;

/* image_size: the run's --image_size, which shards must hold; cl: the class list (its number of
 * classes and names). 0, or -1 with one line in err naming the argument or file. */
int inputs_list(Inputs *in, char *const *args, int nargs, int image_size, const ClassList *cl, char *err,
                size_t errlen);

/* The source of item i (< total). */
const Source *inputs_source(const Inputs *in, size_t i);

void inputs_free(Inputs *in);

#endif
