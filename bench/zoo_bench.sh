#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Training-step throughput and peak memory of ddptrain's built-in torchvision networks against
# torchvision's own modules in PyTorch (channels_last, its faster CPU layout for these), the
# same batch of random images, image size, class count and threads, the two sides run
# alternately ROUNDS times in one run, the best of each kept (the machines are shared and
# noisy). One row per model, with the ratio of images/s and of peak resident memory.
#   bench/zoo_bench.sh [BUILD_DIR]
#   env: MODELS ("mobilenet_v3_large efficientnet_b0 regnet_y_400mf resnext50_32x4d"; googlenet and
#        inception_v3 train with their auxiliary classifiers on both sides)
#        BATCH (32) SIZE (128) CLASSES (1000) THREADS (2) STEPS (10) WARMUP (3) ROUNDS (2)
#        ONEDNN_MAX_CPU_ISA (caps oneDNN; ATEN_CPU_CAPABILITY is capped alike for PyTorch)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-${top_builddir:-$here/../build}}
MODELS=${MODELS:-mobilenet_v3_large efficientnet_b0 regnet_y_400mf resnext50_32x4d}
N=${BATCH:-32}; S=${SIZE:-128}; K=${CLASSES:-1000}; T=${THREADS:-2}
ST=${STEPS:-10}; WU=${WARMUP:-3}; R=${ROUNDS:-2}
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
torch_python zoo_bench "torch, torchvision"
aten_like_onednn

rss() { sed -n 's/.*peak RSS \([0-9]*\) MiB.*/\1/p' | tail -n 1; }
min() { awk -v a="$1" -v b="$2" 'BEGIN{print ((b + 0) > 0 && ((a + 0) == 0 || (b + 0) < (a + 0))) ? b : a}'; }

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
isa=$(grep -o 'avx512[a-z_0-9]*\|amx[a-z_0-9]*\|avx2' /proc/cpuinfo | sort -u | paste -sd' ' -)
echo "# ddptrain against torchvision (PyTorch $("$PY" -c 'import torch; print(torch.__version__)'), channels_last): training step, float32"
echo "# CPU: ${cpu:-unknown}, $(nproc) CPUs online, $T threads; flags: ${isa:-none}"
echo "# ONEDNN_MAX_CPU_ISA: ${ONEDNN_MAX_CPU_ISA:-(unset)}; ATEN_CPU_CAPABILITY: ${ATEN_CPU_CAPABILITY:-(unset)}"
[ -r /proc/loadavg ] && echo "# load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# batch $N, ${S}x$S px, $K classes, best of $R rounds of $ST steps after $WU warm-up"
fmt="%-1s %-20s %10s %10s %7s   %8s %8s %7s\n"
# shellcheck disable=SC2059
printf "$fmt" "#" model "ddptrain" "PyTorch" ratio "RSS ddp" "RSS pt" "ratio"
# shellcheck disable=SC2059
printf "$fmt" "#" "" "images/s" "images/s" "" "MiB" "MiB" ""
for m in $MODELS; do
    bc=0; bt=0; rc=0; rt=0
    i=0
    while [ $i -lt "$R" ]; do
        c=$(OMP_NUM_THREADS=$T "$build/bench/bench_step" --model "$m" --batch "$N" --size "$S" --classes "$K" \
            --steps "$ST" --warmup "$WU") || { echo "# $m: ddptrain failed: $c"; break; }
        echo "#   $c"
        t=$("$PY" "$here/torch_bench.py" --model "$m" --batch "$N" --size "$S" --classes "$K" --steps "$ST" \
            --warmup "$WU" --threads "$T" --channels_last | tail -n 2)
        echo "$t" | sed 's/^/#   /'
        bc=$(max "$bc" "$(echo "$c" | step_ips)"); bt=$(max "$bt" "$(echo "$t" | step_ips)")
        rc=$(min "$rc" "$(echo "$c" | rss)"); rt=$(min "$rt" "$(echo "$t" | rss)")
        i=$((i + 1))
    done
    # shellcheck disable=SC2059
    printf "$fmt" "" "$m" "$bc" "$bt" "$(awk -v a="$bc" -v b="$bt" 'BEGIN{printf "%.2f", (b > 0) ? a / b : 0}')" \
        "$rc" "$rt" "$(awk -v a="$rc" -v b="$rt" 'BEGIN{printf "%.2f", (b > 0) ? a / b : 0}')"
done
