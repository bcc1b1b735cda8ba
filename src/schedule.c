/* SPDX-License-Identifier: BSD-3-Clause */
/* schedule.c - see schedule.h. */
#include <math.h>
#include <string.h>

#include "schedule.h"

int schedule_init(Schedule *s, const char *kind_name, double base_lr, double min_lr, long epochs,
                  long steps_per_epoch, long warmup_steps) {
    if (!strcmp(kind_name, "cosine")) s->kind = SCHED_COSINE;
    else if (!strcmp(kind_name, "cosine_step")) s->kind = SCHED_COSINE_STEP;
    else if (!strcmp(kind_name, "constant")) s->kind = SCHED_CONSTANT;
    else return -1;
    s->base_lr = base_lr;
    s->min_lr = min_lr;
    s->epochs = epochs > 0 ? epochs : 1;
    s->steps_per_epoch = steps_per_epoch > 0 ? steps_per_epoch : 1;
    s->warmup_steps = warmup_steps;
    return 0;
}

double schedule_lr(const Schedule *s, long epoch, long step) {
    double lr = s->base_lr;
    double t = 0.0;
    switch (s->kind) {
    case SCHED_COSINE: t = (double)epoch / (double)s->epochs; break;
    case SCHED_COSINE_STEP: t = (double)step / (double)(s->epochs * s->steps_per_epoch); break;
    case SCHED_CONSTANT: t = -1.0; break;
    }
    if (t >= 0.0) {
        if (t > 1.0) t = 1.0;
        lr = s->min_lr + (s->base_lr - s->min_lr) * 0.5 * (1.0 + cos(M_PI * t));
    }
    if (s->warmup_steps > 0 && step < s->warmup_steps)
        lr *= (double)(step + 1) / (double)s->warmup_steps;
    return lr;
}
