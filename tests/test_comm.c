/* SPDX-License-Identifier: BSD-3-Clause */
/* test_comm.c - checks bootstrap + comm on however many ranks it is started with, plus
 * failure modes driven by test-only flags (see usage()). Run by tests/test_comm.sh.
 * Exit 0 when every check passed on this rank, 1 otherwise. */
#include "build_config.h"
#include "dist/comm.h"
#include "base/half.h"
#include "base/util.h"
#include "dist/world.h"

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static int g_failures;
static int g_rank;
static World g_world;

#define EXPECT(cond, ...) do { if (!(cond)) { \
    fprintf(stderr, "rank %d: FAIL %s:%d: %s: ", g_rank, __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); g_failures++; } } while (0)

static void usage(void) {
    fprintf(stderr,
            "usage: test_comm [--timeout S] [MODE]\n"
            "modes (default: the functional checks):\n"
            "  --fail-startup R          rank R fails before the start-up check\n"
            "  --skip-rank R             rank R never joins an allreduce (timeout test)\n"
            "  --log-context             with --skip-rank: the step set apart from the context\n"
            "  --kill-rank R --kill-at-step K   rank R SIGKILLs itself at step K of a loop\n"
            "  --overlap-bench           measure background progress of iallreduce\n"
            "  --describe                print the bootstrap and comm lines and exit\n"
            "  --fake-device             a device communicator's stream semantics (with --skip-rank R:\n"
            "                            the guarded host wait times out)\n"
            "  --features                print what the build has (mpi=0/1 pmix=0/1) and exit\n");
    exit(2);
}

/* ---- the functional checks ----------------------------------------------------------------- */

static void check_allreduce(Comm *c) {
    const int n = c->world_size, r = c->rank;
    enum { N = 1003 };   /* odd, so no implementation can get away with a vector-width tail */
    float f[N];
    double d[N];
    int64_t q[N];
    for (int i = 0; i < N; i++) {
        f[i] = (float)((r + 1) * (i % 7 + 1));
        d[i] = 0.25 * (r + 1) * (i % 11);
        q[i] = (int64_t)1000000000000000LL + (int64_t)(r + 1) * i;   /* beyond float64's 2^53 */
    }
    comm_set_context(c, "test allreduce sum");
    comm_allreduce(c, f, N, COMM_FLOAT32, COMM_SUM);
    comm_allreduce(c, d, N, COMM_FLOAT64, COMM_SUM);
    comm_allreduce(c, q, N, COMM_INT64, COMM_SUM);
    const int tri = n * (n + 1) / 2;
    int bad = 0;
    for (int i = 0; i < N && !bad; i++) {
        if (f[i] != (float)(tri * (i % 7 + 1))) { EXPECT(0, "float32 sum [%d] = %g", i, f[i]); bad = 1; }
        if (d[i] != 0.25 * tri * (i % 11)) { EXPECT(0, "float64 sum [%d] = %g", i, d[i]); bad = 1; }
        if (q[i] != (int64_t)n * 1000000000000000LL + (int64_t)tri * i) {
            EXPECT(0, "int64 sum [%d] = %lld", i, (long long)q[i]); bad = 1;
        }
    }
    /* Average: the sum of small integers is exact, so sum / n must match bit for bit. */
    for (int i = 0; i < N; i++) {
        f[i] = (float)((r + 1) * (i % 5));
        d[i] = (double)(r + 1) * (i % 3) + 0.5;
    }
    comm_set_context(c, "test allreduce avg");
    comm_allreduce(c, f, N, COMM_FLOAT32, COMM_AVG);
    comm_allreduce(c, d, N, COMM_FLOAT64, COMM_AVG);
    for (int i = 0; i < N; i++) {
        float ef = (float)(tri * (i % 5)) / (float)n;
        double ed = ((double)tri * (i % 3) + 0.5 * n) / (double)n;
        if (f[i] != ef) { EXPECT(0, "float32 avg [%d] = %.9g, expected %.9g", i, f[i], ef); break; }
        if (d[i] != ed) { EXPECT(0, "float64 avg [%d] = %.17g, expected %.17g", i, d[i], ed); break; }
    }
    printf("rank %d: allreduce sum/avg float32, float64, int64 exact over %d ranks: %s\n", r, n,
           g_failures ? "FAILED" : "ok");
}

/* COMM_AVG is the sum, then a division by the world size (comm.h). With 3 ranks, scaling each
 * rank's value by 1/3 before the sum (NCCL's float ncclAvg) rounds differently for many of
 * these values; the integers' sums are exact in any summation order, so the expected results
 * do not depend on how the library orders the sum. */
static unsigned avg_value(int i, int r) { return (unsigned)(i * 2654435761u + (unsigned)r * 40503u) % 1000u + 1u; }

static void check_avg_order(Comm *c) {
    enum { N = 2001 };
    static float f[N], fi[N];
    static double d[N];
    const int n = c->world_size;
    for (int i = 0; i < N; i++) {
        f[i] = fi[i] = (float)avg_value(i, c->rank);
        d[i] = (double)avg_value(i, c->rank);
    }
    comm_set_context(c, "test avg order");
    comm_allreduce(c, f, N, COMM_FLOAT32, COMM_AVG);
    CommRequest req;
    comm_iallreduce(c, fi, N, COMM_FLOAT32, COMM_AVG, &req);
    comm_wait(c, &req);
    comm_allreduce(c, d, N, COMM_FLOAT64, COMM_AVG);
    long pre_differs = 0, bad = 0;
    const float third = 1.0f / (float)n;
    for (int i = 0; i < N; i++) {
        unsigned sum = 0;
        float pre = 0.0f;
        for (int q = 0; q < n; q++) {
            sum += avg_value(i, q);
            pre += (float)avg_value(i, q) * third;
        }
        const float ef = (float)sum / (float)n;
        const double ed = (double)sum / (double)n;
        if (pre != ef) pre_differs++;
        if ((f[i] != ef || fi[i] != ef || d[i] != ed) && bad++ == 0)
            EXPECT(0, "avg [%d]: allreduce %.9g, iallreduce %.9g, float64 %.17g; sum/%d = %.9g / %.17g", i,
                   (double)f[i], (double)fi[i], d[i], n, (double)ef, ed);
    }
    /* Otherwise this check could not tell the two orders apart. */
    if (n == 3) EXPECT(pre_differs > 0, "no value where scaling before the sum rounds differently");
    printf("rank %d: avg = sum / %d over %d values (%ld would differ if scaled before the sum): %s\n", c->rank,
           n, N, pre_differs, bad ? "FAILED" : "ok");
}

static void check_broadcast_barrier(Comm *c) {
    const int root = c->world_size - 1;
    unsigned char buf[777];
    for (int i = 0; i < (int)sizeof buf; i++) buf[i] = (unsigned char)(c->rank == root ? (i * 13 + 5) : 0xEE);
    comm_set_context(c, "test broadcast");
    comm_broadcast(c, buf, sizeof buf, root);
    int ok = 1;
    for (int i = 0; i < (int)sizeof buf; i++) if (buf[i] != (unsigned char)(i * 13 + 5)) ok = 0;
    EXPECT(ok, "broadcast from rank %d delivered wrong bytes", root);
    comm_set_context(c, "test barrier");
    comm_barrier(c);
    printf("rank %d: broadcast from rank %d and barrier: %s\n", c->rank, root, ok ? "ok" : "FAILED");
}

/* Point to point (the --preflight link test): a ring both ways, each rank's bytes checked. */
static void check_sendrecv(Comm *c) {
    if (!c->ops->sendrecv) {
        printf("rank %d: sendrecv: not offered by the %s communicator\n", c->rank, c->ops->name);
        return;
    }
    enum { N = 300000 };   /* above any eager limit: the rendezvous path */
    static unsigned char out[N], in[N];
    const int n = c->world_size;
    int ok = 1;
    const int shifts[2] = {1, n - 1};   /* forward, and backward where that differs */
    for (int k = 0; k < (n > 2 ? 2 : 1); k++) {
        const int shift = shifts[k], dest = (c->rank + shift) % n, src = (c->rank - shift + n) % n;
        for (int i = 0; i < N; i++) out[i] = (unsigned char)(i * 7 + c->rank * 31 + shift);
        memset(in, 0xEE, sizeof in);
        comm_set_context(c, "test sendrecv");
        const double sec = comm_sendrecv(c, out, dest, in, src, N);
        for (int i = 0; i < N; i++) if (in[i] != (unsigned char)(i * 7 + src * 31 + shift)) { ok = 0; break; }
        EXPECT(ok && sec >= 0.0, "sendrecv shift %d: wrong bytes from rank %d or time %g", shift, src, sec);
    }
    printf("rank %d: sendrecv around the ring: %s\n", c->rank, ok ? "ok" : "FAILED");
}

static void check_iallreduce(Comm *c) {
    enum { NB = 3, N = 4096 };
    static float buf[NB][N];
    CommRequest req[NB];
    for (int b = 0; b < NB; b++)
        for (int i = 0; i < N; i++) buf[b][i] = (float)((c->rank + 1) * (b + 1));
    for (int b = 0; b < NB; b++) {
        char ctx[64];
        snprintf(ctx, sizeof ctx, "test iallreduce bucket %d", b);
        comm_set_context(c, ctx);
        comm_iallreduce(c, buf[b], N, COMM_FLOAT32, b == 1 ? COMM_AVG : COMM_SUM, &req[b]);
    }
    /* Complete out of order: bucket 2 by polling, then 0 and 1 by waiting. */
    long polls = 0;
    while (!comm_test(c, &req[2])) polls++;
    comm_wait(c, &req[0]);
    comm_wait(c, &req[1]);
    comm_wait(c, &req[1]);   /* waiting on a completed request is a no-op */
    EXPECT(!req[0].active && !req[1].active && !req[2].active, "requests still active");
    const int n = c->world_size, tri = n * (n + 1) / 2;
    for (int b = 0; b < NB; b++) {
        float e = b == 1 ? (float)(tri * 2) / (float)n : (float)(tri * (b + 1));
        int ok = 1;
        for (int i = 0; i < N; i++) if (buf[b][i] != e) ok = 0;
        EXPECT(ok, "iallreduce bucket %d: got %g, expected %g", b, buf[b][0], e);
    }
    printf("rank %d: 3 iallreduce in flight, completed out of order (%ld test polls): %s\n", c->rank,
           polls, g_failures ? "FAILED" : "ok");
}

/* 16-bit sums (--comm_dtype): every rank's (r+1)/4 adds up exactly in any order; with 2 ranks,
 * 1 + 2^-8 is a tie in bf16 (7 mantissa bits), rounded to even (1), and exact in fp16. */
static void check_half_allreduce(Comm *c) {
    enum { N = 1000 };
    static uint16_t buf[2][N];
    const HalfKind kinds[2] = {HALF_BF16, HALF_FP16};
    const CommDtype dts[2] = {COMM_BF16, COMM_FP16};
    const int n = c->world_size;
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < N; i++)
            buf[k][i] = half_from_float(kinds[k], i == 0 && n == 2 ? (c->rank == 0 ? 1.0f : 0x1p-8f)
                                                               : (float)(c->rank + 1) / 4.0f);
        CommRequest req;
        comm_set_context(c, k == 0 ? "test bf16 iallreduce" : "test fp16 iallreduce");
        comm_iallreduce(c, buf[k], N, dts[k], COMM_SUM, &req);
        comm_wait(c, &req);
        float e = (float)(n * (n + 1) / 2) / 4.0f, e0 = n == 2 ? (k == 0 ? 1.0f : 1.0f + 0x1p-8f) : e;
        int ok = half_to_float(kinds[k], buf[k][0]) == e0;
        for (int i = 1; i < N; i++) if (half_to_float(kinds[k], buf[k][i]) != e) ok = 0;
        EXPECT(ok, "%s sum: got %g and %g, expected %g and %g", k == 0 ? "bf16" : "fp16",
               half_to_float(kinds[k], buf[k][0]), half_to_float(kinds[k], buf[k][1]), e0, e);
    }
    printf("rank %d: bf16 and fp16 iallreduce (16-bit sums): %s\n", c->rank, g_failures ? "FAILED" : "ok");
}

/* The ring all-reduce of comm_mpi.c (--comm_allreduce ring), made to take every float
 * all-reduce here: sums and averages of small integers exact, several rings in flight and
 * completed out of order, 16-bit sums; and, with values whose sum rounds, the bits of the
 * fixed order x_c + x_c+1 + ... + x_c-1 for chunk c (chunks of count / ranks, uneven here) on
 * every rank. */
static float ring_value(int i, int r) { return (float)((i * 2654435761u + (unsigned)r * 97u) % 10007u) / 7919.0f; }

static void check_ring(Comm *c) {
    enum { NB = 3, N = 100003 };
    static float buf[NB][N];
    const int n = c->world_size, r = c->rank, tri = n * (n + 1) / 2;
    const size_t saved = c->ring_min_bytes;
    c->ring_min_bytes = 1;
    CommRequest req[NB];
    for (int b = 0; b < NB; b++) {
        for (int i = 0; i < N; i++) buf[b][i] = b == 2 ? ring_value(i, r) : (float)((r + 1) * (i % 13 + b));
        comm_set_context(c, "test ring");
        comm_iallreduce(c, buf[b], N, COMM_FLOAT32, b == 1 ? COMM_AVG : COMM_SUM, &req[b]);
    }
    while (!comm_test(c, &req[2])) {}
    comm_wait(c, &req[1]);
    comm_wait(c, &req[0]);
    long bad_exact = 0, bad_order = 0;
    for (int i = 0; i < N; i++) {
        if (buf[0][i] != (float)(tri * (i % 13))) bad_exact++;
        if (buf[1][i] != (float)(tri * (i % 13 + 1)) / (float)n) bad_exact++;
        const int chunk = (int)(((long long)i * n + n - 1) / N);   /* smallest chunk with hi > i */
        int cc = chunk;
        while ((long long)N * cc / n > i) cc--;
        while ((long long)N * (cc + 1) / n <= i) cc++;
        float acc = ring_value(i, cc);
        for (int k = 1; k < n; k++) acc = ring_value(i, (cc + k) % n) + acc;
        if (buf[2][i] != acc) bad_order++;
    }
    EXPECT(bad_exact == 0 && bad_order == 0,
           "ring: %ld exact sums or averages wrong, %ld sums not in the ring's order (of %d each)", bad_exact,
           bad_order, N);
    uint16_t h[2][N / 10];
    const HalfKind kinds[2] = {HALF_BF16, HALF_FP16};
    long bad_half = 0;
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < N / 10; i++) h[k][i] = half_from_float(kinds[k], (float)(r + 1) / 4.0f);
        comm_iallreduce(c, h[k], N / 10, k == 0 ? COMM_BF16 : COMM_FP16, COMM_SUM, &req[0]);
        comm_wait(c, &req[0]);
        for (int i = 0; i < N / 10; i++) bad_half += half_to_float(kinds[k], h[k][i]) != (float)tri / 4.0f;
    }
    EXPECT(bad_half == 0, "ring: %ld bf16/fp16 sums wrong", bad_half);
    c->ring_min_bytes = saved;
    printf("rank %d: ring all-reduce over %d ranks: 3 in flight, exact, in the fixed order, 16-bit: %s\n", r, n,
           bad_exact || bad_order || bad_half ? "FAILED" : "ok");
}

static void check_kv(Bootstrap *b) {
    char mine[64], got[64];
    memset(mine, 0, sizeof mine);
    snprintf(mine, sizeof mine, "id-of-rank-%d", b->rank);
    if (!bootstrap_has_kv(b)) {
        EXPECT(bootstrap_put(b, "test-id", mine, sizeof mine) == -1, "put without a kv store must fail");
        EXPECT(bootstrap_commit_fence(b) == -1, "fence without a kv store must fail");
        printf("rank %d: key-value exchange: not available with method %s (returns -1): ok\n", b->rank, b->method);
        return;
    }
    EXPECT(bootstrap_put(b, "test-id", mine, sizeof mine) == 0, "put");
    EXPECT(bootstrap_commit_fence(b) == 0, "fence");
    int peers[2] = {0, (b->rank + 1) % b->world_size};
    for (int k = 0; k < 2; k++) {
        char want[64];
        memset(got, 0, sizeof got);
        snprintf(want, sizeof want, "id-of-rank-%d", peers[k]);
        EXPECT(bootstrap_get(b, peers[k], "test-id", got, sizeof got) == 0, "get");
        EXPECT(strcmp(got, want) == 0, "got '%s' from rank %d, expected '%s'", got, peers[k], want);
    }
    printf("rank %d: PMIx key-value exchange with ranks 0 and %d: %s\n", b->rank, peers[1],
           g_failures ? "FAILED" : "ok");
}

/* ---- a fake device communicator (the GPU's stream semantics, on the CPU) -------------------- */

/* What NCCL's communicator does to the host, over MPI: wait_stream hands a request to the
 * "device stream" and returns at once; a later host wait on that stream (fake_host_sync, the
 * cudaStreamSynchronize of the real backend) would block until it completes, with no timeout.
 * So the host wait must come after comm_guard_host_sync(), which drains the stream's requests
 * under the timeout (comm.h). The world carries the id and creates it like the real one. */
#ifdef HAVE_MPI
#include <mpi.h>
#include "dist/comm_mpi.h"

enum { FAKE_ID_BYTES = 128, FAKE_STREAM_MAX = 64 };
typedef struct {
    Comm *inner;                           /* an MPI communicator does the collectives */
    CommRequest *stream[FAKE_STREAM_MAX];  /* requests the "device stream" waits for */
    int nstream;
    unsigned char id[FAKE_ID_BYTES];       /* the id it was created from */
} FakeDev;

static FakeDev *fake_of(Comm *c) { return (FakeDev *)c->impl; }
static void fake_sync_inner(Comm *c) {     /* timeout and context follow the outer comm */
    Comm *in = fake_of(c)->inner;
    in->timeout_s = c->timeout_s;
    memcpy(in->context, c->context, sizeof in->context);
    in->step = c->step;
    in->has_step = c->has_step;
}
static void fake_allreduce(Comm *c, void *buf, size_t n, CommDtype dt, CommOp op) {
    fake_sync_inner(c);
    comm_allreduce(fake_of(c)->inner, buf, n, dt, op);
}
static void fake_broadcast(Comm *c, void *buf, size_t bytes, int root) {
    fake_sync_inner(c);
    comm_broadcast(fake_of(c)->inner, buf, bytes, root);
}
static void fake_barrier(Comm *c) { fake_sync_inner(c); comm_barrier(fake_of(c)->inner); }
static void fake_iallreduce(Comm *c, void *buf, size_t n, CommDtype dt, CommOp op, CommRequest *req) {
    fake_sync_inner(c);
    comm_iallreduce(fake_of(c)->inner, buf, n, dt, op, req);
}
static int fake_test(Comm *c, CommRequest *req) { fake_sync_inner(c); return comm_test(fake_of(c)->inner, req); }
static void fake_wait(Comm *c, CommRequest *req) { fake_sync_inner(c); comm_wait(fake_of(c)->inner, req); }
static void fake_wait_stream(Comm *c, CommRequest *req) {
    FakeDev *f = fake_of(c);
    CHECK(f->nstream < FAKE_STREAM_MAX);
    f->stream[f->nstream++] = req;
}
static void fake_drain(Comm *c) {
    FakeDev *f = fake_of(c);
    for (int i = 0; i < f->nstream; i++) fake_wait(c, f->stream[i]);   /* watched by the timeout */
    f->nstream = 0;
}
static void fake_free(Comm *c) {
    comm_free(fake_of(c)->inner);
    free(c->impl);
    free(c);
}
static const CommOps fake_ops = {
    .name = "fake-device", .allreduce = fake_allreduce, .broadcast = fake_broadcast, .barrier = fake_barrier,
    .iallreduce = fake_iallreduce, .test = fake_test, .wait = fake_wait, .wait_stream = fake_wait_stream,
    .drain = fake_drain, .free = fake_free,
};

static int fake_make_id(void *id, char *err, size_t errlen) {
    (void)err; (void)errlen;
    unsigned char *b = id;
    uint64_t x = (uint64_t)getpid() * 0x9E3779B97F4A7C15ULL ^ (uint64_t)(now_sec() * 1e6);
    for (int i = 0; i < FAKE_ID_BYTES; i++) { x = x * 6364136223846793005ULL + 1442695040888963407ULL; b[i] = (unsigned char)(x >> 56); }
    return 0;
}

static Comm *fake_create(int rank, int world_size, int device, const void *id, double timeout_s, char *err,
                         size_t errlen) {
    (void)device;
    if (world_mpi_init(&g_world, err, errlen) != 0) return NULL;
    int level = 0;
    MPI_Query_thread(&level);
    FakeDev *f = callocCheck(1, sizeof *f);
    f->inner = comm_mpi_create(timeout_s, level, err, errlen);
    if (!f->inner) { free(f); return NULL; }
    memcpy(f->id, id, FAKE_ID_BYTES);
    Comm *c = callocCheck(1, sizeof *c);
    c->ops = &fake_ops;
    c->impl = f;
    c->rank = rank;
    c->world_size = world_size;
    c->timeout_s = timeout_s;
    c->thread_level = 1;
    snprintf(c->desc, sizeof c->desc, "comm: fake-device over %s", comm_describe(f->inner));
    comm_set_host_sync_guard(c);
    return c;
}

static const DeviceCommFactory fake_factory = {
    .name = "fake-device", .id_bytes = FAKE_ID_BYTES, .make_id = fake_make_id, .create = fake_create,
};

/* The device backend's host wait: what cudaStreamSynchronize does, after the guard. */
static void fake_host_sync(Comm *c) {
    comm_guard_host_sync();
    FakeDev *f = fake_of(c);
    comm_set_timeout(f->inner, 0);   /* a device waits without a timeout */
    for (int i = 0; i < f->nstream; i++) comm_wait(f->inner, f->stream[i]);
    f->nstream = 0;
}

/* Every rank got rank 0's id; a request handed to the stream completes through the guard; and
 * with --skip-rank, the guard's timeout ends the job instead of the host hanging. */
static void check_fake_device(Comm *c, int skipper) {
    FakeDev *f = fake_of(c);
    int64_t sum[FAKE_ID_BYTES], mine[FAKE_ID_BYTES];
    for (int i = 0; i < FAKE_ID_BYTES; i++) sum[i] = mine[i] = f->id[i];
    comm_set_context(c, "fake device: id check");
    comm_allreduce(c, sum, FAKE_ID_BYTES, COMM_INT64, COMM_SUM);
    int same = 1;
    for (int i = 0; i < FAKE_ID_BYTES; i++) same &= sum[i] == mine[i] * c->world_size;
    EXPECT(same, "the ranks hold different communicator ids");
    printf("rank %d: fake device communicator: every rank has rank 0's id: %s\n", c->rank, same ? "ok" : "FAILED");

    enum { N = 4099 };
    float x[N];
    for (int i = 0; i < N; i++) x[i] = (float)(c->rank + 1);
    CommRequest req;
    comm_set_context(c, "step 7, bucket 3");
    if (c->rank == skipper) {
        printf("rank %d: not joining the collective (test)\n", c->rank);
        fflush(stdout);
        sleep(600);   /* the others' timeout must end this process too */
        return;
    }
    comm_iallreduce(c, x, N, COMM_FLOAT32, COMM_SUM, &req);
    EXPECT(comm_wait_stream(c, &req) == 0, "wait_stream on a device communicator returns before completion");
    fake_host_sync(c);   /* a peer that never comes: the guard's timeout ends the job here */
    EXPECT(comm_test(c, &req) == 1, "request complete after the guarded host wait");
    const float want = (float)(c->world_size * (c->world_size + 1) / 2);
    int ok = 1;
    for (int i = 0; i < N; i++) ok &= x[i] == want;
    EXPECT(ok, "sum through the fake device stream");
    printf("rank %d: fake device: iallreduce handed to the stream, host wait after the guard: %s\n", c->rank,
           ok ? "ok" : "FAILED");
}
#endif

/* ---- failure modes ------------------------------------------------------------------------- */

static void startup_check(void) {
    if (world_startup_check(&g_world) != 0) world_startup_fail(&g_world, 1, NULL);
}

static void fail_startup(Comm *c, int bad_rank) {
    if (c->rank == bad_rank) {
        fprintf(stderr, "%s: error: rank %d: cannot read data/train-00001.h5 (test failure)\n",
                g_progname, c->rank);
        world_startup_fail(&g_world, 2, "cannot read data/train-00001.h5 (test failure)");
    }
    startup_check();
    printf("rank %d: start-up check passed although rank %d should have failed\n", c->rank, bad_rank);
}

/* log_context: the context of a collective outside the buckets, which the timeout line prints
 * after the step ("step 7, loss for the log"). */
static void skip_rank(Comm *c, int skipper, int log_context) {
    float x[256] = {0};
    startup_check();
    if (log_context) {
        comm_set_step(c, 7);
        comm_set_context(c, "loss for the log");
    } else {
        comm_set_context(c, "step 7, bucket 3");
    }
    if (c->rank == skipper) {
        printf("rank %d: not joining the allreduce (test)\n", c->rank);
        fflush(stdout);
        sleep(600);   /* the others' timeout must end this process too */
        return;
    }
    comm_allreduce(c, x, 256, COMM_FLOAT32, COMM_SUM);
    printf("rank %d: allreduce completed although rank %d never joined\n", c->rank, skipper);
}

static void kill_rank(Comm *c, int victim, int at_step) {
    static float x[1 << 18];
    startup_check();
    for (int step = 0; step < 1000000; step++) {
        if (c->rank == victim && step == at_step) {
            printf("rank %d: SIGKILL at step %d (test)\n", c->rank, step);
            fflush(stdout);
            raise(SIGKILL);
        }
        char ctx[64];
        snprintf(ctx, sizeof ctx, "step %d", step);
        comm_set_context(c, ctx);
        comm_allreduce(c, x, 1 << 18, COMM_FLOAT32, COMM_AVG);
        usleep(10000);
    }
}

/* ---- overlap measurement ------------------------------------------------------------------- */

static volatile float g_sink;

/* Work that uses a core and no memory bandwidth to speak of (an L1-resident vector). */
static void compute_units(long units) {
    float v[1024];
    for (int i = 0; i < 1024; i++) v[i] = (float)i * 1e-3f;
    for (long u = 0; u < units; u++)
        for (int i = 0; i < 1024; i++) v[i] = v[i] * 0.999f + 0.001f;
    g_sink = v[17];
}

static void overlap_bench(Comm *c) {
    static const int mb[10] = {1, 2, 3, 5, 8, 10, 13, 16, 20, 25};
    float *buf[10];
    size_t n[10];
    for (int b = 0; b < 10; b++) {
        n[b] = (size_t)mb[b] * 1000000 / 4;
        buf[b] = mallocCheck(n[b] * sizeof(float));
        for (size_t i = 0; i < n[b]; i++) buf[b][i] = 1.0f;
    }
    startup_check();
    /* Calibrate: units of work for about 1 s on this rank, alone. */
    long units = 1000;
    for (;;) {
        double t = now_sec();
        compute_units(units);
        double dt = now_sec() - t;
        if (dt > 0.2) { units = (long)(units / dt); break; }
        units *= 4;
    }
    comm_set_context(c, "overlap bench");
    CommRequest req[10];
    for (int rep = 0; rep < 2; rep++) {   /* rep 0 warms up connections and buffers */
        comm_barrier(c);
        double t0 = now_sec();
        for (int b = 0; b < 10; b++) comm_allreduce(c, buf[b], n[b], COMM_FLOAT32, COMM_AVG);
        double t_block = now_sec() - t0;

        double t_alone0 = now_sec();
        compute_units(units);
        double t_alone = now_sec() - t_alone0;

        /* B: post all, compute with no comm calls, then wait. */
        comm_barrier(c);
        t0 = now_sec();
        for (int b = 0; b < 10; b++) comm_iallreduce(c, buf[b], n[b], COMM_FLOAT32, COMM_AVG, &req[b]);
        double t_post = now_sec() - t0;
        double tc = now_sec();
        compute_units(units);
        double t_comp_b = now_sec() - tc;
        double tw = now_sec();
        for (int b = 0; b < 10; b++) comm_wait(c, &req[b]);
        double t_wait_b = now_sec() - tw;
        double t_total_b = now_sec() - t0;

        /* C: post all, compute in 100 chunks with a comm_test on every request between them. */
        comm_barrier(c);
        t0 = now_sec();
        for (int b = 0; b < 10; b++) comm_iallreduce(c, buf[b], n[b], COMM_FLOAT32, COMM_AVG, &req[b]);
        tc = now_sec();
        long tests = 0;
        for (int k = 0; k < 100; k++) {
            compute_units(units / 100);
            for (int b = 0; b < 10; b++) { if (req[b].active) { comm_test(c, &req[b]); tests++; } }
        }
        double t_comp_c = now_sec() - tc;
        tw = now_sec();
        for (int b = 0; b < 10; b++) comm_wait(c, &req[b]);
        double t_wait_c = now_sec() - tw;
        double t_total_c = now_sec() - t0;
        if (rep == 1)
            printf("rank %d: 10 buckets 1-25 MB (103 MB): blocking allreduce %.3f s | compute alone %.3f s | "
                   "B post %.4f s, compute %.3f s, then wait %.3f s, total %.3f s | "
                   "C compute+%ld tests %.3f s, then wait %.3f s, total %.3f s\n",
                   c->rank, t_block, t_alone, t_post, t_comp_b, t_wait_b, t_total_b, tests, t_comp_c,
                   t_wait_c, t_total_c);
    }
    EXPECT(buf[9][0] == 1.0f, "average of ones is %g", buf[9][0]);
    for (int b = 0; b < 10; b++) free(buf[b]);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    double timeout = 60;
    int fail_rank = -1, skip = -1, kill_r = -1, kill_step = 3, bench = 0, describe = 0, fake = 0, log_context = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--timeout") && v) { timeout = atof(v); i++; }
        else if (!strcmp(a, "--fail-startup") && v) { fail_rank = atoi(v); i++; }
        else if (!strcmp(a, "--skip-rank") && v) { skip = atoi(v); i++; }
        else if (!strcmp(a, "--log-context")) log_context = 1;
        else if (!strcmp(a, "--kill-rank") && v) { kill_r = atoi(v); i++; }
        else if (!strcmp(a, "--kill-at-step") && v) { kill_step = atoi(v); i++; }
        else if (!strcmp(a, "--overlap-bench")) bench = 1;
        else if (!strcmp(a, "--describe")) describe = 1;
        else if (!strcmp(a, "--fake-device")) fake = 1;
        else if (!strcmp(a, "--features")) {
            int mpi = 0, pmix = 0;
#ifdef HAVE_MPI
            mpi = 1;
#endif
#ifdef HAVE_PMIX
            pmix = 1;
#endif
            printf("mpi=%d pmix=%d\n", mpi, pmix);
            return 0;
        }
        else usage();
    }
    char err[1024];
    if (world_init(&g_world, err, sizeof err) != 0) die("%s", err);
    Bootstrap boot = g_world.boot;   /* a copy for reading; the world owns the original */
    g_rank = boot.rank;
    const DeviceCommFactory *dev = NULL;
#ifdef HAVE_MPI
    if (fake) dev = &fake_factory;
#else
    if (fake) die("--fake-device needs MPI");
#endif
    if (world_connect(&g_world, dev, 0, timeout, NULL, err, sizeof err) != 0) {
        world_free(&g_world);
        die("%s", err);
    }
    Comm *c = g_world.comm;
    printf("rank %d: %s\n", boot.rank, bootstrap_describe(&g_world.boot));
    printf("rank %d: %s\n", boot.rank, comm_describe(c));
    if (fake && g_world.boot.world_size > 1) {
#ifdef HAVE_MPI
        startup_check();
        check_fake_device(c, skip);
        if (skip >= 0) g_failures++;   /* reaching here means the timeout did not end the job */
#endif
    } else if (describe) {
        startup_check();
    } else if (fail_rank >= 0) {
        fail_startup(c, fail_rank);
        g_failures++;
    } else if (skip >= 0) {
        skip_rank(c, skip, log_context);
        g_failures++;
    } else if (kill_r >= 0) {
        kill_rank(c, kill_r, kill_step);
        g_failures++;
    } else if (bench) {
        overlap_bench(c);
    } else {
        EXPECT(world_startup_check(&g_world) == 0, "start-up check with every rank ok");
        check_allreduce(c);
        check_avg_order(c);
        check_broadcast_barrier(c);
        check_sendrecv(c);
        check_iallreduce(c);
        check_half_allreduce(c);
        if (!strcmp(c->ops->name, "mpi")) check_ring(c);
        check_kv(&g_world.boot);
        comm_set_context(c, "final barrier");
        comm_barrier(c);
    }
    world_free(&g_world);
    printf("rank %d: %s\n", boot.rank, g_failures ? "FAILED" : "all checks passed");
    return g_failures ? 1 : 0;
}
