/* SPDX-License-Identifier: BSD-3-Clause */
/* shard_attrs.h - private to src/data: the readers of a shard's file attributes (shard_attrs.c)
 * that shard_read.c validates a shard with. Each reads one attribute of the open `file` under
 * hdf5_lock() and returns 0, or -1 with one line in err that starts with `path`. */
#ifndef DDP_SHARD_ATTRS_H
#define DDP_SHARD_ATTRS_H

#include <stddef.h>

#include <hdf5.h>

#include "shard_format.h"

/* `num_classes`: required, a single integer in [1, SHARD_MAX_CLASSES]. */
int shard_attr_num_classes(hid_t file, const char *path, int *out, char *err, size_t errlen);

/* `name` ("mean", "std"): 3 numbers, read as floats (ranges are the caller's to check). */
int shard_attr_float3(hid_t file, const char *path, const char *name, float out[3], char *err, size_t errlen);

/* `encoding`: SHARD_ENC_RAW when absent or "raw", SHARD_ENC_JPEG for "jpeg". */
int shard_attr_encoding(hid_t file, const char *path, int *out, char *err, size_t errlen);

/* `image_size` of a JPEG shard: required, in [1, SHARD_MAX_JPEG_SIZE]. */
int shard_attr_image_size(hid_t file, const char *path, int *out, char *err, size_t errlen);

#endif
