/* SPDX-License-Identifier: BSD-3-Clause */
/* loader_state.h - the loader's state, shared by the files that make up the loader
 * (dataloader.c: opening, plans, samples, epochs and prefetch; loader_stream.c: the streamed
 * chunks). Not part of the interface: everything else goes through dataloader.h. */
#ifndef DDP_LOADER_STATE_H
#define DDP_LOADER_STATE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "autoaug.h"
#include "dataloader.h"
#include "shard_format.h"
#include "transform.h"
#include "workpool.h"

/* What a streamed shard was when the loader opened it: a file replaced or rewritten since
 * (another inode, size or modification time) is refused on the next read, as the samples it
 * holds are no longer those the epoch's order was drawn for. */
typedef struct {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    size_t n;                        /* samples, as its header said */
} ShardId;

typedef struct {
    char *path;                      /* shard file */
    size_t begin, count;             /* samples [begin, begin+count) of the shard */
    size_t off;                      /* where they start in assignment order */
    ShardId id;
} Slice;

struct DataLoader {
    DataLoaderOptions opt;
    char *data_dir, *split;          /* owned copies of opt's strings */
    int S;                           /* image size: the side of a raw shard's images, a JPEG shard's shorter side */
    size_t per;                      /* bytes per raw image, S*S*3 */
    size_t n, global_n, num_batches;
    size_t epoch_n;                  /* positions of an epoch's order: n, or RASampler's count */
    uint32_t *ra_perm;               /* ra_reps > 1: [n] the epoch's permutation of the split */
    double lam;                      /* dataloader_batch_lambda */
    int num_shards;
    uint8_t *images;                 /* raw: [n, S, S, 3]; JPEG: the files, off[n] bytes; in assignment order */
    int32_t *labels;                 /* [n] */
    int jpeg;                        /* the shards hold JPEG files (data/README.md) */
    uint64_t *off;                   /* JPEG: [n + 1], sample i's bytes are [off[i], off[i+1]) of the share */
    uint16_t *dims;                  /* JPEG: [n][2], sample i's height and width */
    size_t share_bytes;              /* the whole share as stored */
    Transform tf;                    /* the view a batch holds (transform.h) */
    PixelAug aug;                    /* the pixel augmentations (autoaug.h) */
    int pixaug;                      /* 1: aug is on (training with augment) */
    size_t out_floats;               /* floats per output image, O*O*3 */
    int max_out;                     /* the output size at open, which the buffers hold */
    WorkPool *pool;                  /* opt.workers threads making a batch's samples */
    TransformScratch *scratch;       /* [opt.workers] */
    PixelBox *box, *pre_box;         /* the RandomResizedCrop boxes of the caller's and the worker's plans */
    ShardAttrs attrs;
    float lut[3][256];               /* normalised value of each pixel value, per channel */
    char describe[1024];
    uint64_t shard_list_hash;        /* see dataloader_shard_list_hash */
    char memory_note[256];

    Slice *slices;                   /* the shard ranges of the share, in assignment order */
    int num_slices;

    /* streaming (NULL/0 otherwise) */
    int streaming;
    size_t C, W, num_chunks, num_windows;
    uint32_t *chunk_perm;            /* [num_chunks] this epoch's order of chunks */
    uint32_t *chunk_win;             /* [num_chunks] the window chunk c is in this epoch */
    size_t *win_start;               /* [num_windows + 1] first position of each window */
    uint8_t **chunk_data;            /* [num_chunks] the chunk's images, or NULL when not held */
    size_t held, peak;               /* bytes in chunk_data (atomic: read by the caller) */

    /* epoch state: written only by dataloader_start_epoch while the worker is idle */
    int started, epoch;
    uint32_t *order;                 /* [n] this epoch's permutation of 0..n-1 */
    size_t next_batch;               /* the batch the caller gets next */
    double wait;

    /* prefetch: a one-batch buffer filled by the worker while the caller trains */
    int has_thread;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int quit, busy, ready, pre_n;
    double pre_lam;
    uint64_t gen;                    /* bumped by start_epoch: a batch of an older epoch is dropped */
    size_t want, ready_batch;
    float *pre_x;
    int *pre_labels;
    SamplePlan *pre_plan;            /* the worker's plan scratch */
    SamplePlan *plan;                /* the caller's, when it makes a batch itself */
};

/* Streaming: makes the chunks of the windows batch b's samples lie in resident, and frees every
 * other chunk (loader_stream.c). A chunk that cannot be read, or a shard replaced since the
 * loader opened it, ends the process naming the file: the epoch cannot go on without it. */
void loader_stream_batch(DataLoader *dl, size_t b);

#endif
