/* SPDX-License-Identifier: BSD-3-Clause */
/* flight.h - the flight recorder of collectives: the last FLIGHT_RING collectives of a rank.
 *
 * A hung or dead job leaves every surviving rank waiting in a collective, and the rank to blame
 * is the one that is *not* waiting: it never posted the collective, or it is gone. No single
 * rank can see that; the records of all ranks side by side can. So each rank keeps a ring of
 * its last collectives (comm.c records every one, of every backend: a sequence number, the
 * kind, step, bucket, bytes, posted and completed wall-clock times, state) and writes it into
 * the job directory when the job goes wrong:
 *   - on a collective timeout (comm_timeout_abort), before it names the culprit (verdict.h);
 *   - on a job-wide abort (world_abort_job: an error on this rank ends every rank);
 *   - on a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT), from the handler: the
 *     record is formatted and written with async-signal-safe calls only (no stdio, no malloc);
 *   - on SIGTERM, with which a launcher ends the other ranks when one died, and Slurm ends or
 *     preempts a job (reason "signal 15"; not a fault of this rank: a later timeout or abort
 *     writes over it, and the handler that was installed before, if any, runs after it).
 * The file is <job_dir>/flight/rank-RRRRR.txt (the directory made by the first dump), written
 * to a temporary name and renamed, so a reader sees a whole record or none. Its format (one
 * item per line, a line "end" last):
 *   ddptrain flight record 1
 *   rank R of W
 *   host H
 *   pid P
 *   clock T                 wall clock at the dump (s since the epoch, 6 decimals)
 *   reason timeout|abort|signal N
 *   last_step S             -1 before the first step
 *   peer Q HOST             one per rank (the roster), so any record names every rank's host
 *   silent HOST             a host that did not answer on the network (reach.h), after a timeout
 *   stalled S               this rank did not run for S seconds (more than FLIGHT_STALL_S)
 *                           since its oldest collective still posted: stopped or frozen
 *   # seq kind state step bucket n_buckets bytes posted completed context
 *   c SEQ KIND STATE STEP BUCKET NB BYTES POSTED DONE CONTEXT    oldest first
 *   end
 * STATE is posted, completed or timeout; BUCKET is -1 for a collective outside the gradient
 * buckets (CONTEXT says what it was for); DONE is 0 while not completed.
 *
 * Cost: a record is a few stores into the ring and two reads of the (vDSO) wall clock per
 * collective; nothing is allocated or written to disk until a dump. A rank of a job of several
 * ranks also runs a ticker thread that wakes every FLIGHT_TICK_S to note the time: a rank that
 * was stopped (SIGSTOP, a debugger, a frozen VM) shows it by the gap, which a peer's record
 * cannot show. */
#ifndef DDP_FLIGHT_H
#define DDP_FLIGHT_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define FLIGHT_RING 64
#define FLIGHT_CTX_MAX 96          /* context kept per record, with its NUL (as Comm's) */
#define FLIGHT_HOST_MAX 64
#define FLIGHT_SUBDIR "flight"
#define FLIGHT_TICK_S 0.1
#define FLIGHT_STALL_S 1.0         /* a gap between ticks this long is a process that did not run */

typedef enum { FLIGHT_EMPTY = 0, FLIGHT_POSTED, FLIGHT_COMPLETED, FLIGHT_TIMED_OUT } FlightState;

typedef struct {
    int64_t seq;                   /* 1, 2, ... on each rank; the same collective has the same
                                      number on every rank of a healthy job */
    const char *kind;              /* "allreduce", "iallreduce", "broadcast", "barrier" */
    int state;                     /* FlightState */
    long step;
    int bucket, n_bucket;          /* -1, 0 outside the gradient buckets */
    uint64_t bytes;
    double t_post, t_done;         /* wall clock (s); t_done 0 until completed */
    char context[FLIGHT_CTX_MAX];
} FlightRecord;

typedef struct Flight {
    int rank, world_size;
    char host[FLIGHT_HOST_MAX];
    int64_t next_seq;
    long step;                     /* where the caller is (flight_set_step, flight_set_bucket) */
    int bucket, n_bucket;
    FlightRecord ring[FLIGHT_RING];
    /* Set by flight_open; until then a dump has nowhere to go. */
    char dir[4200];                /* <job_dir>/flight */
    char path[4300], tmp[4300];
    char (*hosts)[FLIGHT_HOST_MAX];   /* every rank's host, world_size rows */
    unsigned char *silent;         /* silent[q]: q's host did not answer (flight_probe_peers) */
    char *buf;                     /* the dump is formatted here: no allocation in a handler */
    size_t buf_cap;
    /* The ticker: a helper thread that notes the time every FLIGHT_TICK_S; a gap between two
     * ticks, or since the last one, is time the process did not run (stopped, frozen). */
    pthread_t ticker;
    int ticker_on;
    volatile sig_atomic_t ticker_stop;
    volatile double t_tick;        /* monotonic */
    volatile double gap_s, gap_end;   /* the last gap of more than FLIGHT_STALL_S, when it ended */
    double stalled_s;              /* fixed at a timeout (the probe and the dump come later) */
    volatile sig_atomic_t dumped;  /* one dump per process: the first reason is the cause */
    atomic_int writer;             /* 1 while a record is being written (flight.c) */
} Flight;

Flight *flight_create(int rank, int world_size, const char *host);
void flight_free(Flight *f);   /* NULL accepted */

/* Where dumps go, and every rank's host (NULL: only this rank's is known). Removes this
 * rank's record of an earlier run in the same job directory, and installs the handlers of the
 * fatal signals and SIGTERM, which write the record and then run the handler that was there
 * before (an MPI library's backtrace, a sanitizer's report, the preemption flag), else the
 * default action. 0, or -1 with one line in err. */
int flight_open(Flight *f, const char *job_dir, const char *const *hosts, char *err, size_t errlen);

/* The step (and the bucket of the next collectives: -1 outside the buckets) the next
 * collectives belong to. */
void flight_set_step(Flight *f, long step);
void flight_set_bucket(Flight *f, int bucket, int n_bucket);

/* A collective posted: returns its sequence number, for flight_completed. */
int64_t flight_posted(Flight *f, const char *kind, uint64_t bytes, const char *context);
void flight_completed(Flight *f, int64_t seq);
/* The oldest collective still posted timed out (collectives complete in the order they were
 * posted, so that is the one a wait gave up on); returns it, NULL when none is posted. */
const FlightRecord *flight_timed_out(Flight *f);

/* After a timeout, before the dump: which of the other hosts answer on the network at all
 * (reach.h), waiting at most limit_s; those that do not are written as "silent" lines. Does
 * nothing when every rank runs on this host. */
void flight_probe_peers(Flight *f, double limit_s);

/* Writes this rank's record (see the top) with `reason` ("timeout", "abort"); once per
 * process, later calls do nothing. Async-signal-safe. 0, or -1 (no directory yet, or the
 * write failed: errno). */
int flight_dump(Flight *f, const char *reason);

/* "<dir>/rank-RRRRR.txt" for rank q into buf; -1 if too long. */
int flight_record_path(char *buf, size_t n, const char *flight_dir, int q);

#endif
