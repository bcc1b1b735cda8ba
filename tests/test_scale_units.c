/* SPDX-License-Identifier: BSD-3-Clause */
/* test_scale_units.c - the checks for running at scale, without MPI: the straggler detector
 * (straggler.h), two ranks on one GPU (roster.h), the agreement verdict (agree.h), the flight
 * record written and read back (flight.h, verdict.h), the link test's shift and verdict
 * (linktest.h) and time.jsonl's records (timeacct.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist/agree.h"
#include "dist/flight.h"
#include "dist/linktest.h"
#include "dist/roster.h"
#include "dist/straggler.h"
#include "base/timeacct.h"
#include "dist/verdict.h"

static int fails = 0;
#define EXPECT(cond, ...) do { if (!(cond)) { fails++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

/* 5 ranks, an exchange every 10 steps (a 3-exchange window); rank `slow` takes `f` times as long
 * from exchange `from` to exchange `to` (exclusive). Returns the exchange that named it (-1). */
static int run_detector(int slow, double f, int from, int to, int *recovered_at, int *others) {
    Straggler s;
    straggler_init(&s, 5, 1.15, 10);
    int named = -1;
    *recovered_at = -1;
    *others = 0;
    for (int k = 0; k < 20; k++) {
        StragglerTimes t[5];
        for (int q = 0; q < 5; q++) {
            t[q].compute = 1.0 + 0.02 * q;   /* a little spread, under the factor */
            t[q].data = 0.1;
            t[q].comm = 0.3;
        }
        if (k >= from && k < to) t[slow].compute *= f;
        StragglerEvent ev[STRAGGLER_MAX_EVENTS];
        int n = straggler_update(&s, t, 10L * k + 1, 10L * k + 10, ev, STRAGGLER_MAX_EVENTS);
        for (int i = 0; i < n; i++) {
            if (ev[i].rank != slow) (*others)++;
            else if (!ev[i].recovered && named < 0) named = k;
            else if (ev[i].recovered && *recovered_at < 0) *recovered_at = k;
            else (*others)++;   /* a second episode, or a recovery before the start */
        }
    }
    straggler_free(&s);
    return named;
}

static void test_straggler(void) {
    int rec, others;
    int named = run_detector(3, 2.0, 4, 10, &rec, &others);
    /* slowed at exchange 4: half of the 3-exchange window is slow by exchange 5 */
    EXPECT(named >= 4 && named <= 6, "2x slow rank named at exchange %d", named);
    EXPECT(rec >= 10 && rec <= 13, "recovery at exchange %d", rec);
    EXPECT(others == 0, "%d events about other ranks or repeated", others);
    named = run_detector(2, 1.05, 4, 20, &rec, &others);
    EXPECT(named < 0 && others == 0, "a rank 5%% slower than the others was named (%d, %d)", named, others);
    named = run_detector(0, 3.0, 0, 1, &rec, &others);   /* the warm-up exchange is left out */
    EXPECT(named < 0 && others == 0, "a slow warm-up exchange was judged (%d)", named);

    Straggler off;
    straggler_init(&off, 2, 0.0, 10);
    StragglerTimes t[2] = {{1, 0, 0}, {9, 0, 0}};
    StragglerEvent ev[2];
    int n = 0;
    for (int k = 0; k < 10; k++) n += straggler_update(&off, t, k, k, ev, 2);
    EXPECT(n == 0, "factor 0 still named %d", n);
    straggler_free(&off);

    StragglerEvent e = {.rank = 1, .ratio = 1.42, .compute = 2.0, .data = 0.1, .median = 1.5, .first_step = 11, .last_step = 40};
    char line[512];
    straggler_describe(&e, "node7", line, sizeof line);
    EXPECT(strstr(line, "straggler: rank 1 on host node7: compute 1.42x the median over steps 11-40") == line, "%s", line);
}

static void test_shared_gpu(void) {
    char id[64];
    roster_gpu_id(1, NULL, id, sizeof id);
    EXPECT(!strcmp(id, "1"), "index without CUDA_VISIBLE_DEVICES: %s", id);
    roster_gpu_id(1, "3, 2", id, sizeof id);
    EXPECT(!strcmp(id, "2"), "second entry of '3, 2': %s", id);
    roster_gpu_id(0, "GPU-8f3a,GPU-11aa", id, sizeof id);
    EXPECT(!strcmp(id, "GPU-8f3a"), "uuid entry: %s", id);
    roster_gpu_id(-1, "0", id, sizeof id);
    EXPECT(!strcmp(id, ""), "cpu rank: %s", id);

    RosterEntry r[4];
    memset(r, 0, sizeof r);
    const char *hosts[4] = {"a", "a", "b", "b"};
    /* --gpus-per-task=1: every rank sees device 0, but each its own GPU */
    const char *cvd[4] = {"0", "1", "0", "1"};
    for (int q = 0; q < 4; q++) {
        snprintf(r[q].host, sizeof r[q].host, "%s", hosts[q]);
        r[q].gpu = 0;
        roster_gpu_id(0, cvd[q], r[q].gpu_id, sizeof r[q].gpu_id);
    }
    int a = -1, b = -1;
    EXPECT(!roster_find_shared_gpu(r, 4, &a, &b), "one GPU per task flagged as shared (%d, %d)", a, b);
    /* rank 3 sees GPUs 0,1 and takes index 0: GPU 0 of host b, rank 2's */
    roster_gpu_id(0, "0,1", r[3].gpu_id, sizeof r[3].gpu_id);
    EXPECT(roster_find_shared_gpu(r, 4, &a, &b) && a == 2 && b == 3, "shared GPU not found (%d, %d)", a, b);
    /* the same index on different hosts, and CPU ranks, are never shared */
    for (int q = 0; q < 4; q++) { r[q].gpu = q < 2 ? 0 : -1; snprintf(r[q].gpu_id, sizeof r[q].gpu_id, "%s", q < 2 ? "0" : ""); }
    snprintf(r[1].host, sizeof r[1].host, "c");
    EXPECT(!roster_find_shared_gpu(r, 4, &a, &b), "different hosts or CPU ranks flagged");
}

static void test_agree(void) {
    int64_t t[4 * 3] = {1, 2, 3,  1, 2, 3,  1, 9, 3,  1, 2, 3};
    int odd = -1, ref = -1;
    EXPECT(agree_find(t, 4, 3, &odd, &ref) == 1 && odd == 2 && ref == 0, "field %d odd %d ref %d", agree_find(t, 4, 3, &odd, &ref), odd, ref);
    int64_t u[3 * 1] = {5, 7, 7};   /* rank 0 is the odd one out */
    EXPECT(agree_find(u, 3, 1, &odd, &ref) == 0 && odd == 0 && ref == 1, "odd %d ref %d", odd, ref);
    int64_t v[2 * 2] = {4, 4, 4, 4};
    EXPECT(agree_find(v, 2, 2, &odd, &ref) == -1, "equal tables disagree");
    int64_t w[2 * 1] = {4, 5};      /* a tie: rank 0's value is the reference */
    EXPECT(agree_find(w, 2, 1, &odd, &ref) == 0 && odd == 1 && ref == 0, "odd %d ref %d", odd, ref);

    Config c1, c2;
    config_init(&c1);
    config_init(&c2);
    char err[256];
    EXPECT(config_set(&c2, "threads", "3", err, sizeof err) == 0, "%s", err);
    EXPECT(config_set(&c2, "data_dir", "/elsewhere", err, sizeof err) == 0, "%s", err);
    Agreement a1, a2;
    agree_init(&a1);
    agree_init(&a2);
    agree_add_config(&a1, &c1);
    agree_add_config(&a2, &c2);
    EXPECT(a1.n == a2.n && !memcmp(a1.hash, a2.hash, sizeof a1.hash), "per-rank options must not count");
    EXPECT(config_set(&c2, "batch_size", "32", err, sizeof err) == 0, "%s", err);
    agree_init(&a2);
    agree_add_config(&a2, &c2);
    int diff = -1;
    for (int f = 0; f < a1.n; f++) if (a1.hash[f] != a2.hash[f]) { diff = f; break; }
    EXPECT(diff >= 0 && !strcmp(a2.name[diff], "--batch_size") && !strcmp(a2.value[diff], "32"), "field %d", diff);
    config_free(&c1);
    config_free(&c2);
}

/* Rank 0 of 3 records 100 collectives (the ring keeps the last 64), the last one times out;
 * its record read back says the same, and alone it blames ranks 1 and 2 for sending none. */
static void test_flight(void) {
    char dir[] = "/tmp/ddp-flight-XXXXXX";
    EXPECT(mkdtemp(dir) != NULL, "mkdtemp");
    const char *hosts[3] = {"n0", "n1", "n2"};
    Flight *f = flight_create(0, 3, "n0");
    char err[512];
    EXPECT(flight_open(f, dir, hosts, err, sizeof err) == 0, "%s", err);
    for (int k = 1; k <= 100; k++) {
        flight_set_step(f, k / 4);
        flight_set_bucket(f, k % 4 == 0 ? -1 : k % 4 - 1, 3);
        /* every kind comm.h records reads back (sendrecv: --preflight's link test) */
        const char *kind = k % 4 == 0 ? "allreduce" : k % 8 == 1 ? "sendrecv" : k % 8 == 3 ? "broadcast" : "iallreduce";
        int64_t seq = flight_posted(f, kind, (uint64_t)k * 8, "a context\nwith a newline");
        EXPECT(seq == k, "seq %lld", (long long)seq);
        if (k < 100) flight_completed(f, seq);
    }
    const FlightRecord *t = flight_timed_out(f);
    EXPECT(t && t->seq == 100, "timed out #%lld", t ? (long long)t->seq : -1LL);
    EXPECT(flight_dump(f, "timeout") == 0, "dump");
    EXPECT(flight_dump(f, "abort") == 0, "a second dump is a no-op");
    char fdir[4200];
    snprintf(fdir, sizeof fdir, "%s/" FLIGHT_SUBDIR, dir);
    FlightSet s;
    EXPECT(flight_set_load(&s, fdir, 1, err, sizeof err) == 0, "%s", err);
    if (s.world_size == 3) {
        const FlightDump *d = &s.dump[0];
        EXPECT(d->present && !s.dump[1].present && d->n == FLIGHT_RING && d->rec[0].seq == 37, "%d records from #%lld",
               d->n, d->n ? (long long)d->rec[0].seq : -1LL);
        EXPECT(!strcmp(d->reason, "timeout") && d->last_step == 25 && !strcmp(s.hosts[2], "n2"), "%s %ld %s", d->reason,
               d->last_step, s.hosts[2]);
        const FlightRecord *r = &d->rec[FLIGHT_RING - 1];
        EXPECT(r->state == FLIGHT_TIMED_OUT && r->bytes == 800 && r->bucket == -1 && !strcmp(r->kind, "allreduce") &&
               !strcmp(r->context, "a context with a newline"), "last: %d %llu %d %s '%s'", r->state,
               (unsigned long long)r->bytes, r->bucket, r->kind, r->context);
        char line[1024];
        const char *want = "rank 1 on host n1 sent no flight record (stopped, killed or cut off); rank 2 on host n2 "
                           "sent no flight record (stopped, killed or cut off); rank 0 waited in allreduce (a context "
                           "with a newline, step 25) (collective #100) since ";
        EXPECT(verdict_judge(&s, line, sizeof line) == 1 && !strncmp(line, want, strlen(want)), "%s", line);
    }
    flight_set_free(&s);
    flight_free(f);
    char path[4400];
    snprintf(path, sizeof path, "%s/rank-00000.txt", fdir);
    unlink(path);
    rmdir(fdir);
    rmdir(dir);
}

static void test_linktest(void) {
    const char *one[3] = {"a", "a", "a"}, *blocks[6] = {"a", "a", "b", "b", "c", "c"};
    const char *cyclic[4] = {"a", "b", "a", "b"}, *uneven[3] = {"a", "a", "b"};
    EXPECT(linktest_shift(one, 3) == 1, "one host: shift %d", linktest_shift(one, 3));
    EXPECT(linktest_shift(blocks, 6) == 2, "2 ranks per host: shift %d", linktest_shift(blocks, 6));
    EXPECT(linktest_shift(cyclic, 4) == 1, "cyclic: shift %d", linktest_shift(cyclic, 4));
    EXPECT(linktest_shift(uneven, 3) == 1, "uneven: shift %d", linktest_shift(uneven, 3));

    /* mbps[q]: the link q - shift -> q. Host of rank 1 slow: links 0->1 and 1->2. */
    LinkVerdict v;
    const double slow1[3] = {100.0, 6.0, 6.0};
    linktest_judge(&v, slow1, 3, 1);
    EXPECT(v.n_ranks == 1 && v.rank_slow[1] && v.n_links == 0 && v.median == 100.0,
           "3 ranks, rank 1 slow: %d ranks (rank 1: %d), %d links, median %g", v.n_ranks, v.rank_slow[1], v.n_links, v.median);
    linktest_verdict_free(&v);
    /* 6 ranks, shift 2, ranks 2 and 3 on the slow host: links 0->2, 1->3, 2->4, 3->5 slow */
    const double slow23[6] = {90.0, 95.0, 5.0, 5.0, 5.0, 5.0};
    linktest_judge(&v, slow23, 6, 2);
    EXPECT(v.n_ranks == 2 && v.rank_slow[2] && v.rank_slow[3] && v.n_links == 0, "6 ranks: %d ranks, %d links",
           v.n_ranks, v.n_links);
    linktest_verdict_free(&v);
    /* one direction only: the link 1 -> 2 slow, rank 1 receives fast */
    const double oneway[4] = {100.0, 100.0, 10.0, 100.0};
    linktest_judge(&v, oneway, 4, 1);
    EXPECT(v.n_ranks == 0 && v.n_links == 1 && v.link_slow[2], "one slow direction: %d ranks, %d links", v.n_ranks,
           v.n_links);
    linktest_verdict_free(&v);
    /* two ranks, one slow path: nothing tells which end */
    const double two[2] = {5.0, 5.0}, even[4] = {80.0, 100.0, 120.0, 90.0};
    linktest_judge(&v, two, 2, 1);
    EXPECT(v.n_ranks == 0 && v.n_links == 0, "2 ranks: %d ranks, %d links", v.n_ranks, v.n_links);
    linktest_verdict_free(&v);
    linktest_judge(&v, even, 4, 1);
    EXPECT(v.n_ranks == 0 && v.n_links == 0, "links within 1.5x named: %d ranks, %d links", v.n_ranks, v.n_links);
    linktest_verdict_free(&v);
}

static void test_timeacct(void) {
    TimeRecord r = {.run = 3, .phase = TIME_REDONE, .start = 1764545123.25, .end = 1764545183.5, .gap = 12.5,
                    .first_step = 40, .step = 96, .redone_steps = 8};
    snprintf(r.state, sizeof r.state, "running");
    for (int p = 0; p < TIME_PHASES; p++) r.sec[p] = 0.5 * (p + 1);
    char line[1024];
    timeacct_format(&r, line, sizeof line);
    TimeRecord back;
    EXPECT(timeacct_parse(line, &back) == 0 && back.run == 3 && back.phase == TIME_REDONE && back.step == 96 &&
           back.redone_steps == 8 && back.sec[TIME_SHUTDOWN] == 3.0 && back.gap == 12.5 && !strcmp(back.state, "running"),
           "round trip: %s", line);
    line[strlen(line) / 2] = '\0';   /* a line cut by a kill */
    EXPECT(timeacct_parse(line, &back) != 0, "half a record parsed: %s", line);
    EXPECT(timeacct_parse("{\"run\": 1}", &back) != 0, "a record without its fields parsed");
    timeacct_format(&r, line, sizeof line);
    char *st = strstr(line, "running");
    memcpy(st, "runnin\\", 7);   /* a state of another writer, with a backslash */
    EXPECT(timeacct_parse(line, &back) != 0, "an unknown state parsed: %s", line);
}

int main(void) {
    test_straggler();
    test_shared_gpu();
    test_agree();
    test_flight();
    test_linktest();
    test_timeacct();
    if (fails) { printf("%d check(s) failed\n", fails); return 1; }
    printf("all checks passed\n");
    return 0;
}
