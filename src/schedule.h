/* SPDX-License-Identifier: BSD-3-Clause */
/* schedule.h - learning rate as a function of training progress. */
#ifndef DDP_SCHEDULE_H
#define DDP_SCHEDULE_H

typedef enum { SCHED_COSINE, SCHED_COSINE_STEP, SCHED_CONSTANT } ScheduleKind;

typedef struct {
    ScheduleKind kind;
    double base_lr, min_lr;
    long epochs, steps_per_epoch, warmup_steps;
} Schedule;

/* kind_name: "cosine" (PyTorch CosineAnnealingLR(T_max=epochs) stepped once per epoch, as the
 * article), "cosine_step" (annealed every optimizer step over epochs*steps_per_epoch) or
 * "constant". Returns -1 for an unknown name. */
int schedule_init(Schedule *s, const char *kind_name, double base_lr, double min_lr, long epochs,
                  long steps_per_epoch, long warmup_steps);

/* lr for optimizer step `step` (0-based, global) which lies in epoch `epoch` (0-based). Linear
 * warm-up from base_lr/warmup_steps to base_lr over the first warmup_steps steps multiplies it. */
double schedule_lr(const Schedule *s, long epoch, long step);

#endif
