/* SPDX-License-Identifier: BSD-3-Clause */
/* comm_mpi.c - the MPI backend of comm.h (comm_mpi.h).
 *
 * Every operation is non-blocking underneath (MPI_Iallreduce, MPI_Ibcast, MPI_Ibarrier) and
 * completed by one polling loop, because a blocking MPI call cannot time out: if a peer dies
 * or never arrives, MPI_Allreduce waits forever and the job burns its allocation silently. */
#include "build_config.h"
#ifdef HAVE_MPI
#include "comm_mpi.h"
#include "base/half.h"
#include "base/util.h"

#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct Ring Ring;

typedef struct {
    MPI_Comm comm;          /* a duplicate of MPI_COMM_WORLD, so our traffic cannot match a
                               library's or another Comm's collectives */
    Ring *rings;            /* the ring all-reduces not yet seen complete (below) */
    MPI_Request *scratch;   /* rings_progress's arrays, scratch_n each */
    int *idx, scratch_n;
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

/* A request's handle: an MPI request, or the state of a ring all-reduce (below). */
typedef struct {
    MPI_Request r;
    Ring *ring;
} MpiHandle;
_Static_assert(sizeof(MpiHandle) <= sizeof(((CommRequest *)0)->handle), "CommRequest.handle too small");

static MpiHandle *req_h(CommRequest *req) { return (MpiHandle *)(void *)req->handle.bytes; }
static void req_set(CommRequest *req, MPI_Request r) { *req_h(req) = (MpiHandle){.r = r, .ring = NULL}; }
static MPI_Request *req_mpi(CommRequest *req) { return &req_h(req)->r; }

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

/* ---- the ring all-reduce ----------------------------------------------------------------
 * Open MPI 4's MPI_Iallreduce (libnbc) takes a binomial tree for fewer than 4 ranks or an
 * in-place buffer: a reduce to rank 0 and a broadcast back, so each link carries the whole
 * buffer one way and then the other, never both at once, and a bucket takes twice its wire
 * time (two nodes at 90 Mbit/s: 2.28 s a step against 1.32 s with a ring). So large buckets go
 * round a ring of point-to-point messages of our own, as NCCL, Gloo and Horovod do: the buffer
 * in world_size chunks; in round k < p-1 (reduce-scatter) each rank sends chunk (rank - k) to
 * its right neighbour and adds chunk (rank - k - 1) from its left one into its own; in the p-1
 * rounds after (allgather) the finished chunks go round the same way. Every link carries
 * 2 (p-1) / p of the buffer in each direction at once. Chunk c is summed in the fixed order
 * x_c + x_c+1 + ... + x_c-1 (by rank, whatever the placement) and copied, not re-summed, to
 * every rank, so all ranks hold the same bits. Two ranks make one round instead: each sends
 * its whole buffer and adds the other's: the same bytes each way as the ring's two rounds with
 * half the handshakes, which wait behind the data queued on a slow link; x_0 + x_1 is the same
 * sum on both. Rounds advance inside mpi_test, of any request,
 * for every ring in flight (as libnbc progresses all its schedules in every MPI call): a wait
 * for one bucket must not leave the others stalled between two rounds. */
struct Ring {
    Ring *next;                 /* MpiImpl.rings */
    unsigned char *buf, *tmp;   /* the user's buffer; one received chunk */
    size_t count, esize;
    CommDtype dt;
    int p, rank, round, rounds, tag;
    MPI_Request rq[2];          /* this round's receive and send */
};

static size_t ring_lo(const Ring *g, int chunk) {
    return (size_t)(((unsigned long long)g->count * (unsigned)chunk) / (unsigned)g->p);
}

static void ring_add(const Ring *g, unsigned char *inout, const unsigned char *in, size_t n) {
    switch (g->dt) {
    case COMM_FLOAT32: {
        float *a = (float *)(void *)inout;
        const float *b = (const float *)(const void *)in;
        for (size_t i = 0; i < n; i++) a[i] += b[i];
        break;
    }
    case COMM_FLOAT64: {
        double *a = (double *)(void *)inout;
        const double *b = (const double *)(const void *)in;
        for (size_t i = 0; i < n; i++) a[i] += b[i];
        break;
    }
    case COMM_BF16: case COMM_FP16:
        half_sum(g->dt == COMM_BF16 ? HALF_BF16 : HALF_FP16, (const uint16_t *)(const void *)in,
                 (uint16_t *)(void *)inout, n);
        break;
    case COMM_INT64: fail_at(__FILE__, __LINE__, "ring all-reduce of int64", NULL);
    }
}

/* Posts round g->round: the send to the right, then the receive from the left. The send
 * first: its rendezvous request leads on the wire (two ranks at 90 Mbit/s: 1.30 to 1.33 s a
 * step, against 1.43 to 1.73 s with the receive posted first). */
static void ring_post(Comm *c, Ring *g) {
    if (g->p == 2) {
        const int other = 1 - g->rank;
        MPI_CHECK(c, MPI_Isend(g->buf, mpi_count(g->count), mpi_type(g->dt), other, g->tag, mpi_comm(c), &g->rq[1]));
        MPI_CHECK(c, MPI_Irecv(g->tmp, mpi_count(g->count), mpi_type(g->dt), other, g->tag, mpi_comm(c), &g->rq[0]));
        return;
    }
    const int p = g->p, k = g->round, scatter = k < p - 1;
    const int j = scatter ? k : k - (p - 1);
    const int send_chunk = ((g->rank - j + (scatter ? 0 : 1)) % p + p) % p;
    const int recv_chunk = ((g->rank - j - (scatter ? 1 : 0)) % p + p) % p;
    const size_t s0 = ring_lo(g, send_chunk), s1 = ring_lo(g, send_chunk + 1);
    const size_t r0 = ring_lo(g, recv_chunk), r1 = ring_lo(g, recv_chunk + 1);
    const int left = (g->rank - 1 + p) % p, right = (g->rank + 1) % p;
    MPI_Datatype t = mpi_type(g->dt);
    MPI_CHECK(c, MPI_Isend(g->buf + s0 * g->esize, mpi_count(s1 - s0), t, right, g->tag, mpi_comm(c), &g->rq[1]));
    MPI_CHECK(c, MPI_Irecv(scatter ? g->tmp : g->buf + r0 * g->esize, mpi_count(r1 - r0), t, left, g->tag,
                           mpi_comm(c), &g->rq[0]));
}

/* Round g->round's messages are complete: add what came in, post the next round. */
static void ring_advance(Comm *c, Ring *g) {
    const int p = g->p;
    if (p == 2) {
        ring_add(g, g->buf, g->tmp, g->count);
    } else if (g->round < p - 1) {
        const int chunk = ((g->rank - g->round - 1) % p + p) % p;
        const size_t lo = ring_lo(g, chunk), hi = ring_lo(g, chunk + 1);
        ring_add(g, g->buf + lo * g->esize, g->tmp, hi - lo);
    }
    if (++g->round < g->rounds) ring_post(c, g);
}

/* Moves every ring in flight on as far as its messages allow, with one MPI_Testsome over all
 * their requests: one pass of MPI's progress engine however many buckets are in flight (a
 * test per ring made tens of thousands of passes a second from the reducer's thread, and
 * cost the rank's core more than the transfers). */
static void rings_progress(Comm *c) {
    MpiImpl *m = c->impl;
    for (;;) {
        int n = 0;
        for (Ring *o = m->rings; o; o = o->next) n += o->round < o->rounds ? 2 : 0;
        if (n == 0) return;
        if (n > m->scratch_n) {
            free(m->scratch);
            free(m->idx);
            m->scratch = mallocCheck((size_t)n * sizeof *m->scratch);
            m->idx = mallocCheck((size_t)n * sizeof *m->idx);
            m->scratch_n = n;
        }
        int k = 0;
        for (Ring *o = m->rings; o; o = o->next)
            if (o->round < o->rounds) { m->scratch[k++] = o->rq[0]; m->scratch[k++] = o->rq[1]; }
        int outcount = 0;
        MPI_CHECK(c, MPI_Testsome(n, m->scratch, &outcount, m->idx, MPI_STATUSES_IGNORE));
        int advanced = 0;
        k = 0;
        for (Ring *o = m->rings; o; o = o->next) {
            if (o->round >= o->rounds) continue;
            o->rq[0] = m->scratch[k++];   /* completed ones are MPI_REQUEST_NULL now */
            o->rq[1] = m->scratch[k++];
            if (o->rq[0] == MPI_REQUEST_NULL && o->rq[1] == MPI_REQUEST_NULL) {
                ring_advance(c, o);
                advanced = 1;
            }
        }
        if (!advanced) return;   /* a new round may be complete at once (a short message) */
    }
}

static void ring_start(Comm *c, CommRequest *req, void *buf, size_t count, CommDtype dt) {
    static unsigned seq;   /* every rank starts its rings in the same order: the same tags */
    Ring *g = callocCheck(1, sizeof *g);
    g->buf = buf;
    g->count = count;
    g->dt = dt;
    g->esize = comm_dtype_size(dt);
    g->p = c->world_size;
    g->rank = c->rank;
    g->tag = 100 + (int)(seq++ % 30000u);   /* 0-99: other point-to-point traffic; MPI_TAG_UB >= 32767 */
    g->rounds = g->p == 2 ? 1 : 2 * (g->p - 1);
    g->tmp = mallocCheck((g->p == 2 ? count : count / (size_t)g->p + 1) * g->esize);
    ring_post(c, g);
    MpiImpl *m = c->impl;
    g->next = m->rings;
    m->rings = g;
    *req_h(req) = (MpiHandle){.r = MPI_REQUEST_NULL, .ring = g};
}

static int mpi_test(Comm *c, CommRequest *req) {
    int done = 0;
    Ring *g = req_h(req)->ring;
    MpiImpl *m = c->impl;
    rings_progress(c);
    if (g) {
        done = g->round == g->rounds;
        if (done) {
            Ring **pp = &m->rings;
            while (*pp != g) pp = &(*pp)->next;
            *pp = g->next;
            free(g->tmp);
            free(g);
            req_h(req)->ring = NULL;
        }
    } else {
        MPI_CHECK(c, MPI_Test(req_mpi(req), &done, MPI_STATUS_IGNORE));
    }
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
    if (c->ring_min_bytes > 0 && c->world_size > 1 && dt != COMM_INT64 &&
        count * comm_dtype_size(dt) >= c->ring_min_bytes && count >= (size_t)c->world_size) {
        ring_start(c, req, buf, count, dt);
        return;
    }
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
    free(m->scratch);
    free(m->idx);
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
