#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# scaling.sh [BUILD_DIR] - data-parallel efficiency on one machine: the same global batch (128)
# trained by 2 ranks x 1 thread (mpirun -np 2, batch 64 each) and by 1 rank x 2 threads
# (batch 128), MiniResNet at width 64. Throughput is the mean images/s of metrics.jsonl after
# the first log interval (warm-up). The two configurations alternate for ROUNDS rounds and the
# best of each is kept; prints both and the ratio 2x1 / 1x2 (1.0: data parallelism costs
# nothing over threads; the target is >= 0.95).
#
# Environment: ROUNDS (2), STEPS (30), LOG_INTERVAL (10), WIDTH (64), TMPDIR.
set -u
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_setup scaling.sh "${1:-}"
ROUNDS=${ROUNDS:-2}
STEPS=${STEPS:-30}
LOG_INTERVAL=${LOG_INTERVAL:-10}
WIDTH=${WIDTH:-64}
GLOBAL=128
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ddp-scaling.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# Enough samples for STEPS steps in one epoch: 2 shards (one per rank in the 2-rank run).
"$DDPDATA" synth --out "$WORK/data" --train $(((STEPS + 2) * GLOBAL)) --test 256 --shards 2 >/dev/null ||
    { echo "scaling.sh: ddptrain-data synth failed" >&2; exit 1; }
COMMON=(--data_dir "$WORK/data" --width "$WIDTH" --epochs 1 --max_steps "$STEPS" --log_interval "$LOG_INTERVAL"
        --eval_every 0 --save_every 0 --eval_batch_size 256)


run() {   # run NAME : prints images/s, or nothing when the run failed
    local name=$1 job="$WORK/$1-$2" rc
    if [ "$name" = 2x1 ]; then
        OMP_NUM_THREADS=1 timeout 900 mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to none \
            "$DDPTRAIN" "${COMMON[@]}" --job_dir "$job" --batch_size $((GLOBAL / 2)) --threads 1 >"$job.out" 2>&1
    else
        OMP_NUM_THREADS=2 timeout 900 "$DDPTRAIN" "${COMMON[@]}" --job_dir "$job" --batch_size $GLOBAL \
            --threads 2 >"$job.out" 2>&1
    fi
    rc=$?
    if [ $rc -ne 0 ]; then
        echo "scaling.sh: $name run failed (exit $rc):" >&2; tail -n 5 "$job.out" >&2; return 1
    fi
    job_ips "$job"
}

echo "scaling: MiniResNet width $WIDTH, global batch $GLOBAL, $STEPS steps, images/s after the first $LOG_INTERVAL; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
best21=0 best12=0
for r in $(seq 1 "$ROUNDS"); do
    a=$(run 2x1 "$r") || exit 1
    b=$(run 1x2 "$r") || exit 1
    echo "round $r: 2 ranks x 1 thread $a images/s, 1 rank x 2 threads $b images/s (load $(cut -d' ' -f1 /proc/loadavg))"
    best21=$(awk -v x="$a" -v y="$best21" 'BEGIN{print (x > y) ? x : y}')
    best12=$(awk -v x="$b" -v y="$best12" 'BEGIN{print (x > y) ? x : y}')
done
echo "best: 2x1 $best21 images/s, 1x2 $best12 images/s"
awk -v a="$best21" -v b="$best12" 'BEGIN{ if (b > 0) printf "ratio 2x1 / 1x2 = %.3f (target >= 0.95)\n", a / b; else print "ratio: n/a" }'
