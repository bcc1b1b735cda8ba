/* SPDX-License-Identifier: BSD-3-Clause */
/* shard_class_names.h - private to src/data (and to a checkpoint's /dataset, which
 * checkpoint_read.c reads with the same checks): where a shard keeps its class names, written
 * and read back (shard_class_names.c). Up to SHARD_ATTR_MAX_CLASS_NAMES classes in the file
 * attribute `class_names`, as h5py writes a list of str; more in a dataset `class_names`:
 * an attribute is one message of the root group's object header, at most 64 KiB, and a
 * variable-length string takes 16 bytes of it, so some 4,090 names at most (ImageNet-21k has
 * 21,841). Dense attribute storage would lift the limit, but the pre-walk of h5check.h
 * refuses it on the root group, where HDF5 1.10 decoded it unchecked. */
#ifndef DDP_SHARD_CLASS_NAMES_H
#define DDP_SHARD_CLASS_NAMES_H

#include <stddef.h>

#include <hdf5.h>

#include "shard_format.h"

/* Writes the num_classes names (none holding a control character, each at most
 * SHARD_MAX_CLASS_NAME bytes) to the open file being made: as the attribute, or beyond
 * SHARD_ATTR_MAX_CLASS_NAMES as a 1-D dataset of fixed-length UTF-8 strings (as long as the
 * longest name, NUL-padded, contiguous: no heap, nothing for a reader to follow). 0 or -1. */
int shard_class_names_write(hid_t file, int num_classes, char *const *names);

/* Reads the names from the attribute or the dataset `class_names` of the open `file` (or group): the
 * attribute of fixed- or variable-length strings, the dataset of fixed-length ones and one
 * dimension; num_classes of them, none holding a control character: *out malloc'd, as ShardAttrs.class_names
 * (shard_attrs_free), or NULL when the file has neither. Both present is an error, so is
 * anything else wrong: -1 with one line in err that starts with `path`. */
int shard_class_names_read(hid_t file, const char *path, int num_classes, char ***out, char *err,
                           size_t errlen);

#endif
