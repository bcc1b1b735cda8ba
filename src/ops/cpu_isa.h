/* SPDX-License-Identifier: BSD-3-Clause */
/* cpu_isa.h - which vector instructions ddptrain's own CPU kernels (winograd.c, depthwise.c)
 * use: the widest the CPU has and oneDNN's ISA limit (ONEDNN_MAX_CPU_ISA) allows, so that one
 * setting selects a whole path, oneDNN's and ours. Each of those kernels is compiled three
 * times, for AVX-512, AVX2+FMA and the build's baseline SSE4.1, and picks one with this. */
#ifndef DDP_CPU_ISA_H
#define DDP_CPU_ISA_H

#include "build_config.h"

#ifdef HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

enum { CPU_ISA_SSE41, CPU_ISA_AVX2, CPU_ISA_AVX512 };

static inline int cpu_isa(void) {
    __builtin_cpu_init();
    const int has512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                       __builtin_cpu_supports("avx512dq");
    const int has2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#ifdef HAVE_DNNL
    const unsigned lim = (unsigned)dnnl_get_effective_cpu_isa();
    const unsigned core512 = (unsigned)dnnl_cpu_isa_avx512_core, avx2 = (unsigned)dnnl_cpu_isa_avx2;
    if (has512 && (lim & core512) == core512) return CPU_ISA_AVX512;
    if (has2 && (lim & avx2) == avx2) return CPU_ISA_AVX2;
    return CPU_ISA_SSE41;
#else
    return has512 ? CPU_ISA_AVX512 : has2 ? CPU_ISA_AVX2 : CPU_ISA_SSE41;
#endif
}

/* "sse41", "avx2", "avx512": as implementation names show it */
static inline const char *cpu_isa_name(int isa) {
    static const char *const names[] = { "sse41", "avx2", "avx512" };
    return names[isa];
}

/* The attributes that compile a function for each path. */
#define CPU_ISA_ATTR_AVX2 __attribute__((target("avx2,fma")))
#define CPU_ISA_ATTR_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma,prefer-vector-width=512")))

#endif
