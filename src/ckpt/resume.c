/* SPDX-License-Identifier: BSD-3-Clause */
/* resume.c - see resume.h. */
#include "resume.h"
#include "base/util.h"

void resume_stamp(TrainState *ts, long batch_size, long grad_accum_steps, long seed, const DataLoader *train) {
    ts->batch_size = batch_size;
    ts->grad_accum_steps = grad_accum_steps;
    ts->seed = (uint64_t)seed;
    ts->data_samples = (long)dataloader_global_samples(train);
    ts->data_shards = dataloader_num_shards(train);
    ts->data_id = dataloader_shard_list_hash(train);
    ts->has_data_order = 1;
    dataloader_order_shape(train, &ts->data_chunk_images, &ts->data_window_chunks);
}

/* "held in memory" or "streamed in chunks of C images, windows of W chunks" */
static const char *order_text(const TrainState *ts, char *buf, size_t n) {
    if (ts->data_chunk_images == 0) snprintf(buf, n, "held in memory");
    else snprintf(buf, n, "streamed in chunks of %ld images, windows of %ld chunks", ts->data_chunk_images, ts->data_window_chunks);
    return buf;
}

int resume_check(const TrainState *saved, const TrainState *now, const char *data_dir, char *err, size_t errlen) {
    static const char tail[] = "the data order would not continue where it stopped";
    if (saved->seed != now->seed)
        return errf(err, errlen, "--seed %llu, but the checkpoint was written with --seed %llu: %s",
                    (unsigned long long)now->seed, (unsigned long long)saved->seed, tail);
    if (saved->batch_size <= 0) return 0;   /* recorded nothing more */
    if (saved->batch_size != now->batch_size)
        return errf(err, errlen, "--batch_size %ld, but the checkpoint was written with --batch_size %ld: %s",
                    now->batch_size, saved->batch_size, tail);
    if (saved->grad_accum_steps != now->grad_accum_steps)
        return errf(err, errlen, "--grad_accum_steps %ld, but the checkpoint was written with --grad_accum_steps %ld: %s",
                    now->grad_accum_steps, saved->grad_accum_steps, tail);
    if (saved->data_samples != now->data_samples || saved->data_shards != now->data_shards)
        return errf(err, errlen, "--data_dir %s: the training split has %ld samples in %ld shards, but the checkpoint "
                    "was written for %ld in %ld: %s", data_dir, now->data_samples, now->data_shards,
                    saved->data_samples, saved->data_shards, tail);
    if (saved->data_id != now->data_id)
        return errf(err, errlen, "--data_dir %s: the training shards' names or sizes differ from the checkpoint's: %s",
                    data_dir, tail);
    if (saved->has_data_order && (saved->data_chunk_images != now->data_chunk_images ||
                                  saved->data_window_chunks != now->data_window_chunks)) {
        char a[96], b[96];
        const char *flag = (saved->data_chunk_images == 0) != (now->data_chunk_images == 0) ? "--data_in_memory"
                         : saved->data_chunk_images != now->data_chunk_images ? "--data_chunk_images" : "--data_window_chunks";
        return errf(err, errlen, "%s: the training split is %s, but the checkpoint was written with it %s: %s", flag,
                    order_text(now, a, sizeof a), order_text(saved, b, sizeof b), tail);
    }
    return 0;
}

void resume_next_epoch(TrainState *ts) {
    if (ts->step_in_epoch > 0) ts->epoch++;
    ts->step_in_epoch = 0;
}
