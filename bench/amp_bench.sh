#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# --use_amp on the CPU: training-step throughput of ddptrain's bf16 step (bench_step --amp 1:
# bf16 convolutions and linear layers, float32 master weights) against PyTorch's
# torch.autocast("cpu", bfloat16) with channels_last (torch_bench.py --amp bf16), and each
# against its own float32 step, on the same networks, batch of random images, image size,
# class count and threads; the four run alternately ROUNDS times in one run and the best of
# each is kept (the machines are shared and noisy). Prints the CPU model and its bf16 features:
# without avx512_bf16 or AMX oneDNN emulates bf16 with float32 instructions, and the figures
# are those of the emulation, not of bf16 hardware.
#   bench/amp_bench.sh [BUILD_DIR]
#   env: MODELS ("resnet18 resnet50") BATCH (32) SIZE (128) CLASSES (1000) THREADS (2)
#        STEPS (5) WARMUP (2) ROUNDS (1)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-${top_builddir:-$here/../build}}
MODELS=${MODELS:-resnet18 resnet50}
N=${BATCH:-32}; S=${SIZE:-128}; K=${CLASSES:-1000}; T=${THREADS:-2}
ST=${STEPS:-5}; WU=${WARMUP:-2}; R=${ROUNDS:-1}
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
torch_python amp_bench "torch, torchvision"
aten_like_onednn

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b + 0 > 0) printf "%.2fx", a / b; else print "-" }'; }

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
bf=$(grep -o 'avx512_bf16\|amx_bf16\|amx_tile\|avx512_core_bf16' /proc/cpuinfo | sort -u | paste -sd' ' -)
echo "# ddptrain --use_amp (bf16) against torch.autocast(\"cpu\", bfloat16), PyTorch $("$PY" -c 'import torch; print(torch.__version__)') channels_last: training step"
echo "# CPU: ${cpu:-unknown}, $(nproc) CPUs online, $T threads; bf16 features: ${bf:-none (oneDNN emulates bf16: no speed-up to expect)}"
echo "# ONEDNN_MAX_CPU_ISA: ${ONEDNN_MAX_CPU_ISA:-(unset)}; ATEN_CPU_CAPABILITY: ${ATEN_CPU_CAPABILITY:-(unset)}"
[ -r /proc/loadavg ] && echo "# load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# batch $N, ${S}x$S px, $K classes, best of $R round(s) of $ST steps after $WU warm-up; images/s"
fmt="%-1s %-10s %9s %9s %9s %9s   %11s %11s %11s %11s\n"
# shellcheck disable=SC2059
printf "$fmt" "#" model "ddp bf16" "ddp f32" "pt bf16" "pt f32" "ddp/pt bf16" "ddp bf16/f32" "pt bf16/f32" "ddp/pt f32"
for m in $MODELS; do
    db=0; df=0; tb=0; tf=0
    i=0
    while [ $i -lt "$R" ]; do
        for amp in 1 0; do
            c=$(OMP_NUM_THREADS=$T "$build/bench/bench_step" --model "$m" --batch "$N" --size "$S" --classes "$K" \
                --steps "$ST" --warmup "$WU" --amp $amp) || { echo "# $m: ddptrain --amp $amp failed: $c"; continue; }
            echo "#   $c"
            if [ $amp = 1 ]; then db=$(max "$db" "$(echo "$c" | step_ips)"); else df=$(max "$df" "$(echo "$c" | step_ips)"); fi
        done
        for amp in bf16 f32; do
            set --   # torch_bench.py's autocast flag
            [ $amp = bf16 ] && set -- --amp bf16
            t=$("$PY" "$here/torch_bench.py" --model "$m" --batch "$N" --size "$S" --classes "$K" --steps "$ST" \
                --warmup "$WU" --threads "$T" --channels_last "$@" | tail -n 2)
            echo "$t" | sed 's/^/#   /'
            if [ $amp = bf16 ]; then tb=$(max "$tb" "$(echo "$t" | step_ips)"); else tf=$(max "$tf" "$(echo "$t" | step_ips)"); fi
        done
        i=$((i + 1))
    done
    # shellcheck disable=SC2059
    printf "$fmt" "" "$m" "$db" "$df" "$tb" "$tf" "$(ratio "$db" "$tb")" "$(ratio "$db" "$df")" "$(ratio "$tb" "$tf")" \
        "$(ratio "$df" "$tf")"
done
