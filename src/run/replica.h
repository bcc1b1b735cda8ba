/* SPDX-License-Identifier: BSD-3-Clause */
/* replica.h - the state kept equal across the ranks' replicas of the model: the initial
 * weights (broadcast from rank 0, then a checksum compared), and the batch-norm running
 * statistics, which are not.
 *
 * Each rank's running statistics follow its own batches, and nothing else ever changes them:
 * evaluation, the EMA and checkpoints use their average over the ranks, which
 * replica_buffers_average puts into the model for that time only, keeping the rank's own in
 * own_buffers, and replica_buffers_restore puts back, bit for bit. So how often a run averaged
 * (an interrupted run checkpoints once more than an uninterrupted one) changes nothing, and a
 * checkpoint stores every rank's own statistics beside their average (checkpoint.h,
 * /train_state/rank_buffers), from which a resume on as many ranks gives each rank its own
 * back. On one rank the average is the rank's statistics, and all of this does nothing. */
#ifndef DDP_REPLICA_H
#define DDP_REPLICA_H

#include <stdint.h>

#include "dist/comm.h"
#include "base/logger.h"
#include "model/model.h"

typedef struct {
    Comm *comm;
    Model *model;
    float *own_buffers;   /* several ranks: this rank's running statistics (backend memory)
                           * while the model holds their average */
} Replica;

void replica_init(Replica *p, Comm *c, Model *m);

/* Collective: the model's buffers become the ranks' average (this rank's kept aside). */
void replica_buffers_average(Replica *p);
/* This rank's own buffers back into the model. */
void replica_buffers_restore(Replica *p);
/* Every rank's own running statistics, row r = rank r's, on rank 0 (malloc'd, the caller
 * frees); NULL on the other ranks and on one rank. Collective: one broadcast per rank, so the
 * bits arrive as they are. Before replica_buffers_average, while the model holds the rank's
 * own. */
float *replica_buffers_gather(Replica *p);

/* FNV-1a of the parameters' bytes. */
uint64_t replica_params_checksum(const Replica *p);

/* Collective: rank 0's weights and buffers on every rank, checked by a checksum; logged. */
void replica_broadcast_weights(Replica *p, Logger *log);

void replica_free(Replica *p);

#endif
