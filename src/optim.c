/* optim.c - see optim.h. */
#include "optim.h"
#include "util.h"

void sgd_init(SGD *o, size_t n, float momentum, float weight_decay) {
    o->n = n;
    o->momentum = momentum;
    o->weight_decay = weight_decay;
    o->buf = alignedAllocCheck(n * sizeof(float));
    o->steps = 0;
}

void sgd_step(SGD *o, float *restrict params, const float *restrict grads, float lr) {
    const float wd = o->weight_decay, mom = o->momentum;
    float *restrict buf = o->buf;
    const size_t n = o->n;
    /* Same operation order and float rounding as torch.optim.SGD's foreach path, so a
     * comparison after several steps stays within float round-off. With buf zeroed, the first
     * step's mom*0 + d equals PyTorch's buf = d exactly. */
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        float d = grads[i] + wd * params[i];
        float b = mom != 0.0f ? buf[i] * mom + d : d;
        buf[i] = b;
        params[i] = params[i] - lr * b;
    }
    o->steps++;
}

void sgd_free(SGD *o) {
    free(o->buf);
    o->buf = NULL;
}
