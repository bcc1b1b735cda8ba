/* SPDX-License-Identifier: BSD-3-Clause */
/* onednn.c - see onednn.h. */
#include "build_config.h"

#ifdef HAVE_DNNL
#include "onednn.h"

#include <stdio.h>
#include <string.h>

#include "base/util.h"

void dnn_fail(dnnl_status_t st, const char *call, const char *file, int line) {
    char d[64];
    snprintf(d, sizeof d, "dnnl status %d", (int)st);
    fail_at(file, line, call, d);
}

/* Process-wide backend resources. The engine and stream are what oneDNN expects one of per
 * device. The workspace holds the layout-converted activations of the call in progress: those
 * live only inside one conv2d_* call, so one buffer serves every layer instead of each layer
 * keeping tens of MB of its own. The scratchpad is the same idea for oneDNN's own temporary
 * buffers: every primitive is created with a user-managed scratchpad, and all of them share
 * this one (left to itself oneDNN 2.x gives each primitive a private one for its lifetime).
 * Calls come from a single thread (the model's). */
static struct {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    float *ws;
    size_t ws_bytes;
    unsigned char *sp;  /* scratchpad, followed by SP_GUARD bytes of guard */
    size_t sp_bytes;
} g_dnn;

void dnn_init(void) {
    if (g_dnn.engine) return;
    DNNL_CHECK(dnnl_engine_create(&g_dnn.engine, dnnl_cpu, 0));
    DNNL_CHECK(dnnl_stream_create(&g_dnn.stream, g_dnn.engine, dnnl_stream_default_flags));
}

dnnl_engine_t dnn_engine(void) { return g_dnn.engine; }

float *dnn_ws(void) { return g_dnn.ws; }

/* Grow the shared workspace to at least `need` bytes. Growing moves it, so each conv call
 * reserves its whole need first and only then binds pointers into it. */
void dnn_ws_reserve(size_t need) {
    if (need <= g_dnn.ws_bytes) return;
    free(g_dnn.ws);
    g_dnn.ws = alignedAllocCheck(need);
    g_dnn.ws_bytes = need;
}

static void sp_reserve(size_t need) {
    if (need <= g_dnn.sp_bytes) return;
    free(g_dnn.sp);
    g_dnn.sp = alignedAllocCheck(need + SP_GUARD);
    g_dnn.sp_bytes = need;
}

void dnn_exec(const Prim *p, int nargs, const dnnl_exec_arg_t *args) {
    dnnl_exec_arg_t a[8];
    CHECK(nargs < 8);
    memcpy(a, args, (size_t)nargs * sizeof *a);
    if (p->sp_mem) {
        sp_reserve(p->sp_bytes);
        DNNL_CHECK(dnnl_memory_set_data_handle(p->sp_mem, g_dnn.sp));
        a[nargs].arg = DNNL_ARG_SCRATCHPAD;
        a[nargs++].memory = p->sp_mem;
    } else if (!g_dnn.sp) {
        sp_reserve(64);
    }
    unsigned char *guard = g_dnn.sp + p->sp_bytes;
    memset(guard, SP_GUARD_BYTE, SP_GUARD);
    DNNL_CHECK(dnnl_primitive_execute(p->p, g_dnn.stream, nargs, a));
    DNNL_CHECK(dnnl_stream_wait(g_dnn.stream));
    for (size_t i = 0; i < SP_GUARD; i++)
        if (guard[i] != SP_GUARD_BYTE)
            die("internal error: oneDNN's %s (%s) wrote past the end of its %zu-byte scratchpad; "
                "its results cannot be trusted", p->what, p->impl, p->sp_bytes);
}

/* Every primitive descriptor is created with these attributes: a user-managed scratchpad. */
dnnl_primitive_attr_t dnn_attr_new(void) {
    dnnl_primitive_attr_t attr;
    DNNL_CHECK(dnnl_primitive_attr_create(&attr));
    DNNL_CHECK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    return attr;
}

Prim dnn_prim_new(const_dnnl_primitive_desc_t pd, const char *what) {
    Prim p = { .what = what };
    DNNL_CHECK(dnnl_primitive_create(&p.p, pd));
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    p.sp_bytes = md ? dnnl_memory_desc_get_size(md) : 0;
    if (p.sp_bytes) {
        p.sp_bytes = (p.sp_bytes + 63) / 64 * 64;
        DNNL_CHECK(dnnl_memory_create(&p.sp_mem, md, g_dnn.engine, DNNL_MEMORY_NONE));
    }
    const char *impl = NULL;
    DNNL_CHECK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
    snprintf(p.impl, sizeof p.impl, "%s", impl ? impl : "?");
    return p;
}

void dnn_prim_free(Prim *p) {
    if (p->sp_mem) DNNL_CHECK(dnnl_memory_destroy(p->sp_mem));
    if (p->p) DNNL_CHECK(dnnl_primitive_destroy(p->p));
    memset(p, 0, sizeof *p);
}

dnnl_memory_t dnn_mem_new(const dnnl_memory_desc_t *md, void *handle) {
    dnnl_memory_t m;
    DNNL_CHECK(dnnl_memory_create(&m, md, g_dnn.engine, handle));
    return m;
}

void dnn_mem_set(dnnl_memory_t m, const void *p) {
    /* oneDNN takes non-const handles for inputs too; it never writes to a source argument. */
    DNNL_CHECK(dnnl_memory_set_data_handle(m, (void *)p));
}

Prim dnn_reorder_new(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                        int accumulate) {
    dnnl_primitive_attr_t attr = dnn_attr_new();
    dnnl_post_ops_t po = NULL;
    if (accumulate) {
        /* sum post-op: to = from + 1.0 * to, i.e. += into the gradient buffer. */
        DNNL_CHECK(dnnl_post_ops_create(&po));
        DNNL_CHECK(dnnl_post_ops_append_sum(po, 1.0f));
        DNNL_CHECK(dnnl_primitive_attr_set_post_ops(attr, po));
    }
    dnnl_primitive_desc_t pd;
    DNNL_CHECK(dnnl_reorder_primitive_desc_create(&pd, from, g_dnn.engine, to, g_dnn.engine, attr));
    Prim p = dnn_prim_new(pd, "reorder");
    DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
    if (po) DNNL_CHECK(dnnl_post_ops_destroy(po));
    DNNL_CHECK(dnnl_primitive_attr_destroy(attr));
    return p;
}


void dnn_port_init(Port *pt, const dnnl_memory_desc_t *user_md, const dnnl_memory_desc_t *prim_md,
                      int is_input, size_t *ws_top) {
    memset(pt, 0, sizeof *pt);
    pt->user = dnn_mem_new(user_md, DNNL_MEMORY_NONE);
    if (dnnl_memory_desc_equal(user_md, prim_md)) {
        pt->prim = pt->user;
        return;
    }
    pt->prim = dnn_mem_new(prim_md, DNNL_MEMORY_NONE);
    pt->reorder = is_input ? dnn_reorder_new(user_md, prim_md, 0) : dnn_reorder_new(prim_md, user_md, 0);
    pt->bytes = (dnnl_memory_desc_get_size(prim_md) + 63) / 64 * 64;
    pt->ws_off = *ws_top;
    *ws_top += pt->bytes;
}

void dnn_port_free(Port *pt) {
    if (pt->prim && pt->prim != pt->user) DNNL_CHECK(dnnl_memory_destroy(pt->prim));
    if (pt->user) DNNL_CHECK(dnnl_memory_destroy(pt->user));
    dnn_prim_free(&pt->reorder);
    memset(pt, 0, sizeof *pt);
}

/* Point the port at the user's tensor (and at the workspace), converting inputs in. */
void dnn_port_bind(Port *pt, const void *user_ptr, int is_input) {
    dnn_mem_set(pt->user, user_ptr);
    if (pt->prim == pt->user) return;
    dnn_mem_set(pt->prim, (char *)g_dnn.ws + pt->ws_off);
    if (is_input) {
        dnnl_exec_arg_t a[2] = { { DNNL_ARG_FROM, pt->user }, { DNNL_ARG_TO, pt->prim } };
        dnn_exec(&pt->reorder, 2, a);
    }
}

/* After the primitive ran: convert an output back into the user's NHWC tensor. */
void dnn_port_flush(Port *pt) {
    if (pt->prim == pt->user) return;
    dnnl_exec_arg_t a[2] = { { DNNL_ARG_FROM, pt->prim }, { DNNL_ARG_TO, pt->user } };
    dnn_exec(&pt->reorder, 2, a);
}

#endif /* HAVE_DNNL */
