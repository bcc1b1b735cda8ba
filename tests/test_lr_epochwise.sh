#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# torchvision's per-epoch schedules (--lr_schedule step, multistep, exponential, and cosine or
# constant behind --lr_warmup_epochs) against torch's own schedulers built as torchvision 0.14's
# reference train.py builds them (SequentialLR of LinearLR or ConstantLR and the main one,
# stepped once per epoch): the lr of every optimizer step within 1e-12 relative
# (tests/helpers/schedule_dump prints ddptrain's Schedule from its own options with 17 digits),
# and once through a training run's metrics.jsonl (8 digits: 1e-7). Each compared with a variant
# that differs (warm-up one epoch longer, another gamma, the other warm-up, a cosine over all the
# epochs) must fail. Then --ema_adjust's decay on the EMA's line against train.py's formula, its
# restarts during the warm-up epochs against AveragedModel (tests/helpers/ema_warmup_check.py), and
# the refusals (exit 2, one line).
# shellcheck disable=SC2086  # flag lists
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "torch") || { echo "SKIP: no python3 with torch"; exit $SKIP; }
CMP="$top_srcdir/tests/helpers/schedule_compare.py"
DUMP="$top_builddir/tests/helpers/schedule_dump"
export OMP_NUM_THREADS=1

# case LABEL "DDPTRAIN_FLAGS" TORCH_FLAGS...: must agree; wrong LABEL "DDPTRAIN_FLAGS" TORCH_FLAGS...: must not
case_() {
    label=$1 flags=$2; shift 2
    "$DUMP" 3 --lr 0.1 $flags >"$TMP/d.txt" 2>"$TMP/d.err" || { bad "$label: schedule_dump: $(cat "$TMP/d.err")"; return; }
    if "$PY" "$CMP" "$TMP/d.txt" --lr 0.1 --steps_per_epoch 3 "$@" >"$TMP/c.out" 2>&1; then
        ok "$label: $(head -1 "$TMP/c.out")"
    else
        bad "$label: $(cat "$TMP/c.out")"
    fi
}
wrong() {
    label=$1 flags=$2; shift 2
    "$DUMP" 3 --lr 0.1 $flags >"$TMP/d.txt" 2>"$TMP/d.err" || { bad "$label: schedule_dump: $(cat "$TMP/d.err")"; return; }
    if "$PY" "$CMP" "$TMP/d.txt" --lr 0.1 --steps_per_epoch 3 "$@" >"$TMP/c.out" 2>&1; then
        bad "$label went unnoticed: $(cat "$TMP/c.out")"
    else
        ok "$label detected: $(sed -n 2p "$TMP/c.out")"
    fi
}

S="--lr_schedule step --lr_step_size 3 --lr_gamma 0.5 --epochs 10"
case_ "step 3 x0.5" "$S" --schedule step --step_size 3 --gamma 0.5 --epochs 10
case_ "step behind 2 linear warm-up epochs" "$S --lr_warmup_epochs 2" --schedule step --step_size 3 --gamma 0.5 --epochs 10 --warmup 2
wrong "warm-up of 2 epochs against torch's 3" "$S --lr_warmup_epochs 2" --schedule step --step_size 3 --gamma 0.5 --epochs 10 --warmup 3
wrong "warm-up of 2 epochs against torch's 1" "$S --lr_warmup_epochs 2" --schedule step --step_size 3 --gamma 0.5 --epochs 10 --warmup 1
M="--lr_schedule multistep --lr_milestones 2,5,6 --lr_gamma 0.3 --epochs 12"
case_ "multistep 2,5,6 x0.3" "$M" --schedule multistep --milestones 2,5,6 --gamma 0.3 --epochs 12
case_ "multistep behind 3 constant warm-up epochs at 0.2" "$M --lr_warmup_epochs 3 --lr_warmup_method constant --lr_warmup_decay 0.2" \
    --schedule multistep --milestones 2,5,6 --gamma 0.3 --epochs 12 --warmup 3 --method constant --decay 0.2
wrong "constant warm-up against a linear one" "$M --lr_warmup_epochs 3 --lr_warmup_method constant --lr_warmup_decay 0.2" \
    --schedule multistep --milestones 2,5,6 --gamma 0.3 --epochs 12 --warmup 3 --method linear --decay 0.2
E="--lr_schedule exponential --lr_gamma 0.7 --epochs 12"
case_ "exponential 0.7" "$E" --schedule exponential --gamma 0.7 --epochs 12
case_ "exponential behind 4 linear epochs from 0.05" "$E --lr_warmup_epochs 4 --lr_warmup_decay 0.05" \
    --schedule exponential --gamma 0.7 --epochs 12 --warmup 4 --decay 0.05
wrong "exponential 0.7 against gamma 0.71" "$E" --schedule exponential --gamma 0.71 --epochs 12
C="--lr_schedule cosine --min_lr 0.001 --epochs 9"
case_ "cosine (the existing schedule, unchanged)" "$C" --schedule cosine --min_lr 0.001 --epochs 9
case_ "cosine behind 3 linear warm-up epochs (T_max 6)" "$C --lr_warmup_epochs 3" --schedule cosine --min_lr 0.001 --epochs 9 --warmup 3
wrong "cosine after warm-up against T_max = all 9 epochs" "$C --lr_warmup_epochs 3" --schedule cosine --min_lr 0.001 --epochs 9 --warmup 3 --tmax_all
case_ "constant behind 2 linear warm-up epochs" "--lr_schedule constant --epochs 6 --lr_warmup_epochs 2" --schedule constant --epochs 6 --warmup 2

# Through training: 256 images, batch 64, 4 steps per epoch, metrics.jsonl's 8 digits
make_synth "$TMP/data" --train 256 --test 64 --shards 2
FLAGS="--data_dir $TMP/data --width 4 --blocks 1 --threads 1 --batch_size 64 --log_interval 1 --save_every 0"
if timeout -k 5 120 "$DDPTRAIN" $FLAGS --job_dir "$TMP/run" --epochs 4 --lr 0.1 --lr_schedule step --lr_step_size 1 \
        --lr_gamma 0.5 --lr_warmup_epochs 2 --lr_warmup_decay 0.1 --ema_decay 0.999 --ema_adjust --ema_every 2 \
        --save_every 1 --save_every_steps 2 --keep_checkpoints 100 >"$TMP/run.out" 2>&1; then
    if "$PY" "$CMP" "$TMP/run/metrics.jsonl" --lr 0.1 --steps_per_epoch 4 --schedule step --step_size 1 --gamma 0.5 --epochs 4 \
            --warmup 2 --decay 0.1 --tol 1e-7 >"$TMP/c.out" 2>&1; then
        ok "a training run's metrics.jsonl: $(head -1 "$TMP/c.out")"
    else
        bad "a training run's metrics.jsonl: $(cat "$TMP/c.out")"
    fi
    # train.py: alpha = min(1, (1 - decay) * world_size * batch_size * model_ema_steps / epochs)
    want=$("$PY" -c 'print("%.17g" % (1.0 - min(1.0, (1.0 - 0.999) * (1 * 64 * 2 / 4))))')
    if grep -q "EMA: weights and batch-norm buffers averaged with decay $want (--ema_adjust" "$TMP/run.out"; then
        ok "--ema_adjust: decay $want on the EMA's line, as train.py's adjustment"
    else
        bad "--ema_adjust: wanted decay $want: $(grep "EMA:" "$TMP/run.out")"
    fi
    # The restarts during the warm-up epochs, against AveragedModel rebuilt from the weights of a
    # checkpoint at every update; the same without the restarts must not match.
    EMA="$top_srcdir/tests/helpers/ema_warmup_check.py"
    EA="$TMP/run/checkpoints --decay $want --every 2 --steps_per_epoch 4 --warmup_epochs 2"
    if "$PY" "$EMA" $EA >"$TMP/e.out" 2>&1; then
        ok "--ema_adjust: the average restarts during the warm-up: $(cat "$TMP/e.out")"
    else
        bad "--ema_adjust's restarts: $(cat "$TMP/e.out")"
    fi
    if "$PY" "$EMA" $EA --no_reset >"$TMP/e.out" 2>&1; then
        bad "the EMA without restarts during the warm-up matched too: $(cat "$TMP/e.out")"
    else
        ok "without the restarts the reference differs: $(cat "$TMP/e.out")"
    fi
else
    bad "training run failed: $(tail -3 "$TMP/run.out")"
fi

refused() {   # $1 = text expected, rest = flags
    want=$1; shift
    "$DDPTRAIN" $FLAGS --job_dir "$TMP/refused" "$@" >"$TMP/r.out" 2>"$TMP/r.err"
    rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/r.err")" -eq 1 ] && grep -q -- "$want" "$TMP/r.err" && [ ! -e "$TMP/refused" ]; then
        ok "$* -> exit 2: $(cat "$TMP/r.err")"
    else
        bad "$* -> rc=$rc: $(cat "$TMP/r.err") (wanted '$want')"
    fi
}
refused "warms up by itself" --lr_schedule onecycle --lr_warmup_epochs 1 --epochs 3
refused "use --warmup_steps" --lr_schedule cosine_step --lr_warmup_epochs 1 --epochs 3
refused "one warm-up at a time" --lr_warmup_epochs 1 --warmup_steps 4 --epochs 3
refused "must be below --epochs" --lr_warmup_epochs 3 --epochs 3
refused "needs --lr_milestones" --lr_schedule multistep --epochs 3
refused "ascending" --lr_schedule multistep --lr_milestones 5,3 --epochs 3
finish
