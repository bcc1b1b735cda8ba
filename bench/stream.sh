#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# stream.sh [BUILD_DIR] - the streaming loader against the share held in memory
# (--data_in_memory no against yes): MiniResNet at width 64 on 64x64 images, 2 ranks x 1
# thread, a dataset of several GB (ddptrain-data synth, or DATA). The two alternate for ROUNDS
# rounds, the page cache dropped before each run where we may (root), so a streamed run reads
# from the disk; throughput is the mean images/s of metrics.jsonl after the first log interval,
# the best of each kept; peak resident memory is each rank's (/usr/bin/time). Prints both and
# the ratio streamed / in memory (target >= 0.95).
#
# With MEMLIMIT_MIB (root, a memory cgroup v1 or v2): the job is also run inside a cgroup of
# that limit, smaller than the dataset, at width LIMIT_WIDTH (16, whose activations leave room
# under a small limit): with --data_in_memory yes (expected to be killed), and with auto
# (expected to stream, seeing the limit, and train with flat memory: the ranks' resident memory
# sampled every 2 s, and the group's peak).
#
# Environment: DATA (a dataset directory; default made in WORK), TRAIN (250000 images: 2.9 GiB
# at 64x64), SIZE (64), WIDTH (64), BATCH (32 per rank), STEPS (40), LOG_INTERVAL (5), ROUNDS
# (2), MEMLIMIT_MIB (unset), LIMIT_WIDTH (16), KEEP (1: keep WORK), TMPDIR.
set -u
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_setup stream.sh "${1:-}"
[ -x /usr/bin/time ] || { echo "stream.sh: /usr/bin/time not found (Debian: apt-get install time)" >&2; exit 2; }
TRAIN=${TRAIN:-250000} SIZE=${SIZE:-64} WIDTH=${WIDTH:-64} BATCH=${BATCH:-32} STEPS=${STEPS:-40}
LOG_INTERVAL=${LOG_INTERVAL:-5} ROUNDS=${ROUNDS:-2}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ddp-stream.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT

DATA=${DATA:-}
if [ -z "$DATA" ]; then
    DATA=$WORK/data
    echo "stream: writing $TRAIN synthetic images of ${SIZE}x$SIZE to $DATA"
    "$DDPDATA" synth --out "$DATA" --train "$TRAIN" --test 1000 --shards 2 --size "$SIZE" >/dev/null ||
        { echo "stream.sh: ddptrain-data synth failed" >&2; exit 1; }
fi
COMMON=(--data_dir "$DATA" --image_size "$SIZE" --width "$WIDTH" --batch_size "$BATCH" --epochs 1
        --max_steps "$STEPS" --log_interval "$LOG_INTERVAL" --eval_every 0 --save_every 0 --threads 1)

drop_caches() { [ -w /proc/sys/vm/drop_caches ] && sync && echo 3 >/proc/sys/vm/drop_caches; }


# run JOB MODE [PREFIX...]: 2 ranks, each under /usr/bin/time (JOB.rss.RANK, KiB), mpirun run by
# PREFIX (a command that execs its arguments); output in JOB.out
run() {
    local job=$1 mode=$2; shift 2
    OMP_NUM_THREADS=1 timeout 1800 "$@" mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to none \
        sh -c 'exec /usr/bin/time -f %M -o "$0.rss.$OMPI_COMM_WORLD_RANK" "$@"' "$job" \
        "$DDPTRAIN" "${COMMON[@]}" --job_dir "$job" --data_in_memory "$mode" >"$job.out" 2>&1
}
rss_mib() { awk '/^[0-9]+$/ {printf "%s%.0f", sep, $1 / 1024; sep = " and "}' "$1.rss.0" "$1.rss.1" 2>/dev/null; }

du_data=$(du -sm "$DATA" | cut -f1)
echo "stream: MiniResNet width $WIDTH at ${SIZE}x$SIZE, 2 ranks x batch $BATCH, $STEPS steps, images/s after the first $LOG_INTERVAL;" \
     "data $DATA ($du_data MiB on disk); $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')," \
     "$(grep -q avx512f /proc/cpuinfo && echo AVX-512 || echo AVX2)"
[ -w /proc/sys/vm/drop_caches ] || echo "stream: cannot drop the page cache (not root): streamed runs may read from memory"
best_mem=0 best_str=0
for r in $(seq 1 "$ROUNDS"); do
    for mode in yes no; do
        job=$WORK/$mode-$r
        drop_caches
        if ! run "$job" "$mode"; then echo "stream.sh: --data_in_memory $mode failed:" >&2; tail -n 5 "$job.out" >&2; exit 1; fi
        v=$(job_ips "$job")
        echo "round $r: --data_in_memory $mode: $v images/s, peak RSS $(rss_mib "$job") MiB; $(grep -m1 -o 'train [a-z ]*: the train share is [0-9.]* MiB[^;]*' "$job.out")"
        if [ $mode = yes ]; then best_mem=$(awk -v x="$v" -v y="$best_mem" 'BEGIN{print (x > y) ? x : y}')
        else best_str=$(awk -v x="$v" -v y="$best_str" 'BEGIN{print (x > y) ? x : y}'); fi
    done
done
echo "best: in memory $best_mem images/s, streamed $best_str images/s"
awk -v a="$best_str" -v b="$best_mem" 'BEGIN{ if (b > 0) printf "ratio streamed / in memory = %.3f (target >= 0.95)\n", a / b; else print "ratio: n/a" }'

[ -n "${MEMLIMIT_MIB:-}" ] || exit 0
# A memory cgroup of MEMLIMIT_MIB for the job: v2 where /sys/fs/cgroup is the unified tree, else v1.
CGNAME=ddp-stream-$$
if [ -e /sys/fs/cgroup/cgroup.controllers ]; then
    CG=/sys/fs/cgroup/$CGNAME
    echo +memory >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
    mkdir "$CG" && echo $((MEMLIMIT_MIB * 1048576)) >"$CG/memory.max" && echo 0 >"$CG/memory.swap.max" 2>/dev/null
    PEAK_FILE=memory.peak
else
    CG=/sys/fs/cgroup/memory/$CGNAME
    mkdir "$CG" && echo $((MEMLIMIT_MIB * 1048576)) >"$CG/memory.limit_in_bytes"
    PEAK_FILE=memory.max_usage_in_bytes
fi
[ -d "$CG" ] || { echo "stream.sh: cannot make a memory cgroup (root, cgroup v1 or v2 needed)" >&2; exit 1; }
trap 'rmdir "$CG" 2>/dev/null; [ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"' EXIT
# a command run inside the group: CGRUN COMMAND...
CGRUN=(sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG")
echo "limit: a memory cgroup of $MEMLIMIT_MIB MiB ($CG), the dataset $du_data MiB on disk, width ${LIMIT_WIDTH:=16}"
COMMON+=(--width "$LIMIT_WIDTH")   # the later --width wins

job=$WORK/limit-yes
drop_caches
run "$job" yes "${CGRUN[@]}"
rc=$?
echo "limit: --data_in_memory yes: exit $rc; $(grep -m1 -i -o 'exit code: *[0-9]*\|killed.*\|signal [0-9]*' "$job.out"); peak RSS $(rss_mib "$job") MiB"

job=$WORK/limit-auto
drop_caches
[ -w "$CG/$PEAK_FILE" ] && echo 0 >"$CG/$PEAK_FILE" 2>/dev/null
# the ranks' resident memory every 2 s while they train
( while sleep 2; do
      for p in $(pgrep -f "^$DDPTRAIN .*--job_dir $job"); do
          awk -v t="$(date +%s)" '/^VmRSS/ {print t, $2}' "/proc/$p/status" 2>/dev/null
      done
  done >"$job.samples" ) &
sampler=$!
run "$job" auto "${CGRUN[@]}"
rc=$?
kill $sampler 2>/dev/null
wait $sampler 2>/dev/null
if [ $rc -ne 0 ]; then echo "limit: --data_in_memory auto failed (exit $rc): $(tail -n 3 "$job.out")"; exit 1; fi
echo "limit: --data_in_memory auto: $(job_ips "$job") images/s, peak RSS $(rss_mib "$job") MiB per rank, the group's peak $(awk '{printf "%.0f", $1 / 1048576}' "$CG/$PEAK_FILE") MiB"
echo "limit: $(grep -m1 -o 'train [a-z ]*: the train share is [0-9.]* MiB[^;]*' "$job.out" | head -n 1); $(grep -o 'budget [0-9.]* MiB = half of [^;]*' "$job.out" | head -n 1)"
awk 'NR == 1 {t0 = $1} {n++; k = int(($1 - t0) / 10); if (!(k in lo) || $2 < lo[k]) lo[k] = $2; if ($2 > hi[k]) hi[k] = $2}
     END {printf "limit: resident memory per rank, min-max MiB per 10 s (%d samples):", n;
          for (i = 0; i in hi; i++) printf " %.0f-%.0f", lo[i] / 1024, hi[i] / 1024; print ""}' "$job.samples"
