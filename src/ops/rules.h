/* SPDX-License-Identifier: BSD-3-Clause */
/* rules.h - arithmetic the CPU and the CUDA backend both do, written once so that they cannot
 * drift apart: GradScaler's update and batch norm's statistics.
 *
 * Plain C inline functions over scalars, with no header but <math.h>: backend_cpu.c and
 * ops_cpu.c call them on the host, ops_cuda.cu from its kernels (nvcc compiles them for the
 * device too, __host__ __device__). Each is the same sequence of operations in the same types
 * on both sides. One difference remains: by default nvcc fuses a multiply and an add into one
 * FMA where it can (GCC does not at -std=c11), so the GPU's double intermediates of
 * bn_finalize_channel can differ in their last bits, which test_ops_cuda allows for. */
#ifndef DDP_RULES_H
#define DDP_RULES_H

#include <math.h>

#ifdef __CUDACC__
#define DDP_HOST_DEVICE __host__ __device__
#else
#define DDP_HOST_DEVICE
#endif

/* ---- GradScaler (model/scaler.h) ---- */

/* Indices into the loss scaler's int state in backend memory. */
enum { SCALER_TRACKER = 0, SCALER_FOUND_INF = 1, SCALER_SKIPPED = 2, SCALER_NSTATE = 3 };

/* GradScaler.update: with found_inf, scale *= backoff, tracker = 0, skipped++; else
 * tracker++, and at `interval` scale *= growth (when that stays finite) and tracker = 0. Then
 * found_inf = 0. */
static inline DDP_HOST_DEVICE void scaler_update_rule(float *scale, int *st, float growth, float backoff,
                                                      int interval) {
    if (st[SCALER_FOUND_INF]) {
        *scale = *scale * backoff;
        st[SCALER_TRACKER] = 0;
        st[SCALER_SKIPPED]++;
    } else {
        const int ok = st[SCALER_TRACKER] + 1;
        if (ok >= interval) {
            const float grown = *scale * growth;
            /* PyTorch grows only while the result is finite. */
            if (grown - grown == 0.0f) *scale = grown;
            st[SCALER_TRACKER] = 0;
        } else {
            st[SCALER_TRACKER] = ok;
        }
    }
    st[SCALER_FOUND_INF] = 0;
}

/* ---- batch norm ---- */

/* Channel c of bn_finalize_stats (ops_cpu.h): from the sums over `count` values, the mean and
 * 1/sqrt(var + eps) of the biased variance, in double and rounded once to float; and PyTorch's
 * running-statistics update, running = (1 - momentum) running + momentum batch, with the
 * unbiased variance (count / (count - 1)). running_mean and running_var may be NULL. */
static inline DDP_HOST_DEVICE void bn_finalize_channel(int c, const double *sum, const double *sumsq, double count,
                                                       float eps, float momentum, float *mean, float *invstd,
                                                       float *running_mean, float *running_var) {
    const double m = sum[c] / count;
    double var = sumsq[c] / count - m * m;
    if (var < 0.0) var = 0.0;   /* rounding can take a constant channel slightly below 0 */
    mean[c] = (float)m;
    invstd[c] = (float)(1.0 / sqrt(var + (double)eps));
    if (running_mean)
        running_mean[c] = (float)((1.0 - momentum) * running_mean[c] + (double)momentum * m);
    if (running_var) {
        const double unbiased = count > 1.0 ? var * count / (count - 1.0) : var;
        running_var[c] = (float)((1.0 - momentum) * running_var[c] + (double)momentum * unbiased);
    }
}

/* Evaluation mode's invstd from the running variance, in float: each operation is correctly
 * rounded on both sides, so the two backends agree bit for bit. */
static inline DDP_HOST_DEVICE float bn_eval_invstd(float running_var, float eps) {
    return 1.0f / sqrtf(running_var + eps);
}

#endif
