/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_step.c - images/s of ddptrain's training step (forward, backward, SGD) for MiniResNet
 * on a fixed random batch, so that only compute is measured, as bench/torch_bench.py does for
 * PyTorch; the GFLOP/s that makes (model_train_flops_per_image) and the peak resident memory.
 * usage: bench_step [--model M] [--width W] [--blocks B] [--batch N] [--steps S] [--warmup K] [--size S]
 *                   [--classes K] [--amp 0|1]   (M: miniresnet, resnet18, ... or a network file; images
 *                                    S x S, 32; K classes, 10; --amp 1: --use_amp's bf16 convolutions and
 *                                    linear layers, float32 master weights, exit 2 without oneDNN bf16 kernels) */
#include <string.h>
#include <sys/resource.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "model/model.h"
#include "model/netfile.h"
#include "model/optim.h"
#include "ops/conv_cpu.h"   /* ops_cpu_describe */
#include "ops/linear_cpu.h"
#include "base/rng.h"
#include "base/util.h"

int main(int argc, char **argv) {
    g_progname = "bench_step";
    int width = 64, blocks = 2, N = 64, steps = 20, warmup = 3, S = 32, K = 10, amp = 0;
    const char *model = "miniresnet";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--width")) width = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--blocks")) blocks = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) N = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--size")) S = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--classes")) K = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--amp")) amp = atoi(argv[i + 1]);
        else die_code(2, "unknown option %s", argv[i]);
    }
    Model m;
    if (S < 8 || K < 2) die_code(2, "--size must be at least 8 and --classes at least 2");
    NetSpec net;
    char err[1200];
    char bf16[64] = "float32";
    if (amp) {   /* before the model: each convolution takes its precision at init */
        char impl[48];
        const CpuBf16Path path = conv2d_bf16_path(impl, sizeof impl);
        if (path == CPU_BF16_NONE) die_code(2, "--amp 1: oneDNN has no bf16 kernels on this CPU (%s)", impl);
        snprintf(bf16, sizeof bf16, "bf16 %s, %s", path == CPU_BF16_NATIVE ? "native" : "emulated", impl);
        conv2d_use_bf16(1);
        linear_use_bf16(1);
    }
    if (netfile_load(model, width, blocks, &net, err, sizeof err) != 0) die_code(2, "%s", err);
    if (model_init_net(&m, &backend_cpu, &net, model, K, S, N, err, sizeof err) != 0) die_code(2, "%s", err);
    netspec_free(&net);
    model_init_weights(&m, 1);
    Optimizer opt;
    sgd_init(&opt, m.num_params, 0.9f, 1e-4f);
    Rng r;
    rng_init(&r, 1, 2, 3);
    float *x = mallocCheck((size_t)N * S * S * 3 * sizeof(float));
    int *y = mallocCheck((size_t)N * sizeof(int));
    for (size_t i = 0; i < (size_t)N * S * S * 3; i++) x[i] = rng_normal(&r);
    for (int i = 0; i < N; i++) y[i] = (int)rng_below(&r, (uint32_t)K);
    double t0 = 0.0;
    double fwd = 0.0, bwd = 0.0;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup) { t0 = now_sec(); fwd = bwd = 0.0; }
        double a = now_sec();
        model_zero_grad(&m);
        model_forward(&m, x, y, N, 1, 1.0f, NULL);
        double b = now_sec();
        model_backward(&m);
        double c = now_sec();
        optim_step(&opt, m.params, m.grads, 0.01f);
        model_params_changed(&m);
        fwd += b - a;
        bwd += c - b;
    }
    double dt = now_sec() - t0;
#ifdef _OPENMP
    int threads = omp_get_max_threads();
#else
    int threads = 1;
#endif
    const double ips = (double)N * steps / dt, flops = model_train_flops_per_image(&m);
    struct rusage ru;
    CHECK(getrusage(RUSAGE_SELF, &ru) == 0);
    printf("ddptrain: %s width %d batch %d size %d classes %d threads %d: %.1f images/s, %.1f GFLOP/s (%.3f GFLOP per image), "
           "peak RSS %ld MiB (forward %.1f ms, backward %.1f ms per step) [%s; %s]\n",
           model, width, N, S, K, threads, ips, ips * flops / 1e9, flops / 1e9, ru.ru_maxrss / 1024, 1e3 * fwd / steps,
           1e3 * bwd / steps, ops_cpu_describe(), bf16);
    free(x); free(y);
    optim_free(&opt);
    model_free(&m);
    return 0;
}
