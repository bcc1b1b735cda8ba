/* SPDX-License-Identifier: BSD-3-Clause */
/* model_slots.c - the activation-gradient slots of one backward (model_step.h).
 *
 * The gradient of a step's output lives in a slot from a pool: taken by the first consumer that
 * writes it (the last in forward order), added to by the others, given back once its producer
 * has used it. model.c makes the pool by one dry run of backward, in which these functions keep
 * the books and hand out no memory. */
#include "model_step.h"

#include "base/util.h"

/* The dry run records its choices (Slots.script), and a real backward, which asks for the same
 * gradients in the same order, takes the same slots; so the dry run may grow a free slot to a
 * larger gradient instead of making a new one. Backward runs from the small maps of the last
 * layers to the large ones of the first: with slots of one size each, every size kept its own
 * few (ResNet-50 at batch 32, 128 px: three each of 4, 8, 16 and 32 MiB, 180 MiB), where
 * growing keeps about what one layer holds at once (the three of 32 MiB). */
static void script_add(Slots *s, int i) {
    if (s->n_script == s->cap_script) {
        s->cap_script = s->cap_script ? 2 * s->cap_script : 64;
        s->script = realloc(s->script, (size_t)s->cap_script * sizeof *s->script);
        CHECK(s->script != NULL);
    }
    s->script[s->n_script++] = i;
}

int slot_take(Slots *s, size_t bytes) {
    int best = -1;
    if (!s->dry && s->k < s->n_script) {   /* the dry run's choice */
        const int i = s->script[s->k];
        if (!s->busy[i] && s->bytes[i] >= bytes) best = i;
    }
    s->k++;
    if (best < 0)   /* else the smallest free slot that holds it */
        for (int i = 0; i < s->n; i++)
            if (!s->busy[i] && s->bytes[i] >= bytes && (best < 0 || s->bytes[i] < s->bytes[best])) best = i;
    if (best < 0 && s->dry) {   /* else, dry, the largest free slot, grown to it */
        for (int i = 0; i < s->n; i++)
            if (!s->busy[i] && (best < 0 || s->bytes[i] > s->bytes[best])) best = i;
        if (best >= 0) s->bytes[best] = bytes;
    }
    if (best >= 0) {
        s->busy[best] = 1;
        if (s->dry) script_add(s, best);
        return best;
    }
    CHECK(s->dry || !"backward needs a gradient slot the dry run did not make");
    script_add(s, s->n);
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->busy = realloc(s->busy, (size_t)s->cap * sizeof *s->busy);
        s->bytes = realloc(s->bytes, (size_t)s->cap * sizeof *s->bytes);
        CHECK(s->busy != NULL && s->bytes != NULL);
    }
    s->busy[s->n] = 1;
    s->bytes[s->n] = bytes;
    return s->n++;
}

void slot_give(Slots *s, int i) {
    CHECK(i >= 0 && s->busy[i]);
    s->busy[i] = 0;
}

float *slot_ptr(const Slots *s, int i) { return s->dry ? NULL : s->m->slot[i]; }

float *grad_begin(Slots *s, int t, GradOut *g) {
    g->t = t;
    g->tmp = s->grad[t] >= 0;
    if (!g->tmp) s->grad[t] = slot_take(s, s->m->step[t].grad_bytes);
    g->slot = g->tmp ? slot_take(s, s->m->step[t].grad_bytes) : s->grad[t];
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
