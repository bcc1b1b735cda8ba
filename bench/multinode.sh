#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode.sh [BUILD_DIR] - what the overlap of gradient all-reduce with backward hides between
# nodes. Brings up the multi-node test cluster (tests/slurm/multinode_up.sh: 2 nodes as network
# namespaces, each link limited to RATE both ways with tc tbf; needs root) unless one is up,
# and trains MODEL (miniresnet at width WIDTH by default; resnet50, ...: 1 rank x 1 thread per node) under several bucket
# settings, one table for each batch size in BATCHES. For each row: the median over STEPS steps
# (after 2 warm-up steps), and over REPS runs, of the step time, of the forward + backward +
# update time (compute) and of the final wait for the all-reduce (comm wait), and
#   exposed = (t - t_alone) / t_alone      the communication cost left in the step
#   hidden  = 1 - (t - t_alone) / (t_one - t_alone)
#             the share of the no-overlap cost (one bucket after backward) the overlap hides
#   bwd+    = compute - compute_alone       backward inflated by driving the transport
#   MB      = MB per step through one node's link (both ways; the start-up's broadcast included)
#   CPU, kernel = CPU seconds per step the whole machine spent (both nodes; after the warm-up,
#             from rank 0's progress lines), and of it the kernel's (system + irq + softirq: the
#             network stack's TCP, veth, bridge and tbf work runs there)
# Under each table, the wire's bound: the default row's bytes each way at RATE take W seconds a
# step, and no step can be shorter, so where W exceeds t_alone no schedule hides more than
# 1 - (W - t_alone) / (t_one - t_alone) of the cost.
# Environment: RATE (90mbit), MODEL (miniresnet), WIDTH (64), BATCHES (batch sizes per rank, a table each: "64
# 256"; the larger gives the node as much compute per step as the slower machines the targets
# were set on), STEPS (8), CAPS (bucket caps in MB besides the default: "2 1"), DTYPES
# (--comm_dtype rows at the default flags: "bf16"), REPS (runs of each row: 3), PROGRESS
# (--comm_progress_us rows at the default flags: "0", the reducer's progress thread off),
# ALLREDUCE (--comm_allreduce rows at the default flags: "mpi", the MPI library's
# MPI_Iallreduce), DDP_MN_STATE (see multinode_up.sh). An empty list drops its rows.
set -u
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_setup multinode.sh "${1:-}"
SRC=$(cd "$(dirname "$0")/.." && pwd)
RATE=${RATE:-90mbit}
WIDTH=${WIDTH:-64}
MODEL=${MODEL:-miniresnet}
BATCHES=${BATCHES-${BATCH:-64 256}}
STEPS=${STEPS:-8}
CAPS=${CAPS-2 1}
DTYPES=${DTYPES-bf16}
REPS=${REPS:-3}
PROGRESS=${PROGRESS-0}
ALLREDUCE=${ALLREDUCE-mpi}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ddp-multinode.XXXXXX")
top_srcdir=$SRC
# shellcheck source=tests/slurm/lib.sh disable=SC1091
. "$SRC/tests/slurm/lib.sh"
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
    if [ -f "$MN_STATE" ]; then bash "$SRC/tests/slurm/multinode_node.sh" rate 1 none; bash "$SRC/tests/slurm/multinode_node.sh" rate 2 none; fi
    mn_down_if_started; rm -rf "$WORK"
}
trap cleanup EXIT
mn_up >"$WORK/up" 2>&1 || { echo "multinode.sh: the multi-node cluster did not start: $(tail -n 1 "$WORK/up")" >&2; exit 1; }
for i in 1 2; do bash "$SRC/tests/slurm/multinode_node.sh" rate $i "$RATE" || exit 1; done

# median: the median of the numbers on standard input, one a line
median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# med FIELD JOBDIR: median of a metrics.jsonl field over the steps after the 2 warm-up steps.
med() { grep '"loss"' "$2/metrics.jsonl" | tail -n +3 | sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p" | median; }
# Bytes through vn1's link, both ways (the veth's counters in the root namespace).
link_bytes() { echo $(($(cat /sys/class/net/v-vn1/statistics/rx_bytes) + $(cat /sys/class/net/v-vn1/statistics/tx_bytes))); }
# run NAME NODES FLAGS...: prints "step compute wait MB" (medians in seconds; MB through vn1's
# link per step, the start-up broadcast of the weights included)
run() {
    local name=$1 nodes=$2 job="$WORK/$1" b0 pid n0 c0 c1 n1; shift 2
    b0=$(link_bytes)
    OMP_NUM_THREADS=1 timeout 1200 srun -t 30 -N "$nodes" -n "$nodes" --mpi=pmix "$DDPTRAIN" "${COMMON[@]}" "$@" \
        --job_dir "$job" >"$job.out" 2>&1 &
    pid=$!
    # The machine's CPU time over the steps after the warm-up: from the second progress line to
    # the last (rank 0 writes them as the steps end).
    n0=$(wait_lines "$job" 2 $pid); c0=$(cpu_now)
    n1=$(wait_lines "$job" $((STEPS + 2)) $pid); c1=$(cpu_now)
    wait $pid || { echo "multinode.sh: run $name failed:" >&2; tail -n 5 "$job.out" >&2; return 1; }
    # Step time from the throughput: global batch / images per second.
    local ips; ips=$(med images_per_sec "$job")
    echo "$(awk -v b=$((BATCH * nodes)) -v r="$ips" 'BEGIN{printf "%.3f", b / r}') $(med compute_sec "$job") $(med comm_wait_sec "$job")" \
         "$(awk -v a="$b0" -v b="$(link_bytes)" -v n=$((STEPS + 2)) 'BEGIN{printf "%.1f", (b - a) / n / 1e6}')" \
         "$(echo "$c0 $c1" | awk -v n=$((n1 - n0)) -v hz="$(getconf CLK_TCK)" '{ if (n < 1) n = 1; printf "%.2f %.2f", ($3 - $1) / hz / n, ($4 - $2) / hz / n }')"
}
# CPU time of the whole machine in clock ticks: "busy kernel" (user + nice + system + irq +
# softirq; the kernel's part: system + irq + softirq, where the network stack runs).
cpu_now() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8, $4 + $7 + $8}' /proc/stat; }
# wait_lines JOB N PID: waits until JOB's metrics.jsonl has N progress lines or PID ended;
# prints how many it has. Counted with shell builtins, every 50 ms: the watching must not be
# what the CPU columns measure.
wait_lines() {
    local n=0 line
    while :; do
        n=0
        if [ -f "$1/metrics.jsonl" ]; then
            while IFS= read -r line; do [[ $line == *'"loss"'* ]] && n=$((n + 1)); done <"$1/metrics.jsonl"
        fi
        [ "$n" -ge "$2" ] && break
        kill -0 "$3" 2>/dev/null || break
        sleep 0.05
    done
    echo "$n"
}

# The rows: name, nodes, flags. Every row runs REPS times, the rows taking turns, and each
# column is the median of its runs' medians: the two nodes share the machine's cores with
# everything else on it, and one run of a row against one of another compared the moments
# they ran in as much as the flags.
ROWS=("alone|1|" "one|2|--bucket_cap_mb 1e5 --first_bucket_mb 1e5" "default|2|")
for us in $PROGRESS; do ROWS+=("progress$us|2|--comm_progress_us $us"); done
for a in $ALLREDUCE; do ROWS+=("allreduce-$a|2|--comm_allreduce $a"); done
for cap in $CAPS; do ROWS+=("cap$cap|2|--bucket_cap_mb $cap"); done
for dt in $DTYPES; do ROWS+=("$dt-default|2|--comm_dtype $dt"); done
label() {
    case $1 in
    alone) echo "one node alone (no communication)" ;;
    one) echo "two nodes, one bucket after backward" ;;
    default) echo "two nodes, default flags" ;;
    *-default) echo "two nodes, --comm_dtype ${1%-default}, default flags" ;;
    *) echo "two nodes, $3" ;;
    esac
}

# medians DIR NAME: the median of each column over the runs of row NAME
medians() {
    local f out=()
    for f in 1 2 3 4 5 6; do out+=("$(cut -d ' ' -f "$f" "$1/$2.vals" | median)"); done
    echo "${out[*]}"
}
# rate_mbit RATE: tc's rate (90mbit, 1gbit, 500kbit) in Mbit/s
rate_mbit() { echo "$1" | awk '{ r = $1 + 0; if ($1 ~ /gbit$/) r *= 1000; else if ($1 ~ /kbit$/) r /= 1000; else if ($1 !~ /mbit$/) r = 0; print r }'; }

# table BATCH: runs every row REPS times at batch BATCH per rank, prints the table and the wire's
# bound.
table() {
    local BATCH=$1 W=$WORK/b$1 rep r name nodes flags
    mkdir -p "$W"
    "$DDPDATA" synth --out "$W/data" --train $(((STEPS + 3) * BATCH * 2)) --test 128 --shards 2 >/dev/null ||
        { echo "multinode.sh: ddptrain-data synth failed" >&2; return 1; }
    COMMON=(--data_dir "$W/data" --model "$MODEL" --width "$WIDTH" --batch_size "$BATCH" --threads 1 --max_steps $((STEPS + 2))
            --epochs 1 --log_interval 1 --eval_every 0 --save_every 0)
    echo "multinode.sh: 2 nodes, links limited to $RATE both ways (tc tbf), --model $MODEL, width $WIDTH, batch $BATCH,"
    echo "1 rank x 1 thread per node, median of $STEPS steps, median of $REPS runs; $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
    for rep in $(seq 1 "$REPS"); do
        for r in "${ROWS[@]}"; do
            IFS='|' read -r name nodes flags <<<"$r"
            # shellcheck disable=SC2086
            run "b$BATCH/$name-$rep" "$nodes" $flags >>"$W/$name.vals" || return 1
        done
    done
    local t0 c0 u0 k0 t1 w1 t c w m u k
    read -r t0 c0 _ _ u0 k0 < <(medians "$W" alone)
    read -r t1 _ w1 _ < <(medians "$W" one)
    printf "%-46s %7s %7s %7s %7s %6s %6s %6s %5s %7s %7s\n" "" "s/step" "compute" "wait" "bwd+" "exposed" "hidden" "wait-h" "MB" "CPU" "kernel"
    printf "%-46s %5.2f s %5.2f s %51s %5.2f s %5.2f s\n" "$(label alone)" "$t0" "$c0" "" "$u0" "$k0"
    for r in "${ROWS[@]:1}"; do
        IFS='|' read -r name nodes flags <<<"$r"
        read -r t c w m u k < <(medians "$W" "$name")
        awk -v l="$(label "$name" "$nodes" "$flags")" -v t="$t" -v c="$c" -v w="$w" -v m="$m" -v u="$u" -v k="$k" \
            -v t0="$t0" -v c0="$c0" -v t1="$t1" -v w1="$w1" 'BEGIN {
            h = (t1 > t0) ? 100 * (1 - (t - t0) / (t1 - t0)) : 0
            wh = (w1 > 0) ? 100 * (1 - w / w1) : 0
            printf "%-46s %5.2f s %5.2f s %5.2f s %+5.2f s %5.0f%% %5.0f%% %5.0f%% %5.1f %5.2f s %5.2f s\n", l, t, c, w, c - c0, 100 * (t - t0) / t0, h, wh, m, u, k }'
    done
    grep -h '^reducer:' "$W/default-1.out" "$W"/bf16-default-1.out 2>/dev/null | sed 's/^/  /'
    # The wire's bound, from the default row's buckets: each step sends the gradients each way,
    # in 1514-byte frames of 1448 bytes of TCP payload (tbf counts the frames).
    local mb; mb=$(grep -h '^reducer:' "$W/default-1.out" | head -n 1 | sed 's/.*(MB)://; s/;.*//' | awk '{ s = 0; for (i = 1; i <= NF; i++) s += $i; print s }')
    awk -v mb="${mb:-0}" -v rate="$(rate_mbit "$RATE")" -v t0="$t0" -v t1="$t1" 'BEGIN {
        if (mb <= 0 || rate <= 0) exit
        wire = mb * 1514 / 1448 * 8 / rate
        printf "  wire: %.1f MB of gradients each way a step take %.2f s at %g Mbit/s; ", mb, wire, rate
        if (wire <= t0) printf "less than the node'"'"'s %.2f s of compute, so all of the cost can be hidden\n", t0
        else printf "no step is shorter, so at most %.0f%% of the cost can be hidden (t_alone %.2f s, one bucket %.2f s)\n", 100 * (1 - (wire - t0) / (t1 - t0)), t0, t1
    }'
}

first=1
for b in $BATCHES; do
    [ $first = 1 ] || echo
    first=0
    table "$b" || exit 1
done
