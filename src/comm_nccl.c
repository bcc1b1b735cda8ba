/* comm_nccl.c - the NCCL backend of comm.h, for DEVICE buffers of the CUDA backend.
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
 * backend (comm_timeout_abort), aborts the communicator and ends the process. There is no
 * launcher-wide abort here (that would need MPI or PMIx_Abort), so the other ranks end the same
 * way when their own waits time out, or sooner when the launcher kills the step on this rank's
 * exit (srun --kill-on-bad-exit, mpirun's default).
 *
 * Host buffers. comm_startup_check and callers that broadcast small host values use the
 * blocking operations on host memory; those are staged through a device buffer. The
 * non-blocking iallreduce takes device memory only.
 *
 * The unique id. NCCL needs rank 0's ncclUniqueId on every rank before a communicator exists,
 * so it travels through whatever channel the launch offers, in this order:
 *   1. the bootstrap's PMIx key-value store (`srun --mpi=pmix`, `mpirun` in a PMIx build);
 *   2. an MPI broadcast over MPI_COMM_WORLD (built with MPI, and ranks MPI can connect: the
 *      bootstrap methods comm_mpi_create accepts). MPI stays initialised until nccl_free, which
 *      finalizes it when this file initialised it; comm_free comes before bootstrap_free, so
 *      MPI is finalized before PMIx, the order Open MPI needs;
 *   3. a file in the caller's rendezvous directory (rendezvous.h), which must be on a file
 *      system every node shares: torchrun-style launches, where neither of the above exists.
 *      Rank 0 removes the file once the communicator is up, when every rank has necessarily
 *      read it.
 * Every wait in the exchange gives up after the start-up timeout, as the communicator's
 * creation does, instead of hanging on a rank that never arrives. */
#include "build_config.h"
#ifdef HAVE_NCCL
#include "comm.h"
#include "ops_cuda.h"
#include "rendezvous.h"
#include "util.h"

#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <nccl.h>
#ifdef HAVE_MPI
#include <mpi.h>
#endif

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
    int nslots;
    void *bounce;                     /* device staging for host buffers */
    size_t bounce_bytes;
    int aborted;
    int mpi_we_initialized;           /* the id went over MPI and MPI_Init_thread was ours */
} NcclImpl;

_Static_assert(sizeof(int) <= sizeof(((CommRequest *)0)->handle), "CommRequest.handle too small");

static NcclImpl *impl_of(const Comm *c) { return (NcclImpl *)c->impl; }

/* A failed NCCL or CUDA call inside a collective leaves the peers waiting in theirs; name the
 * call, abort the communicator (so its kernels stop) and end the process. */
static void nccl_fail(Comm *c, const char *file, int line, const char *call, const char *why) {
    fflush(stdout);
    fprintf(stderr, "%s: internal error at %s:%d: %s: %s\n", g_progname, file, line, call, why);
    fflush(stderr);
    if (c) c->ops->abort_job(c, 1);
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
    }
    fail_at(__FILE__, __LINE__, "unknown CommDtype", NULL);
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
    if (done) m->done = done;
    if (in_use) m->in_use = in_use;
    if (!done || !in_use) nccl_fail(c, __FILE__, __LINE__, "realloc", "out of memory for NCCL request slots");
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

static void *bounce(Comm *c, size_t bytes) {
    NcclImpl *m = impl_of(c);
    if (bytes > m->bounce_bytes) {
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

/* Abort the communicator (its kernels stop, so the GPU is not left spinning) and end this
 * process; see the top of the file for how the other ranks end. */
static void nccl_abort_job(Comm *c, int code) {
    NcclImpl *m = impl_of(c);
    fflush(stdout);
    fflush(stderr);
    if (m && m->comm && !m->aborted) {
        m->aborted = 1;
        ncclCommAbort(m->comm);
    }
    _exit(code);
}

static void nccl_free(Comm *c) {
    NcclImpl *m = impl_of(c);
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
#ifdef HAVE_MPI
    /* Here, not later: the caller frees the bootstrap (PMIx) after the comm, and MPI must be
     * finalized first. MPI_Finalize is collective in effect (it may wait for the peers), which
     * is fine: every rank frees its communicator at the end of a run. */
    int finalized = 0;
    if (m->mpi_we_initialized && MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) {
        int rc = MPI_Finalize();
        if (rc != MPI_SUCCESS) fprintf(stderr, "%s: warning: MPI_Finalize: error %d\n", g_progname, rc);
    }
#endif
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
    .abort_job = nccl_abort_job,
    .free = nccl_free,
};

#ifdef HAVE_MPI
/* The bootstrap methods whose ranks MPI connects, comm_mpi_create's rule: for any other launch
 * MPI_Init would start singletons, which Open MPI 4.1 does not survive after a failed PMIx_Init. */
static int mpi_can_connect(const Bootstrap *b) {
    return strcmp(b->method, "pmix") == 0 || strcmp(b->method, "ompi-env") == 0 || strcmp(b->method, "slurm") == 0;
}

static int mpi_errf(char *err, size_t errlen, const char *call, int rc) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error %d", rc);
    return errf(err, errlen, "%s: %s", call, msg);
}

/* Broadcast the id over MPI_COMM_WORLD, initialising MPI if nobody has (*we_initialized = 1).
 * Returns 0; 1 when MPI does not see the ranks the bootstrap described (why in err; MPI is
 * finalized again if it was ours), so that the caller tries the next channel; -1 with err.
 * MPI_COMM_WORLD itself, not a duplicate: MPI_Comm_dup is a blocking collective that could
 * hang, and nothing else in this process uses MPI_COMM_WORLD before this one broadcast. */
static int mpi_share_id(Bootstrap *b, ncclUniqueId *id, double limit, int *we_initialized, char *err,
                        size_t errlen) {
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        /* The level comm_mpi_create asks for, should the process create an MPI comm later. */
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS) return errf(err, errlen, "MPI_Init_thread failed (error %d)", rc);
        *we_initialized = 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank = -1, size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != b->world_size || rank != b->rank) {
        /* Singletons: finalizing is local, so this cannot hang. */
        errf(err, errlen, "MPI sees rank %d of %d but the launcher (%s) said rank %d of %d", rank, size,
             b->method, b->rank, b->world_size);
        if (*we_initialized) MPI_Finalize();
        *we_initialized = 0;
        return 1;
    }
    /* Non-blocking and polled, like every wait here: a blocking MPI_Bcast cannot time out when
     * a rank never arrives. */
    MPI_Request req;
    int rc = MPI_Ibcast(id, (int)sizeof *id, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS) return mpi_errf(err, errlen, "MPI_Ibcast of the NCCL id", rc);
    double t0 = now_sec();
    long sleep_ns = 0;
    for (;;) {
        int done = 0;
        rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_errf(err, errlen, "MPI_Test of the NCCL id broadcast", rc);
        if (done) return 0;
        double waited = now_sec() - t0;
        if (limit > 0 && waited > limit)
            return errf(err, errlen, "rank %d: the MPI broadcast of the NCCL id did not complete within %g s; a "
                        "peer rank is probably dead or stuck", b->rank, limit);
        poll_pause(waited, &sleep_ns);
    }
}
#endif

/* Hand the unique id from rank 0 to every rank through the first channel the launch offers (see
 * the top of the file), waiting up to `limit` seconds (0: forever). On return *via names the
 * channel (for the log: which fallback a launch needed), *mpi_we_initialized says that MPI was
 * initialised here, and a non-empty rdv_key that the id went through a file, which rank 0
 * removes once the communicator is up. Returns 0 or -1 with err. */
static int share_unique_id(Bootstrap *b, const char *rendezvous_dir, double limit, ncclUniqueId *id,
                           const char **via, int *mpi_we_initialized, char *rdv_key, size_t keylen, char *err,
                           size_t errlen) {
    *via = "none (one rank)";
    if (b->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(id);
        if (r != ncclSuccess) {
            snprintf(err, errlen, "ncclGetUniqueId: %s", ncclGetErrorString(r));
            return -1;
        }
    }
    if (b->world_size == 1) return 0;
    if (bootstrap_has_kv(b)) {
        if ((b->rank == 0 && bootstrap_put(b, "ddp-nccl-id", id, sizeof *id) != 0) ||
            bootstrap_commit_fence(b) != 0 || bootstrap_get(b, 0, "ddp-nccl-id", id, sizeof *id) != 0) {
            snprintf(err, errlen, "could not exchange the NCCL id through %s", b->method);
            return -1;
        }
        *via = "PMIx key-value store";
        return 0;
    }
    char no_mpi[320] = "ddptrain was built without MPI";
#ifdef HAVE_MPI
    if (mpi_can_connect(b)) {
        int r = mpi_share_id(b, id, limit, mpi_we_initialized, no_mpi, sizeof no_mpi);
        if (r < 0) snprintf(err, errlen, "%s", no_mpi);
        if (r == 0) *via = "MPI broadcast";
        if (r <= 0) return r;
    } else {
        snprintf(no_mpi, sizeof no_mpi, "MPI cannot connect the ranks of a %s-style launch", b->method);
    }
#endif
    if (!rendezvous_dir)
        return errf(err, errlen, "%d ranks from a %s-style launch: the NCCL id has neither a PMIx key-value store "
                    "nor MPI to travel through (%s), and no directory for a rendezvous file was given: pass "
                    "--job_dir DIR on a file system every node shares, or start the ranks with "
                    "`srun --mpi=pmix` or `mpirun`", b->world_size, b->method, no_mpi);
    if (rendezvous_key(b->world_size, rdv_key, keylen, err, errlen) != 0) return -1;
    if (rendezvous_share(rendezvous_dir, rdv_key, b->rank, b->world_size, id, sizeof *id, limit, err, errlen) != 0) {
        rdv_key[0] = '\0';   /* rank 0 wrote nothing; the others must not remove anything */
        return -1;
    }
    *via = "rendezvous file";
    return 0;
}

/* Once the communicator is up, or has failed, the rendezvous file has served: see the top. */
static Comm *rendezvous_done(Comm *c, const char *dir, const char *key, int rank) {
    if (key[0]) rendezvous_cleanup(dir, key, rank);
    return c;
}

Comm *comm_nccl_create(Bootstrap *b, int device, double timeout_s, const char *rendezvous_dir, char *err,
                       size_t errlen) {
    if (!cuda_backend_active() || cuda_device() != device) {
        snprintf(err, errlen, "the NCCL communicator needs the CUDA backend initialised on device %d first",
                 device);
        return NULL;
    }
    /* Ranks reach this point at different times (data loading, cuDNN plans): the id exchange
     * and the creation wait as long as the start-up check does. */
    double limit = timeout_s > 0 ? timeout_s : 0;
    if (limit > 0 && limit < COMM_STARTUP_TIMEOUT_S) limit = COMM_STARTUP_TIMEOUT_S;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    const char *via = "";
    int mpi_we_initialized = 0;
    char rdv_key[RENDEZVOUS_KEY_MAX + 1] = "";
    /* On failure MPI stays initialised: MPI_Finalize may wait for peers that never come, and
     * the caller is about to exit anyway (which mpirun treats as the job's failure). */
    if (share_unique_id(b, rendezvous_dir, limit, &id, &via, &mpi_we_initialized, rdv_key, sizeof rdv_key, err,
                        errlen) != 0)
        return NULL;

    NcclImpl *m = callocCheck(1, sizeof *m);
    Comm *c = callocCheck(1, sizeof *c);
    c->ops = &nccl_ops;
    c->impl = m;
    c->rank = b->rank;
    c->world_size = b->world_size;
    c->timeout_s = timeout_s > 0 ? timeout_s : 0;
    c->thread_level = 1;   /* like MPI_THREAD_FUNNELED: every call from the creating thread */
    c->boot = b;

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
        return rendezvous_done(NULL, rendezvous_dir, rdv_key, b->rank);
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
            return rendezvous_done(NULL, rendezvous_dir, rdv_key, b->rank);
        }
        poll_pause(waited, &sleep_ns);
    }

    int v = 0;
    NCCL_CHECK(c, ncclGetVersion(&v));
    snprintf(c->desc, sizeof c->desc, "comm: nccl (NCCL %d.%d.%d), %d ranks, device %d, timeout %g s, id by %s",
             v / 10000, v / 100 % 100, v % 100, c->world_size, device, c->timeout_s, via);
    /* Only now may nccl_free finalize MPI: on the failure paths above the peers may never get
     * there (see share_unique_id's call). */
    m->mpi_we_initialized = mpi_we_initialized;
    return rendezvous_done(c, rendezvous_dir, rdv_key, b->rank);
}

#else
typedef int comm_nccl_not_built;   /* ISO C wants a declaration in every translation unit */
#endif /* HAVE_NCCL */
