/* SPDX-License-Identifier: BSD-3-Clause */
/* reducer.c - see reducer.h. */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "base/half.h"
#include "reducer.h"
#include "base/util.h"

void reducer_init(Reducer *r, Comm *comm, float *grads, const TensorInfo *info, int n_info,
                  size_t cap_bytes, size_t first_cap_bytes, Trace *trace) {
    memset(r, 0, sizeof *r);
    r->comm = comm;
    r->grads = grads;
    r->trace = trace;
    r->n = n_info > 0 ? info[n_info - 1].offset + info[n_info - 1].numel : 0;
    r->bucket = callocCheck((size_t)n_info + 1, sizeof *r->bucket);
    /* Walk tensors from the last to the first, closing a bucket once it reaches the cap. */
    size_t end = r->n, cap = first_cap_bytes;
    for (int i = n_info - 1; i >= 0; i--) {
        size_t begin = info[i].offset;
        if ((end - begin) * sizeof(float) >= cap || i == 0) {
            r->bucket[r->n_bucket++] = (Bucket){.begin = begin, .end = end};
            end = begin;
            cap = cap_bytes;
        }
    }
    /* The last bucket is posted when backward ends, and all of its bytes are on the wire while
     * the step waits. Cut it again from the first tensor up, in buckets of first_cap / 16,
     * twice that, four times, ..., so that the bucket posted last is small and each before it
     * is posted a layer or more earlier, while the link is free. */
    if (r->n_bucket == 0) return;
    const Bucket tail = r->bucket[r->n_bucket - 1];
    size_t piece = first_cap_bytes / 16, begin = tail.begin;
    if ((tail.end - tail.begin) * sizeof(float) < 2 * piece) return;
    Bucket *cut = callocCheck((size_t)n_info + 1, sizeof *cut);
    int n_cut = 0;
    for (int t = 0; t < n_info; t++) {
        const size_t t_end = info[t].offset + info[t].numel;
        if (info[t].offset < tail.begin || t_end > tail.end) continue;
        if ((t_end - begin) * sizeof(float) >= piece || t_end == tail.end) {
            cut[n_cut++] = (Bucket){.begin = begin, .end = t_end};
            begin = t_end;
            piece *= 2;
        }
    }
    /* a remainder under the first piece's size (a batch norm's few floats) joins the piece before */
    if (n_cut >= 2 && (cut[n_cut - 1].end - cut[n_cut - 1].begin) * sizeof(float) < first_cap_bytes / 16)
        cut[n_cut - 2].end = cut[n_cut - 1].end, n_cut--;
    r->n_bucket--;
    for (int k = n_cut - 1; k >= 0; k--) r->bucket[r->n_bucket++] = cut[k];
    free(cut);
}

size_t reducer_auto_cap(size_t grad_bytes) {
    const size_t lo = 1000000, hi = 25000000;
    size_t cap = grad_bytes / 8;
    return cap < lo ? lo : cap > hi ? hi : cap;
}

void reducer_set_wire(Reducer *r, CommDtype wire) {
    CHECK(wire == COMM_FLOAT32 || wire == COMM_BF16 || wire == COMM_FP16);
    r->wire = wire;
    free(r->wire_buf);
    r->wire_buf = wire == COMM_FLOAT32 ? NULL : mallocCheck((r->n ? r->n : 1) * sizeof *r->wire_buf);
}

void reducer_free(Reducer *r) {
    if (r->progress_on) {
        pthread_mutex_lock(&r->lock);
        r->quit = 1;
        pthread_cond_signal(&r->wake);
        pthread_mutex_unlock(&r->lock);
        pthread_join(r->thread, NULL);
        pthread_mutex_destroy(&r->lock);
        pthread_cond_destroy(&r->wake);
    }
    free(r->wire_buf);
    free(r->bucket);
    memset(r, 0, sizeof *r);
}

void reducer_begin(Reducer *r, int active, long step) {
    r->t_last_hook = now_sec();
    r->hook_layer = 0;
    r->active = active && r->comm->world_size > 1;
    r->next = 0;
    r->step = step;
    r->cur = (int)(step & 1);
    /* Reap what reducer_finish handed to a device stream: the last step's requests are only
     * tested; this parity's are two steps old and must be complete before they are reused. */
    double t0 = now_sec();
    for (int i = 0; i < r->n_bucket; i++) {
        Bucket *k = &r->bucket[i];
        comm_test(r->comm, &k->req[r->cur ^ 1]);
        comm_wait(r->comm, &k->req[r->cur]);
        k->posted = 0;
    }
    r->wait_time += now_sec() - t0;
    comm_set_step(r->comm, step);
    if (r->active) comm_test_hook_step(r->comm, step);
}

void reducer_drain(Reducer *r) {
    double t0 = now_sec();
    for (int i = 0; i < r->n_bucket; i++)
        for (int p = 0; p < 2; p++) comm_wait(r->comm, &r->bucket[i].req[p]);
    r->wait_time += now_sec() - t0;
}

static void set_context(Reducer *r, int b) {
    char ctx[96];
    snprintf(ctx, sizeof ctx, "step %ld, bucket %d of %d", r->step, b, r->n_bucket);
    comm_set_context(r->comm, ctx);
    comm_set_bucket(r->comm, b, r->n_bucket);
}

static HalfKind half_kind(CommDtype wire) { return wire == COMM_BF16 ? HALF_BF16 : HALF_FP16; }

static void post(Reducer *r, int b) {
    Bucket *k = &r->bucket[b];
    set_context(r, b);
    k->t_post = now_sec();
    size_t n = k->end - k->begin;
    if (r->wire == COMM_FLOAT32) {
        comm_iallreduce(r->comm, r->grads + k->begin, n, COMM_FLOAT32, COMM_AVG, &k->req[r->cur]);
    } else {
        half_pack(half_kind(r->wire), r->wire_buf + k->begin, r->grads + k->begin, n);
        comm_iallreduce(r->comm, r->wire_buf + k->begin, n, r->wire, COMM_SUM, &k->req[r->cur]);
    }
    k->posted = 1;
    k->t_done = 0.0;
}

/* A completed bucket: the moment completion was seen (its span goes into the trace when the
 * step's buckets are all done: the trace belongs to the backward thread); a 16-bit one is
 * converted back into the gradients. */
static void completed(Reducer *r, int b) {
    Bucket *k = &r->bucket[b];
    if (r->wire != COMM_FLOAT32)
        half_unpack(half_kind(r->wire), r->grads + k->begin, r->wire_buf + k->begin, k->end - k->begin,
                    (float)r->comm->world_size);
    k->t_done = now_sec();
}

/* Tests the buckets in flight in posting order, up to the first that is not complete: one
 * test moves every collective in flight on (MPI's progress engine, and comm_mpi.c's rings),
 * and buckets complete in about the order they were posted; a test each would be a pass of
 * the progress engine each. */
static void poll(Reducer *r) {
    for (int b = 0; b < r->next; b++) {
        Bucket *k = &r->bucket[b];
        if (k->t_done != 0.0) continue;
        if (!comm_test(r->comm, &k->req[r->cur])) break;
        completed(r, b);
    }
}

void reducer_lock(Reducer *r) {
    if (r->progress_on) pthread_mutex_lock(&r->lock);
}

void reducer_unlock(Reducer *r) {
    if (r->progress_on) pthread_mutex_unlock(&r->lock);
}

static void *progress_main(void *arg) {
    Reducer *r = arg;
    pthread_mutex_lock(&r->lock);
    for (;;) {
        while (!r->polling && !r->quit) pthread_cond_wait(&r->wake, &r->lock);
        if (r->quit) break;
        poll(r);
        pthread_mutex_unlock(&r->lock);
        struct timespec ts = {r->interval_ns / 1000000000L, r->interval_ns % 1000000000L};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&r->lock);
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

void reducer_start_progress(Reducer *r, double interval_us) {
    CHECK(!r->progress_on && interval_us > 0.0);
    r->interval_ns = (long)(interval_us * 1e3);
    if (r->interval_ns < 1000) r->interval_ns = 1000;
    CHECK(pthread_mutex_init(&r->lock, NULL) == 0);
    CHECK(pthread_cond_init(&r->wake, NULL) == 0);
    CHECK(helper_thread_create(&r->thread, progress_main, r) == 0);
    pthread_setname_np(r->thread, "ddp-progress");
    r->progress_on = 1;
}

void reducer_grad_ready(void *ctx, size_t offset) {
    Reducer *r = ctx;
    if (r->trace) {
        const double t = now_sec();
        trace_event(r->trace, "backward layer", "compute", r->hook_layer++, 0, r->t_last_hook, t);
        r->t_last_hook = t;
    }
    if (!r->active) return;
    reducer_lock(r);
    while (r->next < r->n_bucket && r->bucket[r->next].begin >= offset) post(r, r->next++);
    poll(r);
    if (r->progress_on && r->next > 0 && !r->polling) {
        r->polling = 1;
        pthread_cond_signal(&r->wake);
    }
    reducer_unlock(r);
}

void reducer_finish(Reducer *r) {
    if (!r->active) return;
    reducer_lock(r);
    while (r->next < r->n_bucket) post(r, r->next++);
    r->polling = 0;   /* from here this thread waits, and tests by itself */
    reducer_unlock(r);
    double t0 = now_sec();
    for (int b = 0; b < r->n_bucket; b++) {
        Bucket *k = &r->bucket[b];
        if (k->t_done != 0.0) continue;
        set_context(r, b);
        if (!comm_wait_stream(r->comm, &k->req[r->cur])) continue;   /* the device waits */
        completed(r, b);
    }
    r->wait_time += now_sec() - t0;
    for (int b = 0; b < r->n_bucket; b++)
        if (r->bucket[b].t_done != 0.0)
            trace_event(r->trace, "allreduce bucket", "comm", b, 1, r->bucket[b].t_post, r->bucket[b].t_done);
    r->active = 0;
}

void reducer_describe(const Reducer *r, char *out, size_t n) {
    size_t len = (size_t)snprintf(out, n, "%d buckets (MB):", r->n_bucket);
    for (int b = 0; b < r->n_bucket && len < n; b++)
        len += (size_t)snprintf(out + len, n - len, " %.3g",
                                (double)(r->bucket[b].end - r->bucket[b].begin) * 4.0 / 1e6);
}

void reducer_stats_allreduce(void *ctx, double *buf, size_t n) {
    Reducer *r = ctx;
    reducer_lock(r);
    comm_allreduce(r->comm, buf, n, COMM_FLOAT64, COMM_SUM);
    reducer_unlock(r);
}
