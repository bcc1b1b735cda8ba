/* SPDX-License-Identifier: BSD-3-Clause */
/* init_from.h - --init_from FILE: a run's starting weights from an HDF5 file whose /model group
 * holds one dataset per state_dict name, as a checkpoint's does and as
 * scripts/torch_to_ddptrain.py writes a PyTorch state_dict (torchvision's pretrained weights,
 * say). A tensor of another shape (the classifier of another class count: fine-tuning) keeps
 * its initialisation and is named; a tensor the network has and the file lacks, or one the file
 * has and the network lacks, is an error.
 *
 * The file gets the checks of every HDF5 file ddptrain reads (base/h5open.h: a regular file,
 * the metadata pre-walk, hard links only, no data in another file), each tensor's storage
 * those of a checkpoint's (every chunk present and of its size), and its values: NaN, an
 * infinity, a negative running_var or num_batches_tracked are refused, naming the tensor. The
 * Fletcher-32 checksum a checkpoint's tensors must carry is not asked of this file: users
 * convert weights with h5py (torch_to_ddptrain.py), which writes unfiltered datasets; where a
 * tensor has the filter (a checkpoint given as --init_from), HDF5 verifies it on the read. */
#ifndef DDP_INIT_FROM_H
#define DDP_INIT_FROM_H

#include <stddef.h>

#include "model/model.h"

/* Loads path's /model into m (any backend). Returns 0 with what was loaded and kept in note,
 * or -1 with one line in err naming the file; m is then unchanged. */
int init_from_file(Model *m, const char *path, char *note, size_t notelen, char *err, size_t errlen);

#endif
