/* SPDX-License-Identifier: BSD-3-Clause */
/* scaler.c - see scaler.h. */
#include "scaler.h"
#include "base/util.h"

void scaler_init(GradScaler *s, const Backend *be, int enabled, float init_scale, float growth, float backoff,
                 int interval) {
    CHECK(init_scale > 0.0f && growth > 1.0f && backoff > 0.0f && backoff < 1.0f && interval >= 1);
    s->be = be;
    s->enabled = enabled != 0;
    s->init_scale = init_scale;
    s->growth = growth;
    s->backoff = backoff;
    s->interval = interval;
    s->scale = NULL;
    s->state = NULL;
    s->skipped_reported = 0;
    if (!s->enabled) return;
    s->scale = be->alloc(sizeof(float));
    s->state = be->alloc(SCALER_NSTATE * sizeof(int));   /* zeroed */
    be->upload(s->scale, &init_scale, sizeof init_scale);
}

void scaler_free(GradScaler *s) {
    if (s->scale) s->be->release(s->scale);
    if (s->state) s->be->release(s->state);
    s->scale = NULL;
    s->state = NULL;
}

const float *scaler_scale_ptr(const GradScaler *s) { return s->enabled ? s->scale : NULL; }
const int *scaler_skip_flag(const GradScaler *s) { return s->enabled ? s->state + SCALER_FOUND_INF : NULL; }

void scaler_unscale(GradScaler *s, float *grads, size_t n) {
    if (s->enabled) s->be->unscale_check(grads, n, s->scale, s->state + SCALER_FOUND_INF);
}

void scaler_update(GradScaler *s) {
    if (s->enabled) s->be->scaler_update(s->scale, s->state, s->growth, s->backoff, s->interval);
}

float scaler_get_scale(const GradScaler *s) {
    if (!s->enabled) return 1.0f;
    float v;
    s->be->download(&v, s->scale, sizeof v);
    return v;
}

static int get_state(const GradScaler *s, int i) {
    int st[SCALER_NSTATE];
    s->be->download(st, s->state, sizeof st);
    return st[i];
}

int scaler_get_tracker(const GradScaler *s) { return s->enabled ? get_state(s, SCALER_TRACKER) : 0; }

long scaler_take_skipped(GradScaler *s) {
    if (!s->enabled) return 0;
    long total = get_state(s, SCALER_SKIPPED), d = total - s->skipped_reported;
    s->skipped_reported = total;
    return d;
}

void scaler_set(GradScaler *s, float scale, int tracker) {
    if (!s->enabled) return;
    CHECK(scale > 0.0f && tracker >= 0);
    int st[SCALER_NSTATE];
    s->be->download(st, s->state, sizeof st);
    st[SCALER_TRACKER] = tracker;
    st[SCALER_FOUND_INF] = 0;
    s->be->upload(s->state, st, sizeof st);
    s->be->upload(s->scale, &scale, sizeof scale);
}
