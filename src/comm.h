/* comm.h - collectives between the ranks of a job, as an interface with several backends.
 *
 * A Comm is a table of operations plus the state every backend shares. Backends:
 *   comm_self_create  one rank: every operation is a no-op (the data already is the result).
 *   comm_mpi_create   MPI (comm_mpi.c). Under `srun --mpi=pmix` and `mpirun` Open MPI connects
 *                     the ranks itself; the Bootstrap only tells it what to expect.
 *   (later)           NCCL for the GPU backend, filling the same table.
 * comm_create picks: self for one rank, MPI otherwise (an error when built without MPI).
 *
 * All reductions work in place on `count` elements. COMM_AVG is the sum over the ranks (in the
 * element type, in the order the library chooses), then divided by the world size in the
 * element type, correctly rounded: a division, not a multiplication by 1/n, and never a sum of
 * values each scaled by 1/n first (NCCL's ncclAvg for floats), which rounds differently. So
 * every backend gives the same bits when the sum itself is exact (integers, equal values); it
 * is defined for float32 and float64 only.
 *
 * Errors and hangs. A collective never returns an error: MPI failures print the call, file:line
 * and MPI's reason and abort the whole job. Every wait, including the blocking operations
 * (which are a post + wait internally), gives up after the comm's timeout and prints one line
 *   ddptrain: error: rank R: collective allreduce (step 120, bucket 3) did not complete within
 *   60 s; a peer rank is probably dead or stuck
 * then aborts the whole job (MPI_Abort on MPI_COMM_WORLD). The text in parentheses is what the
 * caller last passed to comm_set_context, so set it to something that locates the call.
 * A timeout of 0 waits forever.
 *
 * Start-up failures (a rank cannot open its data, a bad flag on one node). A rank that fails
 * before training must not leave the others hanging in their first collective, and should not
 * tear the job down with a kill either (the others' output would be lost). Protocol:
 *   - after its local start-up (flags, data, model) and BEFORE any other collective, every rank
 *     calls comm_startup_check(c, ok) with ok=1;
 *   - a rank that fails prints its own error, then calls comm_abort(c, code), which joins the
 *     same check with ok=0, finalizes and exits(code);
 *   - the healthy ranks' comm_startup_check then returns nonzero after the lowest healthy rank
 *     printed "ddptrain: error: rank R failed at start-up: see its log" (one line per failed
 *     rank, at most 8); they exit with comm_abort too, so every rank finalizes and exits.
 * The check waits max(timeout, COMM_STARTUP_TIMEOUT_S) because ranks finish start-up at
 * different times. After a successful check, comm_abort calls MPI_Abort: the others are then
 * in collectives this rank will never join, so the only way to end them is to end the job.
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

#include "bootstrap.h"

typedef enum { COMM_FLOAT32, COMM_FLOAT64, COMM_INT64 } CommDtype;
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
    void (*abort_job)(Comm *c, int code);        /* end every rank now; does not return */
    void (*free)(Comm *c);                       /* finalize the backend and free c */
} CommOps;

struct Comm {
    const CommOps *ops;
    int rank, world_size;
    double timeout_s;           /* per wait; 0 = forever */
    char context[96];           /* see comm_set_context */
    int thread_level;           /* MPI_THREAD_* obtained (self: 3 = multiple) */
    int startup_state;          /* 0 check not done, 1 all ranks ok, -1 some rank failed */
    Bootstrap *boot;            /* comm_abort finalizes PMIx after MPI, so it needs this */
    char desc[256];
    void *impl;                 /* backend state */
};

/* Self for world size 1, MPI otherwise. NULL with one line in err on failure. The comm keeps
 * the pointer to b (see Comm.boot); b must outlive it. */
Comm *comm_create(Bootstrap *b, double timeout_s, char *err, size_t errlen);
Comm *comm_self_create(Bootstrap *b);
#ifdef HAVE_MPI
Comm *comm_mpi_create(Bootstrap *b, double timeout_s, char *err, size_t errlen);
#endif

/* "comm: mpi (Open MPI v4.1.4, ...), 4 ranks, thread level multiple, timeout 60 s". */
const char *comm_describe(const Comm *c);

/* What the next collectives are for, printed if one of them times out ("step 120, bucket 3").
 * Copied (truncated to 95 characters). Cheap: call it as often as useful. */
void comm_set_context(Comm *c, const char *what);
double comm_set_timeout(Comm *c, double timeout_s);   /* returns the previous value */

/* Start-up agreement, see the top of this file. Collective. Returns 0 when every rank passed
 * ok=1, else the number of ranks that failed (the lowest healthy rank printed which). */
int comm_startup_check(Comm *c, int ok);
/* End this rank's part in the job with exit(code), never leaving the others hanging: see the
 * top of this file. Finalizes the comm and the bootstrap. */
void comm_abort(Comm *c, int code) __attribute__((noreturn));

/* Finalize (MPI_Finalize for MPI) and free. Call before bootstrap_free. NULL is accepted. */
void comm_free(Comm *c);

/* Print the timeout line and abort the job; for backends' wait loops. */
void comm_timeout_abort(Comm *c, const char *what, const char *context) __attribute__((noreturn));

static inline void comm_allreduce(Comm *c, void *buf, size_t count, CommDtype dt, CommOp op) {
    c->ops->allreduce(c, buf, count, dt, op);
}
static inline void comm_broadcast(Comm *c, void *buf, size_t bytes, int root) {
    c->ops->broadcast(c, buf, bytes, root);
}
static inline void comm_barrier(Comm *c) { c->ops->barrier(c); }
static inline void comm_iallreduce(Comm *c, void *buf, size_t count, CommDtype dt, CommOp op,
                                   CommRequest *req) {
    c->ops->iallreduce(c, buf, count, dt, op, req);
}
static inline int comm_test(Comm *c, CommRequest *req) { return req->active ? c->ops->test(c, req) : 1; }
static inline void comm_wait(Comm *c, CommRequest *req) { if (req->active) c->ops->wait(c, req); }
/* What follows on the device waits for req; the host waits only on a comm without device
 * streams (MPI, self). Returns 1 when req is complete, 0 when it was handed to the device
 * stream: the caller must comm_test or comm_wait it before posting into it again. */
static inline int comm_wait_stream(Comm *c, CommRequest *req) {
    if (!req->active) return 1;
    if (c->ops->wait_stream) {
        c->ops->wait_stream(c, req);
        return 0;
    }
    c->ops->wait(c, req);
    return 1;
}

/* Bytes per element of dt; shared by the backends. */
size_t comm_dtype_size(CommDtype dt);
/* The AVG step after a sum: buf[i] /= world_size. */
void comm_finish_avg(void *buf, size_t count, CommDtype dt, int world_size);

#endif
