/* SPDX-License-Identifier: BSD-3-Clause */
/* metrics_tags.h - the TensorBoard scalars of a metrics.jsonl record: every number of the
 * record under a tag, so that the two never disagree and a field added to the records later
 * shows in TensorBoard without a change here.
 *
 * The record's kind gives the group, the first part of the tag (TensorBoard's sections):
 *     an "event" record            "<event>/"   ("straggler/ratio"), and with a "rank" field
 *                                               "<event>/rank/NNN/" ("straggler/rank/001/ratio")
 *     a record with a "test_" key  "test/"      (an evaluation: test_acc -> "test/acc")
 *     any other                    "train/"     (a progress line: loss -> "train/loss")
 * A key that starts with its group's name and '_' loses that prefix. The step is the record's
 * "step" (a record without one gives no scalars); "step" itself, an event's "rank", strings and
 * true/false are not scalars. A record with data_sec, compute_sec and comm_wait_sec also gives
 * their shares of the three's sum, "<group>/data_share", "compute_share", "comm_share". */
#ifndef DDP_METRICS_TAGS_H
#define DDP_METRICS_TAGS_H

#include <stddef.h>
#include <stdint.h>

#include "tfevents.h"

/* More scalars than any record has (a progress line gives 11). */
#define METRICS_TAGS_MAX 64

/* The record `json` (one flat JSON object, json_flat_read's form) as scalars into s (room for
 * max), its step into *step. Returns how many (0: none, or no "step"), or -1 with one line in
 * err when the text is not such an object. */
int metrics_tags_read(const char *json, int64_t *step, TfScalar *s, size_t max, char *err, size_t errlen);

/* "<group>/data_share", "<group>/compute_share", "<group>/comm_share" of the seconds given,
 * into s (room for 3). Returns 3, or 0 when their sum is not above 0. */
size_t metrics_tags_shares(TfScalar *s, const char *group, double data_sec, double compute_sec, double comm_sec);

#endif
