/* SPDX-License-Identifier: BSD-3-Clause */
/* onednn.h - the CPU backend's oneDNN context, which conv_cpu.c's primitives share: the engine
 * and stream, the workspace and the scratchpad every primitive uses (with a guard after it),
 * memory objects, reorders, and ports (a caller's NHWC tensor and its copy in the layout a
 * primitive wants). With oneDNN only (HAVE_DNNL). Calls come from a single thread (the
 * model's). */
#ifndef DDP_ONEDNN_H
#define DDP_ONEDNN_H

#include <stddef.h>

#include <oneapi/dnnl/dnnl.h>

void dnn_fail(dnnl_status_t st, const char *call, const char *file, int line);
#define DNNL_CHECK(call) do { dnnl_status_t st_ = (call); \
    if (st_ != dnnl_success) dnn_fail(st_, #call, __FILE__, __LINE__); } while (0)

/* A guard zone after each primitive's scratchpad, filled with a pattern before the primitive
 * runs and checked after: a kernel that writes past the scratchpad it asked for (oneDNN 2.6's
 * jit_1x1:avx2 did, see conv_cpu.c's subsample) is reported as an error instead of corrupting memory
 * that is silently used later. Checking 4 KiB costs nothing next to a convolution. */
#define SP_GUARD 4096
#define SP_GUARD_BYTE 0xA5

/* A primitive with the scratchpad it needs. */
typedef struct Prim {
    dnnl_primitive_t p;
    dnnl_memory_t sp_mem;   /* NULL when sp_bytes == 0 */
    size_t sp_bytes;
    const char *what;       /* for the guard's error message */
    char impl[64];          /* oneDNN's implementation name */
} Prim;

/* The engine and stream, made once. */
void dnn_init(void);
dnnl_engine_t dnn_engine(void);

/* The shared workspace: grown to at least `need` bytes, which moves it, so each call reserves
 * its whole need first and only then binds pointers into it (dnn_ws). */
void dnn_ws_reserve(size_t need);
float *dnn_ws(void);

/* Runs p with its scratchpad (the shared one) and checks the guard after it. */
void dnn_exec(const Prim *p, int nargs, const dnnl_exec_arg_t *args);

/* Attributes of every primitive descriptor: a user-managed scratchpad. */
dnnl_primitive_attr_t dnn_attr_new(void);
Prim dnn_prim_new(const_dnnl_primitive_desc_t pd, const char *what);
void dnn_prim_free(Prim *p);
dnnl_memory_t dnn_mem_new(const dnnl_memory_desc_t *md, void *handle);
/* oneDNN takes non-const handles for inputs too; it never writes to a source argument. */
void dnn_mem_set(dnnl_memory_t m, const void *p);
/* from -> to, or to += from with accumulate */
Prim dnn_reorder_new(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to, int accumulate);

/* An activation argument of a primitive: the user's NHWC tensor and, when the primitive wants
 * another layout (Winograd wants nChw16c), a converted copy in the workspace with the reorder
 * that produces it (inputs) or consumes it (outputs). */
typedef struct Port {
    dnnl_memory_t user;      /* NHWC, handle set per call */
    dnnl_memory_t prim;      /* == user when no conversion is needed */
    Prim reorder;
    size_t ws_off, bytes;    /* place of the converted copy in the workspace */
} Port;

/* A port of user_md to prim_md, its converted copy (if any) placed at *ws_top in the workspace
 * (moved on); bind points it at the caller's tensor, converting an input in; flush converts an
 * output back. */
void dnn_port_init(Port *pt, const dnnl_memory_desc_t *user_md, const dnnl_memory_desc_t *prim_md, int is_input,
                   size_t *ws_top);
void dnn_port_free(Port *pt);
void dnn_port_bind(Port *pt, const void *user_ptr, int is_input);
void dnn_port_flush(Port *pt);

#endif
