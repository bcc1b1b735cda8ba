/* SPDX-License-Identifier: BSD-3-Clause */
/* hdf5_lock.h - one process-wide lock around every use of the HDF5 library.
 *
 * The HDF5 that distributions ship (Debian's libhdf5-dev included) is built without its
 * thread-safety option: two threads inside the library at the same time corrupt its global
 * state (open-object tables, error stack, free lists). ddptrain calls HDF5 from more than one
 * thread - the data loader's prefetch thread reads shards while the checkpoint writer's thread
 * writes a checkpoint - so every HDF5 call sequence in the program runs between hdf5_lock() and
 * hdf5_unlock(). Hold it briefly (one dataset read or write, not a whole file) so a checkpoint
 * being written does not stall the next batch for the whole write.
 *
 * The lock is recursive, so a function that takes it may call another that takes it too. */
#ifndef DDP_HDF5_LOCK_H
#define DDP_HDF5_LOCK_H

void hdf5_lock(void);
void hdf5_unlock(void);

#endif
