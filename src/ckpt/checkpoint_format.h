/* SPDX-License-Identifier: BSD-3-Clause */
/* checkpoint_format.h - private to src/ckpt: what reading, writing and the directory code of
 * checkpoints share, so that every side opens a file the same way and words a failure the same
 * way, and the /dataset record's memory (ckpt_dataset_free, checkpoint.h; the copy below), so
 * that neither side calls the other for it. checkpoint.h describes the file layout. */
#ifndef DDP_CHECKPOINT_FORMAT_H
#define DDP_CHECKPOINT_FORMAT_H

#include <hdf5.h>
#include <stddef.h>

#include "checkpoint.h"

/* Why the last HDF5 call failed, in a few words ("No space left on device"). Under hdf5_lock(),
 * right after the failing call: the next call clears the error stack. */
void checkpoint_hdf5_reason(char *buf, size_t len);

/* File access properties for creating and opening a checkpoint, under hdf5_lock() (H5Pclose
 * them). */
hid_t checkpoint_file_access_plist(void);

/* The reader's deep check: 0 when `path` is a ddptrain checkpoint whose every dataset reads back
 * intact, else -1 with err; takes hdf5_lock() itself. Needs no model, so that the prune can tell
 * good files from damaged ones. */
int checkpoint_probe_data(const char *path, char *err, size_t errlen);

/* A deep copy of src into dst (the names each their own; ckpt_dataset_free frees it). The names
 * are at most SHARD_MAX_CLASS_NAME bytes, as checkpoint_writer_set_dataset requires. */
void ckpt_dataset_copy(CkptDataset *dst, const CkptDataset *src);

#endif
