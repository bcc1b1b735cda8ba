/* SPDX-License-Identifier: BSD-3-Clause */
/* trace.h - a Chrome-trace timeline per rank (open in chrome://tracing or ui.perfetto.dev).
 *
 * Events are complete events ("ph":"X") with a start and a duration in microseconds since the
 * trace was opened, kept in memory and written as one JSON file when the trace is closed, so
 * recording costs a few nanoseconds and never touches the disk during training. Only the
 * training thread records. A NULL Trace* makes every call a no-op. */
#ifndef DDP_TRACE_H
#define DDP_TRACE_H

#include <stddef.h>

typedef struct {
    const char *name;     /* static string */
    const char *cat;      /* static string: "compute", "comm", "data", "optim" */
    int arg;              /* layer or bucket index, -1 if none */
    int tid;              /* lane: 0 compute, 1 communication */
    double t0, t1;        /* seconds (now_sec) */
} TraceEvent;

typedef struct {
    char path[4096];
    int rank;
    double origin;
    TraceEvent *ev;
    size_t n, cap;
} Trace;

Trace *trace_open(const char *path, int rank);
void trace_event(Trace *t, const char *name, const char *cat, int arg, int tid, double t0, double t1);
/* Writes the file (atomically) and frees. Returns 0 or -1 with errno set. */
int trace_close(Trace *t);

#endif
