#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Data parallelism changes nothing but speed: with --sync_bn, 2 ranks x batch B and 1 rank x
# batch 2B over the same samples end with the same parameters after 20 SGD steps (max relative
# difference per tensor of the final checkpoints <= 1e-5). Without --sync_bn each rank
# normalises with its own batch statistics, and the same comparison must show a clearly larger
# difference: proof that it can fail.
# At width 4 the default --bucket_cap_mb makes the whole gradient one bucket, posted when
# backward has ended; a third 2-rank run with a bucket cap of 2 KB (>= 6 buckets, from the
# reducer's start-up line) has its buckets all-reduced while backward still runs (its --trace
# shows every bucket but the last posted before backward ended) and must agree alike.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
mpi_leak_checks_off   # ranks started by mpirun/srun (see tests/helpers/lib.sh)
PY=$(find_python h5py) || { echo "SKIP: no python3 with h5py"; exit $SKIP; }
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found"; exit $SKIP; }
TOOLS="$top_srcdir/tests/helpers/dp_tools.py"
B=8
STEPS=20
TOL=1e-5
# Small images, batch and width keep the runs short, and also keep the float32 rounding
# differences between the two runs (gradients summed in another order) from flipping a ReLU
# whose input is within rounding of 0: one such flip changes a batch-norm bias gradient by
# ~1e-3 of itself, far more than the tolerance. With these sizes 15 seeds (data and weights)
# all stayed below 5e-6; at 32x32 images, width 8 and batch 16 most exceeded 1e-5.
SIZE=8

# 2 shards of STEPS*B samples: one epoch of exactly STEPS steps on either layout.
make_synth "$TMP/d2" --train $((2 * STEPS * B)) --test 32 --shards 2 --size $SIZE
"$PY" "$TOOLS" interleave "$TMP/d2" "$TMP/d1" $B || { bad "building the 1-shard dataset"; finish; }

COMMON="--width 4 --blocks 1 --image_size $SIZE --no-augment --no-shuffle --epochs 1
        --max_steps $STEPS --lr 0.01 --lr_schedule constant --threads 1 --log_interval 10"

ckpt() { ls "$1"/checkpoints/ckpt-*.h5 2>/dev/null | tail -n 1; }

# run NAME NP BATCH EXTRA... : train into $TMP/NAME on $TMP/d1 (1 rank) or $TMP/d2 (2 ranks)
run() {
    name=$1 np=$2 batch=$3; shift 3
    if [ "$np" = 1 ]; then
        # shellcheck disable=SC2086
        OMP_NUM_THREADS=1 timeout -k 5 60 "$DDPTRAIN" --data_dir "$TMP/d1" --job_dir "$TMP/$name" \
            --batch_size "$batch" $COMMON "$@" >"$TMP/$name.out" 2>&1
    else
        # shellcheck disable=SC2086
        OMP_NUM_THREADS=1 timeout -k 5 60 mpirun --allow-run-as-root --oversubscribe -np "$np" \
            "$DDPTRAIN" --data_dir "$TMP/d2" --job_dir "$TMP/$name" \
            --batch_size "$batch" $COMMON "$@" >"$TMP/$name.out" 2>&1
    fi
    rc=$?
    if [ $rc -ne 0 ] || [ -z "$(ckpt "$TMP/$name")" ]; then
        bad "$name: exit $rc, checkpoint '$(ckpt "$TMP/$name")'"; tail -n 15 "$TMP/$name.out"; return 1
    fi
    grep -q "step $STEPS/$STEPS " "$TMP/$name.out" && ok "$name: $np rank(s) x batch $batch, $STEPS steps" ||
        bad "$name: no 'step $STEPS/$STEPS' line"
}

# compare A B : prints the max relative difference
compare() {
    "$PY" "$TOOLS" compare "$(ckpt "$TMP/$1")" "$(ckpt "$TMP/$2")" >"$TMP/cmp-$1" 2>&1 ||
        { bad "compare $1 $2: $(tail -n 3 "$TMP/cmp-$1")"; echo nan; return; }
    sed -n 's/^max_rel_diff \([^ ]*\) .*/\1/p' "$TMP/cmp-$1"
}

run sync2 2 $B --sync_bn || finish
run sync1 1 $((2 * B)) --sync_bn || finish
grep -q "synchronised batch norm" "$TMP/sync2.out" && ok "2-rank run uses synchronised batch norm" ||
    bad "no 'synchronised batch norm' in the reducer line"
grep -q "batch $B x accum 1 x 2 ranks = $((2 * B)) images per step" "$TMP/sync2.out" &&
    grep -q "batch $((2 * B)) x accum 1 x 1 ranks = $((2 * B)) images per step" "$TMP/sync1.out" &&
    ok "same global batch ($((2 * B))) in both runs" || bad "global batch lines differ"

d_sync=$(compare sync2 sync1)
echo "   2x$B vs 1x$((2 * B)), --sync_bn: max rel diff $d_sync (worst tensors:)"
sort -k2 -g "$TMP/cmp-sync2" | grep -v '^max_rel' | tail -n 3 | sed 's/^/     /'
awk -v d="$d_sync" -v t=$TOL 'BEGIN{exit !(d <= t)}' &&
    ok "--sync_bn: parameters agree, max rel diff $d_sync <= $TOL" ||
    bad "--sync_bn: max rel diff $d_sync > $TOL"

# Many buckets: the same comparison, with the all-reduce overlapping backward.
run buckets2 2 $B --sync_bn --bucket_cap_mb 0.002 --first_bucket_mb 0.001 --trace || finish
line=$(grep 'reducer: ' "$TMP/buckets2.out")
nb=$(echo "$line" | sed -n 's/.* in \([0-9]*\) buckets.*/\1/p')
[ -n "$nb" ] && [ "$nb" -ge 6 ] && ok "buckets2: ${line#*reducer: }" || bad "buckets2: want >= 6 buckets: '$line'"
"$PY" "$TOOLS" trace "$TMP/buckets2" 2 >"$TMP/trace.out" 2>&1
[ "$(grep -c "^ok: .*: $STEPS steps, $nb buckets: every bucket but the last started before backward ended" \
       "$TMP/trace.out")" -eq 2 ] &&
    ok "buckets2: overlap: $(grep -m1 '^ok: .*every bucket' "$TMP/trace.out" | sed 's/^ok: //')" ||
    { bad "buckets2: trace check"; cat "$TMP/trace.out"; }
d_buckets=$(compare buckets2 sync1)
echo "   2x$B in $nb buckets vs 1x$((2 * B)), --sync_bn: max rel diff $d_buckets"
awk -v d="$d_buckets" -v t=$TOL 'BEGIN{exit !(d <= t)}' &&
    ok "$nb buckets, --sync_bn: parameters agree, max rel diff $d_buckets <= $TOL" ||
    bad "$nb buckets, --sync_bn: max rel diff $d_buckets > $TOL"

run local2 2 $B --no-sync_bn || finish
d_local=$(compare local2 sync1)
echo "   2x$B without --sync_bn vs 1x$((2 * B)): max rel diff $d_local"
awk -v d="$d_local" -v t=$TOL 'BEGIN{exit !(d > 100 * t)}' &&
    ok "without --sync_bn the comparison fails clearly: $d_local > 100 x $TOL" ||
    bad "without --sync_bn the difference $d_local is not > 100 x $TOL: the comparison cannot tell"
finish
