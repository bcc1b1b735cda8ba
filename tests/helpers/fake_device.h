/* SPDX-License-Identifier: BSD-3-Clause */
/* fake_device.h - the fake device module's guarded memory (fake_device_mem.c), which its
 * Backend (fake_device.c) wraps around the CPU backend's operations.
 *
 * The module stands in for ddptrain-cuda.so on a machine without a GPU: ddptrain --device cuda
 * loads it from DDPTRAIN_PLUGIN_DIR and trains through the same table as the CUDA module's,
 * with the same operations missing. It checks the host side's device discipline (which buffers
 * live on the device, that the host reaches them only through upload and download, that every
 * operand of an operation is device memory, what is refused) and nothing about the kernels:
 * the arithmetic is the CPU backend's. */
#ifndef DDP_FAKE_DEVICE_H
#define DDP_FAKE_DEVICE_H

#include <stddef.h>

#define FD_MAX_OPERANDS 16

/* The buffers one operation opened, closed again by fd_leave. */
typedef struct {
    int n;
    void *buf[FD_MAX_OPERANDS];
} FdCall;

/* A zeroed device buffer of `bytes` between guard pages, closed (PROT_NONE); its allocation
 * site is kept for the fault message. */
void *fd_alloc(size_t bytes);
void fd_release(void *p);
/* 1 when p lies in a device buffer or its guard pages. */
int fd_is_device(const void *p);
/* Dies with one line unless [p, p + bytes) lies inside one device buffer. */
void fd_check_range(const char *op, const void *p, size_t bytes);
/* Opens the buffers holding the n operands (NULL ones skipped) for the operation `op`; dies
 * with one line naming the operand when one is not device memory. Holds the module's lock
 * until fd_leave closes them again. */
void fd_enter(FdCall *call, const char *op, const char *names, const void *const *ptrs, int n);
void fd_leave(FdCall *call);
/* The SIGSEGV handler: a fault in a device buffer or its guards prints "device memory touched
 * by the host", the address, the buffer, its allocation site and the faulting stack, then
 * aborts; any other fault is left to the handler before it. */
void fd_install_handler(void);

#endif
