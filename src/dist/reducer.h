/* SPDX-License-Identifier: BSD-3-Clause */
/* reducer.h - gradient averaging across ranks in buckets that overlap with backward.
 *
 * Buckets are contiguous slices of the flat gradient buffer, cut at tensor boundaries, in
 * reverse layer order: bucket 0 holds the last layers (whose gradients backward produces
 * first), and is kept small (first_cap_bytes) so communication starts early, as in PyTorch
 * DDP. The buckets at the other end, posted last, are cut small too (first_cap_bytes / 16 for
 * the very last, doubling towards the earlier ones): the last is posted when backward ends and
 * all of it is on the wire while the step waits. The model calls reducer_grad_ready(offset)
 * each time the gradients at offsets >= offset are final; every bucket that lies entirely
 * above the offset is posted as a non-blocking average at once, and the buckets already in
 * flight are polled so that the communication progresses between layers while backward
 * continues. reducer_finish waits for all of them
 * before the optimizer step: on the host for MPI; on a GPU (NCCL) the compute stream waits,
 * and the host goes on to queue the update and the next step. Such a request is reaped by the
 * next reducer_begin (tested) or the one after (waited for: each bucket has two requests,
 * used in alternate steps), so the host runs at most two steps ahead of the reductions and a
 * stuck one still ends in the comm's timeout; reducer_drain waits for all of them, before
 * anything that reads device memory from the host.
 *
 * The reducer only knows a Comm: the same code drives MPI on CPU and NCCL on GPU.
 *
 * Progress between layers alone is coarse: Open MPI moves a non-blocking collective on only
 * inside MPI calls, and a layer of backward can take tens of milliseconds, during which a
 * transfer stalls at its next handshake (rendezvous, next round of the algorithm) with the link
 * idle. On the host (MPI), reducer_start_progress starts a thread that tests the buckets in
 * flight every interval while backward runs, so the link is kept busy and the buckets finish at
 * the wire's pace, not the layers'. The thread and the backward thread take turns through one
 * mutex (the Comm is not thread-safe: its context, the flight recorder); the thread stops
 * polling when reducer_finish starts waiting, and another collective during backward (the
 * synchronised batch norm's) runs under reducer_lock.
 *
 * Compressed buckets (reducer_set_wire, --comm_dtype bf16|fp16, MPI only): a bucket is
 * converted to 16 bits into a staging buffer when posted, summed there (src/base/half.h: each step
 * of the reduction adds in float32 and rounds to 16 bits), and converted back into the
 * gradients, divided by the world size in float32, when it completes: half the bytes on the
 * wire, as DDP's bf16/fp16 compress hooks. */
#ifndef DDP_REDUCER_H
#define DDP_REDUCER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "model/model.h"
#include "base/trace.h"

typedef struct {
    size_t begin, end;       /* [begin, end) of the gradient buffer */
    int posted;
    CommRequest req[2];      /* by step parity (see the top) */
    double t_post, t_done;
} Bucket;

typedef struct {
    Comm *comm;
    float *grads;
    size_t n;
    Bucket *bucket;
    int n_bucket;
    int next;                /* next bucket to post (they are posted in index order) */
    int active;              /* this backward communicates (the last micro-step) */
    long step;               /* for the timeout context */
    int cur;                 /* step parity: which request of each bucket this step uses */
    Trace *trace;
    double t_last_hook;      /* the trace's backward per layer: the last hook's time, and its count */
    int hook_layer;
    double wait_time;        /* seconds the host waited for reductions since last taken */
    CommDtype wire;          /* COMM_FLOAT32, or COMM_BF16 / COMM_FP16 (reducer_set_wire) */
    uint16_t *wire_buf;      /* the 16-bit copy of the gradients, for a 16-bit wire */
    /* the progress thread (reducer_start_progress); the fields below and every Comm call
     * while it runs are guarded by lock */
    int progress_on;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int polling;             /* buckets are in flight and backward runs: the thread tests them */
    int quit;
    long interval_ns;
} Reducer;

/* Buckets from the tensor layout (params in forward order). */
void reducer_init(Reducer *r, Comm *comm, float *grads, const TensorInfo *info, int n_info,
                  size_t cap_bytes, size_t first_cap_bytes, Trace *trace);
void reducer_free(Reducer *r);
/* The default bucket cap for grad_bytes of gradients: an eighth of them, at least 1 MB and at
 * most 25 MB (PyTorch DDP's fixed default). A fixed number of buckets keeps backward and
 * communication pipelined whatever the model's size: with a fixed 25 MB a model of 11 MB is
 * one bucket after backward and nothing overlaps; the floor keeps messages long enough that
 * their latency does not dominate, the ceiling bounds the last bucket's wait on large models. */
size_t reducer_auto_cap(size_t grad_bytes);
/* The element type gradients travel in: COMM_FLOAT32 (default), COMM_BF16 or COMM_FP16 (for a
 * host Comm only: the conversion runs on the CPU). */
void reducer_set_wire(Reducer *r, CommDtype wire);

/* Starts the progress thread (see the top): a pass over the buckets in flight every
 * interval_us microseconds during backward. For a host Comm (MPI) only; a device's (NCCL)
 * progresses on its own. */
void reducer_start_progress(Reducer *r, double interval_us);
/* Around a collective of the backward thread other than the reducer's (sync_bn). */
void reducer_lock(Reducer *r);
void reducer_unlock(Reducer *r);

/* Before each backward: active = 0 on the first k-1 micro-steps of gradient accumulation
 * (nothing is communicated then), 1 on the last. */
void reducer_begin(Reducer *r, int active, long step);

/* The model's GradReadyFn (ctx = Reducer*); each call is also one layer's backward in the
 * trace. */
void reducer_grad_ready(void *ctx, size_t offset);

/* The model's StatsAllreduceFn for --sync_bn (ctx = Reducer*): the batch-norm sums of a layer
 * added up over the ranks in backward, between the progress thread's turns. */
void reducer_stats_allreduce(void *ctx, double *buf, size_t n);

/* Posts what is left and waits for every bucket (see the top for how on a GPU): what is
 * computed afterwards sees the gradients averaged over ranks. */
void reducer_finish(Reducer *r);

/* Waits on the host for every reduction still in flight. */
void reducer_drain(Reducer *r);

/* "12 buckets: 1.0 MB, 24.8 MB, ..." for the log. */
void reducer_describe(const Reducer *r, char *out, size_t n);

#endif
