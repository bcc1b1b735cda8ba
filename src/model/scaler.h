/* SPDX-License-Identifier: BSD-3-Clause */
/* scaler.h - dynamic loss scaling for fp16 mixed precision, with torch.cuda.amp.GradScaler's
 * semantics, over any Backend.
 *
 * fp16 has 5 exponent bits: small gradients flush to zero. So the loss (in practice the
 * gradient of the logits) is multiplied by a large power of two before backward, and the
 * gradients are divided by it after the all-reduce, in float32. When the scaled gradients
 * overflow somewhere, the step is skipped (parameters and momentum untouched) and the scale
 * halved; after `growth_interval` clean steps in a row it doubles. Defaults as PyTorch's:
 * init 65536, growth 2, backoff 0.5, interval 2000.
 *
 * The state lives in backend memory and is updated by the backend (a one-thread kernel on a
 * GPU; both backends apply ops/rules.h's scaler_update_rule), so no step waits for the host:
 * the optimizer reads the skip flag itself. The host looks at the state only at log intervals
 * (skipped steps) and for checkpoints.
 *
 * Every rank decides the same: the check runs on the all-reduced gradients, and an inf or NaN
 * on any rank makes the average non-finite on all of them. */
#ifndef DDP_SCALER_H
#define DDP_SCALER_H

#include <stddef.h>

#include "ops/backend.h"
#include "ops/rules.h"   /* SCALER_* indices, scaler_update_rule */

typedef struct {
    const Backend *be;
    int enabled;                 /* 0: every call below is a no-op and skip_flag is NULL */
    float init_scale, growth, backoff;
    int interval;
    float *scale;                /* backend memory: the current scale */
    int *state;                  /* backend memory: SCALER_NSTATE ints */
    long skipped_reported;       /* skipped steps already returned by scaler_take_skipped */
} GradScaler;

/* PyTorch's defaults. */
#define SCALER_INIT_SCALE 65536.0f
#define SCALER_GROWTH 2.0f
#define SCALER_BACKOFF 0.5f
#define SCALER_INTERVAL 2000

void scaler_init(GradScaler *s, const Backend *be, int enabled, float init_scale, float growth, float backoff,
                 int interval);
void scaler_free(GradScaler *s);

/* The loss scale in backend memory for Model.grad_scale (NULL when disabled). */
const float *scaler_scale_ptr(const GradScaler *s);
/* After the gradients are complete (and all-reduced): unscale them and note overflow. */
void scaler_unscale(GradScaler *s, float *grads, size_t n);
/* For the optimizer: nonzero (in backend memory) when this step must be skipped. */
const int *scaler_skip_flag(const GradScaler *s);
/* After the optimizer step: the scale and tracker for the next step. */
void scaler_update(GradScaler *s);

/* Host view, for logs and checkpoints (waits for the backend). */
float scaler_get_scale(const GradScaler *s);
int scaler_get_tracker(const GradScaler *s);
/* Steps skipped since the last call. */
long scaler_take_skipped(GradScaler *s);
/* Restore from a checkpoint. */
void scaler_set(GradScaler *s, float scale, int tracker);

#endif
