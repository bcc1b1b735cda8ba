/* SPDX-License-Identifier: BSD-3-Clause */
/* agree.c - see agree.h. */
#include "agree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

/* Options each rank may hold its own value of: where this node mounts the data, the job
 * directory and the checkpoint to resume (rank 0 decides both and tells the others), threads,
 * prefetching, timeouts, the trace, the preemption signal, how many checkpoints rank 0 keeps. */
static const char *const k_per_rank[] = {
    "data_dir", "job_dir", "resume", "threads", "prefetch", "comm_timeout", "trace", "preempt_signal",
    "keep_checkpoints", "comm_progress_us",
};

static int per_rank(const char *name) {
    for (size_t i = 0; i < sizeof k_per_rank / sizeof *k_per_rank; i++)
        if (!strcmp(name, k_per_rank[i])) return 1;
    return 0;
}

uint64_t agree_hash(uint64_t h, const void *bytes, size_t n) {
    if (h == 0) h = 1469598103934665603ULL;
    const unsigned char *p = bytes;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

void agree_init(Agreement *a) { memset(a, 0, sizeof *a); }

void agree_add(Agreement *a, const char *name, const char *value, const void *bytes, size_t n) {
    CHECK(a->n < AGREE_MAX_FIELDS);
    snprintf(a->name[a->n], sizeof a->name[a->n], "%s", name);
    snprintf(a->value[a->n], sizeof a->value[a->n], "%s", value ? value : "");
    a->hash[a->n] = agree_hash(0, bytes, n);
    a->n++;
}

void agree_add_config(Agreement *a, const Config *c) {
    char name[48], v[48];
#define DDP_AGREE_STR(x) agree_add(a, name, (x) ? (x) : "", (x) ? (x) : "", (x) ? strlen(x) : 0)
#define DDP_AGREE_NUM(x, fmt) do { snprintf(v, sizeof v, fmt, x); agree_add(a, name, v, &(x), sizeof(x)); } while (0)
#define DDP_AGREE_INT(x) DDP_AGREE_NUM(x, "%ld")
#define DDP_AGREE_FLOAT(x) DDP_AGREE_NUM(x, "%.17g")
#define DDP_AGREE_BOOL(x) DDP_AGREE_NUM(x, "%d")
#define DDP_AGREE_SWITCH(x) DDP_AGREE_NUM(x, "%d")   /* CONFIG_AUTO is -1 */
#define DDP_AGREE_CHOICE(x) DDP_AGREE_STR(x)
#define X(nm, type, def, min, max, help) \
    if (!per_rank(#nm)) { snprintf(name, sizeof name, "--%s", #nm); DDP_AGREE_##type(c->nm); }
    DDP_CONFIG_TABLE(X)
#undef X
}

int agree_find(const int64_t *table, int world_size, int nfields, int *odd, int *ref) {
    for (int f = 0; f < nfields; f++) {
        /* the value most ranks hold; O(world^2) only when the field is not unanimous */
        int all_same = 1;
        for (int q = 1; q < world_size && all_same; q++) all_same = table[(size_t)q * nfields + f] == table[f];
        if (all_same) continue;
        int best = 0, best_count = 0;
        for (int q = 0; q < world_size; q++) {
            int count = 0;
            for (int p = 0; p < world_size; p++)
                count += table[(size_t)p * nfields + f] == table[(size_t)q * nfields + f];
            if (count > best_count) { best = q; best_count = count; }
        }
        *ref = best;
        for (int q = 0; q < world_size; q++)
            if (table[(size_t)q * nfields + f] != table[(size_t)best * nfields + f]) { *odd = q; return f; }
    }
    return -1;
}

int agree_check(const Agreement *a, Comm *c, const char *const *hosts, int *reporter, char *err, size_t errlen) {
    const size_t W = (size_t)c->world_size, F = (size_t)a->n;
    int64_t *t = callocCheck(W * F, sizeof *t);
    for (size_t f = 0; f < F; f++) t[(size_t)c->rank * F + f] = (int64_t)a->hash[f];
    comm_set_context(c, "checking that every rank runs the same job");
    comm_allreduce(c, t, W * F, COMM_INT64, COMM_SUM);   /* one nonzero term per element */
    int odd = -1, ref = -1;
    const int f = agree_find(t, (int)W, (int)F, &odd, &ref);
    free(t);
    if (f < 0) return 0;
    *reporter = ref;
    if (c->rank == ref && a->value[f][0])
        snprintf(err, errlen, "rank %d on host %s disagrees on %s: rank %d on host %s has %s; every rank must have the same",
                 odd, hosts[odd], a->name[f], ref, hosts[ref], a->value[f]);
    else if (c->rank == odd && a->value[f][0])
        snprintf(err, errlen, "rank %d on host %s disagrees on %s: it has %s, rank %d on host %s another value; every rank must have the same",
                 odd, hosts[odd], a->name[f], a->value[f], ref, hosts[ref]);
    else
        snprintf(err, errlen, "rank %d on host %s disagrees on %s with rank %d on host %s; every rank must have the same",
                 odd, hosts[odd], a->name[f], ref, hosts[ref]);
    return -1;
}

void agree_refuse(Comm *c, int reporter, const char *msg) {
    if (c->rank != reporter) {
        comm_set_context(c, "waiting for the rank that says why the job is refused");
        comm_barrier(c);
    }
    die("%s", msg);
}

void agree_require(const Agreement *a, Comm *c, const char *const *hosts) {
    char err[1024];
    int reporter = 0;
    if (c->world_size > 1 && agree_check(a, c, hosts, &reporter, err, sizeof err) != 0) agree_refuse(c, reporter, err);
}
