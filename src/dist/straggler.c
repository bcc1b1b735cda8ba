/* SPDX-License-Identifier: BSD-3-Clause */
/* straggler.c - see straggler.h. */
#include "straggler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

void straggler_init(Straggler *s, int world_size, double factor, long every_steps) {
    memset(s, 0, sizeof *s);
    s->world_size = world_size;
    s->factor = factor;
    if (every_steps < 1) every_steps = 1;
    s->window = (int)((STRAGGLER_WINDOW_STEPS + every_steps - 1) / every_steps);
    const size_t w = (size_t)world_size, n = (size_t)s->window * w;
    s->compute = callocCheck(n, sizeof *s->compute);
    s->data = callocCheck(n, sizeof *s->data);
    s->first = callocCheck((size_t)s->window, sizeof *s->first);
    s->last = callocCheck((size_t)s->window, sizeof *s->last);
    s->flagged = callocCheck(w, sizeof *s->flagged);
    s->sums = callocCheck(w, sizeof *s->sums);
    s->sorted = callocCheck(w, sizeof *s->sorted);
}

void straggler_free(Straggler *s) {
    free(s->compute);
    free(s->data);
    free(s->first);
    free(s->last);
    free(s->flagged);
    free(s->sums);
    free(s->sorted);
    memset(s, 0, sizeof *s);
}

int straggler_update(Straggler *s, const StragglerTimes *times, long first_step, long last_step,
                     StragglerEvent *ev, int max_events) {
    if (s->factor <= 0.0 || s->world_size < 2) return 0;
    if (s->seen++ == 0) return 0;   /* the warm-up exchange (straggler.h) */
    const int W = s->world_size;
    for (int q = 0; q < W; q++) {
        s->compute[(size_t)s->head * W + q] = times[q].compute;
        s->data[(size_t)s->head * W + q] = times[q].data;
    }
    s->first[s->head] = first_step;
    s->last[s->head] = last_step;
    s->head = (s->head + 1) % s->window;
    if (s->filled < s->window) s->filled++;
    if (s->filled < s->window) return 0;

    long a = first_step, b = last_step;
    for (int k = 0; k < s->window; k++) {
        if (s->first[k] < a) a = s->first[k];
        if (s->last[k] > b) b = s->last[k];
    }
    for (int q = 0; q < W; q++) {
        double sum = 0.0;
        for (int k = 0; k < s->window; k++)
            sum += s->compute[(size_t)k * W + q] + s->data[(size_t)k * W + q];
        s->sums[q] = s->sorted[q] = sum;
    }
    const double median = median_sort(s->sorted, (size_t)W);
    if (!(median > 0.0)) return 0;
    /* The window (30 steps) damps a rank near the threshold; a margin below it as well left a
     * rank that was back to its peers' pace "slow" for good on a noisy 2-core machine. */
    const double recover_below = s->factor;
    int n = 0;
    for (int q = 0; q < W && n < max_events; q++) {
        const double ratio = s->sums[q] / median;
        const int start = !s->flagged[q] && ratio > s->factor;
        const int end = s->flagged[q] && ratio < recover_below;
        if (!start && !end) continue;
        s->flagged[q] = start;
        StragglerEvent *e = &ev[n++];
        memset(e, 0, sizeof *e);
        e->rank = q;
        e->recovered = end;
        e->ratio = ratio;
        e->median = median;
        e->first_step = a;
        e->last_step = b;
        for (int k = 0; k < s->window; k++) {
            e->compute += s->compute[(size_t)k * W + q];
            e->data += s->data[(size_t)k * W + q];
        }
    }
    return n;
}

void straggler_exchange(Comm *c, const StragglerTimes *mine, StragglerTimes *all) {
    const size_t W = (size_t)c->world_size;
    double *buf = callocCheck(W * 3, sizeof *buf);
    buf[(size_t)c->rank * 3 + 0] = mine->compute;
    buf[(size_t)c->rank * 3 + 1] = mine->data;
    buf[(size_t)c->rank * 3 + 2] = mine->comm;
    comm_set_context(c, "straggler check: every rank's compute, data and communication times");
    /* one nonzero term per element: the sum is exact */
    comm_allreduce(c, buf, W * 3, COMM_FLOAT64, COMM_SUM);
    for (size_t q = 0; q < W; q++) {
        all[q].compute = buf[q * 3 + 0];
        all[q].data = buf[q * 3 + 1];
        all[q].comm = buf[q * 3 + 2];
    }
    free(buf);
}

void straggler_describe(const StragglerEvent *e, const char *host, char *buf, size_t n) {
    if (e->recovered)
        snprintf(buf, n, "straggler: rank %d on host %s recovered: compute %.2fx the median over steps %ld-%ld",
                 e->rank, host, e->ratio, e->first_step, e->last_step);
    else
        snprintf(buf, n, "straggler: rank %d on host %s: compute %.2fx the median over steps %ld-%ld "
                 "(compute %.3f s + data %.3f s against a median of %.3f s)",
                 e->rank, host, e->ratio, e->first_step, e->last_step, e->compute, e->data, e->median);
}

void straggler_json(const StragglerEvent *e, const char *host, long step, char *buf, size_t n) {
    /* the host name is the kernel's (no quotes or backslashes), so it needs no escaping */
    snprintf(buf, n, "{\"event\": \"%s\", \"step\": %ld, \"rank\": %d, \"host\": \"%s\", \"ratio\": %.4f, "
             "\"first_step\": %ld, \"last_step\": %ld, \"compute_sec\": %.4f, \"data_sec\": %.4f, \"median_sec\": %.4f}",
             e->recovered ? "straggler_recovered" : "straggler", step, e->rank, host, e->ratio, e->first_step,
             e->last_step, e->compute, e->data, e->median);
}
