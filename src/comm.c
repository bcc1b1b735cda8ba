/* comm.c - the backend-independent part of comm.h, and the one-rank ("self") backend. */
#include "build_config.h"
#include "comm.h"
#include "util.h"

#include <string.h>
#include <unistd.h>

size_t comm_dtype_size(CommDtype dt) {
    switch (dt) {
    case COMM_FLOAT32: return 4;
    case COMM_FLOAT64: return 8;
    case COMM_INT64: return 8;
    }
    fail_at(__FILE__, __LINE__, "unknown CommDtype", NULL);
}

void comm_finish_avg(void *buf, size_t count, CommDtype dt, int world_size) {
    if (world_size == 1) return;
    if (dt == COMM_FLOAT32) {
        float *x = buf, n = (float)world_size;
        for (size_t i = 0; i < count; i++) x[i] /= n;
    } else if (dt == COMM_FLOAT64) {
        double *x = buf, n = (double)world_size;
        for (size_t i = 0; i < count; i++) x[i] /= n;
    } else {
        fail_at(__FILE__, __LINE__, "COMM_AVG", "defined for float32 and float64 only");
    }
}

void comm_set_context(Comm *c, const char *what) {
    snprintf(c->context, sizeof c->context, "%s", what ? what : "");
}

double comm_set_timeout(Comm *c, double timeout_s) {
    double old = c->timeout_s;
    c->timeout_s = timeout_s > 0 ? timeout_s : 0;
    return old;
}

const char *comm_describe(const Comm *c) { return c->desc; }

void comm_timeout_abort(Comm *c, const char *what, const char *context) {
    fflush(stdout);
    fprintf(stderr, "%s: error: rank %d: collective %s (%s) did not complete within %g s; "
            "a peer rank is probably dead or stuck\n", g_progname, c->rank, what,
            context && *context ? context : "no context set", c->timeout_s);
    fflush(stderr);
    c->ops->abort_job(c, 1);
    _exit(1);   /* abort_job does not return; this is for the compiler and for broken backends */
}

int comm_startup_check(Comm *c, int ok) {
    CHECK(c->startup_state == 0);   /* once per run: a second call would mismatch collectives */
    /* One slot per rank rather than a single count, so the message can name the ranks. */
    int64_t *failed = callocCheck((size_t)c->world_size, sizeof *failed);
    failed[c->rank] = ok ? 0 : 1;
    char saved_ctx[sizeof c->context];
    memcpy(saved_ctx, c->context, sizeof saved_ctx);
    double saved_timeout = c->timeout_s;
    if (c->timeout_s > 0 && c->timeout_s < COMM_STARTUP_TIMEOUT_S) c->timeout_s = COMM_STARTUP_TIMEOUT_S;
    comm_set_context(c, "start-up check: waiting for every rank to finish start-up");
    comm_allreduce(c, failed, (size_t)c->world_size, COMM_INT64, COMM_SUM);
    c->timeout_s = saved_timeout;
    memcpy(c->context, saved_ctx, sizeof saved_ctx);

    int nfailed = 0, first_ok = -1;
    for (int r = 0; r < c->world_size; r++) {
        if (failed[r]) nfailed++;
        else if (first_ok < 0) first_ok = r;
    }
    /* The lowest healthy rank speaks for the job: one line per failed rank (a few), not one
     * per healthy rank. The failed ranks printed their own reasons already. */
    if (nfailed > 0 && c->rank == first_ok) {
        fflush(stdout);
        int shown = 0;
        for (int r = 0; r < c->world_size && shown < 8; r++) {
            if (!failed[r]) continue;
            fprintf(stderr, "%s: error: rank %d failed at start-up: see its log\n", g_progname, r);
            shown++;
        }
        if (nfailed > shown)
            fprintf(stderr, "%s: error: ... and %d more ranks failed at start-up\n", g_progname, nfailed - shown);
        fflush(stderr);
    }
    free(failed);
    c->startup_state = nfailed ? -1 : 1;
    return nfailed;
}

void comm_abort(Comm *c, int code) {
    fflush(stdout);
    fflush(stderr);
    if (c->startup_state == 1) c->ops->abort_job(c, code);
    if (c->startup_state == 0) comm_startup_check(c, 0);
    /* Every rank now knows about the failure and leaves through here: a clean finalize. */
    Bootstrap *b = c->boot;
    comm_free(c);
    if (b) bootstrap_free(b);
    exit(code);
}

void comm_free(Comm *c) {
    if (c) c->ops->free(c);
}

/* ---- self: one rank ------------------------------------------------------------------------ */

static void self_allreduce(Comm *c, void *buf, size_t count, CommDtype dt, CommOp op) {
    (void)c; (void)buf; (void)count;
    if (op == COMM_AVG && dt == COMM_INT64) comm_finish_avg(buf, count, dt, 2);   /* same error as MPI */
}
static void self_broadcast(Comm *c, void *buf, size_t bytes, int root) {
    (void)c; (void)buf; (void)bytes;
    CHECK(root == 0);
}
static void self_barrier(Comm *c) { (void)c; }
static void self_iallreduce(Comm *c, void *buf, size_t count, CommDtype dt, CommOp op, CommRequest *req) {
    self_allreduce(c, buf, count, dt, op);
    memset(req, 0, sizeof *req);   /* complete at once: active == 0 */
}
static int self_test(Comm *c, CommRequest *req) { (void)c; req->active = 0; return 1; }
static void self_wait(Comm *c, CommRequest *req) { (void)c; req->active = 0; }
static void self_abort_job(Comm *c, int code) {
    Bootstrap *b = c->boot;
    if (b) bootstrap_free(b);
    exit(code);
}
static void self_free(Comm *c) { free(c); }

static const CommOps self_ops = {
    .name = "self",
    .allreduce = self_allreduce,
    .broadcast = self_broadcast,
    .barrier = self_barrier,
    .iallreduce = self_iallreduce,
    .test = self_test,
    .wait = self_wait,
    .abort_job = self_abort_job,
    .free = self_free,
};

Comm *comm_self_create(Bootstrap *b) {
    Comm *c = callocCheck(1, sizeof *c);
    c->ops = &self_ops;
    c->rank = 0;
    c->world_size = 1;
    c->thread_level = 3;
    c->boot = b;
    snprintf(c->desc, sizeof c->desc, "comm: self (1 rank, no communication)");
    return c;
}

Comm *comm_create(Bootstrap *b, double timeout_s, char *err, size_t errlen) {
    if (b->world_size == 1) return comm_self_create(b);
#ifdef HAVE_MPI
    return comm_mpi_create(b, timeout_s, err, errlen);
#else
    (void)timeout_s;
    snprintf(err, errlen, "%d ranks (%s) but ddptrain was built without MPI: rebuild with MPI "
             "(configure --with-mpi) or run one process", b->world_size, b->method);
    return NULL;
#endif
}
