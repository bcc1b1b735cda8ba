# shellcheck shell=bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/lib.sh - what the benchmark scripts share; sourced after `set -u`.
#
# bench_setup NAME [BUILD_DIR]: B (the build directory, default build), DDPTRAIN and DDPDATA
# built there, and mpirun on PATH, or a line naming NAME and exit 2.
bench_setup() {
    local name=$1
    B=$(cd "${2:-build}" && pwd) || { echo "usage: $name [BUILD_DIR]" >&2; exit 2; }
    DDPTRAIN=$B/ddptrain
    DDPDATA=$B/ddptrain-data
    [ -x "$DDPTRAIN" ] && [ -x "$DDPDATA" ] || { echo "$name: build ddptrain in $B first" >&2; exit 2; }
    command -v mpirun >/dev/null || { echo "$name: mpirun not found" >&2; exit 2; }
}

# job_ips JOB_DIR: the mean images/s of its metrics.jsonl progress records after the first
# (warm-up), 0 when there is none.
job_ips() {
    grep '"loss"' "$1/metrics.jsonl" | tail -n +2 |
        sed 's/.*"images_per_sec": \([0-9.]*\).*/\1/' | awk '{s += $1; n++} END {if (n) printf "%.1f", s / n; else print 0}'
}

# aten_like_onednn: PyTorch's own (ATen) kernels pick their vectors apart from oneDNN; cap them
# as ONEDNN_MAX_CPU_ISA caps oneDNN (ATEN_CPU_CAPABILITY, unless set), so that on a wider CPU
# both sides run what a CPU without the wider ISA runs.
aten_like_onednn() {
    if [ -n "${ONEDNN_MAX_CPU_ISA:-}" ] && [ -z "${ATEN_CPU_CAPABILITY:-}" ]; then
        case $ONEDNN_MAX_CPU_ISA in
            AVX2|avx2) ATEN_CPU_CAPABILITY=avx2 ;;
            AVX512*|avx512*) ATEN_CPU_CAPABILITY=avx512 ;;
            *) ATEN_CPU_CAPABILITY=default ;;
        esac
        export ATEN_CPU_CAPABILITY
    fi
}
