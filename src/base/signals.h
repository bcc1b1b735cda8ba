/* SPDX-License-Identifier: BSD-3-Clause */
/* signals.h - asynchronous signals taken by one thread of their own, never by a computing one.
 *
 * The sgemm kernels that oneDNN 2.x generates (jit_avx512_common_gemm_f32, jit_avx_gemm_f32;
 * oneDNN issue 4845, fixed in 3.11) point the stack pointer into a heap buffer while they run.
 * A signal delivered to a thread inside one of them has its frame written there by the kernel,
 * and the heap is corrupted: a preemption signal ended a rank with "corrupted size vs.
 * prev_size" (SIGABRT in free) one step later in about one run in ten. So the signals ddptrain
 * handles asynchronously are blocked in every thread, and one thread waits for them and calls
 * the handler installed for each (with sigaction, as usual) on its own stack. */
#ifndef DDP_SIGNALS_H
#define DDP_SIGNALS_H

/* Blocks sigs in the calling thread, which every thread created afterwards inherits (OpenMP's,
 * MPI's and PMIx's included), and starts the thread that takes them: call first thing in
 * main, before any other thread exists. A signal whose disposition is SIG_DFL when it arrives
 * gets its default action (the process ends); SIG_IGN drops it. Returns 0, or -1 with errno. */
int signals_route(const int *sigs, int n);

#endif
