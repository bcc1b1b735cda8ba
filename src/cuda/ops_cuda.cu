/* SPDX-License-Identifier: BSD-3-Clause */
/* ops_cuda.cu - see ops_cuda.h.
 *
 * Convolutions go through cuDNN's convolution API on NHWC tensors; the matrix products of the
 * head through cuBLAS; everything else is kernels here. Two rules shape the kernels:
 *  - Reductions never use floating-point atomics. A reduction over the M rows of an [M, C]
 *    tensor runs in two passes: each block sums a fixed range of rows (the range depends only
 *    on M) into its own slot, then one thread per channel adds the slots in block order. The
 *    result depends only on the data and the shapes, so a resumed run reproduces bit for bit.
 *  - Elementwise arithmetic that ops_cpu.c also does in float uses the explicitly rounded
 *    intrinsics (__fmul_rn, __fadd_rn), because nvcc would otherwise contract a*b+c into one
 *    fused multiply-add and the two backends would differ in the last bit for no reason. */
#include "build_config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>
#include <cublas_v2.h>

#include "ops_cuda.h"
#include "ops/rules.h"
extern "C" {
#include "dist/comm.h"
#include "base/util.h"
}

/* ======================================================================================
 * Checks: the failing call, file:line and the library's own message.
 * ====================================================================================== */

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); \
    if (e_ != cudaSuccess) fail_at(__FILE__, __LINE__, #call, cudaGetErrorString(e_)); } while (0)
#define CUDNN_CHECK(call) do { cudnnStatus_t s_ = (call); \
    if (s_ != CUDNN_STATUS_SUCCESS) fail_at(__FILE__, __LINE__, #call, cudnnGetErrorString(s_)); } while (0)
#define CUBLAS_CHECK(call) do { cublasStatus_t s_ = (call); \
    if (s_ != CUBLAS_STATUS_SUCCESS) fail_at(__FILE__, __LINE__, #call, cublasGetStatusString(s_)); } while (0)
/* A launch reports a bad configuration only through the next runtime call: ask right away so
 * the message names the kernel rather than some later, innocent call. */
#define KERNEL_CHECK(name) do { cudaError_t e_ = cudaGetLastError(); \
    if (e_ != cudaSuccess) fail_at(__FILE__, __LINE__, "launch of " name, cudaGetErrorString(e_)); } while (0)

/* Bits of the device flag word that kernels set instead of stopping. */
#define FLAG_BAD_LABEL 1

/* ======================================================================================
 * Context.
 * ====================================================================================== */

/* One GPU per process, driven from one thread (the model's), as the CPU backend's oneDNN
 * context. The scratch buffers live only inside one op, so every op shares them. */
static struct {
    int active, device;
    cudaStream_t stream;
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    void *ws;                 /* cuDNN workspace */
    size_t ws_bytes;
    void *scratch;            /* reduction partials, per-channel coefficients */
    size_t scratch_bytes;
    int *flags;               /* device word of FLAG_* bits */
    int tf32, conv_benchmark, filter_layout, amp;
    int act;                  /* CUDA_AMP_* element type of activations (cuda_set_act_storage) */
    /* 16-bit copies of a convolution's operands under AMP, shared by every layer (used only
     * inside one op, in stream order): input or input gradient, output or output gradient */
    void *h_in, *h_out;
    size_t h_in_bytes, h_out_bytes;
    char desc[512];
} g_cu = { 0, -1, NULL, NULL, NULL, NULL, 0, NULL, 0, NULL, 0, 0, -1, 0, 0, NULL, NULL, 0, 0, "" };

static void require_active(const char *file, int line) {
    if (!g_cu.active) fail_at(file, line, "CUDA op called", "cuda_backend_init has not succeeded");
}
#define REQUIRE_ACTIVE() require_active(__FILE__, __LINE__)

/* Grow a device buffer. Work already queued may still read the old one, so wait for it
 * before freeing; growth happens only while shapes are first seen, not in steady state. */
static void grow(void **buf, size_t *have, size_t need) {
    if (need <= *have) return;
    comm_guard_host_sync();
    CUDA_CHECK(cudaStreamSynchronize(g_cu.stream));
    if (*buf) CUDA_CHECK(cudaFree(*buf));
    *buf = NULL;
    CUDA_CHECK(cudaMalloc(buf, need));
    *have = need;
}

static void *scratch(size_t bytes) {
    grow(&g_cu.scratch, &g_cu.scratch_bytes, (bytes + 255) / 256 * 256);
    return g_cu.scratch;
}

static int init_fail(char *err, size_t errlen, const char *fmt, const char *a, const char *b) {
    if (err && errlen) snprintf(err, errlen, fmt, a, b);
    return -1;
}

extern "C" int cuda_backend_init(int device, char *err, size_t errlen) {
    if (g_cu.active) {
        if (device == g_cu.device) return 0;
        snprintf(err, errlen, "CUDA backend already initialised on device %d (asked for %d)",
                 g_cu.device, device);
        return -1;
    }
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        cudaGetLastError();   /* clear it: the CPU fallback may still probe again later */
        return init_fail(err, errlen, "no CUDA device: cudaGetDeviceCount: %s%s", cudaGetErrorString(e), "");
    }
    if (count <= 0) return init_fail(err, errlen, "no CUDA device: the driver reports 0 devices%s%s", "", "");
    if (device < 0 || device >= count) {
        snprintf(err, errlen, "CUDA device %d does not exist (%d device%s visible)", device, count,
                 count == 1 ? "" : "s");
        return -1;
    }
    if ((e = cudaSetDevice(device)) != cudaSuccess)
        return init_fail(err, errlen, "cudaSetDevice: %s%s", cudaGetErrorString(e), "");
    /* Non-blocking: the legacy default stream (used by libraries that are not told a stream)
     * must not serialise against our work. */
    if ((e = cudaStreamCreateWithFlags(&g_cu.stream, cudaStreamNonBlocking)) != cudaSuccess)
        return init_fail(err, errlen, "cudaStreamCreateWithFlags: %s%s", cudaGetErrorString(e), "");
    cudnnStatus_t ds = cudnnCreate(&g_cu.cudnn);
    if (ds != CUDNN_STATUS_SUCCESS) {
        cudaStreamDestroy(g_cu.stream);
        return init_fail(err, errlen, "cudnnCreate: %s%s", cudnnGetErrorString(ds), "");
    }
    cublasStatus_t bs = cublasCreate(&g_cu.cublas);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        cudnnDestroy(g_cu.cudnn);
        cudaStreamDestroy(g_cu.stream);
        return init_fail(err, errlen, "cublasCreate: %s%s", cublasGetStatusString(bs), "");
    }
    g_cu.device = device;
    g_cu.active = 1;
    CUDNN_CHECK(cudnnSetStream(g_cu.cudnn, g_cu.stream));
    CUBLAS_CHECK(cublasSetStream(g_cu.cublas, g_cu.stream));
    /* Scalars (alpha, beta) come from host memory. */
    CUBLAS_CHECK(cublasSetPointerMode(g_cu.cublas, CUBLAS_POINTER_MODE_HOST));
    CUBLAS_CHECK(cublasSetMathMode(g_cu.cublas, g_cu.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    CUDA_CHECK(cudaMalloc((void **)&g_cu.flags, sizeof(int)));
    CUDA_CHECK(cudaMemsetAsync(g_cu.flags, 0, sizeof(int), g_cu.stream));
    comm_guard_host_sync();   /* no communicator exists yet: a no-op, kept for the rule */
    CUDA_CHECK(cudaStreamSynchronize(g_cu.stream));
    return 0;
}

extern "C" int cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

extern "C" void cuda_backend_free(void) {
    if (!g_cu.active) return;
    comm_guard_host_sync();
    CUDA_CHECK(cudaStreamSynchronize(g_cu.stream));
    CUDA_CHECK(cudaFree(g_cu.ws));
    CUDA_CHECK(cudaFree(g_cu.scratch));
    CUDA_CHECK(cudaFree(g_cu.flags));
    CUDA_CHECK(cudaFree(g_cu.h_in));
    CUDA_CHECK(cudaFree(g_cu.h_out));
    g_cu.h_in = g_cu.h_out = NULL;
    g_cu.h_in_bytes = g_cu.h_out_bytes = 0;
    CUBLAS_CHECK(cublasDestroy(g_cu.cublas));
    CUDNN_CHECK(cudnnDestroy(g_cu.cudnn));
    CUDA_CHECK(cudaStreamDestroy(g_cu.stream));
    g_cu.ws = g_cu.scratch = NULL;
    g_cu.flags = NULL;
    g_cu.ws_bytes = g_cu.scratch_bytes = 0;
    g_cu.active = 0;
    g_cu.device = -1;
}

extern "C" int cuda_backend_active(void) { return g_cu.active; }
extern "C" int cuda_device(void) { return g_cu.device; }
extern "C" struct CUstream_st *cuda_compute_stream(void) { return g_cu.stream; }

extern "C" void cuda_set_tf32(int enable) {
    g_cu.tf32 = enable != 0;
    if (g_cu.active)
        CUBLAS_CHECK(cublasSetMathMode(g_cu.cublas, g_cu.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
}
extern "C" void cuda_set_conv_benchmark(int enable) { g_cu.conv_benchmark = enable != 0; }
extern "C" void cuda_set_conv_filter_layout(int mode) { g_cu.filter_layout = mode < 0 ? -1 : mode > 0; }
extern "C" void cuda_set_amp(int mode) {
    CHECK(mode == CUDA_AMP_OFF || mode == CUDA_AMP_BF16 || mode == CUDA_AMP_FP16);
    g_cu.amp = mode;
}
extern "C" void cuda_set_act_storage(int mode) {
    CHECK(mode == CUDA_AMP_OFF || mode == CUDA_AMP_BF16 || mode == CUDA_AMP_FP16);
    g_cu.act = mode;
}
extern "C" size_t cuda_act_bytes(void) { return g_cu.act == CUDA_AMP_OFF ? sizeof(float) : 2; }

static void convert(int st, const void *src, int dt, void *dst, size_t n);

extern "C" const float *cuda_act_input(const float *x, size_t n, float *scratch) {
    REQUIRE_ACTIVE();
    if (g_cu.act == CUDA_AMP_OFF) return x;
    convert(CUDA_AMP_OFF, x, g_cu.act, scratch, n);
    return scratch;
}

extern "C" const char *cuda_describe(void) {
    if (!g_cu.active) return "CUDA: not initialised";
    cudaDeviceProp p;
    CUDA_CHECK(cudaGetDeviceProperties(&p, g_cu.device));
    int drv = 0, rt = 0, bl = 0;
    CUDA_CHECK(cudaDriverGetVersion(&drv));
    CUDA_CHECK(cudaRuntimeGetVersion(&rt));
    CUBLAS_CHECK(cublasGetVersion(g_cu.cublas, &bl));
    const size_t dn = cudnnGetVersion();   /* e.g. 91900 for 9.19.0 */
    snprintf(g_cu.desc, sizeof g_cu.desc,
             "CUDA: %s (sm_%d%d, %.0f GiB, %d SMs), driver %d.%d, runtime %d.%d, cuDNN %zu.%zu.%zu, "
             "cuBLAS %d.%d.%d, TF32 %s, convolutions in %s, activations stored in %s", p.name, p.major, p.minor,
             (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), p.multiProcessorCount,
             drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10, dn / 10000, dn % 10000 / 100,
             dn % 100, bl / 10000, bl % 10000 / 100, bl % 100, g_cu.tf32 ? "on" : "off",
             g_cu.amp == CUDA_AMP_BF16 ? "bf16" : g_cu.amp == CUDA_AMP_FP16 ? "fp16" : "fp32",
             g_cu.act == CUDA_AMP_BF16 ? "bf16" : g_cu.act == CUDA_AMP_FP16 ? "fp16" : "fp32");
    return g_cu.desc;
}

extern "C" void cuda_sync(const char *where) {
    REQUIRE_ACTIVE();
    comm_guard_host_sync();
    cudaError_t e = cudaStreamSynchronize(g_cu.stream);
    if (e != cudaSuccess) fail_at(__FILE__, __LINE__, where ? where : "cuda_sync", cudaGetErrorString(e));
    int flags = 0;
    CUDA_CHECK(cudaMemcpy(&flags, g_cu.flags, sizeof flags, cudaMemcpyDeviceToHost));
    if (flags & FLAG_BAD_LABEL)
        fail_at(__FILE__, __LINE__, where ? where : "cuda_sync",
                "cuda_softmax_xent was given a label outside [0, K)");
}

extern "C" void *cuda_malloc(size_t bytes) {
    REQUIRE_ACTIVE();
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        char d[160];
        snprintf(d, sizeof d, "%zu bytes: %s", bytes, cudaGetErrorString(e));
        fail_at(__FILE__, __LINE__, "cudaMalloc", d);
    }
    return p;
}

extern "C" void cuda_free(void *p) {
    if (!p) return;
    comm_guard_host_sync();   /* cudaFree waits for the whole device */
    CUDA_CHECK(cudaFree(p));
}

extern "C" void cuda_upload(void *dst_dev, const void *src_host, size_t bytes) {
    REQUIRE_ACTIVE();
    if (!bytes) return;
    CUDA_CHECK(cudaMemcpyAsync(dst_dev, src_host, bytes, cudaMemcpyHostToDevice, g_cu.stream));
    /* The host buffer may be reused as soon as we return. */
    comm_guard_host_sync();
    CUDA_CHECK(cudaStreamSynchronize(g_cu.stream));
}

extern "C" void cuda_download(void *dst_host, const void *src_dev, size_t bytes) {
    REQUIRE_ACTIVE();
    if (!bytes) return;
    CUDA_CHECK(cudaMemcpyAsync(dst_host, src_dev, bytes, cudaMemcpyDeviceToHost, g_cu.stream));
    comm_guard_host_sync();
    CUDA_CHECK(cudaStreamSynchronize(g_cu.stream));
}

extern "C" void cuda_memset_zero(void *dst_dev, size_t bytes) {
    REQUIRE_ACTIVE();
    if (bytes) CUDA_CHECK(cudaMemsetAsync(dst_dev, 0, bytes, g_cu.stream));
}

extern "C" void cuda_copy(void *dst_dev, const void *src_dev, size_t bytes) {
    REQUIRE_ACTIVE();
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst_dev, src_dev, bytes, cudaMemcpyDeviceToDevice, g_cu.stream));
}

/* Blocks for a grid-stride loop over n elements: enough to fill the GPU, never more than the
 * elements need. The result never depends on this number (elementwise work only). */
static unsigned grid_for(size_t n) {
    const size_t b = (n + 255) / 256;
    return (unsigned)(b < 1 ? 1 : b > 8192 ? 8192 : b);
}

/* ======================================================================================
 * Convolution.
 * ====================================================================================== */

/* Workspace cap per algorithm: the largest need of MiniResNet's convs is far below it; an
 * algorithm wanting more (some FFT variants want GBs) is skipped. */
#define CONV_WS_LIMIT ((size_t)1 << 30)

/* Descriptors and algorithms for one input shape. */
typedef struct ConvPlan {
    int N, H, W;
    cudnnTensorDescriptor_t x_desc, y_desc;
    cudnnConvolutionDescriptor_t conv_desc;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t ws_fwd, ws_bwd_data, ws_bwd_filter;
    char impl[192];
    struct ConvPlan *next;
} ConvPlan;

typedef struct ConvImpl {
    ConvPlan *plans;
    int amp;                    /* CUDA_AMP_* this layer runs in (decided on the first shape) */
    void *wh;                   /* AMP: 16-bit OHWI weights */
    void *dwh;                  /* AMP: 16-bit OHWI weight gradient of one call */
    unsigned wh_version;
    const float *wh_src;
    int layout;                 /* -1 undecided, 0 OIHW (the master itself), 1 OHWI copy */
    int mode;                   /* g_cu.filter_layout at init */
    cudnnMathType_t math;
    int benchmark;
    cudnnFilterDescriptor_t w_desc;
    float *w_copy;              /* OHWI weights (layout 1) */
    float *dw_copy;             /* OHWI gradient of one call (layout 1) */
    unsigned version, copy_version;
    const float *copy_src;      /* master the copy was made from */
} ConvImpl;

static const char *fwd_name(cudnnConvolutionFwdAlgo_t a) {
    switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "?";
    }
}
static const char *bwd_data_name(cudnnConvolutionBwdDataAlgo_t a) {
    switch (a) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "?";
    }
}
static const char *bwd_filter_name(cudnnConvolutionBwdFilterAlgo_t a) {
    switch (a) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0: return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1: return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3: return "ALGO_3";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING: return "FFT_TILING";
    default: return "?";
    }
}

/* With TF32 off a float32 algorithm may only run in plain float FMA; cuDNN lists tensor-core
 * variants of the same algorithm separately. 16-bit convolutions (AMP) want the tensor cores,
 * but never a conversion of their operands to something narrower. */
static int math_ok(cudnnMathType_t m, int amp) {
    if (amp) return m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    return g_cu.tf32 || (m != CUDNN_TENSOR_OP_MATH && m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
}

static cudnnDataType_t conv_dtype(int amp) {
    return amp == CUDA_AMP_BF16 ? CUDNN_DATA_BFLOAT16 : amp == CUDA_AMP_FP16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}
static const char *amp_name(int amp) {
    return amp == CUDA_AMP_BF16 ? "bf16" : amp == CUDA_AMP_FP16 ? "fp16" : "fp32";
}

/* The first usable entry of a candidate list (cuDNN sorts them best first): it ran (Find) or
 * is supported (heuristics), obeys the math rule, has a workspace size cuDNN confirms for this
 * shape within the cap (the heuristics' own estimate is not always right, and an entry they
 * list can still be refused here), and is deterministic. When no deterministic one exists the
 * first otherwise usable one is taken and *nondet set. Returns the index, or -1. */
template <typename Perf, typename WsQuery>
static int pick(const Perf *p, int n, int amp, WsQuery ws_query, size_t *ws, int *nondet) {
    int fallback = -1;
    size_t fallback_ws = 0;
    for (int i = 0; i < n; i++) {
        if (p[i].status != CUDNN_STATUS_SUCCESS || !math_ok(p[i].mathType, amp)) continue;
        size_t need = 0;
        if (ws_query(p[i].algo, &need) != CUDNN_STATUS_SUCCESS || need > CONV_WS_LIMIT) continue;
        if (p[i].determinism == CUDNN_DETERMINISTIC) {
            *ws = need;
            *nondet = 0;
            return i;
        }
        if (fallback < 0) { fallback = i; fallback_ws = need; }
    }
    *ws = fallback_ws;
    *nondet = fallback >= 0;
    return fallback;
}

#define MAX_ALGOS 16

static void set_filter_desc(ConvImpl *im, const CudaConv2d *c, int layout) {
    const ConvShape *sh = &c->shape;
    /* OIHW is cuDNN's NCHW filter format (K=C_out, C=C_in, R=S=k); OHWI its NHWC format. */
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(im->w_desc, conv_dtype(im->amp),
                                           layout ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                           sh->C_out, sh->C_in, sh->k, sh->k));
}

/* Choose the three algorithms for the plan's descriptors with the filter in `layout`.
 * Returns 0, or -1 when some direction has no usable algorithm (nothing is changed then). */
static int plan_choose(ConvImpl *im, ConvPlan *pl) {
    cudnnConvolutionFwdAlgoPerf_t f[MAX_ALGOS];
    cudnnConvolutionBwdDataAlgoPerf_t d[MAX_ALGOS];
    cudnnConvolutionBwdFilterAlgoPerf_t w[MAX_ALGOS];
    int nf = 0, nd = 0, nw = 0;
    if (im->benchmark) {
        /* Find runs every candidate on scratch buffers it allocates itself. */
        CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(g_cu.cudnn, pl->x_desc, im->w_desc, pl->conv_desc,
                                                         pl->y_desc, MAX_ALGOS, &nf, f));
        CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(g_cu.cudnn, im->w_desc, pl->y_desc, pl->conv_desc,
                                                              pl->x_desc, MAX_ALGOS, &nd, d));
        CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(g_cu.cudnn, pl->x_desc, pl->y_desc, pl->conv_desc,
                                                                im->w_desc, MAX_ALGOS, &nw, w));
    } else {
        CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(g_cu.cudnn, pl->x_desc, im->w_desc, pl->conv_desc,
                                                           pl->y_desc, MAX_ALGOS, &nf, f));
        CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(g_cu.cudnn, im->w_desc, pl->y_desc, pl->conv_desc,
                                                                pl->x_desc, MAX_ALGOS, &nd, d));
        CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(g_cu.cudnn, pl->x_desc, pl->y_desc, pl->conv_desc,
                                                                  im->w_desc, MAX_ALGOS, &nw, w));
    }
    int ndf = 0, ndd = 0, ndw = 0;
    size_t wsf = 0, wsd = 0, wsw = 0;
    const int i = pick(f, nf, im->amp, [&](cudnnConvolutionFwdAlgo_t a, size_t *need) {
        return cudnnGetConvolutionForwardWorkspaceSize(g_cu.cudnn, pl->x_desc, im->w_desc, pl->conv_desc,
                                                       pl->y_desc, a, need); }, &wsf, &ndf);
    const int j = pick(d, nd, im->amp, [&](cudnnConvolutionBwdDataAlgo_t a, size_t *need) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(g_cu.cudnn, im->w_desc, pl->y_desc, pl->conv_desc,
                                                            pl->x_desc, a, need); }, &wsd, &ndd);
    const int k = pick(w, nw, im->amp, [&](cudnnConvolutionBwdFilterAlgo_t a, size_t *need) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(g_cu.cudnn, pl->x_desc, pl->y_desc, pl->conv_desc,
                                                              im->w_desc, a, need); }, &wsw, &ndw);
    if (i < 0 || j < 0 || k < 0) return -1;
    pl->fwd = f[i].algo;
    pl->bwd_data = d[j].algo;
    pl->bwd_filter = w[k].algo;
    pl->ws_fwd = wsf;
    pl->ws_bwd_data = wsd;
    pl->ws_bwd_filter = wsw;
    snprintf(pl->impl, sizeof pl->impl, "%s: fwd %s%s / bwd-data %s%s / bwd-filter %s%s, filter %s%s",
             amp_name(im->amp),
             fwd_name(pl->fwd), ndf ? " (non-deterministic)" : "",
             bwd_data_name(pl->bwd_data), ndd ? " (non-deterministic)" : "",
             bwd_filter_name(pl->bwd_filter), ndw ? " (non-deterministic)" : "",
             im->amp ? "OHWI 16-bit copy" : im->layout ? "OHWI copy" : "OIHW", im->benchmark ? ", benchmarked" : "");
    return 0;
}

/* Tensor and convolution descriptors of a plan in the layer's current data type. The
 * accumulation is float32 in every case (cuDNN's "pseudo" 16-bit configurations). */
static void plan_set_descs(const CudaConv2d *c, const ConvImpl *im, ConvPlan *pl) {
    const ConvShape *sh = &c->shape;
    const int Ho = conv_out_size(sh, pl->H), Wo = conv_out_size(sh, pl->W);
    const cudnnDataType_t dt = conv_dtype(im->amp);
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(pl->x_desc, CUDNN_TENSOR_NHWC, dt, pl->N, sh->C_in, pl->H, pl->W));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(pl->y_desc, CUDNN_TENSOR_NHWC, dt, pl->N, sh->C_out, Ho, Wo));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(pl->conv_desc, sh->pad, sh->pad, sh->stride, sh->stride, 1, 1,
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionMathType(pl->conv_desc, im->amp ? CUDNN_TENSOR_OP_MATH : im->math));
}

/* A layout forced by cuda_set_conv_filter_layout (the tests) falls back from OIHW to the OHWI
 * copy when this cuDNN pairs no algorithm with it (cuDNN 9 on sm_90 has none for float32 OIHW
 * weights with NHWC activations); the plan's name says which layout ran, so the caller can
 * tell. Returns 1 when the OHWI copy has a plan. */
static int fall_back_to_ohwi(ConvImpl *im, const CudaConv2d *c, ConvPlan *pl) {
    if (im->layout != 0) return 0;
    im->layout = 1;
    set_filter_desc(im, c, 1);
    return plan_choose(im, pl) == 0;
}

static ConvPlan *plan_new(const CudaConv2d *c, ConvImpl *im, int N, int H, int W) {
    const ConvShape *sh = &c->shape;
    ConvPlan *pl = (ConvPlan *)callocCheck(1, sizeof *pl);
    pl->N = N; pl->H = H; pl->W = W;
    const int Ho = conv_out_size(sh, H), Wo = conv_out_size(sh, W);
    CHECK(Ho > 0 && Wo > 0);
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&pl->x_desc));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&pl->y_desc));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&pl->conv_desc));
    plan_set_descs(c, im, pl);

    if (im->amp && im->layout < 0) {
        /* AMP, first shape: 16-bit OHWI weights (the tensor-core kernels' format for NHWC
         * activations). No 16-bit algorithm: this layer stays in float32. */
        im->layout = 1;
        set_filter_desc(im, c, 1);
        if (plan_choose(im, pl) != 0) {
            im->amp = CUDA_AMP_OFF;
            im->layout = im->mode;
            if (im->layout >= 0) set_filter_desc(im, c, im->layout);
            plan_set_descs(c, im, pl);
        }
    }
    if (im->amp) {
        if (pl->impl[0] == '\0' && plan_choose(im, pl) != 0) {
            char d[200];
            snprintf(d, sizeof d, "no usable %s algorithm for a %dx%d stride-%d conv %d->%d on %dx%dx%d",
                     amp_name(im->amp), sh->k, sh->k, sh->stride, sh->C_in, sh->C_out, N, H, W);
            fail_at(__FILE__, __LINE__, "cuDNN convolution", d);
        }
    } else if (im->layout < 0) {
        /* Decide the weight layout on the first shape: the flat buffer itself when cuDNN can
         * take OIHW weights with NHWC activations in every direction, else the OHWI copy. */
        im->layout = 0;
        set_filter_desc(im, c, 0);
        if (plan_choose(im, pl) != 0) {
            im->layout = 1;
            set_filter_desc(im, c, 1);
            if (plan_choose(im, pl) != 0)
                fail_at(__FILE__, __LINE__, "cuDNN convolution", "no usable algorithm for either weight layout");
        }
    } else if (plan_choose(im, pl) != 0 && !fall_back_to_ohwi(im, c, pl)) {
        char d[160];
        snprintf(d, sizeof d, "no usable algorithm for a %dx%d stride-%d conv %d->%d on %dx%dx%d with %s weights",
                 sh->k, sh->k, sh->stride, sh->C_in, sh->C_out, N, H, W, im->layout ? "OHWI" : "OIHW");
        fail_at(__FILE__, __LINE__, "cuDNN convolution", d);
    }
    int n = 0, co = 0, ho = 0, wo = 0;
    CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(pl->conv_desc, pl->x_desc, im->w_desc, &n, &co, &ho, &wo));
    CHECK(n == N && co == sh->C_out && ho == Ho && wo == Wo);
    const size_t wn = (size_t)sh->C_out * sh->C_in * sh->k * sh->k;
    if (im->amp && !im->wh) {
        im->wh = cuda_malloc(wn * 2);
        im->dwh = cuda_malloc(wn * 2);
    } else if (!im->amp && im->layout == 1 && !im->w_copy) {
        im->w_copy = (float *)cuda_malloc(wn * sizeof(float));
        im->dw_copy = (float *)cuda_malloc(wn * sizeof(float));
    }
    return pl;
}

static void plan_free(ConvPlan *pl) {
    CUDNN_CHECK(cudnnDestroyTensorDescriptor(pl->x_desc));
    CUDNN_CHECK(cudnnDestroyTensorDescriptor(pl->y_desc));
    CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(pl->conv_desc));
    free(pl);
}

static ConvPlan *plan_get(CudaConv2d *c, int N, int H, int W) {
    ConvImpl *im = (ConvImpl *)c->impl;
    CHECK(im != NULL);
    for (ConvPlan *p = im->plans; p; p = p->next)
        if (p->N == N && p->H == H && p->W == W) return p;
    ConvPlan *p = plan_new(c, im, N, H, W);
    p->next = im->plans;
    im->plans = p;
    return p;
}

/* Element stores and loads in float32, bf16 or fp16: one template of each weight reordering
 * serves the float32 OHWI copy and the 16-bit ones of AMP. */
__device__ __forceinline__ void store_h(float *p, float v) { *p = v; }
__device__ __forceinline__ float load_h(const float *p) { return *p; }
__device__ __forceinline__ void store_h(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store_h(__half *p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ float load_h(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ float load_h(const __half *p) { return __half2float(*p); }

/* Runs the statement with act_t the element type of activations (cuda_set_act_storage). */
#define DISPATCH_ACT(...) do { \
        if (g_cu.act == CUDA_AMP_BF16) { typedef __nv_bfloat16 act_t; __VA_ARGS__; } \
        else if (g_cu.act == CUDA_AMP_FP16) { typedef __half act_t; __VA_ARGS__; } \
        else { typedef float act_t; __VA_ARGS__; } \
    } while (0)

/* dst = src converted between float32, bf16 and fp16 (round to nearest even). */
template <typename S, typename D>
__global__ void k_convert(const S *__restrict__ src, D *__restrict__ dst, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        store_h(dst + i, load_h(src + i));
}
/* OIHW float32 master -> OHWI copy, and an OHWI gradient added into the OIHW float32 one. */
template <typename T>
__global__ void k_oihw_to_ohwi(const float *__restrict__ src, T *__restrict__ dst, int O, int I, int KK) {
    const size_t n = (size_t)O * I * KK;
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < n; t += (size_t)gridDim.x * blockDim.x) {
        const int i = (int)(t % I);
        const int p = (int)(t / I % KK);
        const int o = (int)(t / ((size_t)I * KK));
        store_h(dst + t, src[((size_t)o * I + i) * KK + p]);
    }
}
template <typename T>
__global__ void k_ohwi_add_to_oihw(const T *__restrict__ src, float *__restrict__ dst, int O, int I, int KK) {
    const size_t n = (size_t)O * I * KK;
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < n; t += (size_t)gridDim.x * blockDim.x) {
        const int p = (int)(t % KK);
        const int i = (int)(t / KK % I);
        const int o = (int)(t / ((size_t)KK * I));
        dst[t] = __fadd_rn(dst[t], load_h(src + ((size_t)o * KK + p) * I + i));
    }
}

static const float *weights_for_cudnn(CudaConv2d *c, ConvImpl *im, const float *w) {
    const ConvShape *sh = &c->shape;
    if (im->layout == 0) return w;
    if (im->copy_version != im->version || im->copy_src != w) {
        const size_t n = (size_t)sh->C_out * sh->C_in * sh->k * sh->k;
        k_oihw_to_ohwi<<<grid_for(n), 256, 0, g_cu.stream>>>(w, im->w_copy, sh->C_out, sh->C_in, sh->k * sh->k);
        KERNEL_CHECK("k_oihw_to_ohwi");
        im->copy_version = im->version;
        im->copy_src = w;
    }
    return im->w_copy;
}

static size_t type_bytes(int t) { return t == CUDA_AMP_OFF ? sizeof(float) : 2; }

template <typename S>
static void convert_from(const S *src, int dt, void *dst, size_t n) {
    if (dt == CUDA_AMP_BF16) k_convert<<<grid_for(n), 256, 0, g_cu.stream>>>(src, (__nv_bfloat16 *)dst, n);
    else if (dt == CUDA_AMP_FP16) k_convert<<<grid_for(n), 256, 0, g_cu.stream>>>(src, (__half *)dst, n);
    else k_convert<<<grid_for(n), 256, 0, g_cu.stream>>>(src, (float *)dst, n);
    KERNEL_CHECK("k_convert");
}

/* n elements of type st at src into type dt at dst (types CUDA_AMP_*; st != dt). */
static void convert(int st, const void *src, int dt, void *dst, size_t n) {
    if (st == CUDA_AMP_BF16) convert_from((const __nv_bfloat16 *)src, dt, dst, n);
    else if (st == CUDA_AMP_FP16) convert_from((const __half *)src, dt, dst, n);
    else convert_from((const float *)src, dt, dst, n);
}

/* A convolution operand in the layer's compute type: the tensor itself when it is stored in
 * that type, else a converted copy in the scratch buffer *buf. */
static const void *in_type(const void *x, int stored, int want, void **buf, size_t *have, size_t n) {
    if (stored == want) return x;
    grow(buf, have, (n * type_bytes(want) + 255) / 256 * 256);
    convert(stored, x, want, *buf, n);
    return *buf;
}

/* Where a convolution writes an output of n elements in its compute type: the tensor itself, or
 * scratch to be converted into it afterwards (out_type). */
static void *out_type(void *y, int stored, int want, void **buf, size_t *have, size_t n) {
    if (stored == want) return y;
    grow(buf, have, (n * type_bytes(want) + 255) / 256 * 256);
    return *buf;
}

/* The 16-bit OHWI weights, refreshed after each change of the float32 master. */
static const void *weights_h(CudaConv2d *c, ConvImpl *im, const float *w) {
    const ConvShape *sh = &c->shape;
    if (im->wh_version != im->version || im->wh_src != w) {
        const size_t n = (size_t)sh->C_out * sh->C_in * sh->k * sh->k;
        const int KK = sh->k * sh->k;
        if (im->amp == CUDA_AMP_BF16)
            k_oihw_to_ohwi<<<grid_for(n), 256, 0, g_cu.stream>>>(w, (__nv_bfloat16 *)im->wh, sh->C_out, sh->C_in, KK);
        else
            k_oihw_to_ohwi<<<grid_for(n), 256, 0, g_cu.stream>>>(w, (__half *)im->wh, sh->C_out, sh->C_in, KK);
        KERNEL_CHECK("k_oihw_to_ohwi");
        im->wh_version = im->version;
        im->wh_src = w;
    }
    return im->wh;
}

extern "C" void cuda_conv2d_init(CudaConv2d *c, const ConvShape *shape) {
    REQUIRE_ACTIVE();
    CHECK(conv_shape_valid(shape));
    c->shape = *shape;
    ConvImpl *im = (ConvImpl *)callocCheck(1, sizeof *im);
    im->mode = g_cu.filter_layout;
    im->amp = g_cu.amp;
    im->layout = im->amp ? -1 : im->mode;   /* -1: decided on the first shape */
    /* FMA_MATH keeps float32 convolutions off the TF32 tensor cores; DEFAULT_MATH lets cuDNN
     * use them on Ampere and later. */
    im->math = g_cu.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    im->benchmark = g_cu.conv_benchmark;
    im->version = 1;
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&im->w_desc));
    if (im->layout >= 0) set_filter_desc(im, c, im->layout);
    c->impl = im;
}

extern "C" void cuda_conv2d_free(CudaConv2d *c) {
    ConvImpl *im = (ConvImpl *)c->impl;
    if (!im) return;
    while (im->plans) {
        ConvPlan *next = im->plans->next;
        plan_free(im->plans);
        im->plans = next;
    }
    if (im->w_copy || im->dw_copy || im->wh) {
        comm_guard_host_sync();
        CUDA_CHECK(cudaStreamSynchronize(g_cu.stream));
    }
    cuda_free(im->w_copy);
    cuda_free(im->dw_copy);
    cuda_free(im->wh);
    cuda_free(im->dwh);
    CUDNN_CHECK(cudnnDestroyFilterDescriptor(im->w_desc));
    free(im);
    c->impl = NULL;
}

extern "C" void cuda_conv2d_weights_changed(CudaConv2d *c) {
    ((ConvImpl *)c->impl)->version++;
}

extern "C" const char *cuda_conv2d_impl_name(CudaConv2d *c, int N, int H, int W) {
    REQUIRE_ACTIVE();
    return plan_get(c, N, H, W)->impl;
}

/* Activations are stored in g_cu.act's type (A); a layer computes in im->amp's (P): float32,
 * or the 16-bit type of AMP. Operands stored in another type than P go through the scratch
 * buffers h_in (input side) and h_out (output side), converted on the way. */
extern "C" void cuda_conv2d_forward(CudaConv2d *c, int N, int H, int W, const float *x, const float *w,
                                    float *y) {
    const ConvShape *sh = &c->shape;
    REQUIRE_ACTIVE();
    ConvPlan *pl = plan_get(c, N, H, W);
    ConvImpl *im = (ConvImpl *)c->impl;
    const int A = g_cu.act, P = im->amp;
    const size_t nx = (size_t)N * H * W * sh->C_in;
    const size_t ny = (size_t)N * conv_out_size(sh, H) * conv_out_size(sh, W) * sh->C_out;
    const void *xin = in_type(x, A, P, &g_cu.h_in, &g_cu.h_in_bytes, nx);
    void *yout = out_type(y, A, P, &g_cu.h_out, &g_cu.h_out_bytes, ny);
    grow(&g_cu.ws, &g_cu.ws_bytes, pl->ws_fwd);
    const void *wk = P ? weights_h(c, im, w) : (const void *)weights_for_cudnn(c, im, w);
    const float one = 1.0f, zero = 0.0f;
    CUDNN_CHECK(cudnnConvolutionForward(g_cu.cudnn, &one, pl->x_desc, xin, im->w_desc, wk, pl->conv_desc, pl->fwd,
                                        g_cu.ws, g_cu.ws_bytes, &zero, pl->y_desc, yout));
    if (yout != (void *)y) convert(P, yout, A, y, ny);
}

extern "C" void cuda_conv2d_backward(CudaConv2d *c, int N, int H, int W, const float *x, const float *w,
                                     const float *dy, float *dx, float *dw) {
    const ConvShape *sh = &c->shape;
    REQUIRE_ACTIVE();
    ConvPlan *pl = plan_get(c, N, H, W);
    ConvImpl *im = (ConvImpl *)c->impl;
    const int A = g_cu.act, P = im->amp;
    const size_t nx = (size_t)N * H * W * sh->C_in;
    const size_t ny = (size_t)N * conv_out_size(sh, H) * conv_out_size(sh, W) * sh->C_out;
    const void *dyin = in_type(dy, A, P, &g_cu.h_out, &g_cu.h_out_bytes, ny);
    grow(&g_cu.ws, &g_cu.ws_bytes, pl->ws_bwd_data > pl->ws_bwd_filter ? pl->ws_bwd_data : pl->ws_bwd_filter);
    const float one = 1.0f, zero = 0.0f;
    if (dx) {
        const void *wk = P ? weights_h(c, im, w) : (const void *)weights_for_cudnn(c, im, w);
        void *dxout = out_type(dx, A, P, &g_cu.h_in, &g_cu.h_in_bytes, nx);
        CUDNN_CHECK(cudnnConvolutionBackwardData(g_cu.cudnn, &one, im->w_desc, wk, pl->y_desc, dyin, pl->conv_desc,
                                                 pl->bwd_data, g_cu.ws, g_cu.ws_bytes, &zero, pl->x_desc, dxout));
        if (dxout != (void *)dx) convert(P, dxout, A, dx, nx);
    }
    /* h_in is free again (in stream order) for the input in the compute type */
    const void *xin = in_type(x, A, P, &g_cu.h_in, &g_cu.h_in_bytes, nx);
    const size_t n = (size_t)sh->C_out * sh->C_in * sh->k * sh->k;
    const int KK = sh->k * sh->k;
    if (P) {
        /* the 16-bit gradient of this call, added into the float32 one */
        CUDNN_CHECK(cudnnConvolutionBackwardFilter(g_cu.cudnn, &one, pl->x_desc, xin, pl->y_desc, dyin, pl->conv_desc,
                                                   pl->bwd_filter, g_cu.ws, g_cu.ws_bytes, &zero, im->w_desc,
                                                   im->dwh));
        if (P == CUDA_AMP_BF16)
            k_ohwi_add_to_oihw<<<grid_for(n), 256, 0, g_cu.stream>>>((const __nv_bfloat16 *)im->dwh, dw, sh->C_out,
                                                                     sh->C_in, KK);
        else
            k_ohwi_add_to_oihw<<<grid_for(n), 256, 0, g_cu.stream>>>((const __half *)im->dwh, dw, sh->C_out, sh->C_in,
                                                                     KK);
        KERNEL_CHECK("k_ohwi_add_to_oihw");
    } else if (im->layout == 0) {
        /* beta = 1: accumulate into the gradient, as the contract wants. */
        CUDNN_CHECK(cudnnConvolutionBackwardFilter(g_cu.cudnn, &one, pl->x_desc, xin, pl->y_desc, dyin, pl->conv_desc,
                                                   pl->bwd_filter, g_cu.ws, g_cu.ws_bytes, &one, im->w_desc, dw));
    } else {
        CUDNN_CHECK(cudnnConvolutionBackwardFilter(g_cu.cudnn, &one, pl->x_desc, xin, pl->y_desc, dyin, pl->conv_desc,
                                                   pl->bwd_filter, g_cu.ws, g_cu.ws_bytes, &zero, im->w_desc,
                                                   im->dw_copy));
        k_ohwi_add_to_oihw<<<grid_for(n), 256, 0, g_cu.stream>>>((const float *)im->dw_copy, dw, sh->C_out, sh->C_in, KK);
        KERNEL_CHECK("k_ohwi_add_to_oihw");
    }
}

/* ======================================================================================
 * Batch norm.
 * ====================================================================================== */

/* Row tiling of the [M, C] reductions: a block of 32 x 8 threads covers 32 channels (one warp
 * reads 128 contiguous bytes of a row) and 8 rows at a time of its row range. */
#define RT_X 32
#define RT_Y 8
#define MAX_ROW_BLOCKS 1024

/* Rows per block: a function of M alone, so the summation order is too. */
static size_t rows_per_block(size_t M) {
    size_t r = (M + MAX_ROW_BLOCKS - 1) / MAX_ROW_BLOCKS;
    if (r < 64) r = 64;
    return (r + RT_Y - 1) / RT_Y * RT_Y;
}

/* Pass 1 of bn_stats: part[b][c] and part[nb + b][c] = sum and sum of squares of x over the
 * rows of block b. Within the block, each thread sums its rows in order, then the RT_Y
 * partials are added in ty order by one thread. */
template <typename T>
__global__ void k_bn_stats_part(const T *__restrict__ x, size_t M, int C, size_t R,
                                double *__restrict__ part) {
    __shared__ double s_sh[RT_Y][RT_X], q_sh[RT_Y][RT_X];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int c = blockIdx.y * RT_X + tx;
    const size_t b = blockIdx.x, nb = gridDim.x;
    const size_t r0 = b * R, r1 = r0 + R < M ? r0 + R : M;
    double s = 0.0, q = 0.0;
    if (c < C)
        for (size_t r = r0 + ty; r < r1; r += RT_Y) {
            const double v = load_h(x + r * C + c);
            s += v;
            q += v * v;
        }
    s_sh[ty][tx] = s;
    q_sh[ty][tx] = q;
    __syncthreads();
    if (ty == 0 && c < C) {
        for (int j = 1; j < RT_Y; j++) { s += s_sh[j][tx]; q += q_sh[j][tx]; }
        part[b * C + c] = s;
        part[(nb + b) * C + c] = q;
    }
}

/* Pass 2, shared by bn_stats and bn_backward_reduce: out0[c], out1[c] = the block partials
 * added in block order; out1 is then multiplied by mul1[c] when given. */
__global__ void k_reduce_parts(const double *__restrict__ part, int nb, int C, double *__restrict__ out0,
                               double *__restrict__ out1, const float *__restrict__ mul1,
                               double *__restrict__ count, double M) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c == 0 && count) *count = M;
    if (c >= C) return;
    double s = 0.0, q = 0.0;
    for (int b = 0; b < nb; b++) {
        s += part[(size_t)b * C + c];
        q += part[((size_t)nb + b) * C + c];
    }
    out0[c] = s;
    out1[c] = mul1 ? q * (double)mul1[c] : q;
}

static void launch_reduce_parts(const double *part, int nb, int C, double *out0, double *out1,
                                const float *mul1, double *count, size_t M) {
    k_reduce_parts<<<(C + 127) / 128, 128, 0, g_cu.stream>>>(part, nb, C, out0, out1, mul1, count, (double)M);
    KERNEL_CHECK("k_reduce_parts");
}

extern "C" void cuda_bn_stats(const float *x, size_t M, int C, double *sum, double *sumsq, double *count) {
    REQUIRE_ACTIVE();
    CHECK(M > 0 && C > 0);
    const size_t R = rows_per_block(M), nb = (M + R - 1) / R;
    double *part = (double *)scratch(2 * nb * (size_t)C * sizeof(double));
    dim3 grid((unsigned)nb, (unsigned)((C + RT_X - 1) / RT_X)), block(RT_X, RT_Y);
    DISPATCH_ACT(k_bn_stats_part<<<grid, block, 0, g_cu.stream>>>((const act_t *)x, M, C, R, part));
    KERNEL_CHECK("k_bn_stats_part");
    launch_reduce_parts(part, (int)nb, C, sum, sumsq, NULL, count, M);
}

/* One thread per channel: ops_cpu.c's bn_finalize_stats, both rules.h's bn_finalize_channel. */
__global__ void k_bn_finalize(const double *__restrict__ sum, const double *__restrict__ sumsq,
                              const double *__restrict__ count_p, int C, float eps, float momentum,
                              float *__restrict__ mean, float *__restrict__ invstd,
                              float *__restrict__ running_mean, float *__restrict__ running_var) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    bn_finalize_channel(c, sum, sumsq, *count_p, eps, momentum, mean, invstd, running_mean, running_var);
}

extern "C" void cuda_bn_finalize_stats(const double *sum, const double *sumsq, const double *count, int C,
                                       float eps, float momentum, float *mean, float *invstd,
                                       float *running_mean, float *running_var) {
    REQUIRE_ACTIVE();
    k_bn_finalize<<<(C + 127) / 128, 128, 0, g_cu.stream>>>(sum, sumsq, count, C, eps, momentum, mean, invstd,
                                                             running_mean, running_var);
    KERNEL_CHECK("k_bn_finalize");
}

__global__ void k_bn_eval_stats(const float *__restrict__ rm, const float *__restrict__ rv, int C, float eps,
                                float *__restrict__ mean, float *__restrict__ invstd) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    mean[c] = rm[c];
    invstd[c] = bn_eval_invstd(rv[c], eps);
}

extern "C" void cuda_bn_eval_stats(const float *running_mean, const float *running_var, int C, float eps,
                                   float *mean, float *invstd) {
    REQUIRE_ACTIVE();
    k_bn_eval_stats<<<(C + 127) / 128, 128, 0, g_cu.stream>>>(running_mean, running_var, C, eps, mean, invstd);
    KERNEL_CHECK("k_bn_eval_stats");
}

/* NaN passes through (as in PyTorch) so that a diverging run shows up in the loss. */
__device__ __forceinline__ float relu1(float v) { return v < 0.0f ? 0.0f : v; }

template <typename T>
__global__ void k_bn_apply(const T *__restrict__ x, T *__restrict__ y, size_t n, int C,
                           const float *__restrict__ mean, const float *__restrict__ invstd,
                           const float *__restrict__ gamma, const float *__restrict__ beta,
                           const T *__restrict__ residual, int relu) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(i % C);
        /* ops_cpu.c folds scale and shift in float, then y = x*scale + shift [+ r]. */
        const float scale = __fmul_rn(gamma[c], invstd[c]);
        const float shift = __fsub_rn(beta[c], __fmul_rn(mean[c], scale));
        float v = __fadd_rn(__fmul_rn(load_h(x + i), scale), shift);
        if (residual) v = __fadd_rn(v, load_h(residual + i));
        store_h(y + i, relu ? relu1(v) : v);
    }
}

extern "C" void cuda_bn_apply(const float *x, float *y, size_t M, int C, const float *mean,
                              const float *invstd, const float *gamma, const float *beta,
                              const float *residual, int relu) {
    REQUIRE_ACTIVE();
    const size_t n = M * (size_t)C;
    DISPATCH_ACT(k_bn_apply<<<grid_for(n), 256, 0, g_cu.stream>>>((const act_t *)x, (act_t *)y, n, C, mean, invstd,
                                                                  gamma, beta, (const act_t *)residual, relu));
    KERNEL_CHECK("k_bn_apply");
}

/* Pass 1 of bn_backward_reduce: g = dy (masked by y > 0 when relu), written out, and the block
 * partials of sum(g) and sum(g*(x-mean)) (the product in float, as ops_cpu.c). No restrict on
 * dy and g: they may alias, and each element is read before it is written. */
template <typename T>
__global__ void k_bn_bwd_part(const T *__restrict__ x, const T *__restrict__ y, const T *dy,
                              T *g, size_t M, int C, size_t R, const float *__restrict__ mean, int relu,
                              double *__restrict__ part) {
    __shared__ double s_sh[RT_Y][RT_X], q_sh[RT_Y][RT_X];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int c = blockIdx.y * RT_X + tx;
    const size_t b = blockIdx.x, nb = gridDim.x;
    const size_t r0 = b * R, r1 = r0 + R < M ? r0 + R : M;
    double s = 0.0, q = 0.0;
    if (c < C) {
        const float mc = mean[c];
        for (size_t r = r0 + ty; r < r1; r += RT_Y) {
            const size_t i = r * C + c;
            const float d = load_h(dy + i);
            const float gv = relu ? (load_h(y + i) > 0.0f ? d : 0.0f) : d;
            store_h(g + i, gv);
            s += gv;
            q += (double)__fmul_rn(gv, __fsub_rn(load_h(x + i), mc));
        }
    }
    s_sh[ty][tx] = s;
    q_sh[ty][tx] = q;
    __syncthreads();
    if (ty == 0 && c < C) {
        for (int j = 1; j < RT_Y; j++) { s += s_sh[j][tx]; q += q_sh[j][tx]; }
        part[b * C + c] = s;
        part[(nb + b) * C + c] = q;
    }
}

extern "C" void cuda_bn_backward_reduce(const float *x, const float *y, const float *dy, float *g, size_t M,
                                        int C, const float *mean, const float *invstd, int relu,
                                        double *sum_g, double *sum_gx) {
    REQUIRE_ACTIVE();
    CHECK(M > 0 && C > 0);
    const size_t R = rows_per_block(M), nb = (M + R - 1) / R;
    double *part = (double *)scratch(2 * nb * (size_t)C * sizeof(double));
    dim3 grid((unsigned)nb, (unsigned)((C + RT_X - 1) / RT_X)), block(RT_X, RT_Y);
    DISPATCH_ACT(k_bn_bwd_part<<<grid, block, 0, g_cu.stream>>>((const act_t *)x, (const act_t *)y,
                                                                (const act_t *)dy, (act_t *)g, M, C, R, mean, relu,
                                                                part));
    KERNEL_CHECK("k_bn_bwd_part");
    launch_reduce_parts(part, (int)nb, C, sum_g, sum_gx, invstd, NULL, M);
}

/* Per channel, as ops_cpu.c: dx = a*g - b*x + d with a = gamma*invstd,
 * b = a*invstd*sum_gx/count, d = b*mean - a*sum_g/count (double, rounded to float). */
__global__ void k_bn_bwd_coef(const float *__restrict__ mean, const float *__restrict__ invstd,
                              const float *__restrict__ gamma, const double *__restrict__ lsg,
                              const double *__restrict__ lsgx, const double *__restrict__ gsg,
                              const double *__restrict__ gsgx, const double *__restrict__ count_p, int C,
                              float *__restrict__ dgamma, float *__restrict__ dbeta, float *__restrict__ coef) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const double count = *count_p;
    const double ac = (double)gamma[c] * invstd[c];
    const double bc = ac * invstd[c] * gsgx[c] / count;
    coef[c] = (float)ac;
    coef[C + c] = (float)bc;
    coef[2 * C + c] = (float)(bc * mean[c] - ac * gsg[c] / count);
    if (dgamma) dgamma[c] = __fadd_rn(dgamma[c], (float)lsgx[c]);
    if (dbeta) dbeta[c] = __fadd_rn(dbeta[c], (float)lsg[c]);
}

/* No restrict on g and dx: they may alias (elementwise, read before write). */
template <typename T>
__global__ void k_bn_bwd_apply(const T *__restrict__ x, const T *g, T *dx, size_t n, int C,
                               const float *__restrict__ coef) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(i % C);
        store_h(dx + i, __fadd_rn(__fsub_rn(__fmul_rn(coef[c], load_h(g + i)), __fmul_rn(coef[C + c], load_h(x + i))),
                                  coef[2 * C + c]));
    }
}

extern "C" void cuda_bn_backward_apply(const float *x, const float *g, float *dx, size_t M, int C,
                                       const float *mean, const float *invstd, const float *gamma,
                                       const double *local_sum_g, const double *local_sum_gx,
                                       const double *global_sum_g, const double *global_sum_gx,
                                       const double *count, float *dgamma, float *dbeta) {
    REQUIRE_ACTIVE();
    float *coef = (float *)scratch(3 * (size_t)C * sizeof(float));
    k_bn_bwd_coef<<<(C + 127) / 128, 128, 0, g_cu.stream>>>(mean, invstd, gamma, local_sum_g, local_sum_gx,
                                                             global_sum_g, global_sum_gx, count, C, dgamma,
                                                             dbeta, coef);
    KERNEL_CHECK("k_bn_bwd_coef");
    const size_t n = M * (size_t)C;
    DISPATCH_ACT(k_bn_bwd_apply<<<grid_for(n), 256, 0, g_cu.stream>>>((const act_t *)x, (const act_t *)g,
                                                                      (act_t *)dx, n, C, coef));
    KERNEL_CHECK("k_bn_bwd_apply");
}

/* ======================================================================================
 * Head.
 * ====================================================================================== */

/* One thread per (n, c), pixels summed in order in double: the same sum as ops_cpu.c. */
template <typename T>
__global__ void k_avgpool_fwd(const T *__restrict__ x, float *__restrict__ y, int N, int HW, int C) {
    const size_t n_out = (size_t)N * C;
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < n_out; t += (size_t)gridDim.x * blockDim.x) {
        const size_t n = t / C, c = t % C;
        const T *xp = x + n * HW * C + c;
        double acc = 0.0;
        for (int p = 0; p < HW; p++) acc += load_h(xp + (size_t)p * C);
        y[t] = (float)(acc / HW);
    }
}

extern "C" void cuda_avgpool_forward(const float *x, float *y, int N, int HW, int C) {
    REQUIRE_ACTIVE();
    const size_t n = (size_t)N * C;
    DISPATCH_ACT(k_avgpool_fwd<<<grid_for(n), 256, 0, g_cu.stream>>>((const act_t *)x, y, N, HW, C));
    KERNEL_CHECK("k_avgpool_fwd");
}

template <typename T>
__global__ void k_avgpool_bwd(const float *__restrict__ dy, T *__restrict__ dx, int N, int HW, int C,
                              float inv) {
    const size_t n = (size_t)N * HW * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t c = i % C, img = i / ((size_t)HW * C);
        store_h(dx + i, __fmul_rn(dy[img * C + c], inv));
    }
}

extern "C" void cuda_avgpool_backward(const float *dy, float *dx, int N, int HW, int C) {
    REQUIRE_ACTIVE();
    const size_t n = (size_t)N * HW * C;
    DISPATCH_ACT(k_avgpool_bwd<<<grid_for(n), 256, 0, g_cu.stream>>>(dy, (act_t *)dx, N, HW, C, 1.0f / (float)HW));
    KERNEL_CHECK("k_avgpool_bwd");
}

__global__ void k_add_bias(float *__restrict__ y, const float *__restrict__ b, int N, int O) {
    const size_t n = (size_t)N * O;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = __fadd_rn(y[i], b[i % O]);
}

/* db[o] += sum over rows, in row order in double. */
__global__ void k_bias_grad(const float *__restrict__ dy, float *__restrict__ db, int N, int O) {
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= O) return;
    double s = 0.0;
    for (int n = 0; n < N; n++) s += dy[(size_t)n * O + o];
    db[o] = __fadd_rn(db[o], (float)s);
}

/* cuBLAS is column-major: a row-major [R, C] matrix is the column-major [C, R] matrix, i.e. its
 * transpose. So each product below is written for the transposed (column-major) operands. */
extern "C" void cuda_linear_forward(const float *x, const float *w, const float *b, float *y, int N, int I, int O) {
    REQUIRE_ACTIVE();
    const float one = 1.0f, zero = 0.0f;
    /* y^T[O,N] = w[O,I] x^T[I,N]: w is column-major [I,O] (op T), x column-major [I,N]. */
    CUBLAS_CHECK(cublasSgemm(g_cu.cublas, CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, &one, w, I, x, I, &zero, y, O));
    const size_t n = (size_t)N * O;
    k_add_bias<<<grid_for(n), 256, 0, g_cu.stream>>>(y, b, N, O);
    KERNEL_CHECK("k_add_bias");
}

extern "C" void cuda_linear_backward(const float *x, const float *w, const float *dy, float *dx, float *dw,
                                     float *db, int N, int I, int O) {
    REQUIRE_ACTIVE();
    const float one = 1.0f, zero = 0.0f;
    /* dw^T[I,O] += x^T[I,N] dy[N,O]: x column-major [I,N], dy column-major [O,N] (op T). */
    CUBLAS_CHECK(cublasSgemm(g_cu.cublas, CUBLAS_OP_N, CUBLAS_OP_T, I, O, N, &one, x, I, dy, O, &one, dw, I));
    k_bias_grad<<<(O + 127) / 128, 128, 0, g_cu.stream>>>(dy, db, N, O);
    KERNEL_CHECK("k_bias_grad");
    if (!dx) return;
    /* dx^T[I,N] = w^T[I,O] dy^T[O,N]: w column-major [I,O], dy column-major [O,N]. */
    CUBLAS_CHECK(cublasSgemm(g_cu.cublas, CUBLAS_OP_N, CUBLAS_OP_N, I, N, O, &one, w, I, dy, O, &zero, dx, I));
}

/* One block: each thread takes rows t, t+B, ... and keeps its own loss sum; thread 0 adds the
 * B sums in thread order. Fixed B, so the loss is bitwise stable. Row arithmetic in double
 * as ops_cpu.c. */
#define XENT_THREADS 256
__global__ void k_softmax_xent(const float *__restrict__ logits, const int *__restrict__ labels, int N, int K,
                               float scale, float *__restrict__ dlogits, float *__restrict__ loss,
                               int *__restrict__ correct, int *__restrict__ flags) {
    __shared__ double l_sh[XENT_THREADS];
    __shared__ int c_sh[XENT_THREADS];
    double lsum = 0.0;
    int ok = 0;
    for (int n = threadIdx.x; n < N; n += blockDim.x) {
        const float *z = logits + (size_t)n * K;
        const int lab = labels[n];
        if (lab < 0 || lab >= K) {
            atomicOr(flags, FLAG_BAD_LABEL);
            lsum = nan("");
            continue;
        }
        int arg = 0;
        for (int k = 1; k < K; k++)
            if (z[k] > z[arg]) arg = k;
        ok += arg == lab;
        const double zmax = z[arg];
        double se = 0.0;
        for (int k = 0; k < K; k++) se += exp((double)z[k] - zmax);
        lsum += log(se) - ((double)z[lab] - zmax);
        if (dlogits) {
            const double f = (double)scale / N;
            for (int k = 0; k < K; k++) {
                const double p = exp((double)z[k] - zmax) / se;
                dlogits[(size_t)n * K + k] = (float)(f * (p - (k == lab)));
            }
        }
    }
    l_sh[threadIdx.x] = lsum;
    c_sh[threadIdx.x] = ok;
    __syncthreads();
    if (threadIdx.x == 0) {
        double s = 0.0;
        int cs = 0;
        for (int t = 0; t < (int)blockDim.x; t++) { s += l_sh[t]; cs += c_sh[t]; }
        *loss = (float)(s / N);
        if (correct) *correct = cs;
    }
}

extern "C" void cuda_softmax_xent(const float *logits, const int *labels, int N, int K, float scale,
                                  float smoothing, float mix, float *dlogits, float *loss, int *correct) {
    REQUIRE_ACTIVE();
    CHECK(N > 0 && K > 0 && loss != NULL);
    /* Label smoothing and mixed targets have not run on a GPU yet: ddptrain refuses
     * --label_smoothing, --mixup_alpha and --cutmix_alpha there. */
    CHECK(smoothing == 0.0f && mix == 1.0f);
    k_softmax_xent<<<1, XENT_THREADS, 0, g_cu.stream>>>(logits, labels, N, K, scale, dlogits, loss, correct,
                                                        g_cu.flags);
    KERNEL_CHECK("k_softmax_xent");
}

/* ======================================================================================
 * Elementwise helpers and SGD.
 * ====================================================================================== */

template <typename T>
__global__ void k_relu_mask_copy(T *__restrict__ g, const T *__restrict__ y, T *__restrict__ out, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float v = load_h(y + i) > 0.0f ? load_h(g + i) : 0.0f;
        store_h(g + i, v);
        store_h(out + i, v);
    }
}

extern "C" void cuda_relu_mask_copy(float *g, const float *y, float *out, size_t n) {
    REQUIRE_ACTIVE();
    if (!n) return;
    DISPATCH_ACT(k_relu_mask_copy<<<grid_for(n), 256, 0, g_cu.stream>>>((act_t *)g, (const act_t *)y, (act_t *)out, n));
    KERNEL_CHECK("k_relu_mask_copy");
}

template <typename T>
__global__ void k_add_inplace(T *__restrict__ d, const T *__restrict__ s, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        store_h(d + i, __fadd_rn(load_h(d + i), load_h(s + i)));
}

extern "C" void cuda_add_inplace(float *d, const float *s, size_t n) {
    REQUIRE_ACTIVE();
    if (!n) return;
    k_add_inplace<<<grid_for(n), 256, 0, g_cu.stream>>>(d, s, n);
    KERNEL_CHECK("k_add_inplace");
}

extern "C" void cuda_add_act_inplace(float *d, const float *s, size_t n) {
    REQUIRE_ACTIVE();
    if (!n) return;
    DISPATCH_ACT(k_add_inplace<<<grid_for(n), 256, 0, g_cu.stream>>>((act_t *)d, (const act_t *)s, n));
    KERNEL_CHECK("k_add_inplace");
}

__global__ void k_scale_inplace(float *__restrict__ x, size_t n, const float *__restrict__ s) {
    const float f = *s;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = __fmul_rn(x[i], f);
}

extern "C" void cuda_scale_inplace(float *x, size_t n, const float *s) {
    REQUIRE_ACTIVE();
    if (!n) return;
    k_scale_inplace<<<grid_for(n), 256, 0, g_cu.stream>>>(x, n, s);
    KERNEL_CHECK("k_scale_inplace");
}

/* Correctly rounded whatever -prec-div says, so the result is the host's x / d bit for bit. */
__device__ __forceinline__ float div_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double div_rn(double a, double b) { return __ddiv_rn(a, b); }

template <typename T>
__global__ void k_div_inplace(T *__restrict__ x, size_t n, T d) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = div_rn(x[i], d);
}

extern "C" void cuda_div_inplace(void *x, size_t n, int f64, int d, struct CUstream_st *stream) {
    REQUIRE_ACTIVE();
    if (!n) return;
    if (f64)
        k_div_inplace<double><<<grid_for(n), 256, 0, stream>>>((double *)x, n, (double)d);
    else
        k_div_inplace<float><<<grid_for(n), 256, 0, stream>>>((float *)x, n, (float)d);
    KERNEL_CHECK("k_div_inplace");
}

/* Several threads may store 1 into found_inf: the same value, so no atomic is needed. */
__global__ void k_unscale_check(float *__restrict__ g, size_t n, const float *__restrict__ scale,
                                int *__restrict__ found_inf) {
    const float inv = (float)(1.0 / (double)*scale);
    int bad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float v = __fmul_rn(g[i], inv);
        bad |= !isfinite(v);
        g[i] = v;
    }
    if (__syncthreads_or(bad) && threadIdx.x == 0) *found_inf = 1;
}

extern "C" void cuda_unscale_check(float *g, size_t n, const float *scale, int *found_inf) {
    REQUIRE_ACTIVE();
    if (!n) return;
    k_unscale_check<<<grid_for(n), 256, 0, g_cu.stream>>>(g, n, scale, found_inf);
    KERNEL_CHECK("k_unscale_check");
}

__global__ void k_scaler_update(float *scale, int *state, float growth, float backoff, int interval) {
    scaler_update_rule(scale, state, growth, backoff, interval);
}

extern "C" void cuda_scaler_update(float *scale, int *state, float growth, float backoff, int interval) {
    REQUIRE_ACTIVE();
    k_scaler_update<<<1, 1, 0, g_cu.stream>>>(scale, state, growth, backoff, interval);
    KERNEL_CHECK("k_scaler_update");
}

/* optim.c's operation order and float rounding, without contraction into FMAs. */
__global__ void k_sgd(float *__restrict__ p, const float *__restrict__ g, float *__restrict__ buf, size_t n,
                      float lr, float mom, float wd, const int *__restrict__ skip) {
    if (skip && *skip) return;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float pi = p[i];
        const float d = __fadd_rn(g[i], __fmul_rn(wd, pi));
        const float b = mom != 0.0f ? __fadd_rn(__fmul_rn(buf[i], mom), d) : d;
        buf[i] = b;
        p[i] = __fsub_rn(pi, __fmul_rn(lr, b));
    }
}

extern "C" void cuda_sgd_step(float *params, const float *grads, float *buf, size_t n, float lr,
                              float momentum, float weight_decay, int nesterov, const int *skip) {
    REQUIRE_ACTIVE();
    /* Nesterov momentum has not run on a GPU yet: ddptrain refuses --nesterov there. */
    CHECK(!nesterov);
    if (!n) return;
    k_sgd<<<grid_for(n), 256, 0, g_cu.stream>>>(params, grads, buf, n, lr, momentum, weight_decay, skip);
    KERNEL_CHECK("k_sgd");
}
