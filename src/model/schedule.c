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
    else if (!strcmp(kind_name, "onecycle")) s->kind = SCHED_ONECYCLE;
    else return -1;
    s->base_lr = base_lr;
    s->min_lr = min_lr;
    s->epochs = epochs > 0 ? epochs : 1;
    s->steps_per_epoch = steps_per_epoch > 0 ? steps_per_epoch : 1;
    s->warmup_steps = warmup_steps;
    s->onecycle = (OneCycle){ .total_steps = s->epochs * s->steps_per_epoch, .pct_start = 0.3, .div_factor = 25.0,
                              .final_div_factor = 1e4, .anneal_linear = 0 };
    return 0;
}

/* OneCycleLR.get_lr, its operations in its order (Python floats are doubles): phase 1 from
 * initial_lr = max_lr / div_factor up to max_lr ending at step pct_start * total_steps - 1,
 * phase 2 down to min_lr = initial_lr / final_div_factor at step total_steps - 1. */
static double anneal(const OneCycle *o, double start, double end, double pct) {
    if (o->anneal_linear) return (end - start) * pct + start;
    const double cos_out = cos(M_PI * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
}

static double onecycle_lr(const Schedule *s, long step) {
    const OneCycle *o = &s->onecycle;
    const double initial_lr = s->base_lr / o->div_factor, max_lr = s->base_lr;
    const double min_lr = initial_lr / o->final_div_factor;
    const double end1 = o->pct_start * (double)o->total_steps - 1, end2 = (double)(o->total_steps - 1);
    const double t = (double)step;
    if (t <= end1) return anneal(o, initial_lr, max_lr, (t - 0.0) / (end1 - 0.0));
    return anneal(o, max_lr, min_lr, (t - end1) / (end2 - end1));
}

const char *schedule_onecycle_problem(const Schedule *s) {
    const OneCycle *o = &s->onecycle;
    if (s->kind != SCHED_ONECYCLE) return NULL;
    if (o->total_steps < 1) return "no optimizer steps";
    const double end1 = o->pct_start * (double)o->total_steps - 1;
    if (end1 == 0.0) return "its first phase (onecycle_pct_start x total steps - 1 = 0) has no length";
    return NULL;
}

double schedule_lr(const Schedule *s, long epoch, long step) {
    double lr = s->base_lr;
    double t = 0.0;
    switch (s->kind) {
    case SCHED_COSINE: t = (double)epoch / (double)s->epochs; break;
    case SCHED_COSINE_STEP: t = (double)step / (double)(s->epochs * s->steps_per_epoch); break;
    case SCHED_CONSTANT: t = -1.0; break;
    case SCHED_ONECYCLE: return onecycle_lr(s, step);
    }
    if (t >= 0.0) {
        if (t > 1.0) t = 1.0;
        lr = s->min_lr + (s->base_lr - s->min_lr) * 0.5 * (1.0 + cos(M_PI * t));
    }
    if (s->warmup_steps > 0 && step < s->warmup_steps)
        lr *= (double)(step + 1) / (double)s->warmup_steps;
    return lr;
}
