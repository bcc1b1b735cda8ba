#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Training-step throughput of ddptrain against PyTorch on the same MiniResNet, the same batch
# size and the same number of threads, measured alternately in one run, and the float32 work
# that makes against the machine's peak, measured in the same run by bench/fma_peak (on the ISA
# oneDNN is allowed: ONEDNN_MAX_CPU_ISA caps both). The machine is shared and noisy: the main
# row runs each side ROUNDS times (and the peak once per round) and keeps the best. Then a
# width x batch table, one short run per cell, with PyTorch in its faster layout of the main row.
#   bench/bench.sh [BUILD_DIR]
#   env: WIDTH (64) BATCH (64) THREADS (2) STEPS (20) ROUNDS (3): the main row;
#        TABLE (1; 0: no table) TABLE_STEPS (5) TABLE_WIDTHS ("16 32 64") TABLE_BATCHES ("32 64 128")
# FLOPs per training image: model_train_flops_per_image (src/model/model.h); torch_bench.py counts them
# from the PyTorch module and the two counts are compared.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-${top_builddir:-$here/../build}}
W=${WIDTH:-64}; N=${BATCH:-64}; T=${THREADS:-2}; S=${STEPS:-20}; R=${ROUNDS:-3}
TABLE=${TABLE:-1}; TS=${TABLE_STEPS:-5}
TW=${TABLE_WIDTHS:-16 32 64}; TB=${TABLE_BATCHES:-32 64 128}
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
torch_python bench "torch"

# Fields of the programs' output lines.
ips() { sed -n 's/.*: \([0-9.]*\) images\/s.*/\1/p' | tail -n 1; }
gflop_img() { sed -n 's/.*(\([0-9.]*\) GFLOP per image).*/\1/p' | tail -n 1; }
rss() { sed -n 's/.*peak RSS \([0-9]*\) MiB.*/\1/p' | tail -n 1; }
peak_of() { sed -n 's/.*: \([0-9.]*\) GFLOP\/s.*/\1/p'; }
# GFLOP/s and share of peak for images/s x GFLOP per image
gflops() { awk -v i="$1" -v f="$2" 'BEGIN{printf "%.1f", i * f}'; }
share() { awk -v i="$1" -v f="$2" -v p="$3" 'BEGIN{printf "%.1f%%", (p > 0) ? 100 * i * f / p : 0}'; }

ddp() {   # ddp WIDTH BATCH STEPS WARMUP: bench_step's line
    OMP_NUM_THREADS=$T "$build/bench/bench_step" --width "$1" --batch "$2" --steps "$3" --warmup "$4"
}
pyt() {   # pyt WIDTH BATCH STEPS WARMUP [--channels_last]: torch_bench.py's two lines
    w=$1; b=$2; s=$3; k=$4; shift 4
    "$PY" "$here/torch_bench.py" --width "$w" --batch "$b" --steps "$s" --warmup "$k" --threads "$T" "$@"
}
peak() { OMP_NUM_THREADS=$T "$build/bench/fma_peak" --seconds 0.1 --repeats 10; }

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
fam=$(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
mod=$(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "# ddptrain against PyTorch: MiniResNet training step (forward, backward, SGD), float32"
echo "# CPU: ${cpu:-unknown} (family ${fam:-?} model ${mod:-?}), $(nproc) CPUs online, $T threads used"
echo "# ONEDNN_MAX_CPU_ISA: ${ONEDNN_MAX_CPU_ISA:-(unset: oneDNN takes the best ISA of the CPU)}"
aten_like_onednn
echo "# ATEN_CPU_CAPABILITY (PyTorch): ${ATEN_CPU_CAPABILITY:-(unset: its best)}"
# Other processes slow both sides alike, but the figures then say less about the hardware.
[ -r /proc/loadavg ] && echo "# load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "#"
echo "# main row: width $W, batch $N, best of $R rounds of $S steps"

best_c=0; best_t=0; best_tcl=0; best_p=0; rss_c=0; rss_t=0; rss_tcl=0
i=0
while [ $i -lt "$R" ]; do
    p=$(peak); echo "#   $p"
    c=$(ddp "$W" "$N" "$S" 3); echo "#   $c"
    t=$(pyt "$W" "$N" "$S" 3); echo "$t" | sed 's/^/#   /'
    tcl=$(pyt "$W" "$N" "$S" 3 --channels_last); echo "$tcl" | sed 's/^/#   /'
    best_p=$(max "$best_p" "$(echo "$p" | peak_of)")
    best_c=$(max "$best_c" "$(echo "$c" | ips)")
    best_t=$(max "$best_t" "$(echo "$t" | ips)")
    best_tcl=$(max "$best_tcl" "$(echo "$tcl" | ips)")
    rss_c=$(max "$rss_c" "$(echo "$c" | rss)")
    rss_t=$(max "$rss_t" "$(echo "$t" | rss)")
    rss_tcl=$(max "$rss_tcl" "$(echo "$tcl" | rss)")
    i=$((i + 1))
done
f=$(echo "$c" | gflop_img); f_t=$(echo "$t" | gflop_img)
isa_peak=$(echo "$p" | sed -n 's/^fma_peak: \([^ ,]*\).*/\1/p')
isa_dnnl=$(echo "$c" | sed -n 's/.*\[\(.*\)\]$/\1/p')
layout=NCHW; ref=$best_t
if awk -v a="$best_tcl" -v b="$best_t" 'BEGIN{exit !(a > b)}'; then layout=channels_last; ref=$best_tcl; fi

echo "#"
echo "# ISA: ddptrain ${isa_dnnl:-?}; peak measured with ${isa_peak:-?} FMAs"
echo "# peak: $best_p GFLOP/s float32 on $T threads (bench/fma_peak, best of $R)"
echo "# work: $f GFLOP per training image at width $W (multiply-adds of the convolutions and the"
echo "#       linear layer, x 2 FLOPs, x 3 for forward, backward-data, backward-weights;"
echo "#       counted from the PyTorch module: $f_t)"
[ "$f" = "$f_t" ] || echo "# WARNING: the two FLOP counts differ"
echo "#"
# Columns as nccl-tests prints them: comment lines start with #, rows with blanks.
fmt="%-1s %-8s %-13s %5s %5s %7s %9s %8s %6s %8s\n"
# shellcheck disable=SC2059
printf "$fmt" "#" side layout width batch threads images/s GFLOP/s peak "RSS MiB"
for side in "ddptrain NHWC $best_c $rss_c" "PyTorch NCHW $best_t $rss_t" "PyTorch channels_last $best_tcl $rss_tcl"; do
    # shellcheck disable=SC2086
    set -- $side
    # shellcheck disable=SC2059
    printf "$fmt" "" "$1" "$2" "$W" "$N" "$T" "$3" "$(gflops "$3" "$f")" "$(share "$3" "$f" "$best_p")" "$4"
done
awk -v c="$best_c" -v r="$ref" -v l="$layout" \
    'BEGIN{printf "# ratio ddptrain / PyTorch (best layout, %s): %.2f\n", l, c / r}'

[ "$TABLE" != 0 ] || exit 0
echo "#"
echo "# width x batch: one run of $TS steps per cell (2 warm-up steps), PyTorch in $layout;"
echo "# % of the peak above ($best_p GFLOP/s)"
fmt="%-1s %5s %5s   %9s %8s %6s %7s   %9s %8s %6s %7s   %5s\n"
printf "%-16s%-36s%s\n" "#" "ddptrain" "PyTorch ($layout)"
# shellcheck disable=SC2059
printf "$fmt" "#" width batch images/s GFLOP/s peak "RSS MiB" images/s GFLOP/s peak "RSS MiB" ratio
lflag=""; [ "$layout" = channels_last ] && lflag=--channels_last
for w in $TW; do
    for n in $TB; do
        c=$(ddp "$w" "$n" "$TS" 2)
        # shellcheck disable=SC2086
        t=$(pyt "$w" "$n" "$TS" 2 $lflag)
        fw=$(echo "$c" | gflop_img)
        ci=$(echo "$c" | ips); ti=$(echo "$t" | ips)
        # shellcheck disable=SC2059
        printf "$fmt" "" "$w" "$n" "$ci" "$(gflops "$ci" "$fw")" "$(share "$ci" "$fw" "$best_p")" "$(echo "$c" | rss)" \
            "$ti" "$(gflops "$ti" "$fw")" "$(share "$ti" "$fw" "$best_p")" "$(echo "$t" | rss)" \
            "$(awk -v a="$ci" -v b="$ti" 'BEGIN{printf "%.2f", a / b}')"
    done
done
