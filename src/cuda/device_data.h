/* SPDX-License-Identifier: BSD-3-Clause */
/* device_data.h - training batches made on the GPU from this rank's whole shard held in GPU
 * memory. Part of the CUDA backend module (HAVE_CUDA_BACKEND): programs reach these functions
 * through its table (cuda_plugin.h), only the GPU tests link them directly.
 *
 * Why: uploading every float32 batch from the host costs a blocking copy per step and four
 * times the bytes of the images. Instead the uint8 images go to the GPU once, at open; per
 * batch only the loader's plan (dataloader_next_plan: sample index, crop offset, flip) and the
 * labels travel, from pinned memory, asynchronously, and a kernel gathers, crops, flips and
 * normalises. The plans are the CPU path's, and the kernel reads the loader's normalisation
 * table, so a batch is bit-identical to dataloader_next's.
 *
 * Everything is queued on the CUDA backend's compute stream (cuda_compute_stream()), so the
 * ops that consume a batch need no synchronisation, and device_data_next never waits for the
 * GPU except when the host runs a whole ring of batches ahead of it.
 *
 * Requires a successful cuda_backend_init. Failures of CUDA calls after device_data_open
 * print the call and file:line, and exit (fail_at), as ops_cuda.h. */
#ifndef DDP_DEVICE_DATA_H
#define DDP_DEVICE_DATA_H

#include <stddef.h>

#include "data/dataloader.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct DeviceData DeviceData;   /* opaque */

/* Copies the loader's images and normalisation table to the GPU and prepares the ring of
 * pinned plan buffers for batches of up to max_batch samples (at least the loader's batch
 * size). Returns NULL with one line in err when the images do not fit in the free GPU memory
 * with 2 GiB to spare for training, or on any other failure; the caller then keeps using
 * dataloader_next and uploads. The DeviceData serves only this loader (device_data_next
 * checks it), which must outlive it. */
DeviceData *device_data_open(const DataLoader *dl, int max_batch, char *err, size_t errlen);

/* The loader's next batch, made on the GPU: queues on the compute stream the copy of its plan
 * and labels and the kernel writing x_dev, NHWC float32 [n, S, S, 3], and labels_dev, int [n]
 * (both device memory of at least max_batch samples). *n_out receives n, 0 at the end of the
 * epoch (then nothing is queued). Uses the loader's epoch and batch position like
 * dataloader_next (dataloader_start_epoch as usual); does not wait for the GPU, so x_dev must
 * not be read from the host before a synchronisation (cuda_download, cuda_sync). */
void device_data_next(DeviceData *d, DataLoader *dl, float *x_dev, int *labels_dev, int *n_out);

/* GPU memory held, in bytes (the images, the table and the plan ring): for the log. */
size_t device_data_bytes(const DeviceData *d);

/* Waits for the work queued on the compute stream, then releases everything. Call before
 * cuda_backend_free. NULL is a no-op. */
void device_data_free(DeviceData *d);

#ifdef __cplusplus
}
#endif

#endif
