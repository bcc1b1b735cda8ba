/* SPDX-License-Identifier: BSD-3-Clause */
/* linktest.h - the link test of --preflight: which rank's network is slow, before training.
 *
 * A job that starts on a node whose link is degraded (a bad cable, a port negotiated down, a
 * host on the wrong network) trains at that link's pace and says nothing. So --preflight sends
 * a ring of point-to-point transfers: every rank q sends to rank q + shift and receives from
 * rank q - shift (modulo the world size) at the same time, and times its receive alone. That
 * measures every directed link src -> dst of the ring once per round, all links at once.
 *
 * The shift is the smallest one that puts every rank's peer on another host (linktest_shift):
 * with 2 ranks per node on 3 nodes it is 2, so every link measured crosses the network, not a
 * node's shared memory. On one host it is 1.
 *
 * Which rank is to blame (linktest_judge). A slow host slows both links it is on, the one into
 * it and the one out of it, and so one link of each of its two neighbours as well. A rank's rate
 * is the better of its two links, and a rank is named when its rate is below half the median
 * rank's: both of its links are slow, while its neighbours' other link is fast. (The median of
 * the links would not do: with 3 ranks, 2 of the 3 links touch the slow host.) A link below
 * half that median whose two ends are not named (one direction of a host is slow) is named as
 * a link, from rank to rank. On two hosts both links of every rank cross the one path between
 * them: a slow path then names nobody, since nothing tells which end is slow.
 *
 * Sizes and time. A first round of LINKTEST_PROBE_BYTES measures the slowest link; the rounds
 * that follow send what that link carries in about LINKTEST_ROUND_SEC (64 KiB to
 * LINKTEST_MAX_BYTES: a very slow link gets smaller rounds), at least LINKTEST_MIN_ROUNDS and
 * until they took LINKTEST_MIN_SEC, and a link's rate is its best round. Every transfer waits at most
 * LINKTEST_TIMEOUT_S (or the communicator's timeout if shorter): a dead link ends the job with
 * the comm's timeout line, which names the rank the receive waited for. All of it stays well
 * under a minute. */
#ifndef DDP_LINKTEST_H
#define DDP_LINKTEST_H

#include <stddef.h>

#include "comm.h"

#define LINKTEST_PROBE_BYTES (256u << 10)
#define LINKTEST_MAX_BYTES (16u << 20)
#define LINKTEST_ROUND_SEC 1.0
#define LINKTEST_MIN_ROUNDS 3
#define LINKTEST_MAX_ROUNDS 20
#define LINKTEST_MIN_SEC 0.5
#define LINKTEST_BUDGET_SEC 20.0    /* no further round starts after this much */
#define LINKTEST_TIMEOUT_S 15.0

typedef struct {
    int world_size, shift;
    double *mbps;       /* [world_size]: the link into rank q, from rank q - shift, in MB/s (1e6 bytes) */
    size_t bytes;       /* per transfer, in the measured rounds */
    int rounds;
    double seconds;     /* the whole test, probe included */
} LinkTest;

/* The verdict over the links of a LinkTest. */
typedef struct {
    double median;      /* MB/s, of the ranks' rates */
    int *rank_slow;     /* [world_size]: 1 for a named rank (both of its links slow) */
    double *rank_mbps;  /* [world_size]: the better of rank q's two links */
    int *link_slow;     /* [world_size]: 1 for a slow link into q whose ends are not named */
    int n_ranks, n_links;   /* how many of each are named */
} LinkVerdict;

/* The smallest shift in 1..world_size-1 that puts every rank's peer on another host; when none
 * does, the one that does for most ranks; 1 on one host. */
int linktest_shift(const char *const *hosts, int world_size);

/* Collective (every rank, the same hosts). Needs comm_sendrecv (c->ops->sendrecv); t is
 * filled the same on every rank. */
void linktest_run(LinkTest *t, Comm *c, const char *const *hosts);
void linktest_free(LinkTest *t);

/* The verdict over mbps[q] (the link q - shift -> q), the rule at the top. */
void linktest_judge(LinkVerdict *v, const double *mbps, int world_size, int shift);
void linktest_verdict_free(LinkVerdict *v);

/* "rank 1  host vn2  receive 5.9 MB/s from rank 0 (vn1)  send 6.0 MB/s to rank 2 (vn3)" */
void linktest_line(const LinkTest *t, const char *const *hosts, int q, char *buf, size_t n);

#endif
