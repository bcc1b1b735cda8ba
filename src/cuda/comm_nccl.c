/* SPDX-License-Identifier: BSD-3-Clause */
/* comm_nccl.c - the NCCL backend of comm.h (comm_nccl.h), for DEVICE buffers of the CUDA backend.
 *
 * Streams. Collectives run on a communication stream of their own, so that the reduction of
 * one gradient bucket overlaps the backward of the next layers on the compute stream. A post
 * records an event on the compute stream and makes the communication stream wait for it (the
 * bucket's gradients are complete only when the work queued so far has run), enqueues the
 * collective, and records a completion event; test is cudaEventQuery on it.
 *
 * Hangs. A blocking NCCL communicator waits inside NCCL (or inside a CUDA synchronisation)
 * forever when a peer dies. So the communicator is created non-blocking (config.blocking = 0):
 * no NCCL call blocks, and every wait here is a polling loop that watches the completion event
 * and ncclCommGetAsyncError, and after the comm's timeout prints the same one line as the MPI
 * backend (comm_timeout_abort), which aborts the communicator (abort_local: its kernels stop)
 * and ends the whole job through the world's abort (MPI_Abort or PMIx_Abort).
 *
 * Host waits behind a collective. After comm_wait_stream the compute stream waits for a
 * collective the host no longer watches; a host synchronisation on that stream would then
 * hang with no timeout if a peer died. This communicator registers itself as the host-sync
 * guard (comm.h): the CUDA backend calls comm_guard_host_sync() before each host wait, and
 * nccl_drain polls every collective still in flight, watched by the timeout, first.
 *
 * Host buffers. Callers that broadcast small host values use the blocking operations on host
 * memory; those are staged through a device buffer. The non-blocking iallreduce takes device
 * memory only.
 *
 * The unique id is made on rank 0 (comm_nccl_make_id) and carried to the others by the world
 * (world.h), which owns the launch's channels (PMIx, MPI, a rendezvous file). */
#include "build_config.h"
#ifdef HAVE_NCCL
#include "comm_nccl.h"
#include "ops_cuda.h"
#include "base/util.h"

#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

_Static_assert(sizeof(ncclUniqueId) == COMM_NCCL_ID_BYTES, "COMM_NCCL_ID_BYTES is not sizeof(ncclUniqueId)");

/* Request slots at creation. A slot is held from the post until a test or wait sees the
 * request complete, so the reducer alone holds up to 2 per gradient bucket (one per step
 * parity, see reducer.h), and the bucket count follows --bucket_cap_mb and the model size: no
 * fixed number is enough. slot_take doubles the pool when every slot is held. */
#define NCCL_INITIAL_REQUESTS 64

typedef struct {
    ncclComm_t comm;
    cudaStream_t stream;              /* communication stream */
    cudaEvent_t ready;                /* recorded on the compute stream at each post */
    cudaEvent_t *done;                /* per request slot: recorded after its collective */
    unsigned char *in_use;
    const char **what;                /* per slot: the request's operation and context, for */
    char (*context)[96];              /* nccl_drain's timeout line (the request is the caller's) */
    int nslots;
    void *bounce;                     /* device staging for host buffers */
    size_t bounce_bytes;
    int aborted;
} NcclImpl;

_Static_assert(sizeof(int) <= sizeof(((CommRequest *)0)->handle), "CommRequest.handle too small");

static NcclImpl *impl_of(const Comm *c) { return (NcclImpl *)c->impl; }

/* A failed NCCL or CUDA call inside a collective leaves the peers waiting in theirs; name the
 * call, abort the communicator (so its kernels stop) and end the job. */
static void nccl_fail(Comm *c, const char *file, int line, const char *call, const char *why) {
    fflush(stdout);
    fprintf(stderr, "%s: internal error at %s:%d: %s: %s\n", g_progname, file, line, call, why);
    fflush(stderr);
    if (c) comm_abort_job(c, 1);
    _exit(1);
}

static void nccl_fail_rc(Comm *c, const char *file, int line, const char *call, ncclResult_t rc) {
    char why[512];
    const char *last = c ? ncclGetLastError(impl_of(c)->comm) : NULL;
    snprintf(why, sizeof why, "%s%s%s", ncclGetErrorString(rc), last && *last ? ": " : "", last ? last : "");
    nccl_fail(c, file, line, call, why);
}

/* ncclInProgress is not a failure on a non-blocking communicator: the call continues in the
 * background and nccl_settle waits for it. */
#define NCCL_CHECK(c, call) do { ncclResult_t r_ = (call); \
    if (r_ != ncclSuccess && r_ != ncclInProgress) nccl_fail_rc((c), __FILE__, __LINE__, #call, r_); } while (0)
#define CUDA_CHECK(c, call) do { cudaError_t e_ = (call); \
    if (e_ != cudaSuccess) nccl_fail((c), __FILE__, __LINE__, #call, cudaGetErrorString(e_)); } while (0)

/* Sleep between polls: yield for the first millisecond (a short collective finishes with no
 * added latency), then back off to 200 us so a long wait costs no CPU. The GPU and NCCL's own
 * threads make progress without us. */
static void poll_pause(double waited, long *sleep_ns) {
    if (waited < 1e-3) {
        sched_yield();
        return;
    }
    *sleep_ns = *sleep_ns ? *sleep_ns * 2 : 10000;
    if (*sleep_ns > 200000) *sleep_ns = 200000;
    struct timespec ts = {0, *sleep_ns};
    nanosleep(&ts, NULL);
}

/* An asynchronous NCCL error (a peer's connection dropped, a remote failure) ends the job with
 * NCCL's message; returns 1 while the last call is still being processed in the background. */
static int async_pending(Comm *c, const char *what) {
    ncclResult_t st = ncclSuccess;
    NCCL_CHECK(c, ncclCommGetAsyncError(impl_of(c)->comm, &st));
    if (st == ncclInProgress) return 1;
    if (st != ncclSuccess) nccl_fail_rc(c, __FILE__, __LINE__, what, st);
    return 0;
}

/* Wait until the last NCCL call on a non-blocking communicator has been enqueued. */
static void nccl_settle(Comm *c, const char *what, const char *context) {
    double t0 = now_sec();
    long sleep_ns = 0;
    while (async_pending(c, what)) {
        double waited = now_sec() - t0;
        if (c->timeout_s > 0 && waited > c->timeout_s) comm_timeout_abort(c, what, context);
        poll_pause(waited, &sleep_ns);
    }
}

static ncclDataType_t nccl_type(CommDtype dt) {
    switch (dt) {
    case COMM_FLOAT32: return ncclFloat32;
    case COMM_FLOAT64: return ncclFloat64;
    case COMM_INT64: return ncclInt64;
    case COMM_BF16:
    case COMM_FP16: break;   /* --comm_dtype is refused on GPUs (reducer.h) */
    }
    fail_at(__FILE__, __LINE__, "nccl", "no NCCL collective for this CommDtype");
}

/* COMM_AVG is a sum here, followed by finish_avg: NCCL's ncclAvg multiplies every rank's value
 * by 1/n before summing for floating-point types, which rounds differently from the sum
 * divided by n that comm.h promises (and the MPI backend computes). */
static ncclRedOp_t nccl_op(CommDtype dt, CommOp op) {
    if (op == COMM_AVG && dt == COMM_INT64) fail_at(__FILE__, __LINE__, "COMM_AVG", "defined for float32 and float64 only");
    return ncclSum;
}

/* The division of COMM_AVG, queued on the communication stream after the sum into dbuf. */
static void finish_avg(Comm *c, void *dbuf, size_t count, CommDtype dt, CommOp op) {
    if (op != COMM_AVG || c->world_size == 1) return;
    cuda_div_inplace(dbuf, count, dt == COMM_FLOAT64, c->world_size, impl_of(c)->stream);
}

static int is_device_ptr(const void *p) {
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();   /* an unknown pointer is host memory; clear the error */
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

/* Add slots [m->nslots, n). Requests name their slot by index, so moving the arrays is safe.
 * cudaEventCreate is no stream operation: it neither waits for nor orders against the work
 * queued on either stream (and no stream is ever being captured into a graph here, where
 * creating resources could conflict with the capture). */
static void slots_grow(Comm *c, NcclImpl *m, int n) {
    cudaEvent_t *done = realloc(m->done, (size_t)n * sizeof *done);
    unsigned char *in_use = realloc(m->in_use, (size_t)n);
    const char **what = realloc(m->what, (size_t)n * sizeof *what);
    char(*context)[96] = realloc(m->context, (size_t)n * sizeof *context);
    if (done) m->done = done;
    if (in_use) m->in_use = in_use;
    if (what) m->what = what;
    if (context) m->context = context;
    if (!done || !in_use || !what || !context)
        nccl_fail(c, __FILE__, __LINE__, "realloc", "out of memory for NCCL request slots");
    for (int i = m->nslots; i < n; i++) {
        CUDA_CHECK(c, cudaEventCreateWithFlags(&m->done[i], cudaEventDisableTiming));
        m->in_use[i] = 0;
        m->nslots = i + 1;   /* nccl_free destroys exactly the events created */
    }
}

static int slot_take(Comm *c) {
    NcclImpl *m = impl_of(c);
    for (int i = 0; i < m->nslots; i++)
        if (!m->in_use[i]) {
            m->in_use[i] = 1;
            return i;
        }
    const int s = m->nslots;
    slots_grow(c, m, 2 * m->nslots);
    m->in_use[s] = 1;
    return s;
}

static int req_slot(const CommRequest *req) {
    int s;
    memcpy(&s, req->handle.bytes, sizeof s);
    return s;
}

static void req_begin(Comm *c, CommRequest *req, const char *what, void *buf, size_t count, CommDtype dt,
                      CommOp op) {
    memset(req, 0, sizeof *req);
    req->active = 1;
    req->buf = buf;
    req->count = count;
    req->dtype = dt;
    req->op = op;
    req->what = what;
    memcpy(req->context, c->context, sizeof req->context);
    req->context[sizeof req->context - 1] = '\0';
    req->t_post = now_sec();
    const int s = slot_take(c);
    memcpy(req->handle.bytes, &s, sizeof s);
    impl_of(c)->what[s] = what;
    memcpy(impl_of(c)->context[s], req->context, sizeof req->context);
}

/* The communication stream starts the next collective only after the compute stream's work
 * queued so far (which produced the buffer). */
static void order_after_compute(Comm *c) {
    NcclImpl *m = impl_of(c);
    CUDA_CHECK(c, cudaEventRecord(m->ready, cuda_compute_stream()));
    CUDA_CHECK(c, cudaStreamWaitEvent(m->stream, m->ready, 0));
}

static void post_done(Comm *c, CommRequest *req) {
    NcclImpl *m = impl_of(c);
    CUDA_CHECK(c, cudaEventRecord(m->done[req_slot(req)], m->stream));
}

static int nccl_test(Comm *c, CommRequest *req) {
    NcclImpl *m = impl_of(c);
    const int s = req_slot(req);
    cudaError_t e = cudaEventQuery(m->done[s]);
    if (e == cudaErrorNotReady) {
        async_pending(c, req->what);   /* reports a failed peer instead of waiting for the timeout */
        /* A request the device stream waits on (nccl_wait_stream) is only ever tested: its
         * age is the watchdog. */
        if (c->timeout_s > 0 && now_sec() - req->t_post > c->timeout_s)
            comm_timeout_abort(c, req->what, req->context);
        return 0;
    }
    if (e != cudaSuccess) nccl_fail(c, __FILE__, __LINE__, "cudaEventQuery", cudaGetErrorString(e));
    m->in_use[s] = 0;
    req->active = 0;
    return 1;
}

static void nccl_wait(Comm *c, CommRequest *req) {
    double t0 = now_sec();
    long sleep_ns = 0;
    for (;;) {
        if (nccl_test(c, req)) return;
        double waited = now_sec() - t0;
        if (c->timeout_s > 0 && waited > c->timeout_s) comm_timeout_abort(c, req->what, req->context);
        poll_pause(waited, &sleep_ns);
    }
}

/* The compute stream waits for the collective; the host does not (comm.h). */
static void nccl_wait_stream(Comm *c, CommRequest *req) {
    CUDA_CHECK(c, cudaStreamWaitEvent(cuda_compute_stream(), impl_of(c)->done[req_slot(req)], 0));
}

static void nccl_iallreduce(Comm *c, void *buf, size_t count, CommDtype dt, CommOp op, CommRequest *req) {
    const ncclRedOp_t rop = nccl_op(dt, op);
    if (!is_device_ptr(buf))
        fail_at(__FILE__, __LINE__, "nccl iallreduce", "the buffer is not device memory");
    req_begin(c, req, "iallreduce", buf, count, dt, op);
    order_after_compute(c);
    NCCL_CHECK(c, ncclAllReduce(buf, buf, count, nccl_type(dt), rop, impl_of(c)->comm, impl_of(c)->stream));
    nccl_settle(c, "iallreduce", c->context);
    finish_avg(c, buf, count, dt, op);
    post_done(c, req);
}

static void nccl_drain(Comm *c);

static void *bounce(Comm *c, size_t bytes) {
    NcclImpl *m = impl_of(c);
    if (bytes > m->bounce_bytes) {
        /* cudaFree waits for the whole device, the collectives in flight included: watch them
         * first, so that the synchronisation cannot hang on a dead peer. */
        nccl_drain(c);
        CUDA_CHECK(c, cudaStreamSynchronize(m->stream));
        if (m->bounce) CUDA_CHECK(c, cudaFree(m->bounce));
        m->bounce = NULL;
        CUDA_CHECK(c, cudaMalloc(&m->bounce, bytes));
        m->bounce_bytes = bytes;
    }
    return m->bounce;
}

/* Blocking operations: post and wait. A host buffer goes through the device staging buffer;
 * the copy back happens only after the wait, because a copy into pageable host memory blocks
 * the host, and must not do so while the collective might hang. */
static void nccl_allreduce(Comm *c, void *buf, size_t count, CommDtype dt, CommOp op) {
    NcclImpl *m = impl_of(c);
    const ncclRedOp_t rop = nccl_op(dt, op);
    const size_t bytes = count * comm_dtype_size(dt);
    const int host = !is_device_ptr(buf);
    void *dbuf = host ? bounce(c, bytes) : buf;
    CommRequest req;
    req_begin(c, &req, "allreduce", buf, count, dt, op);
    order_after_compute(c);
    if (host) CUDA_CHECK(c, cudaMemcpyAsync(dbuf, buf, bytes, cudaMemcpyHostToDevice, m->stream));
    NCCL_CHECK(c, ncclAllReduce(dbuf, dbuf, count, nccl_type(dt), rop, m->comm, m->stream));
    nccl_settle(c, "allreduce", c->context);
    finish_avg(c, dbuf, count, dt, op);
    post_done(c, &req);
    nccl_wait(c, &req);
    if (host) CUDA_CHECK(c, cudaMemcpy(buf, dbuf, bytes, cudaMemcpyDeviceToHost));
}

static void nccl_broadcast(Comm *c, void *buf, size_t bytes, int root) {
    NcclImpl *m = impl_of(c);
    CHECK(root >= 0 && root < c->world_size);
    const int host = !is_device_ptr(buf);
    void *dbuf = host ? bounce(c, bytes) : buf;
    CommRequest req;
    req_begin(c, &req, "broadcast", buf, bytes, COMM_FLOAT32, COMM_SUM);
    order_after_compute(c);
    if (host && c->rank == root) CUDA_CHECK(c, cudaMemcpyAsync(dbuf, buf, bytes, cudaMemcpyHostToDevice, m->stream));
    NCCL_CHECK(c, ncclBroadcast(dbuf, dbuf, bytes, ncclUint8, root, m->comm, m->stream));
    nccl_settle(c, "broadcast", c->context);
    post_done(c, &req);
    nccl_wait(c, &req);
    if (host && c->rank != root) CUDA_CHECK(c, cudaMemcpy(buf, dbuf, bytes, cudaMemcpyDeviceToHost));
}

/* NCCL has no barrier: an allreduce of one value is one. */
static void nccl_barrier(Comm *c) {
    NcclImpl *m = impl_of(c);
    float *one = bounce(c, sizeof(float));
    CommRequest req;
    req_begin(c, &req, "barrier", NULL, 0, COMM_FLOAT32, COMM_SUM);
    order_after_compute(c);
    NCCL_CHECK(c, ncclAllReduce(one, one, 1, ncclFloat32, ncclSum, m->comm, m->stream));
    nccl_settle(c, "barrier", c->context);
    post_done(c, &req);
    nccl_wait(c, &req);
}

/* Before the job ends: abort the communicator, so its kernels stop and the GPU is not left
 * spinning on a peer that will never come. */
static void nccl_abort_local(Comm *c) {
    NcclImpl *m = impl_of(c);
    if (m && m->comm && !m->aborted) {
        m->aborted = 1;
        ncclCommAbort(m->comm);
    }
}

/* Every collective posted so far has completed on the device, or the job ends after the
 * timeout with the usual line naming the oldest one's context. Slots stay held: the requests
 * belong to their callers, whose next test or wait releases them. */
static void nccl_drain(Comm *c) {
    NcclImpl *m = impl_of(c);
    double t0 = now_sec();
    long sleep_ns = 0;
    for (int s = 0; s < m->nslots; s++) {
        if (!m->in_use[s]) continue;
        for (;;) {
            cudaError_t e = cudaEventQuery(m->done[s]);
            if (e == cudaSuccess) break;
            if (e != cudaErrorNotReady) nccl_fail(c, __FILE__, __LINE__, "cudaEventQuery", cudaGetErrorString(e));
            async_pending(c, "collective in flight");
            double waited = now_sec() - t0;
            if (c->timeout_s > 0 && waited > c->timeout_s)
                comm_timeout_abort(c, m->what[s], m->context[s]);
            poll_pause(waited, &sleep_ns);
        }
    }
}

static void nccl_free(Comm *c) {
    NcclImpl *m = impl_of(c);
    if (!m->aborted) nccl_drain(c);   /* the synchronisations below cannot hang on a peer then */
    if (m->comm && !m->aborted) {
        /* Finalize flushes what is still queued; on a non-blocking communicator it returns at
         * once and finishes in the background. */
        NCCL_CHECK(c, ncclCommFinalize(m->comm));
        nccl_settle(c, "finalize", "communicator teardown");
        NCCL_CHECK(c, ncclCommDestroy(m->comm));
    }
    CUDA_CHECK(NULL, cudaStreamSynchronize(m->stream));
    for (int i = 0; i < m->nslots; i++) CUDA_CHECK(NULL, cudaEventDestroy(m->done[i]));
    free(m->done);
    free(m->in_use);
    CUDA_CHECK(NULL, cudaEventDestroy(m->ready));
    if (m->bounce) CUDA_CHECK(NULL, cudaFree(m->bounce));
    CUDA_CHECK(NULL, cudaStreamDestroy(m->stream));
    free(m->what);
    free(m->context);
    free(m);
    free(c);
}

static const CommOps nccl_ops = {
    .name = "nccl",
    .allreduce = nccl_allreduce,
    .broadcast = nccl_broadcast,
    .barrier = nccl_barrier,
    .iallreduce = nccl_iallreduce,
    .test = nccl_test,
    .wait = nccl_wait,
    .wait_stream = nccl_wait_stream,
    .drain = nccl_drain,
    .abort_local = nccl_abort_local,
    .free = nccl_free,
};

int comm_nccl_make_id(void *id, char *err, size_t errlen) {
    ncclResult_t r = ncclGetUniqueId((ncclUniqueId *)id);
    if (r != ncclSuccess) return errf(err, errlen, "ncclGetUniqueId: %s", ncclGetErrorString(r));
    return 0;
}

Comm *comm_nccl_create(int rank, int world_size, int device, const void *id_bytes, double timeout_s, char *err,
                       size_t errlen) {
    if (!cuda_backend_active() || cuda_device() != device) {
        snprintf(err, errlen, "the NCCL communicator needs the CUDA backend initialised on device %d first",
                 device);
        return NULL;
    }
    /* Ranks reach this point at different times (data loading, cuDNN plans): the creation
     * waits as long as the start-up check does. */
    double limit = timeout_s > 0 ? timeout_s : 0;
    if (limit > 0 && limit < COMM_STARTUP_TIMEOUT_S) limit = COMM_STARTUP_TIMEOUT_S;
    ncclUniqueId id;
    memcpy(&id, id_bytes, sizeof id);

    NcclImpl *m = callocCheck(1, sizeof *m);
    Comm *c = callocCheck(1, sizeof *c);
    c->ops = &nccl_ops;
    c->impl = m;
    c->rank = rank;
    c->world_size = world_size;
    c->timeout_s = timeout_s > 0 ? timeout_s : 0;
    c->thread_level = 1;   /* like MPI_THREAD_FUNNELED: every call from the creating thread */

    /* Highest priority for the communication stream: a reduction kernel that waits behind a
     * queue of compute kernels delays every rank, not just this one. */
    int lo = 0, hi = 0;
    CUDA_CHECK(NULL, cudaDeviceGetStreamPriorityRange(&lo, &hi));
    CUDA_CHECK(NULL, cudaStreamCreateWithPriority(&m->stream, cudaStreamNonBlocking, hi));
    CUDA_CHECK(NULL, cudaEventCreateWithFlags(&m->ready, cudaEventDisableTiming));
    slots_grow(NULL, m, NCCL_INITIAL_REQUESTS);

    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&m->comm, c->world_size, id, c->rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
        snprintf(err, errlen, "ncclCommInitRankConfig: %s", ncclGetErrorString(r));
        m->comm = NULL;
        m->aborted = 1;
        nccl_free(c);
        return NULL;
    }
    double t0 = now_sec();
    long sleep_ns = 0;
    for (;;) {
        ncclResult_t st = ncclSuccess;
        r = ncclCommGetAsyncError(m->comm, &st);
        if (r == ncclSuccess && st == ncclSuccess) break;
        double waited = now_sec() - t0;
        if (r != ncclSuccess || st != ncclInProgress || (limit > 0 && waited > limit)) {
            const char *why = r != ncclSuccess ? ncclGetErrorString(r) : st != ncclInProgress ? ncclGetErrorString(st)
                                                                                                : "timed out";
            snprintf(err, errlen, "NCCL communicator of %d ranks (rank %d, device %d): %s%s%s", c->world_size,
                     c->rank, device, why, limit > 0 && waited > limit ? " waiting for the other ranks" : "",
                     "");
            ncclCommAbort(m->comm);
            m->aborted = 1;
            nccl_free(c);
            return NULL;
        }
        poll_pause(waited, &sleep_ns);
    }

    int v = 0;
    NCCL_CHECK(c, ncclGetVersion(&v));
    snprintf(c->desc, sizeof c->desc, "comm: nccl (NCCL %d.%d.%d), %d ranks, device %d, timeout %g s",
             v / 10000, v / 100 % 100, v % 100, c->world_size, device, c->timeout_s);
    comm_set_host_sync_guard(c);
    return c;
}

#else
typedef int comm_nccl_not_built;   /* ISO C wants a declaration in every translation unit */
#endif /* HAVE_NCCL */
