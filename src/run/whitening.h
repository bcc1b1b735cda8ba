/* SPDX-License-Identifier: BSD-3-Clause */
/* whitening.h - at the start of a run (not a resume), the weight of a network's whitening
 * convolution (model/whiten.h) from the training images.
 *
 * Every rank sums the second moments of the patches of the first ceil(--whiten_images / ranks)
 * images of its own share (in memory, in their stored order: airbench takes the first 5000 of
 * the training set), the sums are added by an all-reduce (d*d + 1 doubles, the same bytes on
 * every rank), and every rank solves the same eigenproblem the same way: the weights are the
 * same everywhere without a broadcast, and no rank reads another's share. Reducing sums rather
 * than broadcasting rank 0's weights keeps every rank's images in the estimate. */
#ifndef DDP_WHITENING_H
#define DDP_WHITENING_H

#include "base/config.h"
#include "base/logger.h"
#include "data/dataloader.h"
#include "dist/comm.h"
#include "learner.h"

/* Nothing when the network has no whitening convolution. Dies (one line, every rank alike)
 * when the images are not in memory (streaming, JPEG shards, crops at load). */
void whitening_init(Learner *l, DataLoader *train, Comm *comm, const Config *c, Logger *log);

#endif
