/* SPDX-License-Identifier: BSD-3-Clause */
/* batches.h - a batch on its way from the data loader to where the model reads it.
 *
 * On the CPU the model reads the loader's host arrays as they are. On a GPU a split held
 * there whole has its batches made there (cuda/device_data.h: only the loader's plan and the
 * labels travel); any other split's batches are made on the host and uploaded. The arrays hold
 * either split's batches: the larger of the training and evaluation batch. */
#ifndef DDP_BATCHES_H
#define DDP_BATCHES_H

#include "ops/backend.h"
#include "data/dataloader.h"
#include "device/device.h"
#include "base/logger.h"

struct DeviceData;

enum { BATCH_TRAIN = 0, BATCH_TEST = 1 };

typedef struct {
    const Device *dev;
    DataLoader *dl[2];              /* BATCH_TRAIN, BATCH_TEST: the splits' loaders (not owned) */
    size_t image_floats[2];         /* one image of each split: its size^2 x 3 */
    size_t cap_floats;              /* the largest image x and dev_x hold per sample */
    float *x;                       /* the host batch from the loader */
    int *y;
    float *dev_x;                   /* the same on the device (device backends only) */
    int *dev_y;
    struct DeviceData *dd[2];       /* a split held on the GPU; NULL: host batches uploaded */
} Batches;

/* After the model's allocations, so that a GPU's free-memory check sees what training needs;
 * logs where each split's batches are made. */
/* train_size and test_size: the side of each split's images (the network's input size and the
 * size it is evaluated at). */
void batches_init(Batches *b, const Device *dev, DataLoader *train, DataLoader *test, int train_size, int test_size,
                  int max_batch, Logger *log);

/* Progressive resizing: the images of split `which` at size x size from its loader's next
 * epoch on (dataloader_set_output_size), at most the larger of the two sizes at init. */
void batches_set_image_size(Batches *b, int which, int size);

/* The next batch of split `which` where the model reads it. Returns its size, 0 at the end of
 * the split. */
int batches_next(Batches *b, int which, const float **x, const int **y);

void batches_free(Batches *b);

#endif
