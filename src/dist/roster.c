/* SPDX-License-Identifier: BSD-3-Clause */
/* roster.c - see roster.h. */
#include "roster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

_Static_assert(sizeof(RosterEntry) % sizeof(int64_t) == 0, "RosterEntry travels as int64 words");

void roster_gpu_id(int index, const char *cvd, char *id, size_t n) {
    if (index < 0) { snprintf(id, n, "%s", ""); return; }
    if (!cvd) { snprintf(id, n, "%d", index); return; }
    /* the index-th comma-separated entry, spaces around it ignored */
    const char *p = cvd;
    for (int k = 0; k < index && p; k++) {
        p = strchr(p, ',');
        if (p) p++;
    }
    if (!p) { snprintf(id, n, "?%d", index); return; }   /* the runtime would not show it */
    while (*p == ' ') p++;
    size_t len = strcspn(p, ", ");
    if (len >= n) len = n - 1;
    memcpy(id, p, len);
    id[len] = '\0';
}

void roster_gather(Comm *c, const RosterEntry *mine, RosterEntry *all) {
    const size_t W = (size_t)c->world_size, words = sizeof(RosterEntry) / sizeof(int64_t);
    memset(all, 0, W * sizeof *all);
    all[c->rank] = *mine;
    comm_set_context(c, "gathering every rank's host and device");
    /* each int64 word has one nonzero contributor: the sum is that rank's bits */
    comm_allreduce(c, all, W * words, COMM_INT64, COMM_SUM);
    for (size_t q = 0; q < W; q++) {
        all[q].host[ROSTER_HOST_MAX - 1] = '\0';
        all[q].gpu_id[ROSTER_GPU_ID_MAX - 1] = '\0';
    }
}

int roster_find_shared_gpu(const RosterEntry *all, int world_size, int *a, int *b) {
    for (int i = 0; i < world_size; i++) {
        if (all[i].gpu < 0) continue;
        for (int j = i + 1; j < world_size; j++) {
            if (all[j].gpu < 0 || strcmp(all[i].host, all[j].host) || strcmp(all[i].gpu_id, all[j].gpu_id)) continue;
            *a = i;
            *b = j;
            return 1;
        }
    }
    return 0;
}

void roster_line(const RosterEntry *all, int q, char *buf, size_t n) {
    const RosterEntry *e = &all[q];
    if (e->gpu >= 0)
        snprintf(buf, n, "rank %d  host %s  local %ld/%ld  GPU %ld (physical %s), %ld CPU thread%s",
                 q, e->host, (long)e->local_rank, (long)e->local_size, (long)e->gpu, e->gpu_id, (long)e->threads,
                 e->threads == 1 ? "" : "s");
    else
        snprintf(buf, n, "rank %d  host %s  local %ld/%ld  cpu: %ld thread%s on %ld core%s", q, e->host,
                 (long)e->local_rank, (long)e->local_size, (long)e->threads, e->threads == 1 ? "" : "s",
                 (long)e->cores, e->cores == 1 ? "" : "s");
}
