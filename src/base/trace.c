/* SPDX-License-Identifier: BSD-3-Clause */
/* trace.c - see trace.h. */
#include <stdio.h>
#include <string.h>

#include "trace.h"
#include "util.h"

Trace *trace_open(const char *path, int rank) {
    Trace *t = callocCheck(1, sizeof *t);
    snprintf_check(t->path, sizeof t->path, "%s", path);
    t->rank = rank;
    t->origin = now_sec();
    return t;
}

void trace_event(Trace *t, const char *name, const char *cat, int arg, int tid, double t0, double t1) {
    if (!t) return;
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 4096;
        t->ev = realloc(t->ev, t->cap * sizeof *t->ev);
        CHECK(t->ev != NULL);
    }
    t->ev[t->n++] = (TraceEvent){name, cat, arg, tid, t0, t1};
}

int trace_close(Trace *t) {
    if (!t) return 0;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    fprintf(f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": \"rank %d\"}},\n",
            t->rank, t->rank);
    fprintf(f, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"args\": {\"name\": \"compute\"}},\n", t->rank);
    fprintf(f, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 1, \"args\": {\"name\": \"communication\"}}", t->rank);
    for (size_t i = 0; i < t->n; i++) {
        const TraceEvent *e = &t->ev[i];
        fprintf(f, ",\n{\"name\": \"%s", e->name);
        if (e->arg >= 0) fprintf(f, " %d", e->arg);
        fprintf(f, "\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, \"ts\": %.1f, \"dur\": %.1f",
                e->cat, t->rank, e->tid, 1e6 * (e->t0 - t->origin), 1e6 * (e->t1 - e->t0));
        if (e->arg >= 0) fprintf(f, ", \"args\": {\"index\": %d}", e->arg);
        fputc('}', f);
    }
    fprintf(f, "\n]}\n");
    CHECK(fclose(f) == 0);
    int rc = write_file_atomic(t->path, buf, len);
    free(buf);
    free(t->ev);
    free(t);
    return rc;
}
