/* SPDX-License-Identifier: BSD-3-Clause */
/* schedule.h - learning rate as a function of training progress. */
#ifndef DDP_SCHEDULE_H
#define DDP_SCHEDULE_H

typedef enum {
    SCHED_COSINE, SCHED_COSINE_STEP, SCHED_CONSTANT, SCHED_ONECYCLE,
    SCHED_STEP, SCHED_MULTISTEP, SCHED_EXPONENTIAL,  /* torchvision's per-epoch ones */
    SCHED_TRIANGLE          /* airbench's per-step LambdaLR, over s->onecycle's settings */
} ScheduleKind;

#define SCHED_MAX_MILESTONES 32

/* torch.optim.lr_scheduler.OneCycleLR(max_lr=base_lr, total_steps, pct_start, anneal_strategy,
 * div_factor, final_div_factor, cycle_momentum=False, three_phase=False), stepped once per
 * optimizer step. */
typedef struct {
    long total_steps;
    double pct_start, div_factor, final_div_factor;
    int anneal_linear;      /* anneal_strategy 'linear' (else 'cos') */
} OneCycle;

typedef struct {
    ScheduleKind kind;
    double base_lr, min_lr;
    long epochs, steps_per_epoch, warmup_steps;
    OneCycle onecycle;      /* SCHED_ONECYCLE, and SCHED_TRIANGLE: airbench's get_lr as LambdaLR, its factor
                             * from 1 / div_factor up to 1 in int(pct_start * total_steps) steps, then down to
                             * 1 / (div_factor * final_div_factor) at total_steps (anneal_linear ignored) */
    /* torchvision's per-epoch rules (set by schedule_set_epochwise after schedule_init):
     * StepLR(step_size, gamma), MultiStepLR(milestones, gamma), ExponentialLR(gamma), and the
     * warm-up SequentialLR puts before them: LinearLR(start_factor=warmup_decay) or
     * ConstantLR(factor=warmup_decay) over warmup_epochs epochs. */
    long step_size;
    double gamma;
    long milestones[SCHED_MAX_MILESTONES];
    int n_milestones;
    long warmup_epochs;
    int warmup_constant;
    double warmup_decay;
} Schedule;

/* kind_name: "cosine" (PyTorch CosineAnnealingLR(T_max=epochs) stepped once per epoch, as the
 * article), "cosine_step" (annealed every optimizer step over epochs*steps_per_epoch),
 * "constant" or "onecycle" (OneCycleLR with PyTorch's defaults over epochs*steps_per_epoch
 * steps; change s->onecycle after this call). Returns -1 for an unknown name. */
int schedule_init(Schedule *s, const char *kind_name, double base_lr, double min_lr, long epochs,
                  long steps_per_epoch, long warmup_steps);

/* torchvision's reference train.py: the main schedule's StepLR step_size, gamma (StepLR,
 * MultiStepLR, ExponentialLR), MultiStepLR's milestones (ascending, counted in the main
 * schedule's epochs, that is after the warm-up), and with warmup_epochs > 0 the SequentialLR of
 * LinearLR(start_factor=warmup_decay, total_iters=warmup_epochs) (or ConstantLR(factor=
 * warmup_decay) when warmup_constant) and the main schedule, milestones=[warmup_epochs]; a
 * cosine's T_max becomes epochs - warmup_epochs, as train.py's. */
void schedule_set_epochwise(Schedule *s, long step_size, double gamma, const long *milestones, int n_milestones,
                            long warmup_epochs, int warmup_constant, double warmup_decay);

/* lr for optimizer step `step` (0-based, global) which lies in epoch `epoch` (0-based). Linear
 * warm-up from base_lr/warmup_steps to base_lr over the first warmup_steps steps multiplies it. */
double schedule_lr(const Schedule *s, long epoch, long step);

/* The reason a one-cycle schedule cannot run (a phase of zero steps, where PyTorch's OneCycleLR
 * divides by zero), or NULL. */
const char *schedule_onecycle_problem(const Schedule *s);

#endif
