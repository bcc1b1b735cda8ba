/* SPDX-License-Identifier: BSD-3-Clause */
/* cpu_amp.h - --use_amp on the CPU backend: bfloat16 convolutions and linear layers through
 * oneDNN, float32 everywhere else (batch norm, loss, optimizer, master weights and their
 * gradients), taken only when asked (--use_amp on; auto is float32 on the CPU).
 *
 * Where the CPU has bf16 instructions (avx512_bf16, AMX) oneDNN runs its native kernels; on
 * plain AVX-512 (avx512_core) it emulates them with float32 instructions, slower than float32
 * training; below AVX-512 it has only its reference loops, and the run is refused. The log's
 * device line names the path taken (cpu_amp_describe). */
#ifndef DDP_CPU_AMP_H
#define DDP_CPU_AMP_H

#include <stddef.h>

#include "base/config.h"
#include "base/logger.h"
#include "model/model.h"

/* With --use_amp on: dies with one line (exit 2) for --amp_dtype fp16 or a CPU without oneDNN
 * bf16 kernels, else turns bf16 on for the convolutions and linear layers made afterwards.
 * Nothing otherwise. Returns 1 when bf16 is on. */
int cpu_amp_configure(const Config *c);

/* The precision part of the CPU's device line: "float32", or "mixed precision bf16, float32
 * master weights: bf16 native (avx512_bf16/amx), <impl>" / "... emulated on avx512_core: slower
 * than float32, <impl>". */
void cpu_amp_describe(const Config *c, char *out, size_t n);

/* With bf16 on: one log line at model build, how many of m's convolutions compute in bf16 at a
 * batch of N and, by node and shape, those that stay float32 because oneDNN has only its
 * reference bf16 loops for their shape (their plans are made here, as the first step would).
 * Nothing otherwise. */
void cpu_amp_log_convs(Model *m, int N, Logger *log);

#endif
