/* SPDX-License-Identifier: BSD-3-Clause */
/* workpool.c - see workpool.h.
 *
 * Indices are handed out one at a time from an atomic counter (samples differ in cost: a JPEG
 * of a large box against a small one), so no worker idles while another holds a long tail. A
 * run is numbered: a helper joins the run whose number it has not seen yet, and the caller
 * waits until every helper has left it, so the next run cannot start under a straggler. */
#include "workpool.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/util.h"

struct WorkPool {
    int threads;
    pthread_t *tid;
    pthread_mutex_t mu;
    pthread_cond_t start, done;
    unsigned long run;         /* the current run's number */
    int quit, active;          /* helpers still inside the current run */
    int n;
    int next;                  /* the next index, taken with __atomic_fetch_add */
    WorkFn fn;
    void *ctx;
};

typedef struct {
    WorkPool *p;
    int worker;
} Helper;

static void work(WorkPool *p, int worker) {
    for (;;) {
        const int i = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
        if (i >= p->n) return;
        p->fn(p->ctx, i, worker);
    }
}

static void *helper_main(void *arg) {
    Helper *h = arg;
    WorkPool *p = h->p;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->run == seen) pthread_cond_wait(&p->start, &p->mu);
        if (p->quit) break;
        seen = p->run;
        pthread_mutex_unlock(&p->mu);
        work(p, h->worker);
        pthread_mutex_lock(&p->mu);
        if (--p->active == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    free(h);
    return NULL;
}

WorkPool *workpool_create(int threads) {
    CHECK(threads >= 1);
    WorkPool *p = callocCheck(1, sizeof *p);
    p->threads = threads;
    CHECK(pthread_mutex_init(&p->mu, NULL) == 0);
    CHECK(pthread_cond_init(&p->start, NULL) == 0);
    CHECK(pthread_cond_init(&p->done, NULL) == 0);
    p->tid = callocCheck((size_t)threads, sizeof(pthread_t));
    for (int k = 1; k < threads; k++) {
        Helper *h = mallocCheck(sizeof *h);
        h->p = p;
        h->worker = k;
        CHECK(helper_thread_create(&p->tid[k], helper_main, h) == 0);
    }
    return p;
}

int workpool_threads(const WorkPool *p) { return p->threads; }

void workpool_run(WorkPool *p, int n, WorkFn fn, void *ctx) {
    if (n <= 0) return;
    if (p->threads == 1 || n == 1) {   /* nothing to share */
        for (int i = 0; i < n; i++) fn(ctx, i, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->n = n;
    p->fn = fn;
    p->ctx = ctx;
    __atomic_store_n(&p->next, 0, __ATOMIC_RELAXED);
    p->active = p->threads - 1;
    p->run++;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    work(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->active > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void workpool_free(WorkPool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    for (int k = 1; k < p->threads; k++) pthread_join(p->tid[k], NULL);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    free(p->tid);
    free(p);
}
