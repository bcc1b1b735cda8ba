/* reducer.c - see reducer.h. */
#include <string.h>

#include "half.h"
#include "reducer.h"
#include "util.h"

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
    free(r->wire_buf);
    free(r->bucket);
    memset(r, 0, sizeof *r);
}

void reducer_begin(Reducer *r, int active, long step) {
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

/* A completed bucket's span goes into the trace from post to the moment completion was seen;
 * a 16-bit one is converted back into the gradients then. */
static void completed(Reducer *r, int b) {
    Bucket *k = &r->bucket[b];
    if (r->wire != COMM_FLOAT32)
        half_unpack(half_kind(r->wire), r->grads + k->begin, r->wire_buf + k->begin, k->end - k->begin,
                    (float)r->comm->world_size);
    k->t_done = now_sec();
}

static void poll(Reducer *r) {
    for (int b = 0; b < r->next; b++) {
        Bucket *k = &r->bucket[b];
        if (k->t_done == 0.0 && comm_test(r->comm, &k->req[r->cur])) {
            completed(r, b);
            trace_event(r->trace, "allreduce bucket", "comm", b, 1, k->t_post, k->t_done);
        }
    }
}

void reducer_grad_ready(void *ctx, size_t offset) {
    Reducer *r = ctx;
    if (!r->active) return;
    while (r->next < r->n_bucket && r->bucket[r->next].begin >= offset) post(r, r->next++);
    poll(r);
}

void reducer_finish(Reducer *r) {
    if (!r->active) return;
    while (r->next < r->n_bucket) post(r, r->next++);
    double t0 = now_sec();
    for (int b = 0; b < r->n_bucket; b++) {
        Bucket *k = &r->bucket[b];
        if (k->t_done != 0.0) continue;
        set_context(r, b);
        if (!comm_wait_stream(r->comm, &k->req[r->cur])) continue;   /* the device waits */
        completed(r, b);
        trace_event(r->trace, "allreduce bucket", "comm", b, 1, k->t_post, k->t_done);
    }
    r->wait_time += now_sec() - t0;
    r->active = 0;
}

void reducer_describe(const Reducer *r, char *out, size_t n) {
    size_t len = (size_t)snprintf(out, n, "%d buckets (MB):", r->n_bucket);
    for (int b = 0; b < r->n_bucket && len < n; b++)
        len += (size_t)snprintf(out + len, n - len, " %.3g",
                                (double)(r->bucket[b].end - r->bucket[b].begin) * 4.0 / 1e6);
}
