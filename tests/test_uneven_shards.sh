#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Uneven data never hangs a job: 3 train shards of 1000/1000/700 images on 2 ranks (whole shards,
# round robin: 1700 and 1000 images) and 2 shards of 500/300 on 3 ranks (contiguous slices of
# the 800) train to the end. Every rank takes the same number of steps per epoch (the fewest any
# rank can fill), logs its share, and the run ends with its evaluation and 'done:' lines; the
# same with both splits streamed from the shards (--data_in_memory no).
. "${top_srcdir:-.}/tests/helpers/lib.sh"
mpi_leak_checks_off   # ranks started by mpirun/srun (see tests/helpers/lib.sh)
PY=$(find_python h5py) || { echo "SKIP: no python3 with h5py"; exit "$SKIP"; }
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found"; exit "$SKIP"; }
TOOLS="$top_srcdir/tests/helpers/dp_tools.py"
BATCH=64
LIMIT=90    # seconds a run may take before it counts as hung

make_synth "$TMP/src" --train 2700 --test 128 --shards 1
"$PY" "$TOOLS" uneven "$TMP/src" "$TMP/s3" 1000 1000 700 || { bad "making 3 uneven shards"; finish; }
"$PY" "$TOOLS" uneven "$TMP/src" "$TMP/s2" 500 300 || { bad "making 2 uneven shards"; finish; }

# train NAME NP DATA [FLAGS...]: one epoch on NP ranks, exit status in $rc, output in $TMP/NAME.out
train() {
    name=$1 np=$2 data=$3
    shift 3
    t0=$(date +%s)
    OMP_NUM_THREADS=1 timeout -k 5 $LIMIT mpirun --allow-run-as-root --oversubscribe -np "$np" \
        "$DDPTRAIN" --data_dir "$data" --job_dir "$TMP/$name" --width 4 --blocks 1 --epochs 1 \
        --batch_size $BATCH --threads 1 --log_interval 5 "$@" >"$TMP/$name.out" 2>&1
    rc=$?
    echo "   $name: $np ranks, exit $rc after $(($(date +%s) - t0)) s"
}

# check_run NAME NP SHARE... : each rank's share of the 'train' split, then the common steps
check_run() {
    name=$1 np=$2; shift 2
    job="$TMP/$name"
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then bad "$name: still running after $LIMIT s (hang)"; return; fi
    [ "$rc" -eq 0 ] && ok "$name: exits 0" || { bad "$name: exit $rc"; tail -n 20 "$TMP/$name.out"; return; }
    total=0
    for s in "$@"; do total=$((total + s)); done
    r=0 fewest=""
    for share in "$@"; do
        log="$job/logs/rank-0000$r.log"
        if grep -q "\[rank $r/$np .*data: .*train $share images on this rank of $total " "$log"; then
            ok "$name: rank $r logs its share: $share of $total images"
        else
            bad "$name: rank $r data line: $(grep 'data: ' "$log" | head -n 1)"
        fi
        steps=$((share / BATCH))
        [ -z "$fewest" ] || [ "$steps" -lt "$fewest" ] && fewest=$steps
        r=$((r + 1))
    done
    r=0 f0=$FAILS
    for share in "$@"; do
        log="$job/logs/rank-0000$r.log"
        grep -q "training: 1 epochs x $fewest steps " "$log" ||
            bad "$name: rank $r does not take $fewest steps: $(grep 'training: ' "$log")"
        if [ $((share / BATCH)) -gt "$fewest" ]; then
            grep -q "this rank could fill $((share / BATCH)) steps per epoch; all ranks take $fewest" "$log" ||
                bad "$name: rank $r does not say it could fill $((share / BATCH)) steps"
        fi
        grep -q "done: $fewest steps in" "$log" || bad "$name: rank $r has no 'done: $fewest steps' line"
        r=$((r + 1))
    done
    [ "$FAILS" -eq "$f0" ] && ok "$name: every rank takes the common $fewest steps per epoch and ends with 'done:'"
    last=$(grep '"step"' "$job/metrics.jsonl" | tail -n 1)
    echo "$last" | grep -q "\"step\": $fewest, .*\"test_acc\"" &&
        ok "$name: final metrics line: $last" || bad "$name: final metrics line: $last"
}

train three_on_two 2 "$TMP/s3"
# round robin: rank 0 reads shards 0 and 2, rank 1 shard 1
check_run three_on_two 2 1700 1000
grep -q "train-00000-of-00003.h5.*train-00002-of-00003.h5" "$TMP/three_on_two/logs/rank-00000.log" &&
    ok "three_on_two: rank 0 reads shards 0 and 2" || bad "three_on_two: rank 0 does not read shards 0 and 2"

train two_on_three 3 "$TMP/s2"
# contiguous slices [T*r/W, T*(r+1)/W) of T = 800: 266, 267, 267
check_run two_on_three 3 266 267 267
grep -q "train-00000-of-00002.h5.*train-00001-of-00002.h5" "$TMP/two_on_three/logs/rank-00001.log" &&
    ok "two_on_three: rank 1's slice spans both shards" || bad "two_on_three: rank 1's slice: $(grep 'data: ' "$TMP/two_on_three/logs/rank-00001.log")"

# Streamed in chunks of 50 images, windows of 2 chunks (rank 1's chunk 4 spans both shards)
train streamed 3 "$TMP/s2" --data_in_memory no --data_chunk_images 50 --data_window_chunks 2
check_run streamed 3 266 267 267
if grep -q "data: train streamed: .*test streamed: " "$TMP/streamed/logs/rank-00002.log"; then
    ok "streamed: rank 2 says both splits are streamed"
else
    bad "streamed: rank 2's data lines: $(grep 'data: ' "$TMP/streamed/logs/rank-00002.log")"
fi
finish
