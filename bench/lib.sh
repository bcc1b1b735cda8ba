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

# torch_python NAME MODULES: PY, the first of $PYTHON, python3 and /usr/bin/python3 that imports
# MODULES ("torch" or "torch, torchvision"), or a line naming NAME and exit 1.
# shellcheck disable=SC2034  # PY is for the caller
torch_python() {
    PY=""
    for py in "${PYTHON:-}" python3 /usr/bin/python3; do
        [ -n "$py" ] && command -v "$py" >/dev/null 2>&1 && "$py" -c "import $2" 2>/dev/null && { PY=$py; return 0; }
    done
    echo "$1: no python3 with $2 (apt-get install python3-torch python3-torchvision)" >&2
    exit 1
}

# max A B: the larger number.
max() { awk -v a="$1" -v b="$2" 'BEGIN{print ((a + 0) > (b + 0)) ? a : b}'; }

# step_ips: images/s of the bench_step or torch_bench.py line on stdin, to 3 digits or more: the
# GFLOP/s over the GFLOP per image both sides print (their images/s has one decimal, coarse for
# the larger networks), else the images/s as printed.
step_ips() {
    sed -n 's/.* \([0-9.]*\) GFLOP\/s (\([0-9.]*\) GFLOP per image).*/\1 \2/p; s/.*: \([0-9.]*\) images\/s.*/\1/p' |
        awk 'NF == 2 && $2 > 0 { g = sprintf("%.2f", $1 / $2) } NF == 1 { i = $1 } END { print (g != "") ? g : i }'
}
