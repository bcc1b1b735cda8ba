/* SPDX-License-Identifier: BSD-3-Clause */
/* init_from.h - --init_from FILE: a run's starting weights from an HDF5 file whose /model group
 * holds one dataset per state_dict name, as a checkpoint's does and as
 * scripts/torch_to_ddptrain.py writes a PyTorch state_dict (torchvision's pretrained weights,
 * say). A tensor of another shape (the classifier of another class count: fine-tuning) keeps
 * its initialisation and is named; a tensor the network has and the file lacks, or one the file
 * has and the network lacks, is an error. */
#ifndef DDP_INIT_FROM_H
#define DDP_INIT_FROM_H

#include <stddef.h>

#include "model/model.h"

/* Loads path's /model into m (any backend). Returns 0 with what was loaded and kept in note,
 * or -1 with one line in err naming the file; m is then unchanged. */
int init_from_file(Model *m, const char *path, char *note, size_t notelen, char *err, size_t errlen);

#endif
