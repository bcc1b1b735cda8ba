/* SPDX-License-Identifier: BSD-3-Clause */
/* checkpoint.h - training checkpoints in HDF5: save, validated load, rotation in a checkpoint
 * directory, and a background writer so a checkpoint costs the training loop a memcpy.
 *
 * File layout (format_version 1). Tensor names are exactly the state_dict names of the PyTorch
 * module in tests/helpers/miniresnet_torch.py, so h5py + torch.load_state_dict can read a
 * checkpoint:
 *
 *   /                              attributes:
 *       format          string   "ddptrain-checkpoint"
 *       format_version  int64    1
 *       architecture    string   "MiniResNet"
 *       width, blocks, num_classes, image_size, num_params   int64
 *   /config                        string dataset: the effective configuration as JSON
 *   /model/<name>                  float32, the tensor's shape, e.g.
 *                                    /model/conv1.weight            [w,3,3,3]   (OIHW)
 *                                    /model/layer1.0.bn1.running_var [w]
 *                                    /model/fc.weight                [classes,4w]
 *                                  and per batch-norm layer an int64 scalar
 *                                    /model/<bn>.num_batches_tracked
 *   /optimizer                     attributes momentum, weight_decay: informational only; a
 *                                  resumed run takes them from its configuration
 *   /optimizer/name                string: the optimizer whose state this is, one of
 *                                  model/optim.h's table (sgd, adamw, rmsprop, lamb, lars);
 *                                  absent in files written before it was recorded: sgd
 *   /optimizer/steps               int64 scalar: the optimizer's steps (SGD: calls, 0 when its
 *                                  momentum is unused; the others: steps taken, the bias
 *                                  corrections' t)
 *   /optimizer/<state>/<name>      float32, one per parameter, same shape as /model/<name>, for
 *                                  each state tensor of the optimizer, under PyTorch's name of it:
 *                                  sgd: momentum (SGD's momentum buffer); adamw, lamb: exp_avg,
 *                                  exp_avg_sq; rmsprop: square_avg, momentum_buffer; lars:
 *                                  momentum_buffer. /optimizer holds nothing else. The state is
 *                                  every rank's (replicated, not sharded: docs/checkpoints.md)
 *   /train_state/epoch             int64 scalar: the epoch in progress (0-based)
 *   /train_state/step_in_epoch     int64 scalar: optimizer steps completed in that epoch
 *   /train_state/global_step       int64 scalar: optimizer steps completed in the run
 *   /train_state/world_size        int64 scalar: ranks of the run that wrote it
 *   /train_state/seed              int64 scalar
 *   /train_state/batch_size, grad_accum_steps, data_samples, data_shards, data_id
 *   /train_state/data_chunk_images, data_window_chunks   int64 (0 and 0: held in memory)
 *                                  int64 scalars (data_id: the split's hash as a bit pattern):
 *                                  what the data position depends on (resume.h); absent in
 *                                  older files, when a resume does not check them
 *   /train_state/amp               float64 [4], only when mixed-precision state exists:
 *                                  [0] loss scale, [1] growth tracker, [2..3] reserved (0)
 *   /train_state/rank_buffers      float32 [world_size, num_buffers], only from a run on several
 *                                  ranks: row r holds rank r's own batch-norm running statistics
 *                                  (every running_mean and running_var tensor of /model,
 *                                  flattened, in /model's state_dict order), of which /model
 *                                  holds the average over the ranks. A resume on as many ranks
 *                                  gives every rank its own row back; any other reader, PyTorch
 *                                  included, needs only /model.
 *   /ema                           only from a run with --ema_decay, once the average exists:
 *                                  the exponential moving average of the weights and buffers
 *                                  (torch.optim.swa_utils.AveragedModel(use_buffers=True)),
 *                                  the model that the run's test_acc and test_loss are of
 *                                  (attribute decay, float64: informational only)
 *   /ema/n_averaged                int64 scalar >= 1: the average's updates (AveragedModel's
 *                                  n_averaged)
 *   /ema/<name>                    float32, every tensor of /model under its name and shape,
 *                                  and an int64 scalar /ema/<bn>.num_batches_tracked per
 *                                  batch-norm layer: a state_dict PyTorch loads as /model's
 *   /dataset                       only from a run that knew its dataset (absent in files
 *                                  written before it was recorded): what the run's evaluation
 *                                  took from its test split, so that the file alone says how
 *                                  to prepare an image for the network and what its classes
 *                                  are called (ddptrain-predict)
 *   /dataset/mean, /dataset/std    float32 [3]: the per-channel normalisation, in units of
 *                                  pixel/255: x = (pixel/255 - mean) / std
 *   /dataset/class_names           fixed-length UTF-8 strings [num_classes], NUL-padded, as
 *                                  wide as the longest name (class k is label k); only when
 *                                  the dataset names its classes
 *
 * The file uses the HDF5 1.10 format (readable by HDF5 >= 1.10, hence any recent h5py), whose
 * metadata is checksummed; every float tensor is one chunk with the Fletcher-32 checksum
 * filter, small values live inside their (checksummed) object headers, and links are stored
 * in the group headers: a damaged byte anywhere is refused on load rather than read as wrong
 * weights. h5py and h5dump read it as usual. No timestamps are recorded, so the same state
 * always gives the same bytes.
 *
 * A checkpoint is written under <path>.tmp.<pid>.<k> (created exclusively: never through a
 * planted file or symlink) in the same directory, flushed, fsynced and
 * renamed, then the directory is fsynced: a crash leaves either the complete file under its
 * real name or no file under that name (and possibly a stale .tmp file, removed by the next
 * prune).
 *
 * In a checkpoint directory files are named ckpt-<global_step, 9 digits>.h5, and a text file
 * `latest` holds the name of the most recent one (replaced atomically).
 *
 * Functions that can fail on the file return 0 or -1 with ONE line in err that starts with the
 * checkpoint's path. All HDF5 calls run under hdf5_lock() (see hdf5_lock.h). */
#ifndef DDP_CHECKPOINT_H
#define DDP_CHECKPOINT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "model/optim.h"

#define CKPT_FORMAT "ddptrain-checkpoint"
#define CKPT_FORMAT_VERSION 1
/* The "architecture" attribute is model_architecture(m): "MiniResNet" (whose checkpoints also
 * record width and blocks), "resnet18", ..., or a network file's "network". */
#define CKPT_PATH_MAX 4096
#define CKPT_LATEST_NAME "latest"
#define CKPT_MAX_STEP (1L << 50)    /* epochs and steps beyond this are refused on load */
#define CKPT_MAX_WORLD (1L << 24)   /* ranks */

/* Indices into TrainState.amp. */
enum { AMP_LOSS_SCALE = 0, AMP_GROWTH_TRACKER = 1, AMP_STATE_N = 4 };

/* Where training stands: enough, with the configuration's seed, to resume the data order. */
typedef struct {
    long epoch;           /* epoch in progress, 0-based */
    long step_in_epoch;   /* optimizer steps completed in that epoch */
    long global_step;     /* optimizer steps completed in the whole run */
    int world_size;
    uint64_t seed;
    int has_amp;          /* amp[] holds mixed-precision loss-scaler state */
    double amp[AMP_STATE_N];
    /* What the data position depends on besides seed and world size (resume.h); 0 in
     * checkpoints written before they were recorded. */
    long batch_size, grad_accum_steps;
    long data_samples, data_shards;   /* of the training split */
    uint64_t data_id;                 /* dataloader_shard_list_hash */
    /* How the training split was held, which sets the sample order (dataloader.h): streamed
     * in chunks of data_chunk_images, shuffled in windows of data_window_chunks, or held in
     * memory and shuffled whole (both 0). has_data_order is 0 in checkpoints written before
     * it was recorded. */
    int has_data_order;
    long data_chunk_images, data_window_chunks;
} TrainState;

/* The moving average of the weights and buffers (ema.h), as the /ema group holds it, in host
 * memory: n_averaged 0 means none (nothing written, or the file has none). */
typedef struct {
    long n_averaged;
    double decay;
    float *params;        /* num_params floats, /model's layout */
    float *buffers;       /* num_buffers floats */
    int64_t *nbt;         /* num_batches_tracked per batch-norm layer (bn_info order) */
} CkptEma;

/* The dataset a run evaluated on, as /dataset holds it: present 0 means none. */
typedef struct {
    int present;
    float mean[3], std[3];  /* per channel, in units of pixel/255 */
    int num_classes;        /* of class_names */
    char **class_names;     /* num_classes names (malloc'd, each too), or NULL: the dataset names none */
} CkptDataset;

void ckpt_dataset_free(CkptDataset *d);

/* A checkpoint's /dataset into d (d->present 0 when the file has none): the normalisation
 * (finite, std above 0) and the class names, as many as the file's num_classes, none holding a
 * control character (shard_class_names.h's checks). 0, or -1 with one line in err naming the
 * file. */
int checkpoint_read_dataset(const char *path, CkptDataset *d, char *err, size_t errlen);

/* Writes the checkpoint file `path` atomically (see above). opt may be NULL (no optimizer
 * state is then written: SGD's, /optimizer/steps 0 and zero momentum). config_json may be NULL. */
int checkpoint_save(const char *path, const Model *m, const Optimizer *opt, const TrainState *ts,
                    const char *config_json, char *err, size_t errlen);

/* Loads `path` into m (parameters, BN running statistics, num_batches_tracked), opt (its state
 * tensors and step count; may be NULL) and ts (may be NULL). The file must be a ddptrain
 * checkpoint of the same architecture, width, blocks, num_classes and image size as m, with
 * every tensor present in the right shape and intact, and of opt's optimizer (any one of the
 * table's when opt is NULL). Everything is read into scratch memory
 * first: on error m, opt and ts are unchanged. Calls model_params_changed(m) on success. */
int checkpoint_load(const char *path, Model *m, Optimizer *opt, TrainState *ts, char *err, size_t errlen);

/* checkpoint_save with the running statistics of every rank of a run on several ranks:
 * rank_buffers (may be NULL: none) holds ts->world_size rows of m->num_buffers floats, row r
 * rank r's own statistics, written as /train_state/rank_buffers; m's buffers (their average)
 * go to /model as always. */
int checkpoint_save_ranks(const char *path, const Model *m, const Optimizer *opt, const TrainState *ts,
                          const float *rank_buffers, const char *config_json, char *err, size_t errlen);

/* checkpoint_load for rank `rank` of a run on `world_size` ranks: when the checkpoint was
 * written by a run of as many ranks and holds /train_state/rank_buffers, m's running
 * statistics are this rank's row of it and *own is set to 1; otherwise (a checkpoint of one
 * rank, of another number of ranks, or without the rows) they are /model's and *own = 0. The
 * rows are read and checked whether used or not, as checkpoint_verify does. */
int checkpoint_load_rank(const char *path, Model *m, Optimizer *opt, TrainState *ts, int rank, int world_size,
                         int *own, char *err, size_t errlen);

/* checkpoint_load_rank that also gives the file's /ema, when ema is not NULL: ema->n_averaged
 * is set (0 when the file has none) and, when above 0, decay and the arrays (allocated by the
 * caller: num_params, num_buffers and model_bn_count(m) elements) are filled. */
int checkpoint_load_ema(const char *path, Model *m, Optimizer *opt, TrainState *ts, int rank, int world_size,
                        int *own, CkptEma *ema, char *err, size_t errlen);

/* The same checks as checkpoint_load, reading every tensor, without changing anything. */
int checkpoint_verify(const char *path, const Model *m, char *err, size_t errlen);

/* The configuration JSON stored in a checkpoint (malloc'd, caller frees), or NULL with err. */
char *checkpoint_read_config(const char *path, char *err, size_t errlen);

/* ---- checkpoint directory ------------------------------------------------------------------- */

/* "<dir>/ckpt-<global_step 9 digits>.h5" into buf. */
void checkpoint_path(char *buf, size_t len, const char *dir, long global_step);
/* Returns 1 and sets *global_step when `name` (a base name) is ckpt-<digits>.h5. */
int checkpoint_parse_name(const char *name, long *global_step);

/* Points <dir>/latest at the base name of `path` (atomic replace). */
int checkpoint_set_latest(const char *dir, const char *path, char *err, size_t errlen);

/* Keeps the newest `keep` checkpoints of `dir` (by step) that open as ddptrain checkpoints,
 * and the one `latest` names; removes the other ckpt-*.h5 and stale temporary files.
 * Returns the number of files removed, or -1 with err. Not to be run while a checkpoint is
 * being written into the same directory by another thread (stale .tmp files are removed). */
int checkpoint_prune(const char *dir, int keep, char *err, size_t errlen);

/* Called by checkpoint_find_latest for each checkpoint it passes over, with the reason. */
typedef void (*CheckpointSkipFn)(void *ctx, const char *path, const char *reason);

/* The newest checkpoint in `dir` that passes checkpoint_verify against m: first the file
 * `latest` names, then the other ckpt-*.h5 newest first. Every file passed over is reported
 * through on_skip (may be NULL), so the caller can log "falling back to X because Y".
 * Returns 0 with the path in out; 1 when the directory holds no checkpoint at all (or does not
 * exist); -1 when checkpoints exist but none is usable (err says why the last one failed). */
int checkpoint_find_latest(const char *dir, const Model *m, char *out, size_t outlen,
                           CheckpointSkipFn on_skip, void *ctx, char *err, size_t errlen);

/* ---- background writer ----------------------------------------------------------------------
 * submit copies the state (parameters, buffers, num_batches_tracked, optimizer state: a few ms) and
 * returns; a thread writes the file, points `latest` at it and prunes the directory to `keep`
 * files. Only one write is in flight: submit first waits for the previous one. The HDF5 calls of
 * the thread take hdf5_lock(), so other threads may use HDF5 meanwhile if they take it too. */
typedef struct {
    int keep;                       /* checkpoints kept by the prune after each write (0: all) */
    int pending;                    /* a thread is running */
    pthread_t thread;
    int status;                     /* result of the last finished write */
    char err[1024];
    char path[CKPT_PATH_MAX];
    void *snap;                     /* the copied state (checkpoint_write.c), reused between writes */
    CkptDataset dataset;            /* written as /dataset into every file (checkpoint_writer_set_dataset) */
    double last_submit_sec, last_write_sec;   /* stall seen by the caller; the thread's write */
} CheckpointWriter;

void checkpoint_writer_init(CheckpointWriter *w, int keep);
/* Waits for a pending write, then frees the copies. */
void checkpoint_writer_free(CheckpointWriter *w);

/* Starts writing the state to `path` (a ckpt-*.h5 name inside the checkpoint directory). If a
 * write was pending it is waited for first: returns that write's status (0, or -1 with err),
 * or 0 if none was pending. opt and config_json may be NULL. */
int checkpoint_writer_submit(CheckpointWriter *w, const char *path, const Model *m, const Optimizer *opt,
                             const TrainState *ts, const char *config_json, char *err, size_t errlen);

/* checkpoint_writer_submit with every rank's running statistics (checkpoint_save_ranks);
 * rank_buffers is copied, as the rest of the state is. */
int checkpoint_writer_submit_ranks(CheckpointWriter *w, const char *path, const Model *m, const Optimizer *opt,
                                   const TrainState *ts, const float *rank_buffers, const char *config_json,
                                   char *err, size_t errlen);

/* checkpoint_writer_submit_ranks with the moving average (may be NULL; copied as the rest). */
int checkpoint_writer_submit_ema(CheckpointWriter *w, const char *path, const Model *m, const Optimizer *opt,
                                 const TrainState *ts, const float *rank_buffers, const CkptEma *ema,
                                 const char *config_json, char *err, size_t errlen);

/* Every checkpoint the writer writes holds d as /dataset (copied; NULL or d->present 0:
 * none); before the first submit. Class names hold no control character and are at most
 * SHARD_MAX_CLASS_NAME bytes (as a dataset's, data/shard_format.h). */
void checkpoint_writer_set_dataset(CheckpointWriter *w, const CkptDataset *d);

/* Blocks until the pending write (if any) is done; returns its status (0 when nothing was
 * pending), with its one-line error in err. */
int checkpoint_writer_wait(CheckpointWriter *w, char *err, size_t errlen);

#endif
