/* SPDX-License-Identifier: BSD-3-Clause */
/* verdict.h - reading the ranks' flight records (flight.h) side by side and naming the culprit.
 *
 * Used twice: by a rank whose collective timed out (after writing its own record it waits a
 * short grace for the others', then names the culprit in its one error line), and by
 * ddptrain-diagnose on a job directory after the fact. The judgement, first match wins:
 *   1. the ranks disagree on the sequence: at the first sequence number where records differ
 *      in kind or size, the ranks outside the largest group posted another collective (one too
 *      many, one too few, another size); with no majority every group is named;
 *   2. a rank died of a fatal signal, or ended the job on an error of its own (abort), or was
 *      stopped or frozen in a wait (its record says its wait loop had not run for seconds:
 *      all ranks may have posted the collective, and this one is still the culprit);
 *   3. a collective no rank completed: the oldest one still posted on any rank. A rank whose
 *      record stops before it never posted it; a rank with no record sent none (stopped,
 *      killed or cut off from the file system); the others waited since they posted it;
 *   4. every rank posted it and not all completed it (a rank may have received all it needed
 *      before a link went, and wait in the next one): no rank is missing, the network
 *      failed; the hosts that did not answer the lowest rank that probed them (reach.h) are
 *      named, and the ranks that did not complete it where one did;
 *   5. otherwise no fault is recorded (the records are of a healthy run, or of a dump on an
 *      abort that ended the job cleanly). */
#ifndef DDP_VERDICT_H
#define DDP_VERDICT_H

#include <stddef.h>

#include "flight.h"

#define VERDICT_REASON_MAX 32
#define VERDICT_GRACE_S 3.0   /* a timed-out rank waits this long at most for the others' records */

typedef struct {
    int present;                   /* a whole record was read */
    int rank, world_size;
    char host[FLIGHT_HOST_MAX];
    long pid;
    double clock;                  /* wall clock at the dump */
    char reason[VERDICT_REASON_MAX];
    long last_step;
    double stalled;                /* seconds the rank had not run in a wait (0: it ran) */
    int n_silent;                  /* hosts that did not answer this rank (reach.h) */
    char silent[8][FLIGHT_HOST_MAX];
    int n;                         /* records, oldest first, consecutive sequence numbers */
    FlightRecord rec[FLIGHT_RING];
} FlightDump;

typedef struct {
    int world_size;
    FlightDump *dump;              /* world_size entries, by rank */
    int n_present;
    char (*hosts)[FLIGHT_HOST_MAX];   /* every rank's host from the records' peer tables */
} FlightSet;

/* Reads <flight_dir>/rank-*.txt. strict: a record that cannot be parsed is an error naming
 * the file (ddptrain-diagnose); else it is skipped as absent (a rank judging in a hurry).
 * 0, or -1 with one line in err (no such directory, no records, a corrupt record). */
int flight_set_load(FlightSet *s, const char *flight_dir, int strict, char *err, size_t errlen);
void flight_set_free(FlightSet *s);

/* The verdict as one line (without "error:" or a newline). 1 when a fault is named, 0 when
 * none is recorded (out says so). */
int verdict_judge(const FlightSet *s, char *out, size_t n);

/* For a rank whose collective timed out, after its own flight_dump: waits until every rank's
 * record is in f's directory or VERDICT_GRACE_S passed, then judges. 1 with the verdict in
 * out; 0 when there is nothing to say beyond the timeout (no directory yet, nothing read). */
int verdict_after_timeout(const Flight *f, char *out, size_t n);

/* One line about rank q's record for ddptrain-diagnose ("rank 1 on host vn2, pid 812: ..."). */
void verdict_rank_line(const FlightSet *s, int q, char *out, size_t n);

#endif
