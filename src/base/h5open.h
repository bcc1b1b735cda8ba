/* SPDX-License-Identifier: BSD-3-Clause */
/* h5open.h - the checked way into an HDF5 file, its groups and its datasets, which every
 * reader of ddptrain (shards, checkpoints, --init_from) takes.
 *
 * HDF5 lets an object of one file stand for data kept elsewhere: an external link (a group or
 * dataset that is a name in another file), a dataset with external storage (its raw bytes in
 * any file of the file system, at an offset), and a virtual dataset (its elements mapped from
 * datasets of other files). HDF5 follows each silently on open or read: pointed at a FIFO the
 * reader hangs; pointed at any file the user can read, its bytes come back as pixels or
 * weights and can go on into a run's checkpoints. ddptrain writes none of these, nor does
 * ddptrain-data or h5py unless asked, so each is refused, in one line naming the file and the
 * object, before HDF5 opens what it points to.
 *
 * Soft links (a name for another path of the same file) are refused where a group or dataset
 * is expected too: ddptrain writes none, and a path that is all hard links is the only kind
 * the checks below can vouch for.
 *
 * Every function runs under hdf5_lock(), held by the caller. */
#ifndef DDP_H5OPEN_H
#define DDP_H5OPEN_H

#include <hdf5.h>
#include <stddef.h>

/* The checks of a file before HDF5 opens it: it exists and is a regular file (a FIFO would
 * block the open), readable, has HDF5's signature, and its metadata passes h5check_file.
 * `expected` ends the message of a file that is not one ("an HDF5 shard is expected").
 * Also makes sure external links cannot be followed (h5open_deny_external_links). 0, or -1
 * with "PATH: what is wrong" in err. */
int h5open_check_file(const char *path, const char *expected, char *err, size_t errlen);

/* Process-wide: replaces HDF5's external link class by one whose traversal fails, so that
 * no call (H5Lexists or H5Aexists_by_name on a path through one, H5Oopen...) can open
 * another file through a link, whatever check a reader forgot. Called by h5open_check_file;
 * ddptrain writes no external links. */
void h5open_deny_external_links(void);

/* Whether `path` (relative to loc, or absolute; "a/b/c") exists as a chain of hard links:
 * 1 when it does, 0 when a component is missing, -1 when a component is a soft, external or
 * user-defined link, with "'a/b' is an external link (to another file)" in why. No link is
 * followed before it is known to be a hard one. */
int h5open_exists(hid_t loc, const char *path, char *why, size_t whylen);

/* 0 unless dataset ds keeps its elements outside its file: external storage (raw data in
 * other files) or a virtual dataset; else -1 with what it is in why. It reads the dataset's
 * creation properties only: no raw data, no other file. */
int h5open_check_storage(hid_t ds, char *why, size_t whylen);

/* Opens dataset `path` of loc after h5open_exists, then checks it with h5open_check_storage
 * and h5check_compact_storage. -1 with why when it cannot: *missing (if not NULL) is 1 when
 * it does not exist, 0 when it was refused or HDF5 could not open it. */
hid_t h5open_dataset(hid_t loc, const char *path, int *missing, char *why, size_t whylen);

/* Opens group `path` of loc after h5open_exists; as h5open_dataset. */
hid_t h5open_group(hid_t loc, const char *path, int *missing, char *why, size_t whylen);

#endif
