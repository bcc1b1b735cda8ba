#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Which precision and algorithm wins per convolution shape on this CPU: bench/conv_shapes (the
# zoo's convolution shapes at 128 px: float32 as conv2d selects it, float32 through oneDNN
# alone, oneDNN's direct convolution where Winograd is in play, and bf16 as --use_amp runs it,
# per pass), on the CPU's own ISA and again under ONEDNN_MAX_CPU_ISA=AVX2 (float32 only there:
# oneDNN has no bf16 kernels below AVX-512). Prints the CPU model and its bf16 features first:
# without avx512_bf16 or AMX, oneDNN emulates bf16 with float32 instructions. Times are of the
# process's CPU time (the machines are shared), one thread by default.
#   bench/conv_shapes.sh [BUILD_DIR]
#   env: BATCH (32) REPS (3) THREADS (1) MARKDOWN (0; 1: docs/benchmarks.md's table rows)
#        ONLY (shapes whose name or networks contain it) AVX2 (1: the second run; 0: none)
#        ONEDNN_MAX_CPU_ISA (when set, the one run is under it)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-${top_builddir:-$here/../build}}
prog=$build/bench/conv_shapes
[ -x "$prog" ] || { echo "conv_shapes.sh: build bench/conv_shapes in $build first (make)" >&2; exit 2; }
N=${BATCH:-32}; R=${REPS:-3}; T=${THREADS:-1}
set -- --batch "$N" --reps "$R" --cpu-time
[ "${MARKDOWN:-0}" = 1 ] && set -- "$@" --markdown
[ -n "${ONLY:-}" ] && set -- "$@" --only "$ONLY"

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
bf=$(grep -o 'avx512_bf16\|amx_bf16\|amx_tile\|amx_int8' /proc/cpuinfo | sort -u | paste -sd' ' -)
echo "# CPU: ${cpu:-unknown}, $(nproc) CPUs online, $T thread(s)"
echo "# bf16 features: ${bf:-none (no avx512_bf16, no AMX: oneDNN emulates bf16 with float32 instructions)}"
[ -r /proc/loadavg ] && echo "# load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
OMP_NUM_THREADS=$T "$prog" "$@"
if [ -z "${ONEDNN_MAX_CPU_ISA:-}" ] && [ "${AVX2:-1}" = 1 ] && grep -q avx512f /proc/cpuinfo; then
    echo
    echo "# again with ONEDNN_MAX_CPU_ISA=AVX2 (oneDNN and ddptrain's own kernels on AVX2): float32 only"
    ONEDNN_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=$T "$prog" "$@"
fi
