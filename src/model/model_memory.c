/* SPDX-License-Identifier: BSD-3-Clause */
/* model_memory.c - see model_memory.h. */
#include "model_memory.h"

#include <string.h>

#include "model_step.h"

/* The bytes the counting backend was asked for. Start-up counts on one thread; thread-local
 * all the same, so that a count never mixes two models. */
static _Thread_local size_t g_counted;

/* Nothing is allocated: model_init_net and the kinds' alloc functions store the pointer and
 * hand it to upload at most (transform_input's constants), which does nothing here. */
static void *count_alloc(size_t bytes) {
    g_counted += bytes;
    return NULL;
}

static void count_release(void *p) { (void)p; }

static void count_copy(void *dst, const void *src, size_t bytes) { (void)dst; (void)src; (void)bytes; }

static void count_zero(void *p, size_t bytes) { (void)p; (void)bytes; }

int model_memory(const Backend *be, const NetSpec *net, const char *what, int num_classes, int image_size,
                 int max_batch, ModelMemory *mm, char *err, size_t errlen) {
    memset(mm, 0, sizeof *mm);
    Backend counting = *be;
    counting.alloc = count_alloc;
    counting.release = count_release;
    counting.upload = counting.download = counting.copy = count_copy;
    counting.zero = count_zero;
    g_counted = 0;
    Model m;
    if (model_init_net(&m, &counting, net, what, num_classes, image_size, max_batch, err, errlen) != 0) return -1;
    mm->num_params = m.num_params;
    mm->num_buffers = m.num_buffers;
    mm->tensors = (2 * m.num_params + m.num_buffers) * sizeof(float);
    for (int i = 0; i < m.n_param_info; i++)
        if (m.param_info[i].numel * sizeof(float) > mm->largest_tensor) mm->largest_tensor = m.param_info[i].numel * sizeof(float);
    for (int i = 0; i < m.n_slot; i++) mm->slots += m.slot_bytes[i];
    mm->activations = g_counted > mm->tensors ? g_counted - mm->tensors : 0;
    if (be->conv2d_memory) {
        size_t ws = 0, sp = 0;
        for (int i = 0; i < m.n_step; i++) {
            ModelStep *st = &m.step[i];
            if (st->kind != NODE_CONV) continue;
            ConvMemory cm;
            be->conv2d_memory(&st->conv, max_batch, st->H_in, st->W_in, &cm);
            if (cm.workspace > ws) ws = cm.workspace;
            if (cm.scratchpad > sp) sp = cm.scratchpad;
            mm->held += cm.held;
        }
        mm->workspace = ws + sp;
    }
    model_free(&m);
    return 0;
}

size_t model_memory_total(const ModelMemory *mm) {
    return mm->tensors + mm->activations + mm->workspace + mm->held;
}
