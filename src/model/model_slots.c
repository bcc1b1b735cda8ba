/* SPDX-License-Identifier: BSD-3-Clause */
/* model_slots.c - the activation-gradient slots of one backward (model_step.h).
 *
 * The gradient of a step's output lives in a slot from a pool: taken by the first consumer that
 * writes it (the last in forward order), added to by the others, given back once its producer
 * has used it. model.c sizes the pool by one dry run of backward, in which these functions keep
 * the books and hand out no memory. */
#include "model_step.h"

#include "base/util.h"

int slot_take(Slots *s) {
    for (int i = 0; i < s->cap; i++)
        if (!s->busy[i]) {
            s->busy[i] = 1;
            if (++s->held > s->peak) s->peak = s->held;
            return i;
        }
    CHECK(!"backward needs more gradient slots than the dry run counted");
    return -1;
}

void slot_give(Slots *s, int i) {
    CHECK(i >= 0 && s->busy[i]);
    s->busy[i] = 0;
    s->held--;
}

float *slot_ptr(const Slots *s, int i) { return s->dry ? NULL : s->m->slot[i]; }

float *grad_begin(Slots *s, int t, GradOut *g) {
    g->t = t;
    g->tmp = s->grad[t] >= 0;
    if (!g->tmp) s->grad[t] = slot_take(s);
    g->slot = g->tmp ? slot_take(s) : s->grad[t];
    return slot_ptr(s, g->slot);
}

void grad_done(Slots *s, const GradOut *g, int N) {
    if (!g->tmp) return;
    if (!s->dry)
        s->m->be->add_act_inplace(s->m->slot[s->grad[g->t]], s->m->slot[g->slot], step_numel(&s->m->step[g->t], N));
    slot_give(s, g->slot);
}

void backward_to_input(Slots *s, ModelStep *st, float *dy, int N, GradOp op) {
    if (st->in < 0) return;
    GradOut g;
    float *dx = grad_begin(s, st->in, &g);
    if (!s->dry) op(s->m, st, dy, dx, N);
    grad_done(s, &g, N);
}
