/* SPDX-License-Identifier: BSD-3-Clause */
/* gpu_refusals.h - the one place that says what a rank on a GPU refuses, before anything is
 * built or written.
 *
 * Two rules. Whole operations: a member of the device's Backend left NULL (backend.h) is an
 * operation the GPU lacks; the networks that need one are refused by their kinds' records
 * (model.c), and an option whose whole work is such an operation is refused here, its test
 * reading the Backend (so it lifts itself the day the operation is filled). Arguments: an
 * option the GPU's operations do not take although they exist (Nesterov momentum and label
 * smoothing in sgd_step's and softmax_xent's arguments, host-made augmentations, a network
 * other than MiniResNet) is refused by its entry in this table alone. docs/gpu.md lists both;
 * tests/test_gpu_refusals.sh checks the list, the table and the CUDA backend's NULL members
 * against each other. */
#ifndef DDP_GPU_REFUSALS_H
#define DDP_GPU_REFUSALS_H

#include <stddef.h>

#include "ops/backend.h"
#include "base/config.h"

typedef struct {
    const char *flag;      /* the option, without "--" */
    const char *example;   /* flags that trigger it, for the tests */
    const char *op;        /* the Backend member whose absence is the reason; NULL: an argument refusal */
    const char *why;       /* for the message and the docs */
    int (*refuses)(const Config *c, const Backend *be);
} GpuRefusal;

int gpu_refusal_count(void);
const GpuRefusal *gpu_refusal(int i);

/* The first entry c triggers on be, its one-line message in msg ("--flag ...: ..."); NULL when
 * none does. */
const GpuRefusal *gpu_refuses(const Config *c, const Backend *be, char *msg, size_t n);

/* The Backend's operations by name (every function pointer of backend.h, in order), and
 * whether be has operation i. */
int backend_op_count(void);
const char *backend_op_name(int i);
int backend_op_present(const Backend *be, int i);

#endif
