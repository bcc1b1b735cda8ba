/* SPDX-License-Identifier: BSD-3-Clause */
/* device_data.cu - see device_data.h.
 *
 * Per batch the host writes the loader's plan and labels into one slot of a ring of pinned
 * buffers, queues an asynchronous copy of the slot to its device twin and the gather kernel,
 * all on the compute stream. A pinned slot may be rewritten only once its copy has finished,
 * so every slot has an event recorded right after its copy, and the host waits on that event
 * before reusing the slot; with RING_SLOTS slots that wait happens only when the host is that
 * many batches ahead of the GPU. The device twins need no such care: on one stream, a later
 * copy into a slot cannot start before the kernel that read it has finished.
 *
 * Bit-identity with the CPU path: the kernel does no arithmetic on pixel values, it looks
 * each one up in the loader's own normalisation table (a copy of the same floats), and the
 * padding is pixel value 0 looked up the same way. */
#include "build_config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "device_data.h"
#include "ops_cuda.h"
extern "C" {
#include "dist/comm.h"
#include "base/util.h"
}

/* The failing call, file:line and CUDA's message; fatal. Used after open has succeeded. */
#define DD_CUDA_CHECK(call) do { cudaError_t e_ = (call); \
    if (e_ != cudaSuccess) fail_at(__FILE__, __LINE__, #call, cudaGetErrorString(e_)); } while (0)
/* A bad launch shows only at the next runtime call: ask at once, so the message names it. */
#define DD_KERNEL_CHECK(name) do { cudaError_t e_ = cudaGetLastError(); \
    if (e_ != cudaSuccess) fail_at(__FILE__, __LINE__, "launch of " name, cudaGetErrorString(e_)); } while (0)

#define RING_SLOTS 4
/* Left free after the images for activations, workspaces and the rest of training. */
#define HEADROOM_BYTES ((size_t)2 << 30)
#define GATHER_THREADS 256
#define GATHER_MAX_BLOCKS 65536u   /* the kernel strides over the rest */

static_assert(sizeof(SamplePlan) == 12 && alignof(SamplePlan) == 4,
              "SamplePlan must have the same layout on host and device");

struct DeviceData {
    const DataLoader *dl;
    cudaStream_t stream;               /* the compute stream at open */
    int S, max_batch;
    size_t n_images, per;              /* per = S*S*3 bytes */
    uint8_t *images;                   /* device [n_images, S, S, 3] */
    float *lut;                        /* device [3][256] */
    /* Slot k of either ring: SamplePlan [max_batch] at k*slot_bytes, int labels
     * [max_batch] at k*slot_bytes + labels_off. */
    unsigned char *host_ring;          /* pinned */
    unsigned char *dev_ring;
    size_t slot_bytes, labels_off;
    cudaEvent_t copied[RING_SLOTS];    /* recorded after the copy out of each pinned slot */
    int events_made, next_slot;
    size_t bytes;
};

static size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

/* One output element per thread: x[e] with e = ((i*S + y)*S + x)*3 + c, so the writes of a
 * warp are contiguous. Reads are 1-byte gathers from an image that was just read by the
 * neighbouring threads, so they come from cache. */
__global__ void gather_kernel(const uint8_t *__restrict__ images, const float *__restrict__ lut,
                              const SamplePlan *__restrict__ plan, const int *__restrict__ labels_in,
                              int n, int S, float *__restrict__ x, int *__restrict__ labels_out) {
    const unsigned per = (unsigned)S * (unsigned)S * 3u;   /* < 2^31, checked at open */
    const size_t total = (size_t)n * per;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        const size_t i = e / per;
        const unsigned r = (unsigned)(e - i * per);
        const unsigned c = r % 3u, q = r / 3u;
        const int y = (int)(q / (unsigned)S), xx = (int)(q % (unsigned)S);
        const SamplePlan p = plan[i];
        /* dataloader_apply_plan's mapping: out(y, x) = src(y + oy, x' + ox). */
        const int sy = y + p.oy;
        const int sx = (p.flip ? S - 1 - xx : xx) + p.ox;
        unsigned v = 0;   /* the padding */
        if (sy >= 0 && sy < S && sx >= 0 && sx < S)
            v = images[(size_t)p.index * per + ((unsigned)sy * (unsigned)S + (unsigned)sx) * 3u + c];
        x[e] = lut[c * 256u + v];
        if (e < (size_t)n) labels_out[e] = labels_in[e];
    }
}

/* Open's failure path: releases what exists, ignoring further errors (the first is what the
 * caller hears about), and clears CUDA's last error so that a later, unrelated launch check
 * does not report it. */
static DeviceData *open_fail(DeviceData *d, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static DeviceData *open_fail(DeviceData *d, char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    if (d) {
        comm_guard_host_sync();
        if (d->stream) cudaStreamSynchronize(d->stream);
        for (int k = 0; k < d->events_made; k++) cudaEventDestroy(d->copied[k]);
        if (d->host_ring) cudaFreeHost(d->host_ring);
        cudaFree(d->dev_ring);
        cudaFree(d->lut);
        cudaFree(d->images);
        free(d);
    }
    cudaGetLastError();
    return NULL;
}

extern "C" DeviceData *device_data_open(const DataLoader *dl, int max_batch, char *err, size_t errlen) {
    if (!cuda_backend_active())
        return open_fail(NULL, err, errlen, "GPU batches: the CUDA backend is not initialised");
    if (max_batch < dataloader_batch_size(dl))
        return open_fail(NULL, err, errlen, "GPU batches: max_batch %d is below the loader's batch size %d",
                         max_batch, dataloader_batch_size(dl));
    /* the GPU's crop pads with zeros only: reflection is made on the host */
    if (dataloader_pad_reflect(dl))
        return open_fail(NULL, err, errlen, "GPU batches: --crop_pad_mode reflect is applied on the host only");
    const int S = dataloader_image_size(dl);
    const size_t per = (size_t)S * (size_t)S * 3, n = dataloader_num_samples(dl);
    if (per >= ((size_t)1 << 31))
        return open_fail(NULL, err, errlen, "GPU batches: images of %dx%d are too large", S, S);
    const size_t image_bytes = n * per;

    DeviceData *d = (DeviceData *)calloc(1, sizeof *d);
    if (!d) return open_fail(NULL, err, errlen, "GPU batches: out of host memory");
    d->dl = dl;
    d->stream = cuda_compute_stream();
    d->S = S;
    d->max_batch = max_batch;
    d->n_images = n;
    d->per = per;
    d->labels_off = round_up((size_t)max_batch * sizeof(SamplePlan), 256);
    d->slot_bytes = round_up(d->labels_off + (size_t)max_batch * sizeof(int), 256);
    const size_t lut_bytes = 3 * 256 * sizeof(float), ring_bytes = RING_SLOTS * d->slot_bytes;
    d->bytes = image_bytes + lut_bytes + ring_bytes;

    size_t free_b = 0, total_b = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess)
        return open_fail(d, err, errlen, "GPU batches: cudaMemGetInfo: %s", cudaGetErrorString(e));
    if (d->bytes + HEADROOM_BYTES > free_b)
        return open_fail(d, err, errlen,
                         "GPU batches: the rank's %zu images (%.2f GiB) do not fit in GPU memory "
                         "(%.2f GiB free, 2 GiB kept for training)", n,
                         (double)image_bytes / (1u << 30), (double)free_b / (1u << 30));

    if ((e = cudaMalloc((void **)&d->images, image_bytes)) != cudaSuccess ||
        (e = cudaMalloc((void **)&d->lut, lut_bytes)) != cudaSuccess ||
        (e = cudaMalloc((void **)&d->dev_ring, ring_bytes)) != cudaSuccess)
        return open_fail(d, err, errlen, "GPU batches: cudaMalloc of %.2f GiB: %s",
                         (double)d->bytes / (1u << 30), cudaGetErrorString(e));
    if ((e = cudaHostAlloc((void **)&d->host_ring, ring_bytes, cudaHostAllocDefault)) != cudaSuccess)
        return open_fail(d, err, errlen, "GPU batches: cudaHostAlloc of %zu bytes: %s", ring_bytes,
                         cudaGetErrorString(e));
    /* Whole slots are copied: the unused tail of a short batch must be defined bytes. */
    memset(d->host_ring, 0, ring_bytes);
    for (; d->events_made < RING_SLOTS; d->events_made++) {
        /* Blocking sync: the host waits here only when it is a whole ring ahead of the GPU,
         * where a sleeping wait costs nothing and frees the core. */
        if ((e = cudaEventCreateWithFlags(&d->copied[d->events_made],
                                          cudaEventDisableTiming | cudaEventBlockingSync)) != cudaSuccess)
            return open_fail(d, err, errlen, "GPU batches: cudaEventCreateWithFlags: %s", cudaGetErrorString(e));
    }
    /* On the compute stream, so the kernels are ordered after the upload; a plain cudaMemcpy
     * from pageable memory may return before its DMA ends, unordered with a non-blocking
     * stream. Then wait: the source is the loader's pageable memory. */
    comm_guard_host_sync();
    if ((e = cudaMemcpyAsync(d->images, dataloader_images(dl), image_bytes, cudaMemcpyHostToDevice,
                             d->stream)) != cudaSuccess ||
        (e = cudaMemcpyAsync(d->lut, dataloader_lut(dl), lut_bytes, cudaMemcpyHostToDevice,
                             d->stream)) != cudaSuccess ||
        (e = cudaStreamSynchronize(d->stream)) != cudaSuccess)
        return open_fail(d, err, errlen, "GPU batches: upload of %.2f GiB of images: %s",
                         (double)image_bytes / (1u << 30), cudaGetErrorString(e));
    return d;
}

extern "C" void device_data_next(DeviceData *d, DataLoader *dl, float *x_dev, int *labels_dev, int *n_out) {
    if (dl != d->dl) fail_at(__FILE__, __LINE__, "device_data_next", "called with another loader than at open");
    const int k = d->next_slot;
    unsigned char *host = d->host_ring + (size_t)k * d->slot_bytes;
    unsigned char *dev = d->dev_ring + (size_t)k * d->slot_bytes;
    SamplePlan *plan = (SamplePlan *)host;
    int *labels = (int *)(host + d->labels_off);
    /* The slot's previous copy may still be reading it (no-op for a slot never used). With
     * gradient accumulation that copy can be queued behind the previous step's all-reduce on
     * the compute stream: the guard waits for the collectives first, watched by the timeout. */
    if (cudaEventQuery(d->copied[k]) == cudaErrorNotReady) comm_guard_host_sync();
    DD_CUDA_CHECK(cudaEventSynchronize(d->copied[k]));
    const int n = dataloader_next_plan(dl, plan, labels);
    *n_out = n;
    if (n == 0) return;
    /* Checked at open against the batch size; an index out of range would read outside the
     * images on the device, where nothing would report it. */
    CHECK(n <= d->max_batch);
    for (int i = 0; i < n; i++) CHECK(plan[i].index >= 0 && (size_t)plan[i].index < d->n_images);
    DD_CUDA_CHECK(cudaMemcpyAsync(dev, host, d->slot_bytes, cudaMemcpyHostToDevice, d->stream));
    DD_CUDA_CHECK(cudaEventRecord(d->copied[k], d->stream));
    d->next_slot = (k + 1) % RING_SLOTS;

    const size_t total = (size_t)n * d->per;
    size_t blocks = (total + GATHER_THREADS - 1) / GATHER_THREADS;
    if (blocks > GATHER_MAX_BLOCKS) blocks = GATHER_MAX_BLOCKS;
    gather_kernel<<<(unsigned)blocks, GATHER_THREADS, 0, d->stream>>>(
        d->images, d->lut, (const SamplePlan *)dev, (const int *)(dev + d->labels_off), n, d->S,
        x_dev, labels_dev);
    DD_KERNEL_CHECK("gather_kernel");
}

extern "C" size_t device_data_bytes(const DeviceData *d) { return d->bytes; }

extern "C" void device_data_free(DeviceData *d) {
    if (!d) return;
    /* Queued copies read the pinned ring and kernels read the images: let them finish. */
    if (!cuda_backend_active() || cuda_compute_stream() != d->stream)
        fail_at(__FILE__, __LINE__, "device_data_free", "the CUDA backend was freed first");
    comm_guard_host_sync();
    DD_CUDA_CHECK(cudaStreamSynchronize(d->stream));
    for (int k = 0; k < d->events_made; k++) DD_CUDA_CHECK(cudaEventDestroy(d->copied[k]));
    DD_CUDA_CHECK(cudaFreeHost(d->host_ring));
    DD_CUDA_CHECK(cudaFree(d->dev_ring));
    DD_CUDA_CHECK(cudaFree(d->lut));
    DD_CUDA_CHECK(cudaFree(d->images));
    free(d);
}
