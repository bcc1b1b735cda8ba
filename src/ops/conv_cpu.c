/* SPDX-License-Identifier: BSD-3-Clause */
/* conv_cpu.c - see conv_cpu.h.
 *
 * Convolutions go through oneDNN when it is available (HAVE_DNNL), with winograd.c's
 * F(4x4, 3x3) taking the 3x3 stride-1 convs and depthwise.c the depthwise convs where they
 * measured faster, and through the direct loops of the reference path (conv_ref.c) otherwise. A grouped
 * convolution's weights are oneDNN's GOIHW, a dilated one's descriptors its dilated ones. Every result depends only on the data and the
 * shapes, never on the number of threads or their scheduling: a resumed run reproduces bit for
 * bit. */
#include "build_config.h"

#include "conv_cpu.h"

#include <string.h>

#include "base/util.h"

#ifdef HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>

#include "cpu_isa.h"
#include "onednn.h"
#include "depthwise.h"
#include "winograd.h"
#endif

/* ======================================================================================
 * oneDNN convolution.
 * ====================================================================================== */
#ifdef HAVE_DNNL

/* The settings of the convolutions initialised from now on, and what the bf16 plans found. */
static struct {
    int winograd;   /* 1: Winograd for 3x3 stride-1 convs where oneDNN has it */
    int own_winograd;   /* 1: winograd.c where it is selected (wino_selected) */
    int own_depthwise;  /* 1: depthwise.c where it is selected (dw_selected) */
    int bf16;           /* 1: bfloat16 through oneDNN (conv2d_use_bf16) */
    int bf16_fallbacks; /* plans that stayed float32: oneDNN had only its reference bf16 code */
    struct Narrow *narrow;   /* conv2d_narrow_bf16's reorders, one per length */
} g_dnnl = { 1, 1, 1, 0, 0, NULL };

/* A copy of the OIHW master weights in a layout some primitive asked for. */
typedef struct WeightCopy {
    dnnl_memory_desc_t md;
    dnnl_memory_t mem;        /* owns its buffer */
    dnnl_memory_t user;       /* OIHW (GOIHW) view of the master, handle set on refresh */
    Prim reorder;             /* OIHW (GOIHW) -> md */
    unsigned version;         /* impl->w_version this copy was made from */
    const float *src;         /* and from which master buffer */
} WeightCopy;

/* Primitives for one input shape (N, H, W). */
typedef struct ConvPlan {
    int N, H, W;
    Prim fwd, bwd_data, bwd_w;
    dnnl_memory_desc_t w_fwd_md, w_bwd_md;
    Port x_f, y_f;                  /* forward: src, dst */
    Port dy_d, dx_d;                /* backward data: diff_dst, diff_src */
    Port x_w, dy_w;                 /* backward weights: src, diff_dst */
    int dy_shared;                  /* backward weights reads dy_d's converted copy */
    dnnl_memory_t dw_prim, dw_user; /* diff weights in the primitive's layout; OIHW gradient */
    Prim dw_reorder;                /* dw_prim -> dw_user with accumulation */
    size_t ws_fwd, ws_bwd;          /* workspace bytes needed by forward / backward */
    size_t dw_off;                  /* dw_prim's place in the workspace */
    int sub;                        /* strided 1x1: oneDNN sees the subsampled input, stride 1 */
    int bf16;                       /* src, weights and diff_dst in bfloat16 (conv2d_use_bf16) */
    size_t wf_off, wb_off;          /* bf16: the weights' copies for forward and backward-data in the
                                     * workspace (weights_in_ws), none held per convolution */
    size_t sub_bytes;               /* that input (at workspace offset 0) and its gradient (next) */
    struct ConvPlan *next;
} ConvPlan;

/* Forward and backward-data want one layout each, but Winograd's layout can depend on the batch
 * size too; past this many the oldest copy is recycled. */
#define MAX_WEIGHT_COPIES 6

typedef struct ConvImpl {
    ConvPlan *plans;
    WeightCopy wc[MAX_WEIGHT_COPIES];
    int n_wc, next_evict;
    unsigned w_version;
    int winograd;   /* g_dnnl.winograd when the conv was initialised */
    int own_winograd;               /* g_dnnl.own_winograd, likewise */
    int own_depthwise;              /* g_dnnl.own_depthwise, likewise */
    int bf16;                       /* g_dnnl.bf16, likewise */
    int in_bf16, out_bf16;          /* conv2d_bf16_io: x, y bfloat16 NHWC */
    int avx512;                     /* the ISA oneDNN and depthwise.c run is AVX-512 (cpu_isa.h) */
    struct WinoPlan *wino_plans;    /* winograd.c's plans, see wino_plan_get */
    char wino_name[32];
    char dw_name[32];
} ConvImpl;

static dnnl_memory_desc_t md4t(int a, int b, int c, int d, dnnl_format_tag_t tag, dnnl_data_type_t dt) {
    dnnl_memory_desc_t md;
    dnnl_dims_t dims = { a, b, c, d };
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&md, 4, dims, dt, tag));
    return md;
}

static dnnl_memory_desc_t md4(int a, int b, int c, int d, dnnl_format_tag_t tag) {
    return md4t(a, b, c, d, tag, dnnl_f32);
}

/* The weights as oneDNN sees them: OIHW, or for a grouped conv GOIHW [G, C_out/G, C_in/G, k, k],
 * which is the same bytes as PyTorch's [C_out, C_in/G, k, k]. `tag` dnnl_format_tag_any lets
 * the primitive choose. */
static dnnl_memory_desc_t w_md_t(const ConvShape *sh, int any, dnnl_data_type_t dt) {
    if (sh->groups == 1)
        return md4t(sh->C_out, sh->C_in, sh->k, sh->kw, any ? dnnl_format_tag_any : dnnl_oihw, dt);
    const int G = sh->groups;
    dnnl_memory_desc_t md;
    dnnl_dims_t dims = { G, sh->C_out / G, sh->C_in / G, sh->k, sh->kw };
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&md, 5, dims, dt, any ? dnnl_format_tag_any : dnnl_goihw));
    return md;
}

static dnnl_memory_desc_t w_md(const ConvShape *sh, int any) {
    return w_md_t(sh, any, dnnl_f32);
}

static dnnl_primitive_desc_t pd_new(const dnnl_convolution_desc_t *cd, const_dnnl_primitive_desc_t hint) {
    dnnl_primitive_desc_t pd;
    dnnl_primitive_attr_t attr = dnn_attr_new();
    DNNL_CHECK(dnnl_primitive_desc_create(&pd, cd, attr, dnn_engine(), hint));
    DNNL_CHECK(dnnl_primitive_attr_destroy(attr));
    return pd;
}

/* The same, or NULL where oneDNN has no implementation for it (Winograd on most ISAs, bf16
 * below AVX-512). */
static dnnl_primitive_desc_t pd_try_hint(const dnnl_convolution_desc_t *cd, const_dnnl_primitive_desc_t hint) {
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = dnn_attr_new();
    if (dnnl_primitive_desc_create(&pd, cd, attr, dnn_engine(), hint) != dnnl_success) pd = NULL;
    DNNL_CHECK(dnnl_primitive_attr_destroy(attr));
    return pd;
}

static dnnl_primitive_desc_t pd_try(const dnnl_convolution_desc_t *cd) {
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = dnn_attr_new();
    if (dnnl_primitive_desc_create(&pd, cd, attr, dnn_engine(), NULL) != dnnl_success) pd = NULL;
    DNNL_CHECK(dnnl_primitive_attr_destroy(attr));
    return pd;
}

static const dnnl_memory_desc_t *q_md(const_dnnl_primitive_desc_t pd, dnnl_query_t what) {
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, what, 0);
    CHECK(md != NULL);
    return md;
}

/* bf16: the primitives read src, weights and diff_dst in bfloat16 (the ports and weights_get
 * round the float32 tensors to nearest even on the way in), accumulate in float32, and write
 * dst and diff_src rounded to bfloat16 as torch.autocast's convolution returns them (the ports
 * widen them back into the float32 NHWC tensors: the activations stay float32 between
 * operations, holding bf16 values after a convolution), and diff_weights in float32 for the
 * float32 master weights. */
static ConvPlan *plan_new(const Conv2d *c, int N, int H, int W, int bf16) {
    const ConvShape *sh = &c->shape;
    const ConvImpl *im = c->impl;
    ConvPlan *pl = callocCheck(1, sizeof *pl);
    pl->N = N; pl->H = H; pl->W = W;
    pl->bf16 = bf16;
    const dnnl_data_type_t lp = bf16 ? dnnl_bf16 : dnnl_f32;
    const int Ho = conv_out_size(sh, H), Wo = conv_out_w(sh, W);
    /* A strided 1x1 conv is handed to oneDNN as a unit-stride one on the subsampled input. The
     * same holds grouped (each output pixel still reads one input pixel, all its channels kept)
     * and dilated (a 1x1 kernel has no taps to space). */
    pl->sub = sh->k == 1 && sh->kw == 1 && sh->pad == 0 && sh->padw == 0 && sh->stride > 1;
    const int s = pl->sub ? 1 : sh->stride;
    if (pl->sub) { H = Ho; W = Wo; }
    pl->sub_bytes = pl->sub ? ((size_t)N * H * W * sh->C_in * sizeof(float) + 63) / 64 * 64 : 0;
    const dnnl_dims_t strides = { s, s }, pad_l = { sh->pad, sh->padw };
    /* oneDNN counts dilation from 0 (taps adjacent), PyTorch from 1 */
    const dnnl_dims_t dilates = { sh->dilation - 1, sh->dilation - 1 };
    const int dilated = sh->dilation > 1;
    /* Right padding that makes the window count come out exactly Ho x Wo (may be < pad). */
    const int span = sh->dilation * (sh->k - 1) + 1, span_w = sh->dilation * (sh->kw - 1) + 1;
    const dnnl_dims_t pad_r = { (Ho - 1) * s + span - H - sh->pad, (Wo - 1) * s + span_w - W - sh->padw };

    const dnnl_memory_desc_t x_nhwc = md4(N, sh->C_in, H, W, dnnl_nhwc);
    const dnnl_memory_desc_t y_nhwc = md4(N, sh->C_out, Ho, Wo, dnnl_nhwc);
    /* the caller's output tensor: bfloat16 where conv2d_bf16_io asked for it (the dst in 16
     * bits as the bf16 primitive writes it, or a float32 fallback plan's rounded by the port) */
    const dnnl_memory_desc_t y_user = md4t(N, sh->C_out, Ho, Wo, dnnl_nhwc, im->out_bf16 ? dnnl_bf16 : dnnl_f32);
    /* and its input tensor, likewise (conv2d_bf16_io); its gradient dx stays float32 */
    const dnnl_memory_desc_t x_user = md4t(N, sh->C_in, H, W, dnnl_nhwc, im->in_bf16 ? dnnl_bf16 : dnnl_f32);
    const dnnl_memory_desc_t w_oihw = w_md(sh, 0);   /* GOIHW when grouped */
    const dnnl_memory_desc_t w_any = w_md_t(sh, 1, lp);
    const dnnl_memory_desc_t x_any = md4t(N, sh->C_in, H, W, dnnl_format_tag_any, lp);
    const dnnl_memory_desc_t y_any = md4t(N, sh->C_out, Ho, Wo, dnnl_format_tag_any, lp);
    /* bf16: src, dst, diff_dst and diff_src in 16 bits, diff_weights in float32; layouts the
     * primitives' choice */
    const dnnl_memory_desc_t dy_any = md4t(N, sh->C_out, Ho, Wo, dnnl_format_tag_any, lp);
    const dnnl_memory_desc_t dx_any = md4t(N, sh->C_in, H, W, dnnl_format_tag_any, lp);
    const dnnl_memory_desc_t dw_any = w_md(sh, 1);

    /* Winograd F(4x4, 3x3) does 2-3x fewer flops than direct for the 3x3 stride-1 convs, which
     * are most of a ResNet's work; it needs its blocked activation layout, and converting
     * NHWC to and from it costs far less than it saves. Everything else runs direct on the
     * NHWC tensors themselves. */
    dnnl_convolution_desc_t cd;
    dnnl_primitive_desc_t fpd = NULL;
    dnnl_alg_kind_t alg = dnnl_convolution_direct;
    const dnnl_memory_desc_t *xm = bf16 ? &x_any : &x_nhwc, *ym = bf16 ? &y_any : &y_nhwc;
    const dnnl_memory_desc_t *dym = bf16 ? &dy_any : ym, *dxm = bf16 ? &dx_any : xm;
    const dnnl_memory_desc_t *dwm_d = bf16 ? &dw_any : &w_any;
    if (!bf16 && im->winograd && sh->k == 3 && sh->kw == 3 && sh->pad == sh->padw && sh->stride == 1 && sh->groups == 1 && sh->dilation == 1 &&
        sh->C_in % 16 == 0 && sh->C_out % 16 == 0) {
        if (dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_winograd,
                                               &x_any, &w_any, NULL, &y_any, strides, pad_l,
                                               pad_r) == dnnl_success &&
            (fpd = pd_try(&cd)) != NULL) {
            alg = dnnl_convolution_winograd;
            xm = &x_any; ym = &y_any; dym = ym; dxm = xm;
        } else {
            fpd = NULL;
        }
    }
    if (!fpd) {
        if (dilated)
            DNNL_CHECK(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_training, alg, xm, &w_any,
                                                                  NULL, ym, strides, dilates, pad_l, pad_r));
        else
            DNNL_CHECK(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, alg, xm, &w_any,
                                                          NULL, ym, strides, pad_l, pad_r));
        fpd = bf16 ? pd_try(&cd) : pd_new(&cd, NULL);
        if (!fpd) {   /* no bf16 kernel at all (below AVX-512): the caller falls back or refuses */
            free(pl);
            return NULL;
        }
    }
    if (dilated)
        DNNL_CHECK(dnnl_dilated_convolution_backward_data_desc_init(&cd, alg, dxm, &w_any, dym, strides, dilates,
                                                                    pad_l, pad_r));
    else
        DNNL_CHECK(dnnl_convolution_backward_data_desc_init(&cd, alg, dxm, &w_any, dym, strides, pad_l, pad_r));
    dnnl_primitive_desc_t dpd = bf16 ? pd_try_hint(&cd, fpd) : pd_new(&cd, fpd);
    if (dilated)
        DNNL_CHECK(dnnl_dilated_convolution_backward_weights_desc_init(&cd, alg, xm, dwm_d, NULL, dym, strides,
                                                                       dilates, pad_l, pad_r));
    else
        DNNL_CHECK(dnnl_convolution_backward_weights_desc_init(&cd, alg, xm, dwm_d, NULL, dym, strides,
                                                               pad_l, pad_r));
    dnnl_primitive_desc_t wpd = bf16 ? pd_try_hint(&cd, fpd) : pd_new(&cd, fpd);
    if (!dpd || !wpd) {
        DNNL_CHECK(dnnl_primitive_desc_destroy(fpd));
        if (dpd) DNNL_CHECK(dnnl_primitive_desc_destroy(dpd));
        if (wpd) DNNL_CHECK(dnnl_primitive_desc_destroy(wpd));
        free(pl);
        return NULL;
    }

    /* Forward and backward do not overlap in time, so each lays its converted copies out from
     * the same offset of the workspace: after the subsampled x and dx of a strided 1x1 conv. */
    size_t top = 2 * pl->sub_bytes;
    dnn_port_init(&pl->x_f, &x_user, q_md(fpd, dnnl_query_src_md), 1, &top);
    dnn_port_init(&pl->y_f, &y_user, q_md(fpd, dnnl_query_dst_md), 0, &top);
    /* bf16: the weights' copy in the workspace too (weights_in_ws): converted on each call from
     * the float32 master instead of held per convolution, which in training changes every step
     * anyway (ResNet-50: 90 MiB of copies held, a 2 MiB place in the workspace instead) */
    pl->wf_off = top;
    if (bf16) top += (dnnl_memory_desc_get_size(q_md(fpd, dnnl_query_weights_md)) + 63) / 64 * 64;
    pl->ws_fwd = top;

    top = 2 * pl->sub_bytes;
    dnn_port_init(&pl->dy_d, &y_nhwc, q_md(dpd, dnnl_query_diff_dst_md), 1, &top);
    dnn_port_init(&pl->dx_d, &x_nhwc, q_md(dpd, dnnl_query_diff_src_md), 0, &top);
    const dnnl_memory_desc_t *wdy = q_md(wpd, dnnl_query_diff_dst_md);
    pl->dy_shared = dnnl_memory_desc_equal(wdy, q_md(dpd, dnnl_query_diff_dst_md));
    if (pl->dy_shared) {
        /* Same layout: the weight gradient reads the copy converted for the data gradient
         * (only valid when both run, see conv2d_backward). */
        size_t no_space = 0;
        dnn_port_init(&pl->dy_w, &y_nhwc, wdy, 1, &no_space);
        pl->dy_w.ws_off = pl->dy_d.ws_off;
    } else {
        dnn_port_init(&pl->dy_w, &y_nhwc, wdy, 1, &top);
    }
    dnn_port_init(&pl->x_w, &x_user, q_md(wpd, dnnl_query_src_md), 1, &top);
    const dnnl_memory_desc_t *dwm = q_md(wpd, dnnl_query_diff_weights_md);
    pl->dw_off = top;
    top += (dnnl_memory_desc_get_size(dwm) + 63) / 64 * 64;
    pl->wb_off = top;
    if (bf16) top += (dnnl_memory_desc_get_size(q_md(dpd, dnnl_query_weights_md)) + 63) / 64 * 64;
    pl->ws_bwd = top;
    pl->dw_prim = dnn_mem_new(dwm, DNNL_MEMORY_NONE);
    pl->dw_user = dnn_mem_new(&w_oihw, DNNL_MEMORY_NONE);
    pl->dw_reorder = dnn_reorder_new(dwm, &w_oihw, 1);

    pl->w_fwd_md = *q_md(fpd, dnnl_query_weights_md);
    pl->w_bwd_md = *q_md(dpd, dnnl_query_weights_md);
    pl->fwd = dnn_prim_new(fpd, "convolution forward");
    pl->bwd_data = dnn_prim_new(dpd, "convolution backward data");
    pl->bwd_w = dnn_prim_new(wpd, "convolution backward weights");
    DNNL_CHECK(dnnl_primitive_desc_destroy(fpd));
    DNNL_CHECK(dnnl_primitive_desc_destroy(dpd));
    DNNL_CHECK(dnnl_primitive_desc_destroy(wpd));
    return pl;
}

static void plan_free(ConvPlan *pl) {
    dnn_port_free(&pl->x_f); dnn_port_free(&pl->y_f);
    dnn_port_free(&pl->dy_d); dnn_port_free(&pl->dx_d);
    dnn_port_free(&pl->x_w); dnn_port_free(&pl->dy_w);
    DNNL_CHECK(dnnl_memory_destroy(pl->dw_prim));
    DNNL_CHECK(dnnl_memory_destroy(pl->dw_user));
    dnn_prim_free(&pl->dw_reorder);
    dnn_prim_free(&pl->fwd);
    dnn_prim_free(&pl->bwd_data);
    dnn_prim_free(&pl->bwd_w);
    free(pl);
}

/* Nonzero when oneDNN gave one of the plan's primitives its reference implementation (plain
 * loops, many times slower than float32's kernels). */
static int plan_has_ref(const ConvPlan *pl) {
    return !strncmp(pl->fwd.impl, "ref", 3) || !strncmp(pl->bwd_data.impl, "ref", 3) ||
           !strncmp(pl->bwd_w.impl, "ref", 3);
}

static ConvPlan *plan_get(Conv2d *c, int N, int H, int W) {
    ConvImpl *im = c->impl;
    for (ConvPlan *pl = im->plans; pl; pl = pl->next)
        if (pl->N == N && pl->H == H && pl->W == W) return pl;
    ConvPlan *pl = plan_new(c, N, H, W, im->bf16);
    if (!pl || (pl->bf16 && plan_has_ref(pl))) {
        /* a shape oneDNN has no bf16 kernel for (conv2d_bf16_fallbacks counts them) */
        if (pl) plan_free(pl);
        pl = plan_new(c, N, H, W, 0);
        g_dnnl.bf16_fallbacks++;
    }
    pl->next = im->plans;
    im->plans = pl;
    return pl;
}

static void weight_copy_free(WeightCopy *wc) {
    DNNL_CHECK(dnnl_memory_destroy(wc->mem));
    DNNL_CHECK(dnnl_memory_destroy(wc->user));
    dnn_prim_free(&wc->reorder);
    memset(wc, 0, sizeof *wc);
}

/* The weights in layout `md`, refreshed from the OIHW master if it changed since; or, with
 * `place` (a bf16 plan's, in the workspace), converted there on every call, the copy's memory
 * object then owning no buffer. */
static dnnl_memory_t weights_get(Conv2d *c, const dnnl_memory_desc_t *md, const float *w, void *place) {
    const ConvShape *sh = &c->shape;
    ConvImpl *im = c->impl;
    WeightCopy *wc = NULL;
    for (int i = 0; i < im->n_wc; i++)
        if (dnnl_memory_desc_equal(&im->wc[i].md, md)) wc = &im->wc[i];
    if (!wc) {
        if (im->n_wc < MAX_WEIGHT_COPIES) {
            wc = &im->wc[im->n_wc++];
        } else {
            wc = &im->wc[im->next_evict];
            im->next_evict = (im->next_evict + 1) % MAX_WEIGHT_COPIES;
            weight_copy_free(wc);
        }
        const dnnl_memory_desc_t oihw = w_md(sh, 0);   /* the master's layout: GOIHW when grouped */
        wc->md = *md;
        wc->mem = dnn_mem_new(md, place ? DNNL_MEMORY_NONE : DNNL_MEMORY_ALLOCATE);
        wc->user = dnn_mem_new(&oihw, DNNL_MEMORY_NONE);
        wc->reorder = dnn_reorder_new(&oihw, md, 0);
        wc->version = im->w_version - 1;
    }
    if (place) {
        dnn_mem_set(wc->mem, place);
        wc->version = im->w_version - 1;   /* the place is shared: never taken as current */
    }
    if (wc->version != im->w_version || wc->src != w) {
        dnn_mem_set(wc->user, w);
        dnnl_exec_arg_t a[2] = { { DNNL_ARG_FROM, wc->user }, { DNNL_ARG_TO, wc->mem } };
        dnn_exec(&wc->reorder, 2, a);
        wc->version = im->w_version;
        wc->src = w;
    }
    return wc->mem;
}

/* ---- winograd.c for the 3x3 stride-1 pad-1 convs ------------------------------------------
 * oneDNN 2.6 has a Winograd convolution only for AVX-512 (and only for channel counts that are
 * multiples of 16); on AVX2 it runs direct. winograd.c's F(4x4, 3x3) takes those convs:
 *  - on the AVX2 path (and SSE4.1), whenever both channel counts are at least 16;
 *  - on AVX-512, where it measured faster than oneDNN's Winograd: images of 16x16 and more,
 *    and channel counts oneDNN's Winograd does not take.
 * The first convolution (3 input channels) stays direct: too few channels to pay for the transforms (3->64
 * at 32x32, batch 64, 1 thread: forward 2.5 ms direct vs 5.3 ms Winograd on AVX2).
 * bench/conv_bench --cpu-time, batch 64, 1 thread, on a 2-core AMD EPYC (Zen 5) that other jobs
 * shared (so CPU time, not wall time), ms for forward + backward-data + backward-weights:
 *                 AVX2: oneDNN direct   winograd.c     AVX-512: oneDNN Winograd   winograd.c
 *   64@32x32                162.9          63.0                      56.5            42.2
 *   128@16x16               186.0          70.4                      45.1            36.2
 *   256@8x8                 189.8          63.5                      33.3            45.7
 * conv2d_use_winograd(0) turns this path off together with oneDNN's Winograd;
 * conv2d_use_own_winograd(0) this path alone. */
typedef struct WinoPlan {
    Winograd p;
    struct WinoPlan *next;
} WinoPlan;

static int wino_selected(const ConvShape *sh, const ConvImpl *im, int H, int W) {
    if (im->bf16) return 0;   /* winograd.c is float32: bf16 convs all go through oneDNN */
    if (!im->winograd || !im->own_winograd || sh->k != 3 || sh->kw != 3 || sh->stride != 1 || sh->pad != 1 ||
        sh->padw != 1)
        return 0;
    if (sh->groups != 1 || sh->dilation != 1) return 0;   /* winograd.c is dense and undilated */
    if (sh->C_in < 16 || sh->C_out < 16) return 0;
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    const unsigned avx512 = (unsigned)dnnl_cpu_isa_avx512_core;
    const int onednn_wino = (isa & avx512) == avx512 && sh->C_in % 16 == 0 && sh->C_out % 16 == 0;
    return !onednn_wino || H * W >= 16 * 16;
}

/* The plan for this shape when winograd.c takes it, else NULL. */
static WinoPlan *wino_plan_get(Conv2d *c, int N, int H, int W) {
    ConvImpl *im = c->impl;
    if (!wino_selected(&c->shape, im, H, W)) return NULL;
    for (WinoPlan *wp = im->wino_plans; wp; wp = wp->next)
        if (wp->p.N == N && wp->p.H == H && wp->p.W == W) return wp;
    WinoPlan *wp = callocCheck(1, sizeof *wp);
    winograd_init(&wp->p, c->shape.C_in, c->shape.C_out, N, H, W);
    snprintf(im->wino_name, sizeof im->wino_name, "winograd4x3:%s", winograd_isa_name());
    wp->next = im->wino_plans;
    im->wino_plans = wp;
    return wp;
}

static void wino_free(ConvImpl *im) {
    while (im->wino_plans) {
        WinoPlan *next = im->wino_plans->next;
        winograd_free(&im->wino_plans->p);
        free(im->wino_plans);
        im->wino_plans = next;
    }
}

/* ---- depthwise.c for the depthwise convs ---------------------------------------------------
 * oneDNN 2.6's depthwise kernels (brdgmm_dw on AVX-512, jit_dw on AVX2) are fast at 3x3, but
 * their backward at 5x5 is several times slower than depthwise.c's, and on 64x64 images
 * depthwise.c is faster at 3x3 stride 2, and on AVX2 at stride 1 too. Both give the same bits
 * on any thread count (tests/test_conv).
 * tests/test_conv --bench -t 1 --cpu-time, N=32, ms of CPU time for forward + backward (dx and
 * dw), on an Intel Xeon (AVX-512, no bf16) of 2 cores that other jobs shared, 1 thread. (Wall
 * times of 2 threads there were whole time slices of the other jobs, whichever kernel ran:
 * multiples of 4 ms; CPU time of 1 thread leaves those out.)
 *                        AVX-512: oneDNN  depthwise.c     AVX2: oneDNN  depthwise.c
 *     96@64x64 k3 s1          46.3     51.0            65.1     53.4
 *     96@64x64 k3 s2          26.7     24.1            31.5     24.2
 *     96@64x64 k5 s1         196.7    110.4           159.2    131.2
 *     96@64x64 k5 s2          78.7     35.7            63.1     39.5
 *    144@32x32 k3 s1          17.3     18.4            18.6     18.6
 *    144@32x32 k3 s2           7.9      9.8             7.3      7.2
 *    144@32x32 k5 s1          70.2     44.0            46.7     37.1
 *    144@32x32 k5 s2          27.8     11.6            16.4     12.7
 *    240@16x16 k3 s1           5.7      5.9             5.4      7.5
 *    240@16x16 k3 s2           2.1      2.2             1.9      2.3
 *    240@16x16 k5 s1          22.5     13.0            20.6     14.9
 *    240@16x16 k5 s2          11.3      4.2             9.7      5.4
 *    480@ 8x8  k3 s1           1.6      2.5             1.8      4.5
 *    480@ 8x8  k3 s2           0.8      1.0             0.9      1.4
 *    480@ 8x8  k5 s1          14.7      6.0            16.8      9.2
 *    480@ 8x8  k5 s2           7.5      2.3             7.5      2.8
 *    960@ 4x4  k3 s1           0.7      1.3             0.9      1.5
 *    960@ 4x4  k3 s2           0.3      0.8             0.3      0.8
 *    960@ 4x4  k5 s1          11.8      3.1            21.9      4.7
 *    960@ 4x4  k5 s2           8.2      1.9            31.8      3.5
 * So depthwise.c takes the kernels of 5 and more, and on AVX-512 the 3x3 ones on images of
 * 64x64 and more at stride 2. On a CPU with AVX2 only (an AMD EPYC, Zen 3: 2 threads, idle;
 * docs/benchmarks.md, "Depthwise convolutions on AVX2"), which the AVX2 columns above only
 * imitated, the 3x3 ones split by channels and size: depthwise.c wins from 64 to 144 channels
 * on large outputs (96@64 s1 23.1 against 27.4 ms, 144@32 s1 9.3 against 11.5), oneDNN below 64
 * channels (16@64 s1 1.2 against 4.2 ms, 32@64 s1 6.5 against 8.4), at 192 and more (ties),
 * and on smaller outputs, where its forward is two to three times as fast (72@32 s1 2.0 against
 * 3.1 ms in all). So there depthwise.c takes 64 to 160 channels where channels times output
 * pixels are at least 96 x 32 x 32. oneDNN has every depthwise conv with a channel multiplier;
 * conv2d_use_own_depthwise(0) turns this path off. */
static int dw_selected(const Conv2d *c, int N, int H, int W) {
    const ConvShape *sh = &c->shape;
    const ConvImpl *im = c->impl;
    (void)N;
    if (im->bf16 || !im->own_depthwise || !depthwise_applies(sh)) return 0;   /* depthwise.c is float32 */
    if (sh->k >= 5) return 1;
    if (sh->k != 3) return 0;
    if (im->avx512) return H * W >= 64 * 64 && sh->stride >= 2;
    const long work = (long)sh->C_in * conv_out_size(sh, H) * conv_out_size(sh, W);
    return sh->C_in >= 64 && sh->C_in <= 160 && work >= 96L * 32 * 32;
}

static const char *dw_name(Conv2d *c) {
    ConvImpl *im = c->impl;
    snprintf(im->dw_name, sizeof im->dw_name, "own_dw:%s", depthwise_isa_name());
    return im->dw_name;
}

void conv2d_init(Conv2d *c, const ConvShape *shape) {
    CHECK(conv_shape_valid(shape));
    c->shape = conv_shape_norm(shape);
    dnn_init();
    ConvImpl *im = callocCheck(1, sizeof *im);
    im->w_version = 1;
    im->winograd = g_dnnl.winograd;
    im->own_winograd = g_dnnl.own_winograd;
    im->own_depthwise = g_dnnl.own_depthwise;
    im->bf16 = g_dnnl.bf16;
    im->avx512 = cpu_isa() == CPU_ISA_AVX512;
    c->impl = im;
}

void conv2d_free(Conv2d *c) {
    ConvImpl *im = c->impl;
    if (!im) return;
    while (im->plans) {
        ConvPlan *next = im->plans->next;
        plan_free(im->plans);
        im->plans = next;
    }
    for (int i = 0; i < im->n_wc; i++) weight_copy_free(&im->wc[i]);
    wino_free(im);
    free(im);
    c->impl = NULL;
}

void conv2d_weights_changed(Conv2d *c) {
    ((ConvImpl *)c->impl)->w_version++;
}

/* x[n, h*s, w*s, :] for the Ho x Wo output pixels of a strided 1x1 conv. */
static void subsample(const Conv2d *c, int N, int H, int W, const void *x, void *xs) {
    const ConvShape *sh = &c->shape;
    const int Ho = conv_out_size(sh, H), Wo = conv_out_size(sh, W), s = sh->stride;
    /* a pixel's C values: float32, or bfloat16 (conv2d_bf16_io) */
    const size_t px = (size_t)sh->C_in * (((const ConvImpl *)c->impl)->in_bf16 ? sizeof(uint16_t) : sizeof(float));
    #pragma omp parallel for schedule(static)
    for (long nh = 0; nh < (long)N * Ho; nh++) {
        const int n = (int)(nh / Ho), ho = (int)(nh % Ho);
        for (int wo = 0; wo < Wo; wo++)
            memcpy((char *)xs + ((size_t)nh * Wo + wo) * px, (const char *)x + (((size_t)n * H + ho * s) * W + wo * s) * px,
                   px);
    }
}

/* The inverse for gradients: dx is dxs at the sampled pixels and zero elsewhere. */
static void upsample_grad(const Conv2d *c, int N, int H, int W, const float *dxs, float *dx) {
    const ConvShape *sh = &c->shape;
    const int Ho = conv_out_size(sh, H), Wo = conv_out_size(sh, W), C = sh->C_in, s = sh->stride;
    #pragma omp parallel for schedule(static)
    for (long nh = 0; nh < (long)N * H; nh++) {
        const int n = (int)(nh / H), h = (int)(nh % H);
        float *row = dx + (size_t)nh * W * C;
        memset(row, 0, (size_t)W * C * sizeof(float));
        if (h % s || h / s >= Ho) continue;
        for (int wo = 0; wo < Wo; wo++)
            memcpy(row + (size_t)wo * s * C, dxs + (((size_t)n * Ho + h / s) * Wo + wo) * C,
                   (size_t)C * sizeof(float));
    }
}

void conv2d_forward(Conv2d *c, int N, int H, int W, const float *x, const float *w, float *y) {
    if (dw_selected(c, N, H, W)) {
        dnn_ws_reserve(depthwise_workspace_bytes(&c->shape, N, H, W));
        depthwise_forward(&c->shape, N, H, W, x, w, y, dnn_ws());
        return;
    }
    WinoPlan *wp = wino_plan_get(c, N, H, W);
    if (wp) {
        dnn_ws_reserve(winograd_workspace_bytes(&wp->p));
        winograd_forward(&wp->p, w, x, y, dnn_ws());
        return;
    }
    ConvPlan *pl = plan_get(c, N, H, W);
    dnn_ws_reserve(pl->ws_fwd);
    if (pl->sub) {
        subsample(c, N, H, W, x, dnn_ws());
        x = dnn_ws();
    }
    dnnl_memory_t wm = weights_get(c, &pl->w_fwd_md, w, pl->bf16 ? (char *)dnn_ws() + pl->wf_off : NULL);
    dnn_port_bind(&pl->x_f, x, 1);
    dnn_port_bind(&pl->y_f, y, 0);
    dnnl_exec_arg_t a[3] = { { DNNL_ARG_SRC, pl->x_f.prim }, { DNNL_ARG_WEIGHTS, wm },
                             { DNNL_ARG_DST, pl->y_f.prim } };
    dnn_exec(&pl->fwd, 3, a);
    dnn_port_flush(&pl->y_f);
}

void conv2d_backward(Conv2d *c, int N, int H, int W, const float *x, const float *w,
                     const float *dy, float *dx, float *dw) {
    if (dw_selected(c, N, H, W)) {
        dnn_ws_reserve(depthwise_workspace_bytes(&c->shape, N, H, W));
        depthwise_backward(&c->shape, N, H, W, x, w, dy, dx, dw, dnn_ws());
        return;
    }
    WinoPlan *wp = wino_plan_get(c, N, H, W);
    if (wp) {
        dnn_ws_reserve(winograd_workspace_bytes(&wp->p));
        winograd_backward(&wp->p, w, x, dy, dx, dw, dnn_ws());
        return;
    }
    ConvPlan *pl = plan_get(c, N, H, W);
    dnn_ws_reserve(pl->ws_bwd);
    float *dx_user = dx;
    if (pl->sub) {
        subsample(c, N, H, W, x, dnn_ws());
        x = dnn_ws();
        if (dx) dx = (float *)((char *)dnn_ws() + pl->sub_bytes);
    }
    if (dx) {
        dnnl_memory_t wm = weights_get(c, &pl->w_bwd_md, w, pl->bf16 ? (char *)dnn_ws() + pl->wb_off : NULL);
        dnn_port_bind(&pl->dy_d, dy, 1);
        dnn_port_bind(&pl->dx_d, dx, 0);
        dnnl_exec_arg_t a[3] = { { DNNL_ARG_DIFF_DST, pl->dy_d.prim }, { DNNL_ARG_WEIGHTS, wm },
                                 { DNNL_ARG_DIFF_SRC, pl->dx_d.prim } };
        dnn_exec(&pl->bwd_data, 3, a);
        dnn_port_flush(&pl->dx_d);
        if (pl->sub) upsample_grad(c, N, H, W, dx, dx_user);
    }
    if (pl->dy_shared && dx) {
        dnn_mem_set(pl->dy_w.user, dy);   /* converted copy already in place */
        if (pl->dy_w.prim != pl->dy_w.user) dnn_mem_set(pl->dy_w.prim, (char *)dnn_ws() + pl->dy_w.ws_off);
    } else {
        dnn_port_bind(&pl->dy_w, dy, 1);
    }
    dnn_port_bind(&pl->x_w, x, 1);
    DNNL_CHECK(dnnl_memory_set_data_handle(pl->dw_prim, (char *)dnn_ws() + pl->dw_off));
    dnnl_exec_arg_t a[3] = { { DNNL_ARG_SRC, pl->x_w.prim }, { DNNL_ARG_DIFF_DST, pl->dy_w.prim },
                             { DNNL_ARG_DIFF_WEIGHTS, pl->dw_prim } };
    dnn_exec(&pl->bwd_w, 3, a);
    dnn_mem_set(pl->dw_user, dw);
    dnnl_exec_arg_t r[2] = { { DNNL_ARG_FROM, pl->dw_prim }, { DNNL_ARG_TO, pl->dw_user } };
    dnn_exec(&pl->dw_reorder, 2, r);
}

void conv2d_use_winograd(int enable) {
    g_dnnl.winograd = enable != 0;
}

void conv2d_use_own_winograd(int enable) {
    g_dnnl.own_winograd = enable != 0;
}

void conv2d_use_own_depthwise(int enable) {
    g_dnnl.own_depthwise = enable != 0;
}

void conv2d_use_bf16(int enable) {
    g_dnnl.bf16 = enable != 0;
}


int conv2d_bf16_fallbacks(void) {
    return g_dnnl.bf16_fallbacks;
}

int conv2d_is_bf16(Conv2d *c, int N, int H, int W) {
    const ConvImpl *im = c->impl;
    return im->bf16 && plan_get(c, N, H, W)->bf16;
}

void conv2d_bf16_io(Conv2d *c, int in, int out) {
    ConvImpl *im = c->impl;
    CHECK(im->bf16);
    while (im->plans) {   /* made for float32 tensors: made again at the next call */
        ConvPlan *next = im->plans->next;
        plan_free(im->plans);
        im->plans = next;
    }
    im->in_bf16 |= in != 0;
    im->out_bf16 |= out != 0;
}

/* The rounding is oneDNN's own reorder from float32 to bf16, the conversion a convolution's
 * port applies to a float32 input, so that the bits are those the convolution would have
 * made of the float32 tensor. One reorder per length, kept. */
typedef struct Narrow {
    size_t n;
    Prim r;
    dnnl_memory_t from, to;
    struct Narrow *next;
} Narrow;

void conv2d_narrow_bf16(const float *x, void *y, size_t n) {
    dnn_init();
    Narrow *p = g_dnnl.narrow;
    while (p && p->n != n) p = p->next;
    if (!p) {
        p = callocCheck(1, sizeof *p);
        p->n = n;
        dnnl_memory_desc_t f, t;
        const dnnl_dims_t dims = { (dnnl_dim_t)n };
        DNNL_CHECK(dnnl_memory_desc_init_by_tag(&f, 1, dims, dnnl_f32, dnnl_a));
        DNNL_CHECK(dnnl_memory_desc_init_by_tag(&t, 1, dims, dnnl_bf16, dnnl_a));
        p->r = dnn_reorder_new(&f, &t, 0);
        p->from = dnn_mem_new(&f, DNNL_MEMORY_NONE);
        p->to = dnn_mem_new(&t, DNNL_MEMORY_NONE);
        p->next = g_dnnl.narrow;
        g_dnnl.narrow = p;
    }
    dnn_mem_set(p->from, x);
    dnn_mem_set(p->to, y);
    dnnl_exec_arg_t a[2] = { { DNNL_ARG_FROM, p->from }, { DNNL_ARG_TO, p->to } };
    dnn_exec(&p->r, 2, a);
}

/* oneDNN's bf16 kernels: native where the CPU multiplies bf16 itself (avx512_bf16, AMX),
 * emulated with float32 instructions on plain AVX-512 (avx512_core), none below it (only the
 * reference loops). Asked of a probe convolution's primitives rather than assumed from the
 * ISA, with the implementation each gets. */
CpuBf16Path conv2d_bf16_path(char *impl, size_t n) {
    dnn_init();
    const int saved = g_dnnl.bf16;
    g_dnnl.bf16 = 1;
    Conv2d a;
    conv2d_init(&a, &(ConvShape){ .C_in = 64, .C_out = 64, .k = 3, .stride = 1, .pad = 1 });
    g_dnnl.bf16 = saved;
    ConvPlan *pl = plan_new(&a, 32, 16, 16, 1);
    const int ref = !pl || plan_has_ref(pl);
    snprintf(impl, n, "%s", pl ? pl->fwd.impl : "none");
    if (pl) plan_free(pl);
    conv2d_free(&a);
    if (ref) return CPU_BF16_NONE;
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    const unsigned nat = (unsigned)dnnl_cpu_isa_avx512_core_bf16;
    return (isa & nat) == nat ? CPU_BF16_NATIVE : CPU_BF16_EMULATED;
}

const char *conv2d_impl_name(Conv2d *c, int N, int H, int W) {
    if (dw_selected(c, N, H, W)) return dw_name(c);
    if (wino_plan_get(c, N, H, W)) return ((ConvImpl *)c->impl)->wino_name;
    return plan_get(c, N, H, W)->fwd.impl;  /* the forward primitive's */
}

void conv2d_memory(Conv2d *c, int N, int H, int W, ConvMemory *m) {
    memset(m, 0, sizeof *m);
    if (dw_selected(c, N, H, W)) {
        m->workspace = depthwise_workspace_bytes(&c->shape, N, H, W);
        return;
    }
    if (wino_selected(&c->shape, c->impl, H, W)) {
        /* a plan of its own, not kept: its size is all that is wanted here */
        Winograd p;
        winograd_init(&p, c->shape.C_in, c->shape.C_out, N, H, W);
        m->workspace = winograd_workspace_bytes(&p);
        winograd_free(&p);
        return;
    }
    const ConvPlan *pl = plan_get(c, N, H, W);
    m->workspace = pl->ws_fwd > pl->ws_bwd ? pl->ws_fwd : pl->ws_bwd;
    const Prim *prims[] = { &pl->fwd, &pl->bwd_data, &pl->bwd_w, &pl->dw_reorder };
    for (size_t i = 0; i < sizeof prims / sizeof *prims; i++)
        if (prims[i]->sp_bytes > m->scratchpad) m->scratchpad = prims[i]->sp_bytes;
    m->scratchpad += SP_GUARD;
    /* weights_get's copies: one per layout the forward and the backward-data primitives take;
     * a bf16 plan's are in its workspace */
    if (pl->bf16) return;
    m->held = dnnl_memory_desc_get_size(&pl->w_fwd_md);
    if (!dnnl_memory_desc_equal(&pl->w_fwd_md, &pl->w_bwd_md)) m->held += dnnl_memory_desc_get_size(&pl->w_bwd_md);
}

const char *ops_cpu_describe(void) {
    static char buf[512];
    if (buf[0]) return buf;
    const dnnl_version_t *v = dnnl_version();
    /* Name the implementations oneDNN picks for the two kinds of 3x3 conv of the model. */
    Conv2d a, b;
    conv2d_init(&a, &(ConvShape){ .C_in = 64, .C_out = 64, .k = 3, .stride = 1, .pad = 1 });
    conv2d_init(&b, &(ConvShape){ .C_in = 64, .C_out = 128, .k = 3, .stride = 2, .pad = 1 });
    snprintf(buf, sizeof buf, "oneDNN %d.%d.%d (3x3 s1: %s, 3x3 s2: %s)", v->major, v->minor,
             v->patch, conv2d_impl_name(&a, 64, 32, 32), conv2d_impl_name(&b, 64, 32, 32));
    conv2d_free(&a);
    conv2d_free(&b);
    return buf;
}

#else /* !HAVE_DNNL */

void conv2d_init(Conv2d *c, const ConvShape *shape) {
    CHECK(conv_shape_valid(shape));
    c->shape = conv_shape_norm(shape);
    c->impl = NULL;
}
void conv2d_free(Conv2d *c) { c->impl = NULL; }
void conv2d_weights_changed(Conv2d *c) { (void)c; }
void conv2d_memory(Conv2d *c, int N, int H, int W, ConvMemory *m) {
    (void)c; (void)N; (void)H; (void)W;
    memset(m, 0, sizeof *m);   /* the reference loops need nothing beside their tensors */
}
void conv2d_forward(Conv2d *c, int N, int H, int W, const float *x, const float *w, float *y) {
    conv2d_reference_forward(c, N, H, W, x, w, y);
}
void conv2d_backward(Conv2d *c, int N, int H, int W, const float *x, const float *w,
                     const float *dy, float *dx, float *dw) {
    conv2d_reference_backward(c, N, H, W, x, w, dy, dx, dw);
}
void conv2d_use_winograd(int enable) { (void)enable; }
void conv2d_use_own_winograd(int enable) { (void)enable; }
void conv2d_use_own_depthwise(int enable) { (void)enable; }
void conv2d_use_bf16(int enable) { (void)enable; }
int conv2d_bf16_fallbacks(void) { return 0; }
int conv2d_is_bf16(Conv2d *c, int N, int H, int W) {
    (void)c; (void)N; (void)H; (void)W;
    return 0;
}
void conv2d_bf16_io(Conv2d *c, int in, int out) {
    (void)c; (void)in; (void)out;
    CHECK(!"no bf16 convolution without oneDNN");
}
void conv2d_narrow_bf16(const float *x, void *y, size_t n) {
    (void)x; (void)y; (void)n;
    CHECK(!"no bf16 convolution without oneDNN");
}
CpuBf16Path conv2d_bf16_path(char *impl, size_t n) {
    snprintf(impl, n, "reference");
    return CPU_BF16_NONE;
}
const char *conv2d_impl_name(Conv2d *c, int N, int H, int W) {
    (void)c; (void)N; (void)H; (void)W;
    return "reference";
}
const char *ops_cpu_describe(void) { return "reference (direct loops, no oneDNN)"; }

#endif /* HAVE_DNNL */
