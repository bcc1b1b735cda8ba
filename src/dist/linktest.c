/* SPDX-License-Identifier: BSD-3-Clause */
/* linktest.c - see linktest.h. */
#include "linktest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

#define LINKTEST_MIN_BYTES (64u << 10)

int linktest_shift(const char *const *hosts, int world_size) {
    int best = 1, best_cross = -1;
    for (int k = 1; k < world_size; k++) {
        int cross = 0;
        for (int q = 0; q < world_size; q++) cross += strcmp(hosts[q], hosts[(q + k) % world_size]) != 0;
        if (cross == world_size) return k;
        if (cross > best_cross) {
            best = k;
            best_cross = cross;
        }
    }
    return best;
}

/* One round: every rank's receive time into secs[world_size] (the same on every rank). */
static void ring_round(Comm *c, int shift, const void *sendbuf, void *recvbuf, size_t bytes, double *secs) {
    const int W = c->world_size, dest = (c->rank + shift) % W, src = (c->rank - shift + W) % W;
    comm_barrier(c);   /* every link starts at once */
    const double mine = comm_sendrecv(c, sendbuf, dest, recvbuf, src, bytes);
    memset(secs, 0, (size_t)W * sizeof *secs);
    secs[c->rank] = mine;
    /* one nonzero term per element: the sum is exact */
    comm_allreduce(c, secs, (size_t)W, COMM_FLOAT64, COMM_SUM);
}

static double max_of(const double *x, int n) {
    double m = 0.0;
    for (int i = 0; i < n; i++) if (x[i] > m) m = x[i];
    return m;
}

void linktest_run(LinkTest *t, Comm *c, const char *const *hosts) {
    CHECK(c->ops->sendrecv != NULL);
    const int W = c->world_size;
    memset(t, 0, sizeof *t);
    t->world_size = W;
    t->shift = linktest_shift(hosts, W);
    t->mbps = callocCheck((size_t)W, sizeof *t->mbps);
    double *secs = callocCheck((size_t)W, sizeof *secs);
    unsigned char *sendbuf = mallocCheck(LINKTEST_MAX_BYTES), *recvbuf = mallocCheck(LINKTEST_MAX_BYTES);
    for (size_t i = 0; i < LINKTEST_MAX_BYTES; i++) sendbuf[i] = (unsigned char)(i * 131u + (unsigned)c->rank);
    memset(recvbuf, 0, LINKTEST_MAX_BYTES);   /* resident before anything is timed */
    const double t0 = now_sec();
    /* A dead link must not hold the job for the comm's usual 300 s. */
    const double old_timeout = c->timeout_s;
    comm_set_timeout(c, old_timeout > 0 && old_timeout < LINKTEST_TIMEOUT_S ? old_timeout : LINKTEST_TIMEOUT_S);
    const int src = (c->rank - t->shift + W) % W, dest = (c->rank + t->shift) % W;
    /* the timeout line says send or receive; this says with whom */
    char ctx[160];   /* cut to the context's 95 characters */
    snprintf(ctx, sizeof ctx, "preflight link test: to rank %d on host %.24s, from rank %d on host %.24s", dest,
             hosts[dest], src, hosts[src]);
    comm_set_context(c, ctx);

    ring_round(c, t->shift, sendbuf, recvbuf, LINKTEST_PROBE_BYTES, secs);
    const double slowest = max_of(secs, W);
    double bytes = slowest > 0.0 ? (double)LINKTEST_PROBE_BYTES / slowest * LINKTEST_ROUND_SEC : (double)LINKTEST_MAX_BYTES;
    if (bytes > LINKTEST_MAX_BYTES) bytes = LINKTEST_MAX_BYTES;
    if (bytes < LINKTEST_MIN_BYTES) bytes = LINKTEST_MIN_BYTES;
    t->bytes = (size_t)bytes & ~(size_t)4095;
    /* Every rank decides from the same reduced times, so all run the same number of rounds. */
    double spent = slowest;
    while (t->rounds < LINKTEST_MAX_ROUNDS && spent < LINKTEST_BUDGET_SEC &&
           (t->rounds < LINKTEST_MIN_ROUNDS || spent < LINKTEST_MIN_SEC)) {
        ring_round(c, t->shift, sendbuf, recvbuf, t->bytes, secs);
        for (int q = 0; q < W; q++) {
            if (!(secs[q] > 0.0)) continue;   /* below the clock's resolution: says nothing */
            const double r = (double)t->bytes / secs[q] / 1e6;
            if (r > t->mbps[q]) t->mbps[q] = r;   /* a link's best round: a passing spell is not its rate */
        }
        spent += max_of(secs, W);
        t->rounds++;
    }
    comm_set_timeout(c, old_timeout);
    t->seconds = now_sec() - t0;
    free(sendbuf);
    free(recvbuf);
    free(secs);
}

void linktest_free(LinkTest *t) {
    free(t->mbps);
    memset(t, 0, sizeof *t);
}

void linktest_judge(LinkVerdict *v, const double *mbps, int world_size, int shift) {
    const int W = world_size;
    memset(v, 0, sizeof *v);
    v->rank_slow = callocCheck((size_t)W, sizeof *v->rank_slow);
    v->rank_mbps = callocCheck((size_t)W, sizeof *v->rank_mbps);
    v->link_slow = callocCheck((size_t)W, sizeof *v->link_slow);
    if (W < 2) return;
    for (int q = 0; q < W; q++) {
        /* rank q's links: into it, mbps[q]; out of it, into q + shift */
        const double in = mbps[q], out = mbps[(q + shift) % W];
        v->rank_mbps[q] = in > out ? in : out;
    }
    /* The ranks' median, not the links': with 3 ranks, 2 of the 3 links touch a slow host. */
    double *sorted = mallocCheck((size_t)W * sizeof *sorted);
    memcpy(sorted, v->rank_mbps, (size_t)W * sizeof *sorted);
    v->median = median_sort(sorted, (size_t)W);
    free(sorted);
    const double limit = 0.5 * v->median;
    for (int q = 0; q < W; q++) {
        v->rank_slow[q] = v->rank_mbps[q] < limit;
        v->n_ranks += v->rank_slow[q];
    }
    for (int q = 0; q < W; q++) {
        const int from = (q - shift + W) % W;
        v->link_slow[q] = mbps[q] < limit && !v->rank_slow[q] && !v->rank_slow[from];
        v->n_links += v->link_slow[q];
    }
}

void linktest_verdict_free(LinkVerdict *v) {
    free(v->rank_slow);
    free(v->rank_mbps);
    free(v->link_slow);
    memset(v, 0, sizeof *v);
}

void linktest_line(const LinkTest *t, const char *const *hosts, int q, char *buf, size_t n) {
    const int W = t->world_size, from = (q - t->shift + W) % W, to = (q + t->shift) % W;
    snprintf(buf, n, "rank %d  host %s  receive %.1f MB/s from rank %d (%s)  send %.1f MB/s to rank %d (%s)", q,
             hosts[q], t->mbps[q], from, hosts[from], t->mbps[to], to, hosts[to]);
}
