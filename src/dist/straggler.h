/* SPDX-License-Identifier: BSD-3-Clause */
/* straggler.h - naming the rank that is slow but alive.
 *
 * In data parallelism every step waits for the slowest rank, so one slow node (thermal
 * throttling, a noisy neighbour, a failing disk) slows the whole job without any error. Every
 * --log_interval steps (at the progress line, which already synchronises the ranks; on GPUs it
 * drains the queued work) each rank contributes the seconds it spent since the last exchange in
 * compute, in data wait and in communication wait to one allreduce of world_size x 3 doubles
 * (straggler_exchange). A slow rank shows up in its own compute + data time; its peers show the
 * same delay as communication wait, which is why that part is left out of the comparison.
 *
 * Every rank then runs the same detector over the same numbers (only rank 0 logs): the sums of
 * compute + data over a window of the last exchanges covering at least STRAGGLER_WINDOW_STEPS
 * steps, each rank's sum compared with the median of all ranks' sums. A rank above `factor`
 * times the median is named once, when the episode starts; it is named again when it recovers,
 * i.e. when its window falls back below `factor` times the median (a window of 30 steps keeps
 * a rank near the threshold from being named at every exchange). Nothing is judged before the window
 * is full, and the first exchange of a process is left out (first-touch allocations, caches).
 *
 * On GPUs the host measures the time it takes to queue the work, not the GPU's, so the check
 * sees a slow host (data, launch) but a slow GPU mostly as its own communication wait. */
#ifndef DDP_STRAGGLER_H
#define DDP_STRAGGLER_H

#include <stddef.h>

#include "comm.h"

#define STRAGGLER_WINDOW_STEPS 30
#define STRAGGLER_MAX_EVENTS 8    /* events returned per exchange; more wait for the next one */

/* Seconds one rank spent since the last exchange. */
typedef struct {
    double compute, data, comm;
} StragglerTimes;

typedef struct {
    int rank;
    int recovered;            /* 0: the episode starts; 1: it ended */
    double ratio;             /* the rank's compute + data over the median's, in the window */
    double compute, data;     /* the rank's seconds in the window */
    double median;            /* the median rank's compute + data seconds in the window */
    long first_step, last_step;
} StragglerEvent;

typedef struct {
    int world_size;
    double factor;            /* 0: off */
    int window;               /* exchanges in the window */
    int filled, head, seen;   /* ring state; exchanges seen in all */
    double *compute, *data;   /* [window][world_size] */
    long *first, *last;       /* [window]: steps each exchange covered */
    int *flagged;             /* [world_size]: in an episode */
    double *sums, *sorted;    /* [world_size] scratch */
} Straggler;

/* every_steps: steps between exchanges (--log_interval). factor 0 turns the check off. */
void straggler_init(Straggler *s, int world_size, double factor, long every_steps);
void straggler_free(Straggler *s);

/* Feed one exchange: times[r] is rank r's, covering steps first_step..last_step. Writes up to
 * max_events new episodes and recoveries to ev (lowest rank first); returns how many. */
int straggler_update(Straggler *s, const StragglerTimes *times, long first_step, long last_step,
                     StragglerEvent *ev, int max_events);

/* Collective: every rank's times into all (world_size entries), one allreduce. */
void straggler_exchange(Comm *c, const StragglerTimes *mine, StragglerTimes *all);

/* "straggler: rank 1 on host node7: compute 1.42x the median over steps 11-40 (...)" and the
 * metrics.jsonl record of the same event. */
void straggler_describe(const StragglerEvent *e, const char *host, char *buf, size_t n);
void straggler_json(const StragglerEvent *e, const char *host, long step, char *buf, size_t n);

#endif
