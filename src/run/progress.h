/* SPDX-License-Identifier: BSD-3-Clause */
/* progress.h - the progress lines: what the loop did since the last line (the window), the
 * loss and the rates averaged over the ranks, one line on rank 0's console and in every rank's
 * log, one metrics record, and the straggler check over the same window (straggler.h), whose
 * exchange of every rank's times also gives TensorBoard each rank's shares (--tensorboard).
 *
 * A window opens after each line and at each epoch's start; the loop adds each step's images
 * and times to it. A loss that is not finite ends the run, unless the fp16 scaler skipped the
 * step for it. */
#ifndef DDP_PROGRESS_H
#define DDP_PROGRESS_H

#include "dist/comm.h"
#include "base/config.h"
#include "learner.h"
#include "base/logger.h"
#include "dist/reducer.h"
#include "dist/straggler.h"
#include "base/timeacct.h"

typedef struct {
    const Config *cfg;
    Comm *comm;
    Logger *log;
    TimeAcct *time;
    const char *const *hosts;   /* hosts[q]: rank q's host */
    Straggler straggler;
    /* the window: what the next progress line averages over */
    double t_start, data_wait, step_time;
    long images, steps;
} Progress;

void progress_init(Progress *p, const Config *c, Comm *comm, Logger *log, TimeAcct *time, const char *const *hosts);

/* A new window from time t; the reducer's wait time starts again from 0. */
void progress_open_window(Progress *p, Reducer *rd, double t);

/* Where the run is, for the line and its ETA. */
typedef struct {
    long epoch, step, total_steps, steps_per_epoch;
    long step_first;      /* where this invocation began */
    double lr, t_train0;  /* the step's learning rate; the start of training */
} ProgressAt;

/* Collective: one progress line and metrics record for the window, then a new window. */
void progress_log(Progress *p, Learner *l, Reducer *rd, const ProgressAt *at);

void progress_free(Progress *p);

#endif
