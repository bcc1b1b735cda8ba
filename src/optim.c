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
    o->buf = be->alloc(n * sizeof(float));
    o->steps = 0;
}

void sgd_step(SGD *o, float *params, const float *grads, float lr) {
    o->be->sgd_step(params, grads, o->buf, o->n, lr, o->momentum, o->weight_decay);
    o->steps++;
}

void sgd_free(SGD *o) {
    o->be->release(o->buf);
    o->buf = NULL;
}
