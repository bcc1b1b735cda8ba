#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# --lr_schedule onecycle against torch.optim.lr_scheduler.OneCycleLR (cycle_momentum=False):
# the learning rate of every optimizer step of short runs (metrics.jsonl at --log_interval 1)
# within 1e-6 relative, with the cos and the linear anneal and other factors, and over a run
# cut short by --max_steps (the cycle spans the run's steps). Each run compared with a schedule
# that differs (the other anneal, another pct_start, the uncut total) must fail. A cycle whose
# first phase would have no length, and onecycle with --warmup_steps, are refused (exit 2).
# shellcheck disable=SC2086  # $FLAGS is a word list
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "torch") || { echo "SKIP: no python3 with torch"; exit $SKIP; }
CMP="$top_srcdir/tests/helpers/onecycle_compare.py"
export OMP_NUM_THREADS=1
# 256 training images, batch 32: 8 steps per epoch
make_synth "$TMP/data" --train 256 --test 64 --shards 2
FLAGS="--data_dir $TMP/data --width 4 --blocks 1 --threads 1 --batch_size 32 --log_interval 1 --save_every 0"

# run NAME FLAGS...: a training run into $TMP/NAME
run() {
    name=$1; shift
    timeout -k 5 120 "$DDPTRAIN" $FLAGS --job_dir "$TMP/$name" "$@" >"$TMP/$name.out" 2>&1 ||
        { bad "$name: ddptrain failed: $(tail -3 "$TMP/$name.out")"; return 1; }
}
# same NAME LABEL COMPARE_FLAGS...: must agree; differs NAME LABEL COMPARE_FLAGS...: must not
same() {
    name=$1 label=$2; shift 2
    if "$PY" "$CMP" "$TMP/$name/metrics.jsonl" "$@" >"$TMP/c.out" 2>&1; then
        ok "$label: $(grep compared "$TMP/c.out")"
    else
        bad "$label: $(cat "$TMP/c.out")"
    fi
}
differs() {
    name=$1 label=$2; shift 2
    if "$PY" "$CMP" "$TMP/$name/metrics.jsonl" "$@" >"$TMP/c.out" 2>&1; then
        bad "$label went unnoticed: $(cat "$TMP/c.out")"
    else
        ok "$label detected: $(grep -E "worst|FAIL" "$TMP/c.out" | head -2 | tr '\n' ' ')"
    fi
}

if run cos --epochs 3 --lr 0.1 --lr_schedule onecycle; then
    same cos "cos anneal, PyTorch's defaults, 24 steps" --lr 0.1 --total_steps 24
    differs cos "cos run against a linear anneal" --lr 0.1 --total_steps 24 --anneal linear
    differs cos "cos run against pct_start 0.25" --lr 0.1 --total_steps 24 --pct_start 0.25
fi
if run lin --epochs 3 --lr 0.05 --lr_schedule onecycle --onecycle_anneal linear --onecycle_pct_start 0.4 \
        --onecycle_div_factor 10 --onecycle_final_div_factor 100; then
    A="--lr 0.05 --total_steps 24 --pct_start 0.4 --div_factor 10 --final_div_factor 100"
    same lin "linear anneal, pct_start 0.4, div 10, final div 100" $A --anneal linear
    differs lin "linear run against a cos anneal" $A --anneal cos
    differs lin "linear run against final_div_factor 1000" --lr 0.05 --total_steps 24 --pct_start 0.4 \
        --div_factor 10 --final_div_factor 1000 --anneal linear
fi
if run cut --epochs 3 --max_steps 13 --lr 0.1 --lr_schedule onecycle --onecycle_pct_start 0.25; then
    same cut "--max_steps 13 of 24: one cycle over 13 steps" --lr 0.1 --total_steps 13 --pct_start 0.25
    differs cut "the cut run against the first 13 steps of the epochs' 24-step cycle" --lr 0.1 --total_steps 24 \
        --steps 13 --pct_start 0.25
fi

# refusals: one line on stderr, exit 2
refused() {   # $1 = text expected, rest = flags
    want=$1; shift
    "$DDPTRAIN" $FLAGS --job_dir "$TMP/refused" "$@" >"$TMP/r.out" 2>"$TMP/r.err"
    rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/r.err")" -eq 1 ] && grep -q -- "$want" "$TMP/r.err"; then
        ok "$* -> exit 2: $(cat "$TMP/r.err")"
    else
        bad "$* -> rc=$rc: $(cat "$TMP/r.err") (wanted '$want')"
    fi
}
refused "first phase" --epochs 1 --lr_schedule onecycle --onecycle_pct_start 0.125
refused "warms up by itself" --lr_schedule onecycle --warmup_steps 5
refused "--min_lr: --lr_schedule onecycle ends at" --lr_schedule onecycle --min_lr 0.001
finish
