/* SPDX-License-Identifier: BSD-3-Clause */
/* batches.c - see batches.h. */
#include "build_config.h"

#include "batches.h"

#include <stdio.h>
#include <string.h>

#ifdef HAVE_CUDA_BACKEND
#include "device/plugin.h"
#endif
#include "base/util.h"

#ifdef HAVE_CUDA_BACKEND
/* The splits held on the GPU when they fit; otherwise their batches are uploaded, and the log
 * says why. */
static void open_device_data(Batches *b, int max_batch, Logger *log) {
    const CudaPlugin *cu = b->dev->cuda;
    char derr[512];
    /* A streamed split is never whole on the host: its batches are made there and uploaded,
     * as those of a split too large for the GPU. */
    if (dataloader_streaming(b->dl[BATCH_TRAIN])) {
        snprintf(derr, sizeof derr, "the training split is streamed from the shards (--data_in_memory)");
    } else if (dataloader_jpeg(b->dl[BATCH_TRAIN])) {
        snprintf(derr, sizeof derr, "the training split is held as JPEG files, decoded on the host");
    } else if (!dataloader_images(b->dl[BATCH_TRAIN])) {
        snprintf(derr, sizeof derr, "its views are made on the host (--train_crop_size, --auto_augment, --color_jitter)");
    } else {
        b->dd[BATCH_TRAIN] = cu->device_data_open(b->dl[BATCH_TRAIN], max_batch, derr, sizeof derr);
    }
    if (!b->dd[BATCH_TRAIN]) log_warn(log, "data: training images stay on the host (uploaded per batch): %s", derr);
    if (b->dd[BATCH_TRAIN] && dataloader_streaming(b->dl[BATCH_TEST]))
        snprintf(derr, sizeof derr, "the test split is streamed from the shards (--data_in_memory)");
    else if (b->dd[BATCH_TRAIN] && !dataloader_images(b->dl[BATCH_TEST]))
        snprintf(derr, sizeof derr, "the test split is held as JPEG files or resized, on the host");
    else if (b->dd[BATCH_TRAIN])
        b->dd[BATCH_TEST] = cu->device_data_open(b->dl[BATCH_TEST], max_batch, derr, sizeof derr);
    if (b->dd[BATCH_TRAIN] && !b->dd[BATCH_TEST]) log_warn(log, "data: test images stay on the host: %s", derr);
    if (b->dd[BATCH_TRAIN])
        log_info(log, "data: held on GPU %d (%.1f MiB%s); batches cropped, flipped and normalised there", b->dev->gpu,
                 (double)(cu->device_data_bytes(b->dd[BATCH_TRAIN]) +
                          (b->dd[BATCH_TEST] ? cu->device_data_bytes(b->dd[BATCH_TEST]) : 0)) / 1048576.0,
                 b->dd[BATCH_TEST] ? ", test split included" : "");
}
#endif

void batches_init(Batches *b, const Device *dev, DataLoader *train, DataLoader *test, int train_size, int test_size,
                  int max_batch, Logger *log) {
    memset(b, 0, sizeof *b);
    b->dev = dev;
    b->dl[BATCH_TRAIN] = train;
    b->dl[BATCH_TEST] = test;
    b->image_floats[BATCH_TRAIN] = (size_t)train_size * train_size * 3;
    b->image_floats[BATCH_TEST] = (size_t)test_size * test_size * 3;
    /* one array serves both splits: the larger image */
    const size_t img = test_size > train_size ? b->image_floats[BATCH_TEST] : b->image_floats[BATCH_TRAIN];
    b->cap_floats = img;
    b->x = alignedAllocCheck((size_t)max_batch * img * sizeof(float));
    b->y = mallocCheck((size_t)max_batch * sizeof(int));
    if (!dev->be->on_device) return;
    b->dev_x = dev->be->alloc((size_t)max_batch * img * sizeof(float));
    b->dev_y = dev->be->alloc((size_t)max_batch * sizeof(int));
#ifdef HAVE_CUDA_BACKEND
    open_device_data(b, max_batch, log);
#else
    (void)log;
#endif
}

void batches_set_image_size(Batches *b, int which, int size) {
    const size_t floats = (size_t)size * size * 3;
    CHECK(floats <= b->cap_floats);
    dataloader_set_output_size(b->dl[which], size);
    b->image_floats[which] = floats;
}

int batches_next(Batches *b, int which, const float **x, const int **y) {
#ifdef HAVE_CUDA_BACKEND
    if (b->dd[which]) {
        int n;
        b->dev->cuda->device_data_next(b->dd[which], b->dl[which], b->dev_x, b->dev_y, &n);
        *x = b->dev_x;
        *y = b->dev_y;
        return n;
    }
#endif
    const int n = dataloader_next(b->dl[which], b->x, b->y);
    if (n <= 0) return n;
    if (!b->dev->be->on_device) {
        *x = b->x;
        *y = b->y;
        return n;
    }
    b->dev->be->upload(b->dev_x, b->x, (size_t)n * b->image_floats[which] * sizeof(float));
    b->dev->be->upload(b->dev_y, b->y, (size_t)n * sizeof(int));
    *x = b->dev_x;
    *y = b->dev_y;
    return n;
}

void batches_free(Batches *b) {
    free(b->x);
    free(b->y);
    if (b->dev && b->dev->be->on_device) {
#ifdef HAVE_CUDA_BACKEND
        b->dev->cuda->device_data_free(b->dd[BATCH_TRAIN]);
        b->dev->cuda->device_data_free(b->dd[BATCH_TEST]);
#endif
        b->dev->be->release(b->dev_x);
        b->dev->be->release(b->dev_y);
    }
    memset(b, 0, sizeof *b);
}
