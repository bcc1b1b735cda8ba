/* test_comm.c - checks bootstrap + comm on however many ranks it is started with, plus
 * failure modes driven by test-only flags (see usage()). Run by tests/test_comm.sh.
 * Exit 0 when every check passed on this rank, 1 otherwise. */
#include "build_config.h"
#include "bootstrap.h"
#include "comm.h"
#include "util.h"

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static int g_failures;
static int g_rank;

#define EXPECT(cond, ...) do { if (!(cond)) { \
    fprintf(stderr, "rank %d: FAIL %s:%d: %s: ", g_rank, __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); g_failures++; } } while (0)

static void usage(void) {
    fprintf(stderr,
            "usage: test_comm [--timeout S] [MODE]\n"
            "modes (default: the functional checks):\n"
            "  --fail-startup R          rank R fails before the start-up check\n"
            "  --skip-rank R             rank R never joins an allreduce (timeout test)\n"
            "  --kill-rank R --kill-at-step K   rank R SIGKILLs itself at step K of a loop\n"
            "  --overlap-bench           measure background progress of iallreduce\n"
            "  --describe                print the bootstrap and comm lines and exit\n"
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

/* ---- failure modes ------------------------------------------------------------------------- */

static void fail_startup(Comm *c, int bad_rank) {
    if (c->rank == bad_rank) {
        fprintf(stderr, "%s: error: rank %d: cannot read data/train-00001.h5 (test failure)\n",
                g_progname, c->rank);
        comm_abort(c, 2);
    }
    if (comm_startup_check(c, 1) != 0) comm_abort(c, 1);
    printf("rank %d: start-up check passed although rank %d should have failed\n", c->rank, bad_rank);
}

static void skip_rank(Comm *c, int skipper) {
    float x[256] = {0};
    if (comm_startup_check(c, 1) != 0) comm_abort(c, 1);
    comm_set_context(c, "step 7, bucket 3");
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
    if (comm_startup_check(c, 1) != 0) comm_abort(c, 1);
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
    if (comm_startup_check(c, 1) != 0) comm_abort(c, 1);
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
    int fail_rank = -1, skip = -1, kill_r = -1, kill_step = 3, bench = 0, describe = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--timeout") && v) { timeout = atof(v); i++; }
        else if (!strcmp(a, "--fail-startup") && v) { fail_rank = atoi(v); i++; }
        else if (!strcmp(a, "--skip-rank") && v) { skip = atoi(v); i++; }
        else if (!strcmp(a, "--kill-rank") && v) { kill_r = atoi(v); i++; }
        else if (!strcmp(a, "--kill-at-step") && v) { kill_step = atoi(v); i++; }
        else if (!strcmp(a, "--overlap-bench")) bench = 1;
        else if (!strcmp(a, "--describe")) describe = 1;
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
    Bootstrap boot;
    char err[1024];
    if (bootstrap_init(&boot, err, sizeof err) != 0) die("%s", err);
    g_rank = boot.rank;
    Comm *c = comm_create(&boot, timeout, err, sizeof err);
    if (!c) {
        bootstrap_free(&boot);
        die("%s", err);
    }
    printf("rank %d: %s\n", boot.rank, bootstrap_describe(&boot));
    printf("rank %d: %s\n", boot.rank, comm_describe(c));
    if (describe) {
        if (comm_startup_check(c, 1) != 0) comm_abort(c, 1);
    } else if (fail_rank >= 0) {
        fail_startup(c, fail_rank);
        g_failures++;
    } else if (skip >= 0) {
        skip_rank(c, skip);
        g_failures++;
    } else if (kill_r >= 0) {
        kill_rank(c, kill_r, kill_step);
        g_failures++;
    } else if (bench) {
        overlap_bench(c);
    } else {
        EXPECT(comm_startup_check(c, 1) == 0, "start-up check with every rank ok");
        check_allreduce(c);
        check_avg_order(c);
        check_broadcast_barrier(c);
        check_iallreduce(c);
        check_kv(&boot);
        comm_set_context(c, "final barrier");
        comm_barrier(c);
    }
    comm_free(c);
    bootstrap_free(&boot);
    printf("rank %d: %s\n", boot.rank, g_failures ? "FAILED" : "all checks passed");
    return g_failures ? 1 : 0;
}
