/* optim.c - see optim.h. */
#include "optim.h"
#include "util.h"

void sgd_init(SGD *o, size_t n, float momentum, float weight_decay) {
    sgd_init_on(o, &backend_cpu, n, momentum, weight_decay);
}

void sgd_init_on(SGD *o, const Backend *be, size_t n, float momentum, float weight_decay) {
    o->be = be;
    o->n = n;
    o->momentum = momentum;
    o->weight_decay = weight_decay;
    o->nesterov = 0;
    o->buf = be->alloc(n * sizeof(float));
    o->steps = 0;
}

void sgd_step(SGD *o, float *params, const float *grads, double lr) {
    sgd_step_unless(o, params, grads, lr, NULL);
}

/* steps counts calls, skipped or not: it only tells a checkpoint reader whether momentum may
 * be nonzero, and a zero buffer gives the same first update as PyTorch's unset one. */
void sgd_step_unless(SGD *o, float *params, const float *grads, double lr, const int *skip) {
    o->be->sgd_step(params, grads, o->buf, o->n, (float)lr, o->momentum, o->weight_decay, o->nesterov, skip);
    o->steps++;
}

void sgd_free(SGD *o) {
    o->be->release(o->buf);
    o->buf = NULL;
}
