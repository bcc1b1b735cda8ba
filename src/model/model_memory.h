/* SPDX-License-Identifier: BSD-3-Clause */
/* model_memory.h - what a network takes in memory at a given batch, counted before any of it
 * is allocated.
 *
 * The count is model_init_net's own: the network is built on a copy of the backend whose
 * allocations only add up their sizes, so every tensor the model would allocate (parameters,
 * gradients, buffers, each step's output kept for backward, the kinds' own arrays, the
 * gradient slots the dry run of backward sizes) is counted by the code that allocates it, and
 * a change there changes the count. The backend's convolution memory (its workspace,
 * scratchpad and weight copies) comes from Backend.conv2d_memory, from the plans it would
 * make. */
#ifndef DDP_MODEL_MEMORY_H
#define DDP_MODEL_MEMORY_H

#include <stddef.h>

#include "model.h"

typedef struct {
    size_t tensors;       /* parameters, their gradients and the batch-norm buffers */
    size_t activations;   /* every other allocation of the model: outputs kept for backward, slots, ... */
    size_t slots;         /* of which the gradient slots of backward */
    size_t workspace;     /* the convolutions' shared workspace and scratchpad, at their largest */
    size_t held;          /* the convolutions' own copies of their weights */
    size_t num_params, num_buffers;
    size_t largest_tensor;   /* bytes of the largest parameter tensor */
} ModelMemory;

/* The memory of model_init_net(be, net, what, num_classes, image_size, max_batch) and of its
 * convolutions' first forward and backward, without allocating it. Returns 0, or -1 with
 * model_init_net's reason in err. */
int model_memory(const Backend *be, const NetSpec *net, const char *what, int num_classes, int image_size,
                 int max_batch, ModelMemory *mm, char *err, size_t errlen);

/* All of it, in bytes. */
size_t model_memory_total(const ModelMemory *mm);

#endif
