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
    else if (!strcmp(kind_name, "step")) s->kind = SCHED_STEP;
    else if (!strcmp(kind_name, "multistep")) s->kind = SCHED_MULTISTEP;
    else if (!strcmp(kind_name, "exponential")) s->kind = SCHED_EXPONENTIAL;
    else if (!strcmp(kind_name, "triangle")) s->kind = SCHED_TRIANGLE;
    else return -1;
    s->base_lr = base_lr;
    s->min_lr = min_lr;
    s->epochs = epochs > 0 ? epochs : 1;
    s->steps_per_epoch = steps_per_epoch > 0 ? steps_per_epoch : 1;
    s->warmup_steps = warmup_steps;
    s->onecycle = (OneCycle){ .total_steps = s->epochs * s->steps_per_epoch, .pct_start = 0.3, .div_factor = 25.0,
                              .final_div_factor = 1e4, .anneal_linear = 0 };
    schedule_set_epochwise(s, 30, 0.1, NULL, 0, 0, 0, 0.01);
    return 0;
}

void schedule_set_epochwise(Schedule *s, long step_size, double gamma, const long *milestones, int n_milestones,
                            long warmup_epochs, int warmup_constant, double warmup_decay) {
    s->step_size = step_size > 0 ? step_size : 1;
    s->gamma = gamma;
    s->n_milestones = n_milestones < SCHED_MAX_MILESTONES ? n_milestones : SCHED_MAX_MILESTONES;
    for (int i = 0; i < s->n_milestones; i++) s->milestones[i] = milestones[i];
    s->warmup_epochs = warmup_epochs > 0 ? warmup_epochs : 0;
    s->warmup_constant = warmup_constant;
    s->warmup_decay = warmup_decay;
}

/* The main schedule's lr at its own epoch k (k = 0 where SequentialLR calls step(0), which takes
 * the closed form: base_lr for all of these), then each step() as torch's chainable get_lr()
 * computes it from the previous lr, in its operations' order, so that the values agree with
 * PyTorch's to the last few bits rather than to a closed form's rounding. */
static double main_lr(const Schedule *s, long k) {
    const double base = s->base_lr, eta_min = s->min_lr;
    double lr = base;
    if (s->kind == SCHED_COSINE) {
        /* CosineAnnealingLR(T_max = epochs - warm-up) */
        const double T = (double)(s->epochs - s->warmup_epochs);
        for (long e = 1; e <= k; e++) {
            if ((e - 1 - (long)T) % (2 * (long)T) == 0)
                lr = lr + (base - eta_min) * (1 - cos(M_PI / T)) / 2;
            else
                lr = (1 + cos(M_PI * (double)e / T)) / (1 + cos(M_PI * (double)(e - 1) / T)) * (lr - eta_min) + eta_min;
        }
        return lr;
    }
    for (long e = 1; e <= k; e++) {
        switch (s->kind) {
        case SCHED_STEP:
            if (e % s->step_size == 0) lr = lr * s->gamma;
            break;
        case SCHED_MULTISTEP:   /* gamma ** (times e is a milestone) */
            for (int i = 0; i < s->n_milestones; i++)
                if (s->milestones[i] == e) lr = lr * s->gamma;
            break;
        case SCHED_EXPONENTIAL: lr = lr * s->gamma; break;
        default: break;         /* constant */
        }
    }
    return lr;
}

/* The warm-up's lr at epoch e < warmup_epochs: torch's LinearLR / ConstantLR chainable get_lr()
 * from base_lr, its first value base_lr * start_factor at e = 0. */
static double warmup_lr(const Schedule *s, long e) {
    const double f = s->warmup_decay, W = (double)s->warmup_epochs;
    double lr = s->base_lr * f;
    for (long i = 1; i <= e; i++) {
        if (s->warmup_constant) {
            if (i == s->warmup_epochs) lr = lr * (1.0 / f);   /* never reached before the switch */
        } else if (i <= s->warmup_epochs) {
            lr = lr * (1.0 + (1.0 - f) / (W * f + (double)(i - 1) * (1.0 - f)));
        }
    }
    return lr;
}

/* The per-epoch schedules of torchvision's reference script, SequentialLR's switch included. */
static double epochwise_lr(const Schedule *s, long epoch) {
    if (epoch < s->warmup_epochs) return warmup_lr(s, epoch);
    return main_lr(s, epoch - s->warmup_epochs);
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

/* airbench's get_lr (utils.py) under LambdaLR: base_lr times the factor, its operations in its
 * order (Python floats) */
static double triangle_lr(const Schedule *s, long step) {
    const OneCycle *o = &s->onecycle;
    const long warm = (long)(o->total_steps * o->pct_start), down = o->total_steps - warm;
    const double start = 1.0 / o->div_factor, end = 1.0 / (o->div_factor * o->final_div_factor);
    double f;
    if (step < warm) {
        const double frac = (double)step / (double)warm;
        f = start * (1 - frac) + 1.0 * frac;
    } else {
        const double frac = (double)(step - warm) / (double)down;
        f = 1.0 * (1 - frac) + end * frac;
    }
    return s->base_lr * f;
}

const char *schedule_onecycle_problem(const Schedule *s) {
    const OneCycle *o = &s->onecycle;
    if (s->kind == SCHED_TRIANGLE) {
        const long warm = (long)(o->total_steps * o->pct_start);
        if (warm < 1 || warm >= o->total_steps) return "its rise (int(onecycle_pct_start x total steps)) is not 1 step or more and below the total";
        return NULL;
    }
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
    case SCHED_TRIANGLE: return triangle_lr(s, step);
    case SCHED_STEP:
    case SCHED_MULTISTEP:
    case SCHED_EXPONENTIAL: lr = epochwise_lr(s, epoch); t = -1.0; break;
    }
    /* cosine with epochs of warm-up: SequentialLR's, torch's chainable form over epochs - W */
    if (s->kind == SCHED_COSINE && s->warmup_epochs > 0) { lr = epochwise_lr(s, epoch); t = -1.0; }
    if (s->kind == SCHED_CONSTANT && s->warmup_epochs > 0) lr = epochwise_lr(s, epoch);
    if (t >= 0.0) {
        if (t > 1.0) t = 1.0;
        lr = s->min_lr + (s->base_lr - s->min_lr) * 0.5 * (1.0 + cos(M_PI * t));
    }
    if (s->warmup_steps > 0 && step < s->warmup_steps)
        lr *= (double)(step + 1) / (double)s->warmup_steps;
    return lr;
}
