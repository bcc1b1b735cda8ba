/* SPDX-License-Identifier: BSD-3-Clause */
/* dataloader.h - batches for one rank from a sharded HDF5 dataset (format: data/README.md).
 *
 * A rank opens only the shards (or, when there are fewer shards than ranks, the slices of
 * shards) assigned to it, shuffles its samples per epoch from (seed, epoch, rank), applies the
 * augmentation, normalises per channel, and prepares the next batch in a background thread
 * while the current one trains.
 *
 * A batch is made in two steps: a plan (which image, crop offset, flip: all the randomness)
 * and its application to the loaded uint8 images. dataloader_next does both on the CPU;
 * device_data.h applies the same plans on the GPU to a copy of the images, so both paths
 * give bit-identical batches. */
#ifndef DDP_DATALOADER_H
#define DDP_DATALOADER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {   /* device_data.cu includes this header */
#endif

typedef struct DataLoader DataLoader;   /* opaque */

/* One sample of a batch. Output pixel (y, x) of the sample is image `index` at
 * (y + oy, x' + ox) with x' = S-1-x when flip, else x; a source pixel outside the image is
 * the padding, pixel value 0 (before normalisation), in every channel. Fixed size (12 bytes,
 * 4-byte aligned) because it is copied to the GPU as is. */
typedef struct {
    int32_t index;            /* image in assignment order (dataloader_images) */
    int16_t ox, oy;           /* crop offset in [-4, 4]; 0 without augmentation */
    int32_t flip;             /* 1: horizontal flip; 0 without augmentation */
} SamplePlan;

typedef struct {
    const char *data_dir;     /* holds <split>-NNNNN-of-MMMMM.h5 */
    const char *split;        /* "train" or "test" */
    int rank, world_size;
    int batch_size;
    int augment;              /* random crop with crop_pad pixels of zero padding + horizontal flip */
    int crop_pad;             /* 0: DL_CROP_PAD; negative: no crop (flips only) */
    int crop_pad_reflect;     /* the crop's padding mirrors the image instead of zeros */
    int alternating_flip;     /* flip in every other epoch from a per-image coin, not p=0.5 each time */
    int shuffle;              /* per-epoch permutation from (seed, epoch, rank) */
    int drop_last;            /* training: only full batches; evaluation: keep the short last one */
    uint64_t seed;
    int num_classes;          /* expected: a label >= num_classes is an error naming the file */
    int image_size;           /* expected H == W */
    int prefetch;             /* background thread on/off (off is for tests and debugging) */
    /* Where the images are held (data/README.md, "Streaming"): DL_MEMORY_YES reads the whole
     * share at open; DL_MEMORY_NO streams it from the shards in chunks of chunk_images, a window
     * of window_chunks chunks at a time; DL_MEMORY_AUTO holds it in memory when it takes at
     * most memory_budget bytes (0: no limit) and streams otherwise. Zero-initialised options
     * mean DL_MEMORY_YES. */
    int in_memory;
    size_t memory_budget;
    int chunk_images;         /* 0: DL_CHUNK_IMAGES */
    int window_chunks;        /* 0: DL_WINDOW_CHUNKS */
    /* ImageNet-style views (transform.h), instead of the stored size with crop_pad's crop:
     * crop_size > 0 with augment: RandomResizedCrop to crop_size x crop_size, a box of
     * [rrc_scale_lo, rrc_scale_hi] of the image's area, flipped as augment flips; else
     * out_size > 0: the shorter side resized to resize_size (0: out_size), the centre
     * out_size x out_size kept. Both 0: the stored S x S (a JPEG split: its centre S x S). */
    int crop_size;
    double rrc_scale_lo, rrc_scale_hi;
    int resize_size, out_size;
    int workers;              /* threads that make a batch's samples (0: 1) */
    /* With augment: torchvision's per-image pixel augmentations of the view after its crop and
     * flip, before normalisation (autoaug.h), from a stream per sample of
     * (seed, epoch, rank, position in the epoch). Such a loader's plans cannot be applied
     * elsewhere: dataloader_images is NULL and dataloader_apply_plan refuses. */
    int auto_augment;         /* autoaug.h's AA_*; 0: none */
    int ra_magnitude, ra_num_ops;
    int augmix_severity;      /* AugMix's severity (1 to 10; 0: 3) */
    double color_jitter[4];   /* ColorJitter's brightness, contrast, saturation, hue; 0: that one off */
    /* torchvision's reference recipe (random_erase.h, mix.h, ra_sampler.h): RandomErasing's
     * probability per sample (0: off); the alphas of RandomMixup and RandomCutmix per batch (0:
     * off; both: one of the two per batch); RASampler's repetitions (0 or 1: off), with which
     * every rank reads the whole split (in memory) and takes its share of each epoch's
     * repeated permutation. */
    double random_erase;
    double mixup_alpha, cutmix_alpha;
    int ra_reps;
} DataLoaderOptions;

enum { DL_MEMORY_YES = 0, DL_MEMORY_NO = 1, DL_MEMORY_AUTO = 2 };
#define DL_CHUNK_IMAGES 1024
#define DL_CROP_PAD 4
#define DL_WINDOW_CHUNKS 8

/* Opens and validates this rank's shards. On any problem returns NULL and writes one line
 * into err naming the file and the problem ("data/train-00000-of-00002.h5: dataset 'images'
 * has shape [10,32,32] but [N,32,32,3] uint8 is required"). Nothing is left open. */
DataLoader *dataloader_open(const DataLoaderOptions *opt, char *err, size_t errlen);

/* Samples held by this rank (with ra_reps > 1 the whole split), and batches per epoch for it
 * (floor or ceil by drop_last, of the samples an epoch takes: RASampler's count with ra_reps). */
size_t dataloader_num_samples(const DataLoader *dl);
size_t dataloader_num_batches(const DataLoader *dl);
/* The same counts summed over all ranks' assignments: computed from the shard headers, so
 * every rank knows them without communication. */
size_t dataloader_global_samples(const DataLoader *dl);
/* Shards of the split. A resumed run compares it, the sample count and
 * dataloader_shard_list_hash with its checkpoint's (resume.h). */
int dataloader_num_shards(const DataLoader *dl);

/* A line for the log: which shards/slices this rank reads ("train-00000-of-00004.h5 [0, 5000)"). */
const char *dataloader_describe(const DataLoader *dl);
/* A hash of the split's shard names and sample counts, as this rank sees them in data_dir (not
 * of the directory's name: nodes may mount the data elsewhere). Equal on every rank of a job. */
uint64_t dataloader_shard_list_hash(const DataLoader *dl);

/* 1 when the loader streams its share from the shards (then dataloader_images is NULL);
 * dataloader_memory_note says which storage was chosen and why, for the log. */
int dataloader_streaming(const DataLoader *dl);
/* The streamed order's shape: images per chunk and chunks per window; 0 and 0 when the share
 * is held in memory (then an epoch is one permutation of the whole share). */
void dataloader_order_shape(const DataLoader *dl, long *chunk_images, long *window_chunks);
const char *dataloader_memory_note(const DataLoader *dl);
/* Bytes of image data the loader holds now (the whole share, or the chunks in its cache),
 * and the most it has held since open. */
size_t dataloader_bytes_held(const DataLoader *dl);
size_t dataloader_peak_bytes_held(const DataLoader *dl);

/* Start epoch `epoch`, beginning at batch `start_batch` (resume mid-epoch). Restarts prefetch. */
void dataloader_start_epoch(DataLoader *dl, int epoch, size_t start_batch);

/* Progressive resizing: the crop (TF_RRC) or centre crop of the batches from the next
 * dataloader_start_epoch on, at most the size the loader was opened with; the boxes drawn stay
 * the same (RandomResizedCrop draws them from the stored image alone). */
void dataloader_set_output_size(DataLoader *dl, int size);

/* Next batch of this epoch: x receives NHWC float32 [n, O, O, 3] normalised (O:
 * dataloader_output_size), labels [n].
 * Returns n (batch_size, or fewer for a short last batch), 0 at the end of the epoch. */
int dataloader_next(DataLoader *dl, float *x, int *labels);

/* The weight of the labels of the batch dataloader_next gave last under mixup or cutmix: its
 * targets are lambda * onehot(labels[i]) + (1 - lambda) * onehot(labels[i - 1]), the labels
 * rolled by one (labels[n - 1] for i = 0). 1 without mixing. */
double dataloader_batch_lambda(const DataLoader *dl);

/* The next batch as a plan instead of pixels: plan [n] and labels [n], with the batch
 * counting, epochs, resume point and the random draws of dataloader_next (the two advance the
 * same position, so calls may be mixed). Returns n, 0 at the end of the epoch. The first call
 * stops the prefetch thread for good: plans are cheap, and batches prepared in the background
 * would never be taken (a later dataloader_next makes its batch in the caller's thread). */
int dataloader_next_plan(DataLoader *dl, SamplePlan *plan, int *labels);
/* Applies n plans to the loaded images: x receives NHWC float32 [n, S, S, 3], exactly the
 * batch dataloader_next gives for the same plans. A streaming loader holds the images of the
 * last plan made only: apply a plan before making the next. */
void dataloader_apply_plan(const DataLoader *dl, const SamplePlan *plan, int n, float *x);
/* The batch size of the options (the most samples a plan or batch has). */
int dataloader_batch_size(const DataLoader *dl);
/* For applying plans elsewhere: this rank's images, uint8 [n, S, S, 3] in assignment order
 * (SamplePlan.index indexes it, n = dataloader_num_samples), and the normalisation table,
 * float [3][256]: lut[c * 256 + v] is the normalised value of pixel value v in channel c.
 * Both stay valid and unchanged until dataloader_free. The images are NULL when streaming, for
 * JPEG shards, with crop_size or out_size (plans then carry only a part of the view), and with
 * pixel augmentations (auto_augment, color_jitter: made on the host alone). */
const uint8_t *dataloader_images(const DataLoader *dl);
const float *dataloader_lut(const DataLoader *dl);
/* 1 when the crops' padding is reflection (transform.h), which plans applied elsewhere must do too. */
int dataloader_pad_reflect(const DataLoader *dl);

/* Seconds the caller spent blocked in dataloader_next (or making plans in
 * dataloader_next_plan) since the last call (data wait). */
double dataloader_take_wait_time(DataLoader *dl);

/* The side of the images a batch holds (x is [n, O, O, 3]): crop_size or out_size when given,
 * else the stored size. */
int dataloader_output_size(const DataLoader *dl);
/* 1 when the split's shards hold JPEG files (decoded as batches are made). */
int dataloader_jpeg(const DataLoader *dl);

/* Dataset attributes: num_classes, class names (may be NULL), per-channel mean and std used to
 * normalise (from the file's attributes, or computed defaults). */
int dataloader_num_classes(const DataLoader *dl);
const char *dataloader_class_name(const DataLoader *dl, int k);
/* Image size S of the data (equal to opt.image_size when that was non-zero), and the
 * per-channel mean/std in units of pixel/255: x = (pixel/255 - mean[c]) / std[c]. */
int dataloader_image_size(const DataLoader *dl);
void dataloader_norm(const DataLoader *dl, float mean[3], float std[3]);
void dataloader_free(DataLoader *dl);

#ifdef __cplusplus
}
#endif

#endif
