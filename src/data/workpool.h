/* SPDX-License-Identifier: BSD-3-Clause */
/* workpool.h - a fixed set of threads that run one loop together: fn(ctx, i, worker) for every
 * i in [0, n), each i once, on `threads` threads (the caller's among them). The data loader
 * makes the samples of a batch this way (decode, crop, resize), so that what a worker computes
 * depends on i alone and a batch is the same whatever the thread count. */
#ifndef DDP_WORKPOOL_H
#define DDP_WORKPOOL_H

typedef struct WorkPool WorkPool;   /* opaque */

typedef void (*WorkFn)(void *ctx, int i, int worker);

/* threads >= 1: threads - 1 helper threads are started (signals blocked in them); worker ids
 * are 0 .. threads - 1, the caller's is 0. */
WorkPool *workpool_create(int threads);
int workpool_threads(const WorkPool *p);
/* Runs the loop and returns when every i is done. One run at a time per pool. */
void workpool_run(WorkPool *p, int n, WorkFn fn, void *ctx);
void workpool_free(WorkPool *p);

#endif
