/* SPDX-License-Identifier: BSD-3-Clause */
/* timeacct.h - where a job's wall time went, across all its runs: <job_dir>/time.jsonl.
 *
 * A job that is preempted, killed or requeued spends wall time that trains nothing: starting
 * up again, redoing the steps since its last checkpoint, waiting in the queue. The ratio of
 * training time to wall time (the effective training time) is what a user pays for, and what
 * a checkpoint interval or a restart policy should be judged by.
 *
 * Every run (one invocation of ddptrain on the job directory) splits its time into phases:
 * start-up (process start to the first step: flags, data, model, resume), training, redone
 * (training steps an earlier run had already reached: work lost since the last checkpoint),
 * evaluation, checkpoint (training paused to write one, and the wait for the last write) and
 * shutdown. Before each run but the first comes a gap: from the previous run's end to this
 * one's start. Effective training time is the training phase summed over the runs; wall time is
 * every phase and every gap.
 *
 * The file, rank 0's only: one JSON object per line, a record of one run,
 *   {"run": 2, "state": "done", "phase": "shutdown", "start": 1764545123.456, "end": ...,
 *    "startup_sec": ..., "train_sec": ..., "redone_sec": ..., "eval_sec": ..., "checkpoint_sec":
 *    ..., "shutdown_sec": ..., "gap_sec": ..., "first_step": 40, "step": 96, "redone_steps": 8}
 * start and end in seconds since the epoch; state running, done, preempted or interrupted;
 * phase the one the run was in when the record was written. While a run goes on, rank 0 appends
 * its record again (a line with the same "run") every TIMEACCT_WRITE_SEC at a progress line,
 * after every evaluation and checkpoint (at most once a TIMEACCT_PHASE_SEC), and at its end: the last line of a run is its latest state, so a killed run leaves the state
 * of its last progress line or two. No step writes anything; the phases cost two clock reads
 * each at evaluations and checkpoints.
 *
 * At start-up rank 0 reads the file. A last run still "running" was interrupted (killed, its
 * node lost): its end is taken from the job directory's own timestamps, the newest of its last
 * record, metrics.jsonl and checkpoints/latest, and the time since its last record is added to
 * the phase it was in. The furthest step any earlier run reached (its records, and the last
 * training line of metrics.jsonl) is where redone steps end. Then the file is rewritten with one
 * line per run (atomically) and this run's lines are appended. */
#ifndef DDP_TIMEACCT_H
#define DDP_TIMEACCT_H

#include <stddef.h>
#include <stdio.h>

#include "util.h"

#define TIMEACCT_FILE "time.jsonl"
#define TIMEACCT_WRITE_SEC 30.0
#define TIMEACCT_PHASE_SEC 1.0    /* a phase's record again no sooner (checkpoints every step) */

/* When timeacct_write appends: at a progress line, every TIMEACCT_WRITE_SEC; back in a phase
 * after another (training after a checkpoint), unless that phase's record is younger than
 * TIMEACCT_PHASE_SEC; now (a run's first and last records). */
enum { TIMEACCT_DUE, TIMEACCT_PHASE, TIMEACCT_NOW };

typedef enum { TIME_STARTUP, TIME_TRAIN, TIME_REDONE, TIME_EVAL, TIME_CHECKPOINT, TIME_SHUTDOWN, TIME_PHASES } TimePhase;

typedef struct {
    int run;                    /* 1 for the job's first */
    char state[16];
    TimePhase phase;
    double start, end;          /* seconds since the epoch */
    double sec[TIME_PHASES];
    double gap;                 /* before this run */
    long first_step, step, redone_steps;
} TimeRecord;

typedef struct {
    int on;                     /* rank 0, once timeacct_open succeeded: the file is kept */
    char path[4200];
    FILE *f;
    TimeRecord cur;             /* this run */
    double mono0;               /* now_sec() at cur.start */
    double phase_t;             /* now_sec() when cur.phase began */
    double last_write;          /* now_sec() of the last record appended */
    TimePhase last_phase;       /* and its phase */
    long redo_until;            /* steps up to it were reached by an earlier run */
    TimeRecord *prev;           /* earlier runs, one record each */
    int n_prev;
} TimeAcct;

/* At process start, on every rank: this run's clock starts, in start-up. */
void timeacct_init(TimeAcct *t);
/* Rank 0, once the job directory exists: reads, completes and rewrites <job_dir>/time.jsonl and
 * appends this run's first record. 0, or -1 with one line in err (the run goes on without the
 * file). *skipped: lines that could not be read (dropped). */
int timeacct_open(TimeAcct *t, const char *job_dir, int *skipped, char *err, size_t errlen);
void timeacct_free(TimeAcct *t);

/* Training (re)starts at global step `step`: the redone steps are those up to redo_until. */
void timeacct_resume_at(TimeAcct *t, long step);

static inline void timeacct_enter(TimeAcct *t, TimePhase p) {
    const double now = now_sec();
    t->cur.sec[t->cur.phase] += now - t->phase_t;
    t->cur.phase = p;
    t->phase_t = now;
}
/* Back to training at `step`: the redone phase while step is below redo_until. */
static inline void timeacct_train(TimeAcct *t, long step) {
    timeacct_enter(t, step < t->redo_until ? TIME_REDONE : TIME_TRAIN);
}
/* After every step: one comparison, a phase change once. */
static inline void timeacct_step(TimeAcct *t, long step) {
    if (t->cur.phase == TIME_REDONE && step >= t->redo_until) timeacct_enter(t, TIME_TRAIN);
}

/* Appends this run's record when `when` (TIMEACCT_DUE, _PHASE, _NOW) says so; nothing when off.
 * -1 with errno when the write failed (the first time only). */
int timeacct_write(TimeAcct *t, long step, int when);
/* The run's last record, in state `state` ("done", "preempted"); closes the file. */
int timeacct_close(TimeAcct *t, long step, const char *state);

/* "effective training time: 41.2 s of 58.3 s wall (70.7%) over 2 runs; start-up 3.1 s, ..."
 * over the earlier runs and this one, as ddptrain-plot computes it from the file. */
void timeacct_summary(const TimeAcct *t, char *buf, size_t n);

/* One record to and from its line (no newline); parse returns 0, or -1 for a line that is not
 * a whole record. */
void timeacct_format(const TimeRecord *r, char *buf, size_t n);
int timeacct_parse(const char *line, TimeRecord *r);

#endif
