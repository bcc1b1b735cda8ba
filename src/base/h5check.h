/* SPDX-License-Identifier: BSD-3-Clause */
/* h5check.h - a bounds check of an HDF5 file's metadata, made with plain reads before HDF5
 * opens the file, and checks of datasets HDF5 has opened.
 *
 * HDF5 1.10 (Debian 12's) decodes an attribute message without checking the sizes it reads
 * from the file against the message: a name, datatype or dataspace length that runs past the
 * message makes H5Aexists, H5Aopen and H5Aread read past a heap buffer (found by fuzzing the
 * shard and checkpoint readers; one such checkpoint crashed the reader). Every attribute ddptrain
 * reads sits on the root group, and H5Aexists decodes every attribute message there, so this
 * walks the root group's object header (both header versions, with continuation blocks) and
 * refuses the file unless each attribute message holds together: a NUL-terminated name, an
 * integer, float or fixed-length string datatype, a dataspace of at most 32 dimensions, and
 * the data, all inside the message. Attributes in dense storage and shared attribute messages,
 * which ddptrain, h5py and HDF5's defaults never write for a handful of attributes, are
 * refused too.
 *
 * Nor does HDF5 1.10 check the addresses in an old-style group (a symbol table message: a v1
 * B-tree of symbol table nodes, names in a local heap; what h5py and ddptrain-data write, and
 * the fuzz seeds): a B-tree child at the undefined address made H5Gget_info read a symbol
 * table node from address 2^64 - 1 and crash. So every such group reachable from the root is
 * walked too: each B-tree node, symbol table node and local heap must lie inside the file
 * with its signature, levels must descend, node entry counts stay within the superblock's K
 * values, names stay inside the heap, and every object linked is checked the same way
 * (attributes included; dense and shared ones are left to HDF5 below the root, since ddptrain
 * reads none of them).
 *
 * New-style groups (link messages, as ddptrain's checkpoints hold) are walked as well, to each
 * object's header, where a chunked dataset's layout must give no dimension of 0 and its chunk
 * index (a v1 B-tree) must list chunks inside the file, of a chunk's size, in order; links in
 * dense storage (a fractal heap and a v2 B-tree) are refused: HDF5 1.10 divided by a chunk
 * dimension of 0 and opened a damaged dense group's index at any address. And the root's
 * variable-length attributes (h5py's str) are followed into the global heap, whose object
 * sizes HDF5 trusts when it copies them.
 *
 * It does not verify checksums or anything HDF5 checks itself. */
#ifndef DDP_H5CHECK_H
#define DDP_H5CHECK_H

#include <hdf5.h>
#include <stddef.h>

/* 0 when the root group's attribute messages and the old-style groups of the HDF5 file at
 * `path` are well-formed; else -1 with "PATH: what is wrong" in err (for a group, "PATH: group
 * '/train_state': ..."). A file without an HDF5 signature passes: HDF5's own open reports it.
 * It reads the file's group metadata only: tens of microseconds for a shard or checkpoint. */
int h5check_file(const char *path, char *err, size_t errlen);

/* 0 unless dataset `ds` is stored compact (inside its header) with another byte count than
 * its elements take; else -1 with "compact storage of N bytes for M bytes of elements" in why.
 * HDF5 1.10 copies the elements' size out of the compact buffer without comparing the two: a
 * fuzzed checkpoint declaring 1 byte for a 576-byte tensor read past a heap buffer. */
int h5check_compact_storage(hid_t ds, char *why, size_t whylen);

/* 0 unless a chunk of dataset `ds` that the selection [start, start + count) touches is
 * stored with another byte count than a chunk holds (unfiltered: the chunk's elements;
 * Fletcher-32 alone: 4 more); else -1 with the chunk and the two sizes in why. start and
 * count have the dataset's rank (at most 32); NULL for the whole dataset. HDF5 1.10 copies a
 * whole chunk out of a buffer sized from the chunk index (a fuzzed shard read past a heap
 * buffer). Chunks through other filters (deflate, shuffle) decode to sizes only the filter
 * knows, and pass unchecked. A selection of more than 4096 chunks that spans more chunks than
 * the file stores is refused too ("chunks never written?"). */
int h5check_chunks(hid_t ds, const hsize_t *start, const hsize_t *count, char *why, size_t whylen);

/* 0 unless dataset `ds` lacks storage for some of its elements: contiguous storage smaller
 * than its elements take (never written: HDF5 allocates it on the first write), or fewer
 * chunks stored than cover its extent; else -1 with the two counts in why. HDF5 reads what
 * was never written as the fill value (zeros), silently. Compact storage is checked by
 * h5check_compact_storage; any other layout passes. */
int h5check_allocated(hid_t ds, char *why, size_t whylen);

/* 0 unless dataset `ds` is contiguous with storage allocated but smaller than its elements
 * take; else -1 with the two sizes in why. HDF5 1.10 sizes its sieve buffer from the layout
 * message and copies the elements out of it: a fuzzed shard's 4 labels declared in 16 bytes
 * read past a heap buffer. Storage never allocated reads as the fill value and passes here
 * (h5check_allocated refuses it where that matters). h5open_dataset checks every dataset. */
int h5check_contiguous(hid_t ds, char *why, size_t whylen);

#endif
