/* SPDX-License-Identifier: BSD-3-Clause */
/* comm.c - the backend-independent part of comm.h, and the one-rank ("self") backend. It knows
 * no other backend: the world (world.c) chooses and creates them. */
#include "build_config.h"
#include "comm.h"
#include "flight.h"
#include "base/util.h"
#include "verdict.h"

#include <string.h>
#include <unistd.h>

size_t comm_dtype_size(CommDtype dt) {
    switch (dt) {
    case COMM_FLOAT32: return 4;
    case COMM_FLOAT64: return 8;
    case COMM_INT64: return 8;
    case COMM_BF16: case COMM_FP16: return 2;
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
    if (c->flight) flight_set_bucket(c->flight, -1, 0);
}

void comm_set_step(Comm *c, long step) {
    c->step = step;
    c->has_step = 1;
    if (c->flight) flight_set_step(c->flight, step);
}

void comm_set_bucket(Comm *c, int bucket, int n_bucket) {
    if (c->flight) flight_set_bucket(c->flight, bucket, n_bucket);
}

int64_t comm_record_post(Comm *c, const char *kind, size_t bytes) {
    return c->flight ? flight_posted(c->flight, kind, bytes, c->context) : 0;
}

void comm_record_done(Comm *c, int64_t seq) {
    if (c->flight) flight_completed(c->flight, seq);
}

void comm_test_hook_step(Comm *c, long step) {
    static int armed = -1;   /* -1: the variable not read yet */
    static long at_step;
    if (armed < 0) {
        const char *v = getenv("DDPTRAIN_TEST_EXTRA_COLLECTIVE");
        int rank = -1, pos = 0;
        armed = v && sscanf(v, "%d:%ld%n", &rank, &at_step, &pos) == 2 && !v[pos] && rank == c->rank;
    }
    if (!armed || step != at_step) return;
    armed = 0;   /* once: gradient accumulation begins a step several times */
    int64_t one = 1;
    comm_set_context(c, "test hook: one collective too many");
    comm_allreduce(c, &one, 1, COMM_INT64, COMM_SUM);
}

double comm_set_timeout(Comm *c, double timeout_s) {
    double old = c->timeout_s;
    c->timeout_s = timeout_s > 0 ? timeout_s : 0;
    return old;
}

const char *comm_describe(const Comm *c) { return c->desc; }

void comm_abort_job(Comm *c, int code) {
    fflush(stdout);
    fflush(stderr);
    flight_dump(c->flight, "abort");   /* a no-op after the timeout's own */
    if (c->ops->abort_local) c->ops->abort_local(c);
    if (c->on_abort) c->on_abort(c->on_abort_ctx, code);
    _exit(code);   /* on_abort does not return; this is for a comm without a world (tests) */
}

void comm_timeout_abort(Comm *c, const char *what, const char *context) {
    fflush(stdout);
    /* This rank's record first, then the others' (verdict.h): the line names the culprit
     * where the records tell who it is. */
    char verdict[1024] = "";
    if (c->flight) {
        flight_timed_out(c->flight);
        flight_probe_peers(c->flight, 1.0);
        if (flight_dump(c->flight, "timeout") == 0) verdict_after_timeout(c->flight, verdict, sizeof verdict);
    }
    /* Without records (before the job directory exists), two ranks still leave one suspect. */
    if (!verdict[0] && c->world_size == 2) {
        const int other = 1 - c->rank;
        const char *host = c->flight && c->flight->hosts ? c->flight->hosts[other] : "";
        snprintf(verdict, sizeof verdict, "rank %d%s%s, the only other rank, did not complete it", other,
                 host[0] ? " on host " : "", host);
    }
    /* The step leads the context of every collective in training, not only the buckets' (they
     * set it themselves): "(step 8, loss for the log)". */
    const char *ctx = context && *context ? context : "no context set";
    char where[160];
    if (c->has_step && strncmp(ctx, "step ", 5) != 0)
        snprintf(where, sizeof where, "step %ld, %s", c->step, ctx);
    else
        snprintf(where, sizeof where, "%s", ctx);
    fprintf(stderr, "%s: error: rank %d: collective %s (%s) did not complete within %g s; %s\n", g_progname, c->rank,
            what, where, c->timeout_s, verdict[0] ? verdict : "a peer rank is probably dead or stuck");
    fflush(stderr);
    comm_abort_job(c, 1);
}

/* The device communicator of this process (one per process: one rank, one device). */
static Comm *g_guard;

void comm_set_host_sync_guard(Comm *c) { g_guard = c; }

void comm_guard_host_sync(void) {
    if (g_guard && g_guard->ops->drain) g_guard->ops->drain(g_guard);
}

void comm_free(Comm *c) {
    if (!c) return;
    if (g_guard == c) g_guard = NULL;
    flight_free(c->flight);
    c->ops->free(c);
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
static void self_free(Comm *c) { free(c); }

static const CommOps self_ops = {
    .name = "self",
    .allreduce = self_allreduce,
    .broadcast = self_broadcast,
    .barrier = self_barrier,
    .iallreduce = self_iallreduce,
    .test = self_test,
    .wait = self_wait,
    .free = self_free,
};

Comm *comm_self_create(void) {
    Comm *c = callocCheck(1, sizeof *c);
    c->ops = &self_ops;
    c->rank = 0;
    c->world_size = 1;
    c->thread_level = 3;
    snprintf(c->desc, sizeof c->desc, "comm: self (1 rank, no communication)");
    return c;
}

long comm_min_long(Comm *c, long v) {
    int64_t *all = callocCheck((size_t)c->world_size, sizeof *all);
    all[c->rank] = v;
    comm_allreduce(c, all, (size_t)c->world_size, COMM_INT64, COMM_SUM);
    long m = v;
    for (int i = 0; i < c->world_size; i++) if (all[i] < m) m = (long)all[i];
    free(all);
    return m;
}
