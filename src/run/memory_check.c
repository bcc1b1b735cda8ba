/* SPDX-License-Identifier: BSD-3-Clause */
/* memory_check.c - see memory_check.h. */
#include "memory_check.h"

#include <stdio.h>
#include <string.h>

#include "base/memavail.h"
#include "base/util.h"
#include "model/optim.h"
#include "model/zoo.h"
#include "tta.h"

int memory_estimate(RunMemory *rm, const Config *c, const NetSpec *net, const Backend *be, int batch, char *err,
                    size_t errlen) {
    memset(rm, 0, sizeof *rm);
    const int in_size = (int)config_input_size(c), ev_size = (int)config_eval_size(c), K = (int)c->num_classes;
    if (model_memory(be, net, c->model, K, in_size, batch, &rm->model, err, errlen) != 0) return -1;
    const size_t P = rm->model.num_params * sizeof(float), B = rm->model.num_buffers * sizeof(float);
    if (ev_size != in_size) {   /* eval.c's second model, sized for the training batch */
        ModelMemory ev;
        if (model_memory(be, net, c->model, K, ev_size, batch, &ev, err, errlen) != 0) return -1;
        rm->eval_model = model_memory_total(&ev);
    }
    /* the optimizer's state tensors (optim.h), each of the parameters' size */
    const OptimKind *opt = optim_kind(c->optimizer);
    const size_t S = (size_t)(opt ? opt->n_state : 1) * P;
    rm->optimizer = S;
    /* ema.c: the average, a scratch of the larger, the saved weights and buffers; learner.c's
     * host copy */
    if (c->ema_decay > 0.0) rm->ema = 2 * P + 2 * B + (P > B ? P : B) + P + B;
    /* batches.c: one array of the larger batch and image for both splits; each loader's
     * prefetch buffer of its own batch (dataloader.c); --tta's views (eval.c) */
    const size_t in_img = (size_t)in_size * in_size * 3 * sizeof(float);
    const size_t ev_img = (size_t)ev_size * ev_size * 3 * sizeof(float);
    const size_t big = (size_t)(batch > c->eval_batch_size ? batch : c->eval_batch_size);
    rm->batches = big * (in_img > ev_img ? in_img : ev_img);
    if (c->prefetch) rm->batches += (size_t)batch * in_img + (size_t)c->eval_batch_size * ev_img;
    const int tta = tta_parse(c->tta);
    const int views = tta > 0 ? tta_views(tta) : 0;
    if (views > 0) rm->batches += (size_t)batch * ev_img + (size_t)(1 + views) * batch * K * sizeof(float);
    /* checkpoint_write.c's background writer keeps a snapshot of weights, optimizer state and
     * buffers (and the average's); HDF5 copies a tensor through its checksum filter: two of
     * the largest, as measured */
    rm->checkpoint = P + S + B + (c->ema_decay > 0.0 ? P + B : 0) + 2 * rm->model.largest_tensor;
    rm->resident = memavail_rss_bytes();
    rm->total = rm->resident + rm->batches + rm->checkpoint;
    if (be->on_device) {
        /* the model, optimizer state and average live on the GPU; the host keeps the EMA's copy
         * and the checkpoints' mirror of weights, buffers and optimizer state (host_mirror.h) */
        rm->total += (c->ema_decay > 0.0 ? P + B : 0) + P + S + B;
    } else {
        rm->total += model_memory_total(&rm->model) + rm->eval_model + rm->optimizer + rm->ema;
    }
    return 0;
}

void memory_format(size_t bytes, char *buf, size_t n) {
    const double mib = (double)bytes / 1048576.0;
    if (mib < 1024.0) snprintf(buf, n, "%.0f MiB", mib);
    else snprintf(buf, n, "%.2f GiB", mib / 1024.0);
}

void memory_describe(const RunMemory *rm, char *buf, size_t n) {
    char t[7][32];
    memory_format(rm->total, t[0], sizeof t[0]);
    memory_format(rm->resident, t[1], sizeof t[1]);
    memory_format(rm->model.tensors + rm->optimizer + rm->ema, t[2], sizeof t[2]);
    memory_format(rm->model.activations + rm->eval_model, t[3], sizeof t[3]);
    memory_format(rm->model.workspace + rm->model.held, t[4], sizeof t[4]);
    memory_format(rm->batches, t[5], sizeof t[5]);
    memory_format(rm->checkpoint, t[6], sizeof t[6]);
    snprintf(buf, n, "estimated peak %s: %s resident at start-up (libraries, data held), %s of weights, gradients, "
             "buffers and optimizer state, %s of activations and their gradients, %s of convolution workspace and "
             "weight copies, %s of batches, %s for checkpoints", t[0], t[1], t[2], t[3], t[4], t[5], t[6]);
}

int memory_check(RunMemory *rm, const Config *c, const NetSpec *net, const Backend *be, int rank, int local_size,
                 char *err, size_t errlen) {
    if (memory_estimate(rm, c, net, be, (int)c->batch_size, err, errlen) != 0) return -1;
    if (!c->memory_check) return 0;
    char how[400];
    const size_t share = memavail_rank_share(rank, local_size, how, sizeof how);
    if (share == 0) return 0;   /* neither MemAvailable nor a cgroup could be read: nothing to check against */
    /* what the process holds already is its own to keep */
    const size_t budget = share + rm->resident;
    if (rm->total <= budget) return 0;
    /* The estimate grows linearly with the batch (every activation, slot and batch array is
     * sized by it): the most that fits, from the estimate at one image. */
    char fits[96] = "not even --batch_size 1 fits";
    RunMemory one;
    if (c->batch_size > 1 && memory_estimate(&one, c, net, be, 1, err, errlen) == 0 && one.total <= budget) {
        const double per_image = (double)(rm->total - one.total) / (double)(c->batch_size - 1);
        long most = 1 + (long)((double)(budget - one.total) / per_image);
        if (most >= c->batch_size) most = c->batch_size - 1;
        snprintf(fits, sizeof fits, "at most --batch_size %ld fits", most);
    }
    char need[32], have[32], held[32];
    memory_format(rm->total, need, sizeof need);
    memory_format(share, have, sizeof have);
    memory_format(rm->resident, held, sizeof held);
    char whose[64] = "this rank";
    if (local_size > 1) snprintf(whose, sizeof whose, "each of %d ranks on this node", local_size);
    return errf(err, errlen, "%s%s needs about %s of memory at --batch_size %ld (%s available to %s beyond the %s it "
                "holds: %s); %s (--no-memory_check runs it anyway)", zoo_has(c->model) ? "--model " : "", c->model, need,
                c->batch_size, have, whose, held, how, fits);
}
