/* optim.h - SGD with momentum and weight decay, PyTorch's exact update rule, over the flat
 * parameter and gradient buffers:
 *   d = g + weight_decay * p;  buf = momentum * buf + d  (buf = d on the first step);  p -= lr * buf
 * or with Nesterov momentum (torch.optim.SGD(nesterov=True)) p -= lr * (d + momentum * buf).
 * The arithmetic is the backend's (Backend.sgd_step); buf lives in the backend's memory. */
#ifndef DDP_OPTIM_H
#define DDP_OPTIM_H

#include <stddef.h>

#include "backend.h"

typedef struct {
    const Backend *be;
    size_t n;
    float momentum, weight_decay;
    int nesterov;       /* 0 unless set after sgd_init */
    float *buf;         /* momentum buffer, zero until the first step (then equal to d) */
    long steps;
} SGD;

void sgd_init(SGD *o, size_t n, float momentum, float weight_decay);   /* on backend_cpu */
void sgd_init_on(SGD *o, const Backend *be, size_t n, float momentum, float weight_decay);
void sgd_step(SGD *o, float *params, const float *grads, double lr);
/* The same, unless *skip (backend memory, may be NULL) is nonzero when the step runs: then
 * parameters and momentum stay as they are (a step the fp16 loss scaler rejected, scaler.h). */
void sgd_step_unless(SGD *o, float *params, const float *grads, double lr, const int *skip);
void sgd_free(SGD *o);

#endif
