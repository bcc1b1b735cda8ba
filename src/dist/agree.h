/* SPDX-License-Identifier: BSD-3-Clause */
/* agree.h - do all ranks run the same job? Checked before training, in one collective.
 *
 * A job whose ranks disagree on a flag, on the model, on the gradient buckets or on the data
 * does not fail: it hangs in a collective whose sizes differ, or trains silently wrong (another
 * binary or a stale flag on one node). So each rank reduces what must match to one 64-bit hash
 * per named field (an Agreement), and agree_check compares them in one allreduce of
 * world_size x fields int64, each rank writing only its own row. A field on which some rank
 * differs from the value most ranks hold (ties: rank 0's) names the lowest such rank.
 *
 * Options: every option of config_table.h must match except the per-rank ones listed in
 * agree.c (paths each node may mount elsewhere, threads, timeouts, the trace, what rank 0 alone
 * reads). So an option added to the table is checked unless it is listed there. */
#ifndef DDP_AGREE_H
#define DDP_AGREE_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "base/config.h"

#define AGREE_MAX_FIELDS 128

typedef struct {
    int n;
    char name[AGREE_MAX_FIELDS][48];     /* "--batch_size", "the model's tensor layout" */
    char value[AGREE_MAX_FIELDS][48];    /* this rank's value, shortened, for the message */
    uint64_t hash[AGREE_MAX_FIELDS];
} Agreement;

void agree_init(Agreement *a);
/* A field whose value is `bytes`; `value` is how to show it ("" when it means nothing to a user). */
void agree_add(Agreement *a, const char *name, const char *value, const void *bytes, size_t n);
/* Every option that must match (top of file), each its own field "--name". */
void agree_add_config(Agreement *a, const Config *c);

uint64_t agree_hash(uint64_t h, const void *bytes, size_t n);   /* FNV-1a; h = 0 to start */

/* table[q * nfields + f] is rank q's hash of field f. Returns the first field on which some
 * rank differs, with that rank in *odd and the usual value's lowest holder in *ref; -1 when
 * all agree. */
int agree_find(const int64_t *table, int world_size, int nfields, int *odd, int *ref);

/* Collective. 0 when every rank agrees on every field; else -1 with the verdict in err ("rank 1
 * on host H disagrees on --batch_size: rank 0 on host G has 64; ...", the value shown by the
 * rank that holds it) and in *reporter the rank whose line says the most: the usual value's
 * holder. hosts[q] names rank q's host. */
int agree_check(const Agreement *a, Comm *c, const char *const *hosts, int *reporter, char *err, size_t errlen);

/* A verdict every rank reached from the same numbers (a refusal before training): `reporter`
 * says it and ends the job; the others wait for that in a barrier, so that no rank's abort cuts
 * the line short. */
void agree_refuse(Comm *c, int reporter, const char *msg) __attribute__((noreturn));

/* agree_check, and agree_refuse with its verdict when some rank differs; nothing on one rank. */
void agree_require(const Agreement *a, Comm *c, const char *const *hosts);

#endif
