/* SPDX-License-Identifier: BSD-3-Clause */
/* preflight.c - see preflight.h. */
#include "build_config.h"

#include "preflight.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "dist/agree.h"
#include "dist/linktest.h"
#include "base/util.h"

/* This rank's row of the roster. */
static void describe_me(RosterEntry *me, const Bootstrap *b, int gpu) {
    memset(me, 0, sizeof *me);
    snprintf(me->host, sizeof me->host, "%.*s", (int)sizeof me->host - 1, b->hostname);   /* cut: see roster.h */
    me->local_rank = b->local_rank;
    me->local_size = b->local_size;
#ifdef _OPENMP
    me->threads = omp_get_max_threads();
#else
    me->threads = 1;
#endif
    cpu_set_t set;
    me->cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
    me->gpu = gpu;
    roster_gpu_id(gpu, getenv("CUDA_VISIBLE_DEVICES"), me->gpu_id, sizeof me->gpu_id);
}

void preflight_check(Ranks *out, Comm *c, const Bootstrap *b, int gpu, const Config *cfg, const DataLoader *train,
                     const DataLoader *test) {
    RosterEntry me;
    describe_me(&me, b, gpu);
    out->rank = b->rank;
    out->world_size = b->world_size;
    out->entry = callocCheck((size_t)b->world_size, sizeof *out->entry);
    out->hosts = callocCheck((size_t)b->world_size, sizeof *out->hosts);
    if (b->world_size > 1) roster_gather(c, &me, out->entry);
    else out->entry[0] = me;
    for (int q = 0; q < b->world_size; q++) out->hosts[q] = out->entry[q].host;
    int qa, qb;
    if (roster_find_shared_gpu(out->entry, b->world_size, &qa, &qb)) {
        char msg[512];
        snprintf(msg, sizeof msg, "rank %d and rank %d on host %s would both train on GPU %s (physical %s); give each rank "
                 "its own GPU (one rank per GPU, or CUDA_VISIBLE_DEVICES per rank)", qa, qb, out->hosts[qa],
                 out->entry[qa].gpu_id, out->entry[qa].gpu_id);
        agree_refuse(c, 0, msg);
    }
    Agreement a;
    agree_init(&a);
    agree_add(&a, "the ddptrain version", PACKAGE_VERSION, PACKAGE_VERSION, strlen(PACKAGE_VERSION));
    agree_add_config(&a, cfg);
    const uint64_t train_h = dataloader_shard_list_hash(train), test_h = dataloader_shard_list_hash(test);
    agree_add(&a, "the train shard list of --data_dir", "", &train_h, sizeof train_h);
    agree_add(&a, "the test shard list of --data_dir", "", &test_h, sizeof test_h);
    agree_require(&a, c, out->hosts);
}

void preflight_agree_layout(Comm *c, const char *const *hosts, const Model *m, const Reducer *rd) {
    Agreement a;
    agree_init(&a);
    uint64_t h = agree_hash(0, &m->num_params, sizeof m->num_params);
    h = agree_hash(h, &m->num_buffers, sizeof m->num_buffers);
    for (int i = 0; i < m->n_param_info; i++) {
        const TensorInfo *t = &m->param_info[i];
        h = agree_hash(h, t->name, strlen(t->name));
        h = agree_hash(h, &t->offset, sizeof t->offset);
        h = agree_hash(h, &t->numel, sizeof t->numel);
        h = agree_hash(h, t->shape, sizeof t->shape);
    }
    char v[48];
    snprintf(v, sizeof v, "%zu parameters", m->num_params);
    agree_add(&a, "the model's tensors", v, &h, sizeof h);
    h = 0;
    for (int k = 0; k < rd->n_bucket; k++) {
        h = agree_hash(h, &rd->bucket[k].begin, sizeof rd->bucket[k].begin);
        h = agree_hash(h, &rd->bucket[k].end, sizeof rd->bucket[k].end);
    }
    snprintf(v, sizeof v, "%d buckets", rd->n_bucket);
    agree_add(&a, "the gradient buckets", v, &h, sizeof h);
    agree_require(&a, c, hosts);
}

void preflight_log_ranks(const Ranks *r, Logger *log) {
    for (int q = 0; q < r->world_size && r->world_size > 1 && r->rank == 0; q++) {
        char line[512];
        roster_line(r->entry, q, line, sizeof line);
        log_info(log, "ranks: %s", line);
    }
}

/* The link table, the median and the slow ranks and links, on rank 0's log. */
static void log_links(const LinkTest *t, const LinkVerdict *v, const char *const *hosts, int world, Logger *log) {
    for (int q = 0; q < world; q++) {
        char line[512];
        linktest_line(t, hosts, q, line, sizeof line);
        log_info(log, "preflight: %s", line);
    }
    log_info(log, "preflight: links: each rank to rank + %d, %d rounds of %.2f MB, median %.1f MB/s, %.1f s", t->shift,
             t->rounds, (double)t->bytes / 1e6, v->median, t->seconds);
    for (int q = 0; q < world; q++) {
        const int from = (q - t->shift + world) % world;
        if (v->rank_slow[q])
            log_warn(log, "preflight: rank %d on host %s: link %.1f MB/s, below half the median of %.1f MB/s", q, hosts[q],
                     v->rank_mbps[q], v->median);
        if (v->link_slow[q])
            log_warn(log, "preflight: the link from rank %d on host %s to rank %d on host %s: %.1f MB/s, below half the "
                     "median of %.1f MB/s (the other links of both ranks are not)", from, hosts[from], q, hosts[q],
                     t->mbps[q], v->median);
    }
}

int preflight_links(Comm *c, const char *const *hosts, Logger *log, double t_start) {
    const int world = c->world_size;
    const double t0 = now_sec();
    int status = 0;
    if (world == 1) {
        log_info(log, "preflight: one rank: no links to measure");
    } else if (!c->ops->sendrecv) {
        /* NCCL's point-to-point calls would need device buffers and streams of their own */
        log_warn(log, "preflight: links not measured: the %s communicator has no point-to-point transfers in "
                 "ddptrain; --preflight --device cpu measures the network between the same hosts over MPI",
                 c->ops->name);
    } else {
        LinkTest t;
        linktest_run(&t, c, hosts);
        LinkVerdict v;
        linktest_judge(&v, t.mbps, world, t.shift);
        if (c->rank == 0) log_links(&t, &v, hosts, world, log);
        status = v.n_ranks + v.n_links > 0 ? PREFLIGHT_EXIT_SLOW : 0;
        linktest_verdict_free(&v);
        linktest_free(&t);
    }
    log_info(log, "preflight: %s; link test %.1f s, %.1f s since start; exiting without training (--preflight)",
             status ? "a slow link" : "all checks passed", now_sec() - t0, now_sec() - t_start);
    return status;
}

void preflight_free(Ranks *r) {
    free(r->entry);
    free(r->hosts);
    r->entry = NULL;
    r->hosts = NULL;
}
