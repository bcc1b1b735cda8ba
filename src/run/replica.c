/* SPDX-License-Identifier: BSD-3-Clause */
/* replica.c - see replica.h. */
#include "replica.h"

#include <stdlib.h>
#include <string.h>

#include "dist/agree.h"
#include "base/util.h"

void replica_init(Replica *p, Comm *c, Model *m) {
    memset(p, 0, sizeof *p);
    p->comm = c;
    p->model = m;
}

void replica_buffers_average(Replica *p) {
    if (p->comm->world_size == 1) return;
    Model *m = p->model;
    const size_t bytes = m->num_buffers * sizeof(float);
    if (!p->own_buffers) p->own_buffers = m->be->alloc(bytes);
    m->be->copy(p->own_buffers, m->buffers, bytes);
    comm_set_context(p->comm, "averaging batch-norm running statistics");
    comm_allreduce(p->comm, m->buffers, m->num_buffers, COMM_FLOAT32, COMM_AVG);
}

void replica_buffers_restore(Replica *p) {
    if (p->comm->world_size == 1) return;
    p->model->be->copy(p->model->buffers, p->own_buffers, p->model->num_buffers * sizeof(float));
}

float *replica_buffers_gather(Replica *p) {
    const int world = p->comm->world_size, rank = p->comm->rank;
    if (world == 1) return NULL;
    const Model *m = p->model;
    const size_t n = m->num_buffers;
    float *rows = mallocCheck((size_t)world * n * sizeof(float));
    m->be->download(rows + (size_t)rank * n, m->buffers, n * sizeof(float));
    comm_set_context(p->comm, "gathering every rank's batch-norm running statistics for the checkpoint");
    for (int q = 0; q < world; q++) comm_broadcast(p->comm, rows + (size_t)q * n, n * sizeof(float), q);
    if (rank == 0) return rows;
    free(rows);
    return NULL;
}

uint64_t replica_params_checksum(const Replica *p) {
    const Model *m = p->model;
    const size_t bytes = m->num_params * sizeof(float);
    unsigned char *h = m->be->on_device ? mallocCheck(bytes) : (unsigned char *)m->params;
    if (m->be->on_device) m->be->download(h, m->params, bytes);
    const uint64_t sum = agree_hash(0, h, bytes);
    if (m->be->on_device) free(h);
    return sum;
}

void replica_broadcast_weights(Replica *p, Logger *log) {
    Model *m = p->model;
    comm_set_context(p->comm, "broadcasting initial weights");
    comm_broadcast(p->comm, m->params, m->num_params * sizeof(float), 0);
    comm_broadcast(p->comm, m->buffers, m->num_buffers * sizeof(float), 0);
    model_params_changed(m);
    int64_t mine = (int64_t)(replica_params_checksum(p) >> 1), ref = mine, bad;
    comm_broadcast(p->comm, &ref, sizeof ref, 0);
    bad = mine != ref;
    comm_allreduce(p->comm, &bad, 1, COMM_INT64, COMM_SUM);
    if (bad) die("initial weights differ on %ld rank(s) after the broadcast", (long)bad);
    log_info(log, "weights: identical on all %d ranks (checksum %016llx)", p->comm->world_size, (unsigned long long)mine);
}

void replica_free(Replica *p) {
    if (p->own_buffers) p->model->be->release(p->own_buffers);
    p->own_buffers = NULL;
}
