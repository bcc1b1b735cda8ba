/* comm_mpi.c - the MPI backend of comm.h (comm_mpi.h).
 *
 * Every operation is non-blocking underneath (MPI_Iallreduce, MPI_Ibcast, MPI_Ibarrier) and
 * completed by one polling loop, because a blocking MPI call cannot time out: if a peer dies
 * or never arrives, MPI_Allreduce waits forever and the job burns its allocation silently. */
#include "build_config.h"
#ifdef HAVE_MPI
#include "comm_mpi.h"
#include "half.h"
#include "util.h"

#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(MPI_Request) <= sizeof(((CommRequest *)0)->handle), "CommRequest.handle too small");

typedef struct {
    MPI_Comm comm;          /* a duplicate of MPI_COMM_WORLD, so our traffic cannot match a
                               library's or another Comm's collectives */
} MpiImpl;

/* An MPI error inside a collective leaves the peers waiting in theirs; exiting this process
 * alone would hang them, so name the call and end the job. */
static void mpi_fail(Comm *c, const char *file, int line, const char *call, int rc) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error %d", rc);
    fflush(stdout);
    fprintf(stderr, "%s: internal error at %s:%d: %s: %s\n", g_progname, file, line, call, msg);
    fflush(stderr);
    comm_abort_job(c, 1);
}
#define MPI_CHECK(c, call) do { int rc_ = (call); \
    if (rc_ != MPI_SUCCESS) mpi_fail((c), __FILE__, __LINE__, #call, rc_); } while (0)

static MPI_Comm mpi_comm(const Comm *c) { return ((const MpiImpl *)c->impl)->comm; }

static MPI_Datatype mpi_type(CommDtype dt) {
    switch (dt) {
    case COMM_FLOAT32: return MPI_FLOAT;
    case COMM_FLOAT64: return MPI_DOUBLE;
    case COMM_INT64: return MPI_INT64_T;
    case COMM_BF16: case COMM_FP16: return MPI_UINT16_T;   /* summed by half_op */
    }
    fail_at(__FILE__, __LINE__, "unknown CommDtype", NULL);
}

static int mpi_count(size_t count) {
    /* MPI counts are int. Buckets and parameter vectors are far below 2^31 elements. */
    if (count > (size_t)INT_MAX) fail_at(__FILE__, __LINE__, "collective larger than INT_MAX elements", NULL);
    return (int)count;
}

static void req_set(CommRequest *req, MPI_Request r) { memcpy(req->handle.bytes, &r, sizeof r); }
static MPI_Request *req_mpi(CommRequest *req) { return (MPI_Request *)(void *)req->handle.bytes; }

static void req_begin(Comm *c, CommRequest *req, const char *what, void *buf, size_t count,
                      CommDtype dt, CommOp op) {
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
}

static void req_complete(Comm *c, CommRequest *req) {
    req->active = 0;
    if (req->op == COMM_AVG) comm_finish_avg(req->buf, req->count, req->dtype, c->world_size);
}

static int mpi_test(Comm *c, CommRequest *req) {
    int done = 0;
    MPI_CHECK(c, MPI_Test(req_mpi(req), &done, MPI_STATUS_IGNORE));
    if (done) req_complete(c, req);
    return done;
}

/* Polls with MPI_Test: Open MPI progresses non-blocking collectives only inside MPI calls, so
 * the first millisecond is spent yielding between tests (a short collective completes with no
 * added latency); after that the sleep grows to 200 us, which keeps a long wait cheap on an
 * oversubscribed node while a multi-round collective still gets a progress call often. */
static void mpi_wait(Comm *c, CommRequest *req) {
    double t0 = now_sec();
    long sleep_ns = 0;
    for (;;) {
        if (mpi_test(c, req)) return;
        double waited = now_sec() - t0;
        if (c->timeout_s > 0 && waited > c->timeout_s) comm_timeout_abort(c, req->what, req->context);
        if (waited < 1e-3) {
            sched_yield();
            continue;
        }
        sleep_ns = sleep_ns ? sleep_ns * 2 : 10000;
        if (sleep_ns > 200000) sleep_ns = 200000;
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
    }
}

/* MPI has no 16-bit float types: they travel as MPI_UINT16_T and are summed by these
 * user-defined (commutative) operations, created on first use and kept for the process. */
static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    half_sum(HALF_BF16, in, inout, (size_t)*len);
}
static void sum_fp16(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    half_sum(HALF_FP16, in, inout, (size_t)*len);
}
static MPI_Op half_op(Comm *c, CommDtype dt) {
    static MPI_Op ops[2] = {MPI_OP_NULL, MPI_OP_NULL};
    int i = dt == COMM_BF16 ? 0 : 1;
    if (ops[i] == MPI_OP_NULL) MPI_CHECK(c, MPI_Op_create(i == 0 ? sum_bf16 : sum_fp16, 1, &ops[i]));
    return ops[i];
}

static void mpi_iallreduce(Comm *c, void *buf, size_t count, CommDtype dt, CommOp op, CommRequest *req) {
    if (op == COMM_AVG && dt == COMM_INT64) comm_finish_avg(buf, count, dt, c->world_size);   /* reports */
    int half = dt == COMM_BF16 || dt == COMM_FP16;
    if (half && op != COMM_SUM) fail_at(__FILE__, __LINE__, "iallreduce", "16-bit floats are summed only");
    req_begin(c, req, "iallreduce", buf, count, dt, op);
    MPI_Request r;
    MPI_CHECK(c, MPI_Iallreduce(MPI_IN_PLACE, buf, mpi_count(count), mpi_type(dt), half ? half_op(c, dt) : MPI_SUM,
                                mpi_comm(c), &r));
    req_set(req, r);
}

static void mpi_allreduce(Comm *c, void *buf, size_t count, CommDtype dt, CommOp op) {
    CommRequest req;
    mpi_iallreduce(c, buf, count, dt, op, &req);
    req.what = "allreduce";
    mpi_wait(c, &req);
}

static void mpi_broadcast(Comm *c, void *buf, size_t bytes, int root) {
    CommRequest req;
    CHECK(root >= 0 && root < c->world_size);
    req_begin(c, &req, "broadcast", buf, bytes, COMM_FLOAT32, COMM_SUM);
    MPI_Request r;
    MPI_CHECK(c, MPI_Ibcast(buf, mpi_count(bytes), MPI_BYTE, root, mpi_comm(c), &r));
    req_set(&req, r);
    mpi_wait(c, &req);
}

static void mpi_barrier(Comm *c) {
    CommRequest req;
    req_begin(c, &req, "barrier", NULL, 0, COMM_FLOAT32, COMM_SUM);
    MPI_Request r;
    MPI_CHECK(c, MPI_Ibarrier(mpi_comm(c), &r));
    req_set(&req, r);
    mpi_wait(c, &req);
}

/* Both requests polled as in mpi_wait; the receive's completion is timed on its own, since
 * the send may still wait for a slower peer. */
static double mpi_sendrecv(Comm *c, const void *sendbuf, int dest, void *recvbuf, int src, size_t bytes) {
    CHECK(dest >= 0 && dest < c->world_size && src >= 0 && src < c->world_size);
    const int tag = 7;   /* the only point-to-point traffic on this communicator */
    CommRequest send, recv;
    double recv_sec = 0.0;
    req_begin(c, &send, "send", NULL, 0, COMM_FLOAT32, COMM_SUM);
    req_begin(c, &recv, "receive", NULL, 0, COMM_FLOAT32, COMM_SUM);
    MPI_Request r;
    /* before the post: a shared-memory transport may copy the whole message inside it */
    const double t0 = now_sec();
    MPI_CHECK(c, MPI_Irecv(recvbuf, mpi_count(bytes), MPI_BYTE, src, tag, mpi_comm(c), &r));
    req_set(&recv, r);
    MPI_CHECK(c, MPI_Isend(sendbuf, mpi_count(bytes), MPI_BYTE, dest, tag, mpi_comm(c), &r));
    req_set(&send, r);
    if (mpi_test(c, &recv)) recv_sec = now_sec() - t0;
    while (send.active || recv.active) {
        if (recv.active && mpi_test(c, &recv)) recv_sec = now_sec() - t0;
        if (send.active) mpi_test(c, &send);
        if (c->timeout_s > 0 && now_sec() - t0 > c->timeout_s)
            comm_timeout_abort(c, recv.active ? "receive" : "send", c->context);
        if (now_sec() - t0 < 1e-3) {
            sched_yield();
            continue;
        }
        /* short sleeps: the receive's time is what is measured, to tens of microseconds */
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    return recv_sec;
}

/* After MPI_Finalize (a world torn down on an error path) the duplicate is gone with MPI. */
static void mpi_free(Comm *c) {
    MpiImpl *m = c->impl;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_CHECK(c, MPI_Comm_free(&m->comm));
    free(m);
    free(c);
}

static const CommOps mpi_ops = {
    .name = "mpi",
    .allreduce = mpi_allreduce,
    .broadcast = mpi_broadcast,
    .barrier = mpi_barrier,
    .iallreduce = mpi_iallreduce,
    .test = mpi_test,
    .wait = mpi_wait,
    .sendrecv = mpi_sendrecv,
    .free = mpi_free,
};

static const char *thread_level_name(int level) {
    switch (level) {
    case MPI_THREAD_SINGLE: return "single";
    case MPI_THREAD_FUNNELED: return "funneled";
    case MPI_THREAD_SERIALIZED: return "serialized";
    case MPI_THREAD_MULTIPLE: return "multiple";
    }
    return "unknown";
}

Comm *comm_mpi_create(double timeout_s, int thread_level, char *err, size_t errlen) {
    if (thread_level < MPI_THREAD_FUNNELED) {
        /* Our helper threads (data prefetch) must not be forbidden from existing. */
        snprintf(err, errlen, "MPI offers thread level %s; ddptrain needs at least funneled",
                 thread_level_name(thread_level));
        return NULL;
    }
    int rank = -1, size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MpiImpl *m = callocCheck(1, sizeof *m);
    Comm *c = callocCheck(1, sizeof *c);
    c->ops = &mpi_ops;
    c->impl = m;
    c->rank = rank;
    c->world_size = size;
    c->timeout_s = timeout_s > 0 ? timeout_s : 0;
    c->thread_level = thread_level;
    /* MPI_Comm_dup is a blocking collective; every rank gets here right after MPI_Init_thread
     * connected them, so it cannot wait on a rank that is still starting. */
    MPI_CHECK(c, MPI_Comm_dup(MPI_COMM_WORLD, &m->comm));
    /* Errors come back to MPI_CHECK, which names the call before ending the job. */
    MPI_CHECK(c, MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN));

    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, ",\n")] = '\0';   /* "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4" */
    snprintf(c->desc, sizeof c->desc, "comm: mpi (%.120s), %d ranks, thread level %s, timeout %g s",
             lib, size, thread_level_name(thread_level), c->timeout_s);
    return c;
}

#else
typedef int comm_mpi_not_built;   /* ISO C wants a declaration in every translation unit */
#endif /* HAVE_MPI */
