/* SPDX-License-Identifier: BSD-3-Clause */
/* splits.h - the run's two data loaders, opened from the options: this rank's share of the
 * training split and of the test split, each held in memory or streamed from the shards.
 *
 * --data_in_memory auto decides per rank from its node's memory (memavail_budget, read once so
 * that both splits and the log line use the same figure); the job streams on every rank when
 * one rank must (splits_agree_on_storage), so that all ranks' data orders are of one kind and
 * a checkpoint records one (resume.h), and a resumed run holds the split the way its
 * checkpoint was written (splits_hold). */
#ifndef DDP_SPLITS_H
#define DDP_SPLITS_H

#include <stddef.h>

#include "dist/bootstrap.h"
#include "dist/comm.h"
#include "base/config.h"
#include "data/dataloader.h"
#include "base/logger.h"

typedef struct {
    const Config *cfg;
    int rank, world_size;
    size_t mem_budget;      /* --data_in_memory auto's budget per rank */
    char mem_how[560];      /* its account, for the log */
    DataLoader *train, *test;
} Splits;

/* Opens both splits (0), or -1 with one line in err (a bad dataset fails before anything is
 * written, and before any collective: the caller fails the start-up check with it). Also
 * refuses a share with fewer images than one optimizer step. */
int splits_open(Splits *s, const Config *c, const Bootstrap *b, char *err, size_t errlen);

/* Collective: with --data_in_memory auto, every rank streams when one does. */
void splits_agree_on_storage(Splits *s, Comm *comm, Logger *log);

/* Holds the training split in memory (streamed = 0) or streams it (1), if it is not held so
 * already; `why` goes into the log line. The sample order changes with it (dataloader.h). */
void splits_hold(Splits *s, int streamed, const char *why, Logger *log);

/* The "data:" lines of the log. */
/* The training augmentation, one line in torchvision's order ("augment: RandomResizedCrop 176
 * (scale 0.08,1), flip, --auto_augment ta_wide, RandomErasing p=0.1, ..."). */
void splits_log_augment(const Config *c, Logger *log);
void splits_log(const Splits *s, Logger *log);

void splits_free(Splits *s);

#endif
