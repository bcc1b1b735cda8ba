/* SPDX-License-Identifier: BSD-3-Clause */
/* host_mirror.h - the model's and optimizer's state in host memory, for checkpoint files.
 *
 * Checkpoints are read and written from host memory through a Model and an Optimizer (checkpoint.h).
 * On the CPU backend those are the live ones. On a device backend a HostMirror holds host
 * copies: a Model with the live model's layout (tensor names, offsets, blocks) and its own
 * parameters, running statistics and batch-norm counters, and an Optimizer with its own state
 * tensors and step count. Nothing in the mirror aliases the live model's state: host_mirror_pull copies
 * the live state in, host_mirror_push copies the mirror's back (and tells the kernels). The
 * mirror's Model is a description for the checkpoint code only: never run it. */
#ifndef DDP_HOST_MIRROR_H
#define DDP_HOST_MIRROR_H

#include "model/model.h"
#include "model/optim.h"

typedef struct {
    Model *model;        /* what the checkpoint code reads or fills */
    Optimizer *opt;
    /* private: the copies on a device backend */
    int copies;
    Model m;
    Optimizer o;
} HostMirror;

/* A mirror of live (and opt): the live objects themselves on a host backend, else host copies
 * with unset contents; pull or fill them next. */
void host_mirror_open(HostMirror *h, Model *live, Optimizer *opt);
/* Live state -> mirror (downloads on a device backend; nothing to do on the host). */
void host_mirror_pull(HostMirror *h, const Model *live, const Optimizer *opt);
/* Mirror -> live state: parameters, running statistics, optimizer state, step count and batch-norm
 * counters, then model_params_changed. Nothing to do on the host. */
void host_mirror_push(const HostMirror *h, Model *live, Optimizer *opt);
void host_mirror_close(HostMirror *h);

#endif
