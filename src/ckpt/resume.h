/* SPDX-License-Identifier: BSD-3-Clause */
/* resume.h - may a checkpoint be resumed with this run's settings?
 *
 * Where a resumed run takes up the data is computed, not stored: the epoch's sample order
 * comes from the seed, the epoch, the world size, the training split (which shards, how
 * many samples) and how it is held (in memory, or streamed in chunks and windows of a
 * size), and the step within the epoch counts batches of batch_size x
 * grad_accum_steps. Resuming with any of these changed would continue at another position in
 * another order: samples seen twice or never, silently. So a resume compares them with what
 * the checkpoint recorded and refuses a change with one line that names the flag.
 *
 * The world size is the exception: a resume on another number of ranks is allowed with a
 * warning (ckpt_policy.c), as it must be for a job requeued onto fewer nodes.
 *
 * --resume_data_change accepts a change: weights, optimizer state, loss scale and the global
 * step (hence the learning-rate schedule) are kept, and the data order of the new settings
 * starts at the beginning of the next epoch (the rest of the checkpoint's epoch is skipped,
 * since no position in it would mean the same samples). */
#ifndef DDP_RESUME_H
#define DDP_RESUME_H

#include <stddef.h>

#include "checkpoint.h"
#include "data/dataloader.h"

/* This run's values of what resume_check compares, into ts (the rest untouched). */
void resume_stamp(TrainState *ts, long batch_size, long grad_accum_steps, long seed, const DataLoader *train);

/* 0 when `saved` (a checkpoint's) and `now` (resume_stamp'd) put the data at the same place;
 * -1 with one line in err naming the first flag that differs. Checkpoints that recorded no
 * batch size (older files) are checked for the seed only. */
int resume_check(const TrainState *saved, const TrainState *now, const char *data_dir, char *err, size_t errlen);

#define RESUME_REFUSAL_HINT "pass --resume_data_change to go on from the next epoch with the new setting, or --resume none to start over"

/* What --resume_data_change does to the loaded state: the next epoch from its start. */
void resume_next_epoch(TrainState *ts);

#endif
