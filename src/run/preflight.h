/* SPDX-License-Identifier: BSD-3-Clause */
/* preflight.h - what is checked before training, with the rank and host named: who every
 * rank is (the roster), two ranks on one GPU, ranks that disagree on the options that must
 * match, on the ddptrain version, on the shard lists they see (agree.h), or on the model's
 * tensors and the gradient buckets; and --preflight's measurement of the links (linktest.h). */
#ifndef DDP_PREFLIGHT_H
#define DDP_PREFLIGHT_H

#include "dist/bootstrap.h"
#include "dist/comm.h"
#include "base/config.h"
#include "data/dataloader.h"
#include "base/logger.h"
#include "model/model.h"
#include "dist/reducer.h"
#include "dist/roster.h"

/* Exit status of --preflight when a rank or a link is below half the median rate. */
#define PREFLIGHT_EXIT_SLOW 4

typedef struct {
    int rank, world_size;
    RosterEntry *entry;    /* every rank's host and device */
    const char **hosts;    /* entry[q].host */
} Ranks;

/* Collective: the roster (one gather), then the job's agreement: refused, naming the ranks,
 * when two ranks would share a GPU or when ranks differ on the options or the shard lists. */
void preflight_check(Ranks *out, Comm *c, const Bootstrap *b, int gpu, const Config *cfg, const DataLoader *train,
                     const DataLoader *test);

/* Collective: the model's tensors and the gradient buckets are the same on every rank (with
 * another binary on one node they could differ although every option agrees). Before the first
 * collective whose size they decide. */
void preflight_agree_layout(Comm *c, const char *const *hosts, const Model *m, const Reducer *rd);

/* Rank 0's log: one line per rank of the roster. */
void preflight_log_ranks(const Ranks *r, Logger *log);

/* --preflight: measures the links, logs the table and the verdict. Returns the exit status,
 * the same on every rank (they judge the same numbers). t_start: the process's start. */
int preflight_links(Comm *c, const char *const *hosts, Logger *log, double t_start);

void preflight_free(Ranks *r);

#endif
