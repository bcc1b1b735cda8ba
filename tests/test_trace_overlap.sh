#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Communication overlaps the backward pass: 2 ranks with --trace and small gradient buckets.
# Each rank's trace-rank-N.json must be valid Chrome trace JSON with data wait, forward,
# backward, backward layer, allreduce bucket, gradient wait and optimizer events, and in every
# step every bucket but the last must have been posted (its 'allreduce bucket N' event starts)
# before that step's 'backward' event ended.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
mpi_leak_checks_off   # ranks started by mpirun/srun (see tests/helpers/lib.sh)
PY=$(find_python h5py) || { echo "SKIP: no python3 with h5py"; exit "$SKIP"; }
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found"; exit "$SKIP"; }
STEPS=8

make_synth "$TMP/data" --train 512 --test 64 --shards 2
job="$TMP/job"
# 19954 parameters (80 KB of gradients) in buckets of 8 KB, the first one 2 KB.
OMP_NUM_THREADS=1 timeout -k 5 60 mpirun --allow-run-as-root --oversubscribe -np 2 \
    "$DDPTRAIN" --data_dir "$TMP/data" --job_dir "$job" --width 8 --blocks 1 --batch_size 16 \
    --max_steps $STEPS --threads 1 --trace --bucket_cap_mb 0.008 --first_bucket_mb 0.002 \
    --log_interval 4 >"$TMP/out" 2>&1
rc=$?
[ $rc -eq 0 ] && ok "2-rank traced run exits 0" || { bad "traced run: exit $rc"; tail -n 20 "$TMP/out"; finish; }

line=$(grep 'reducer: ' "$TMP/out")
nb=$(echo "$line" | sed -n 's/.* in \([0-9]*\) buckets.*/\1/p')
[ -n "$nb" ] && [ "$nb" -ge 3 ] && ok "several buckets: ${line#*INFO }" || bad "reducer line: '$line'"

"$PY" "$top_srcdir/tests/helpers/dp_tools.py" trace "$job" 2 >"$TMP/trace.out" 2>&1
trc=$?
cat "$TMP/trace.out"
FAILS=$((FAILS + $(grep -c '^FAIL:' "$TMP/trace.out")))
[ $trc -eq 0 ] || [ "$FAILS" -gt 0 ] || bad "trace check: exit $trc"
grep -q "$STEPS steps, $nb buckets" "$TMP/trace.out" || bad "trace check did not cover $STEPS steps x $nb buckets"
finish
