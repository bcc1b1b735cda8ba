/* SPDX-License-Identifier: BSD-3-Clause */
/* comm.h - collectives between the ranks of a job, as an interface with several backends.
 *
 * A Comm is a table of operations plus the state every backend shares. Backends, each created
 * by the world (world.h), which owns the process group's lifetime:
 *   comm_self_create  one rank: every operation is a no-op (the data already is the result).
 *   comm_mpi_create   MPI, for host memory (comm_mpi.h).
 *   comm_nccl_create  NCCL, for the CUDA backend's device memory (comm_nccl.h, in the module).
 * This file and comm.c know none of them.
 *
 * All reductions work in place on `count` elements. COMM_AVG is the sum over the ranks (in the
 * element type, in the order the library chooses), then divided by the world size in the
 * element type, correctly rounded: a division, not a multiplication by 1/n, and never a sum of
 * values each scaled by 1/n first (NCCL's ncclAvg for floats), which rounds differently. So
 * every backend gives the same bits when the sum itself is exact (integers, equal values); it
 * is defined for float32 and float64 only.
 *
 * Errors and hangs. A collective never returns an error: a backend's failure prints the call,
 * file:line and the library's reason and ends the whole job (comm_abort_job). Every wait,
 * including the blocking operations (which are a post + wait internally), gives up after the
 * comm's timeout and prints one line
 *   ddptrain: error: rank R: collective allreduce (step 120, bucket 3) did not complete within
 *   60 s; rank 5 on host node7 never posted bucket 3 of 8 in step 120 (collective #611) ...
 * then ends the whole job. The text in parentheses is what the caller last passed to
 * comm_set_context, so set it to something that locates the call; what follows the semicolon
 * is the verdict of the ranks' flight records (flight.h, verdict.h), or "a peer rank is
 * probably dead or stuck" where they tell nothing. A timeout of 0 waits forever.
 *
 * Device streams and host waits. A device communicator (NCCL) lets the device's compute stream
 * wait for a collective while the host goes on (comm_wait_stream). Any later host wait on that
 * stream (a synchronize before a copy, an event, cudaFree) would then sit behind the collective
 * with no timeout. So device code calls comm_guard_host_sync() before every such wait: it
 * waits, watched by the timeout, until no collective of the registered device communicator is
 * still running (CommOps.drain), and the host wait that follows can no longer hang on a peer.
 *
 * Threads: MPI is initialised with MPI_THREAD_MULTIPLE when the library offers it (Open MPI
 * does); comm->thread_level says what was obtained. If it is only FUNNELED, every call on a
 * Comm must come from the thread that created it.
 *
 * Overlap: an iallreduce is posted and returns at once; whether it makes progress while the
 * caller computes without calling into the comm depends on the library and transport, so a
 * caller that overlaps should call comm_test between compute chunks (cheap, non-blocking). */
#ifndef DDP_COMM_H
#define DDP_COMM_H

#include <stddef.h>
#include <stdint.h>

/* COMM_BF16 and COMM_FP16 (uint16_t storage, src/base/half.h) take COMM_SUM only, on MPI only. */
typedef enum { COMM_FLOAT32, COMM_FLOAT64, COMM_INT64, COMM_BF16, COMM_FP16 } CommDtype;
typedef enum { COMM_SUM, COMM_AVG } CommOp;

#define COMM_STARTUP_TIMEOUT_S 600.0

/* One in-flight non-blocking operation, owned by the caller (no allocation per call). Between
 * the post and a test that returned 1 (or a wait), the buffer belongs to the comm. */
typedef struct CommRequest {
    int active;                 /* posted and not yet completed */
    void *buf;                  /* what the completion still has to do (the AVG division) */
    size_t count;
    CommDtype dtype;
    CommOp op;
    const char *what;           /* operation name for the timeout message */
    char context[96];           /* comm context when it was posted */
    double t_post;              /* when it was posted (now_sec) */
    int64_t flight_seq;         /* its number in the flight recorder (set after the post) */
    union { void *ptr; int64_t i; unsigned char bytes[32]; } handle;   /* backend's handle */
} CommRequest;

typedef struct Comm Comm;

typedef struct CommOps {
    const char *name;
    void (*allreduce)(Comm *c, void *buf, size_t count, CommDtype dt, CommOp op);
    void (*broadcast)(Comm *c, void *buf, size_t bytes, int root);
    void (*barrier)(Comm *c);
    void (*iallreduce)(Comm *c, void *buf, size_t count, CommDtype dt, CommOp op, CommRequest *req);
    int (*test)(Comm *c, CommRequest *req);      /* 1 when complete (then req->active == 0) */
    void (*wait)(Comm *c, CommRequest *req);
    /* Optional (NULL: none). Device backends: make the device's compute stream wait for req
     * while the host goes on; req stays active until a later test or wait sees it done. */
    void (*wait_stream)(Comm *c, CommRequest *req);
    /* Optional (NULL: nothing on a device). Wait, watched by the timeout, until no collective
     * posted so far still runs on the device; requests stay as they are (see the top). */
    void (*drain)(Comm *c);
    /* Optional. Stop this rank's part at once before the job ends (NCCL: ncclCommAbort, so
     * its kernels stop spinning); called by comm_abort_job. */
    void (*abort_local)(Comm *c);
    /* Optional (NULL: none). Point to point, for the link test of --preflight (linktest.h):
     * send `bytes` of sendbuf to rank dest while receiving as many into recvbuf from rank src,
     * watched by the timeout; returns the seconds from the call until the receive completed
     * (the rate of the link src -> this rank, whatever the send to dest is waiting for). */
    double (*sendrecv)(Comm *c, const void *sendbuf, int dest, void *recvbuf, int src, size_t bytes);
    void (*free)(Comm *c);                       /* release the backend's state and free c */
} CommOps;

/* How a communicator ends the job on a fatal error or a timeout (world.h sets it). */
typedef void (*CommAbortFn)(void *ctx, int code);

struct Comm {
    const CommOps *ops;
    int rank, world_size;
    double timeout_s;           /* per wait; 0 = forever */
    char context[96];           /* see comm_set_context */
    long step;                  /* see comm_set_step; valid where has_step */
    int has_step;
    int thread_level;           /* MPI_THREAD_* obtained (self: 3 = multiple) */
    CommAbortFn on_abort;       /* the job-wide abort; NULL: this process exits alone */
    void *on_abort_ctx;
    char desc[256];
    struct Flight *flight;      /* the flight recorder (flight.h); NULL: none. Freed by comm_free */
    /* MPI backend: non-blocking sums and averages of floats of at least this many bytes go
     * round ddptrain's own ring (comm_mpi.c); 0: all through MPI_Iallreduce */
    size_t ring_min_bytes;
    void *impl;                 /* backend state */
};

/* One rank: every operation is a no-op. */
Comm *comm_self_create(void);

/* "comm: mpi (Open MPI v4.1.4, ...), 4 ranks, thread level multiple, timeout 60 s". */
const char *comm_describe(const Comm *c);

/* What the next collectives are for, printed if one of them times out ("step 120, bucket 3";
 * after comm_set_step, a context that does not begin with "step " is printed after the step:
 * "step 120, loss for the log"). Copied (truncated to 95 characters). Cheap: call it as often
 * as useful. */
void comm_set_context(Comm *c, const char *what);
double comm_set_timeout(Comm *c, double timeout_s);   /* returns the previous value */

/* The flight recorder's record of every collective posted through the functions below, on
 * every backend (flight.h): where the caller is (the step; the bucket of the next collectives,
 * which comm_set_context resets to none), the post and the completion. A comm without a
 * recorder records nothing. */
void comm_set_step(Comm *c, long step);
void comm_set_bucket(Comm *c, int bucket, int n_bucket);
int64_t comm_record_post(Comm *c, const char *kind, size_t bytes);
void comm_record_done(Comm *c, int64_t seq);

/* A test hook, inert unless the environment sets DDPTRAIN_TEST_EXTRA_COLLECTIVE=RANK:STEP:
 * that rank posts one allreduce too many (8 bytes) when it begins that step, as a rank of
 * another binary or a bug would, so that the tests can check what the job says then. */
void comm_test_hook_step(Comm *c, long step);

/* Release the communicator (the world finalizes MPI and the bootstrap after it). NULL is
 * accepted. */
void comm_free(Comm *c);

/* End the whole job with `code`: the backend's abort_local, then on_abort (the world's
 * job-wide abort), else _exit. For backends' fatal errors; stdio is flushed first. */
void comm_abort_job(Comm *c, int code) __attribute__((noreturn));

/* Print the timeout line and abort the job; for backends' wait loops. */
void comm_timeout_abort(Comm *c, const char *what, const char *context) __attribute__((noreturn));

size_t comm_dtype_size(CommDtype dt);

/* The least of every rank's v (collective; one all-reduce of world_size int64). */
long comm_min_long(Comm *c, long v);

static inline void comm_allreduce(Comm *c, void *buf, size_t count, CommDtype dt, CommOp op) {
    int64_t seq = comm_record_post(c, "allreduce", count * comm_dtype_size(dt));
    c->ops->allreduce(c, buf, count, dt, op);
    comm_record_done(c, seq);
}
static inline void comm_broadcast(Comm *c, void *buf, size_t bytes, int root) {
    int64_t seq = comm_record_post(c, "broadcast", bytes);
    c->ops->broadcast(c, buf, bytes, root);
    comm_record_done(c, seq);
}
static inline void comm_barrier(Comm *c) {
    int64_t seq = comm_record_post(c, "barrier", 0);
    c->ops->barrier(c);
    comm_record_done(c, seq);
}
/* Only where c->ops->sendrecv is set (the MPI backend). */
static inline double comm_sendrecv(Comm *c, const void *sendbuf, int dest, void *recvbuf, int src, size_t bytes) {
    int64_t seq = comm_record_post(c, "sendrecv", bytes);
    double t = c->ops->sendrecv(c, sendbuf, dest, recvbuf, src, bytes);
    comm_record_done(c, seq);
    return t;
}
static inline void comm_iallreduce(Comm *c, void *buf, size_t count, CommDtype dt, CommOp op,
                                   CommRequest *req) {
    int64_t seq = comm_record_post(c, "iallreduce", count * comm_dtype_size(dt));
    c->ops->iallreduce(c, buf, count, dt, op, req);   /* (the backend clears req) */
    req->flight_seq = seq;
    if (!req->active) comm_record_done(c, seq);
}
static inline int comm_test(Comm *c, CommRequest *req) {
    if (!req->active) return 1;
    if (!c->ops->test(c, req)) return 0;
    comm_record_done(c, req->flight_seq);
    return 1;
}
static inline void comm_wait(Comm *c, CommRequest *req) {
    if (!req->active) return;
    c->ops->wait(c, req);
    comm_record_done(c, req->flight_seq);
}
/* What follows on the device waits for req; the host waits only on a comm without device
 * streams (MPI, self). Returns 1 when req is complete, 0 when it was handed to the device
 * stream: the caller must comm_test or comm_wait it before posting into it again. */
static inline int comm_wait_stream(Comm *c, CommRequest *req) {
    if (!req->active) return 1;
    if (c->ops->wait_stream) {
        c->ops->wait_stream(c, req);
        return 0;
    }
    comm_wait(c, req);
    return 1;
}

/* The device communicator whose collectives comm_guard_host_sync waits for (NULL: none);
 * set by whoever creates one, cleared by comm_free. */
void comm_set_host_sync_guard(Comm *c);
/* Before a host wait on a device stream that may be ordered after a collective: see the top.
 * A no-op without a registered device communicator. */
void comm_guard_host_sync(void);

/* Bytes per element of dt (declared above the collectives); shared by the backends. */
/* The AVG step after a sum: buf[i] /= world_size. */
void comm_finish_avg(void *buf, size_t count, CommDtype dt, int world_size);

#endif
