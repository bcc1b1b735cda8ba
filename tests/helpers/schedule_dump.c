/* SPDX-License-Identifier: BSD-3-Clause */
/* schedule_dump.c - prints the learning rate of every optimizer step of a run, one per line
 * with 17 significant digits, from ddptrain's own options: the Schedule train.c builds
 * (schedule_init, schedule_set_epochwise) for --epochs epochs of STEPS_PER_EPOCH steps.
 * tests/helpers/schedule_compare.py drives torch's schedulers per epoch against it; the lr of
 * metrics.jsonl has 8 digits only, too few for a comparison to 1e-12.
 *
 * usage: schedule_dump STEPS_PER_EPOCH [ddptrain options: --lr, --lr_schedule, --epochs...]
 * A refused combination prints config_check_recipe's line on stderr, exit 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "model/schedule.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: schedule_dump STEPS_PER_EPOCH [ddptrain options]\n");
        return 2;
    }
    const long spe = strtol(argv[1], NULL, 10);
    Config c;
    char err[512];
    config_init(&c);
    argv[1] = argv[0];   /* config_parse skips its argv[0] */
    if (config_parse(&c, argc - 1, argv + 1, err, sizeof err) != 0 || config_check_recipe(&c, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    Schedule s;
    if (schedule_init(&s, c.lr_schedule, c.lr, c.min_lr, c.epochs, spe, c.warmup_steps) != 0) return 2;
    long milestones[SCHED_MAX_MILESTONES];
    const int n = config_lr_milestones(&c, milestones, SCHED_MAX_MILESTONES);
    if (n < 0) return 2;
    schedule_set_epochwise(&s, c.lr_step_size, c.lr_gamma, milestones, n, c.lr_warmup_epochs,
                           !strcmp(c.lr_warmup_method, "constant"), c.lr_warmup_decay);
    /* the per-step schedules over the run's steps, --max_steps included, as train.c sets them */
    long total = c.epochs * spe;
    if (c.max_steps > 0 && c.max_steps < total) total = c.max_steps;
    s.onecycle = (OneCycle){.total_steps = total, .pct_start = c.onecycle_pct_start, .div_factor = c.onecycle_div_factor,
                            .final_div_factor = c.onecycle_final_div_factor,
                            .anneal_linear = !strcmp(c.onecycle_anneal, "linear")};
    if (schedule_onecycle_problem(&s)) {
        fprintf(stderr, "%s\n", schedule_onecycle_problem(&s));
        return 2;
    }
    for (long e = 0, step = 0; e < c.epochs && step < total; e++)
        for (long k = 0; k < spe && step < total; k++, step++) printf("%ld %.17g\n", e, schedule_lr(&s, e, step));
    config_free(&c);
    return 0;
}
