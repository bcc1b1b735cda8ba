#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The optimizers (--optimizer sgd, adamw, rmsprop, lamb, lars) and --clip_grad_norm against
# PyTorch (tests/helpers/optim_torch.py):
#  1. The updates on given gradients: 4 steps of each on 8 tensors (tests/helpers/optim_dump:
#     a batch norm's weight and bias, convolutions, a linear layer; 36,864 elements in one),
#     with weight decay, the parameter groups of --no_decay_1d and --bn_bias_lr_mult, Nesterov,
#     RMSprop with and without momentum, LAMB's global clip on and off, LARS with and without
#     momentum, and clip_grad_norm_ before the step; against torch.optim.SGD, AdamW and
#     RMSprop (torch 1.13, foreach=False) and against timm's Lamb and Lars (their update rules
#     transcribed in optim_torch.py), every parameter after every step and every state tensor
#     to 1e-6 relative (max |a - b| / max |b| per tensor). AdamW and RMSprop agree bit for bit
#     (ddptrain rounds as ATen's AVX2 kernels do: one fused multiply-add where they fuse); LAMB
#     and LARS to the last bits of their norms (ddptrain sums squares in double, PyTorch in
#     float32 lanes), SGD to the rounding of its weight decay (d = g + wd * p rounded twice, where
#     PyTorch fuses it). Each against PyTorch told another setting, which must fail. The same
#     dump on 1 and 2 threads and on the SSE4.1 path (ONEDNN_MAX_CPU_ISA) is the same bits.
#  2. Training: 4 steps of a ddptrain run per optimizer (MiniResNet width 4 on 8x8 synthetic
#     images, batch 16, --no_decay_1d, --clip_grad_norm 1, a checkpoint after every step), each
#     step replayed in PyTorch from ddptrain's previous checkpoint (weights, buffers, the
#     optimizer's state and step count): every parameter, buffer and state tensor to 1e-5, and
#     metrics.jsonl's grad_norm against clip_grad_norm_'s. AdamW and LAMB run with eps 1e-3
#     here: where a weight's gradient is exactly 0 in PyTorch, ddptrain's may hold round-off of
#     up to 5e-7 of the largest, which Adam's normalisation turns into a step of up to lr at eps
#     1e-8 (docs/numerics.md; part 1 holds eps 1e-8 to the bit).
#     Against PyTorch told another beta1, trust coefficient or clip, the comparison must fail.
#     AdamW with --norm_weight_decay 0 against torchvision's split_normalization_params groups,
#     which --no_decay_1d's groups (the linear bias undecayed too) must fail.
#  3. A run with --optimizer adamw (and one with lamb) stopped after 3 steps and resumed ends
#     with the checkpoint of the uninterrupted run's 8 steps bit for bit (ckpt_compare.py --all);
#     a checkpoint of adamw resumed with --optimizer sgd is refused in one line, as is one whose
#     /optimizer/name is no optimizer's; one without /optimizer/name (as written before it
#     existed) resumes as SGD.
#  4. Bad flags are refused in one line, exit 2, no job directory made.
# shellcheck disable=SC2086  # $RUN and $S are word lists
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "torch, h5py, numpy") || { echo "SKIP: no python3 with torch, h5py and numpy"; exit $SKIP; }
DUMP="$top_builddir/tests/helpers/optim_dump"
REF="$top_srcdir/tests/helpers/optim_torch.py"
CMP="$top_srcdir/tests/helpers/ckpt_compare.py"
export OMP_NUM_THREADS=1

# ---- 1. the updates -------------------------------------------------------------------------
check() {   # $1 = label, rest = optim_dump flags
    label=$1; shift
    if "$DUMP" "$TMP/d.h5" "$@" && "$PY" "$REF" steps "$TMP/d.h5" >"$TMP/c.out" 2>&1; then
        ok "$label: $(cut -c1-230 "$TMP/c.out")"
    else
        bad "$label"; cat "$TMP/c.out"
    fi
}
wrong() {   # $1 = label, $2 = what PyTorch is told instead, rest = optim_dump flags: must fail
    label=$1; set_=$2; shift 2
    "$DUMP" "$TMP/w.h5" "$@" || { bad "$label: optim_dump $*"; return; }
    if "$PY" "$REF" steps "$TMP/w.h5" --set "$set_" >"$TMP/w.out" 2>&1; then
        bad "$label went unnoticed"; cat "$TMP/w.out"
    else
        ok "$label detected: $(tail -1 "$TMP/w.out" | cut -c1-150)"
    fi
}
G="--wd 0.05 --no_decay_1d 1 --bn_bias_lr_mult 3"
check "sgd, weight decay 0.05"                           --optimizer sgd --wd 0.05
check "sgd, nesterov, groups, clip_grad_norm 1 (clipping)" --optimizer sgd --nesterov 1 $G --clip 1 --grad_scale 10
check "adamw, weight decay 0.05"                         --optimizer adamw --wd 0.05 --lr 0.003
check "adamw, groups, betas 0.8/0.99, eps 1e-6"          --optimizer adamw $G --beta1 0.8 --beta2 0.99 --eps 1e-6
check "adamw, clip_grad_norm 0.5 (clipping)"             --optimizer adamw --wd 0.05 --clip 0.5 --grad_scale 10
check "rmsprop, torchvision's (alpha 0.9, eps 0.0316, momentum 0.9)" --optimizer rmsprop --beta2 0.9 --wd 1e-4
check "rmsprop, no momentum, groups, alpha 0.99"         --optimizer rmsprop --momentum 0 $G --beta2 0.99
check "lamb, global clip 1 (clipping), groups"           --optimizer lamb --max_grad_norm 1 --grad_scale 50 $G
check "lamb, global clip 1 (not reached), decay 0.01"    --optimizer lamb --max_grad_norm 1 --grad_scale 0.1 --lr 0.005
check "lamb, no global clip, clip_grad_norm 2"           --optimizer lamb --clip 2 --grad_scale 20 --wd 0.05
check "lars, momentum 0.9, groups"                       --optimizer lars --lr 0.5 $G
check "lars, nesterov, trust coefficient 0.02"           --optimizer lars --lr 0.5 --nesterov 1 --wd 0.05 --trust_coeff 0.02
check "lars, no momentum"                                --optimizer lars --lr 0.5 --momentum 0 --wd 0.05
wrong "adamw eps 1e-8 against 1.1e-8"      eps=1.1e-8      --optimizer adamw --wd 0.05
wrong "adamw weight decay against none"    weight_decay=0  --optimizer adamw --wd 0.05
wrong "rmsprop alpha 0.9 against 0.99"     beta2=0.99      --optimizer rmsprop --beta2 0.9
wrong "lamb's global clip against none"    max_grad_norm=0 --optimizer lamb --max_grad_norm 1 --grad_scale 50
wrong "lamb no_decay_1d against decay everywhere (trust ratios)" no_decay_1d=0 --optimizer lamb $G
wrong "lars nesterov against plain momentum" nesterov=0    --optimizer lars --lr 0.5 --nesterov 1 --wd 0.05
wrong "lars trust coefficient 0.001 against 0.0011" trust_coeff=0.0011 --optimizer lars --lr 0.5 --wd 0.05
wrong "clip_grad_norm 0.5 against 0.55"    clip=0.55       --optimizer adamw --wd 0.05 --clip 0.5 --grad_scale 10

# The same bits on any thread count and on the baseline path (libm's fmaf and sqrtf)
S="--optimizer lamb --max_grad_norm 1 --grad_scale 50 $G --steps 3"
"$DUMP" "$TMP/t1.h5" $S && OMP_NUM_THREADS=2 "$DUMP" "$TMP/t2.h5" $S &&
    ONEDNN_MAX_CPU_ISA=SSE41 "$DUMP" "$TMP/t3.h5" $S || bad "optim_dump $S"
for t in "t2 2 threads" "t3 the SSE4.1 path"; do
    set -- $t
    f=$1; shift
    if out=$("$PY" "$CMP" --all "$TMP/t1.h5" "$TMP/$f.h5" 2>&1); then ok "lamb on $* against 1 thread on the widest path: $out"
    else bad "lamb on $* against 1 thread on the widest path: $out"; fi
done
S="--optimizer rmsprop --beta2 0.9 --steps 3 --clip 0.5 --grad_scale 10"
"$DUMP" "$TMP/t1.h5" $S && OMP_NUM_THREADS=2 ONEDNN_MAX_CPU_ISA=SSE41 "$DUMP" "$TMP/t2.h5" $S || bad "optim_dump $S"
if out=$("$PY" "$CMP" --all "$TMP/t1.h5" "$TMP/t2.h5" 2>&1); then ok "rmsprop and clipping, SSE4.1 on 2 threads: $out"
else bad "rmsprop and clipping, SSE4.1 on 2 threads: $out"; fi

# ---- 2. training ----------------------------------------------------------------------------
make_synth "$TMP/data" --train 64 --test 32 --shards 1 --size 8
"$PY" "$REF" init "$TMP/w.h5" --width 4 --blocks 1 --classes 10 --seed 4 || bad "optim_torch.py init"
RUN="--data_dir $TMP/data --width 4 --blocks 1 --image_size 8 --batch_size 16 --threads 1 --log_interval 1"
# train NAME OPTIMIZER LR EPS ALPHA [SET]: 4 steps in ddptrain, each replayed in PyTorch
train() {
    name=$1 opt=$2 lr=$3 eps=$4 alpha=$5 set_=${6:-}
    j="$TMP/run-$name"
    if ! timeout -k 5 60 "$DDPTRAIN" $RUN --job_dir "$j" --epochs 1 --max_steps 4 --no-augment --no-shuffle \
            --lr_schedule constant --init_from "$TMP/w.h5" --optimizer "$opt" --lr "$lr" --weight_decay 0.05 \
            --no_decay_1d --clip_grad_norm 1 --opt_eps "$eps" --rmsprop_alpha "$alpha" --save_every_steps 1 \
            --keep_checkpoints 9 >"$j.out" 2>&1; then
        bad "$name: ddptrain failed: $(tail -2 "$j.out")"; return
    fi
    "$PY" "$REF" train "$j/checkpoints" --init "$TMP/w.h5" --data "$TMP/data" --batch 16 --steps 4 --lr "$lr" \
        --optimizer "$opt" --wd 0.05 --no_decay_1d --clip 1 --eps "$eps" --beta2 "$alpha" \
        --metrics "$j/metrics.jsonl" --tol 1e-5 ${set_:+--set "$set_"} >"$j.cmp" 2>&1
}
for c in "sgd 0.05 1e-8 0.999" "adamw 0.003 1e-3 0.999" "rmsprop 0.001 0.0316 0.9" "lamb 0.01 1e-3 0.999" \
         "lars 0.5 1e-8 0.999"; do
    set -- $c
    if train "$1" "$@"; then ok "training, $1: $(cut -c1-230 "$TMP/run-$1.cmp")"
    else bad "training, $1"; cat "$TMP/run-$1.cmp"; fi
done
for c in "adamw adamw 0.003 1e-3 0.999 beta1=0.89" "lars lars 0.5 1e-8 0.999 trust_coeff=0.0011" \
         "sgd sgd 0.05 1e-8 0.999 clip=1.01"; do
    set -- $c
    if "$PY" "$REF" train "$TMP/run-$1/checkpoints" --init "$TMP/w.h5" --data "$TMP/data" --batch 16 --steps 4 \
            --lr "$3" --optimizer "$2" --wd 0.05 --no_decay_1d --clip 1 --eps "$4" --beta2 "$5" --tol 1e-5 \
            --set "$6" >"$TMP/tw.out" 2>&1; then
        bad "training, $1 against PyTorch told $6 went unnoticed"
    else
        ok "training, $1 against PyTorch told $6 detected: $(tail -1 "$TMP/tw.out" | cut -c1-120)"
    fi
done

# --norm_weight_decay: torchvision's split of the norms' parameters (the linear bias keeps its decay)
j="$TMP/run-normwd"
if timeout -k 5 60 "$DDPTRAIN" $RUN --job_dir "$j" --epochs 1 --max_steps 4 --no-augment --no-shuffle \
        --lr_schedule constant --init_from "$TMP/w.h5" --optimizer adamw --lr 0.003 --weight_decay 0.05 \
        --norm_weight_decay 0 --opt_eps 1e-3 --save_every_steps 1 --keep_checkpoints 9 >"$j.out" 2>&1; then
    if "$PY" "$REF" train "$j/checkpoints" --init "$TMP/w.h5" --data "$TMP/data" --batch 16 --steps 4 --lr 0.003 \
            --optimizer adamw --wd 0.05 --eps 1e-3 --norm_wd 0 --tol 1e-5 >"$j.cmp" 2>&1; then
        ok "training, adamw with --norm_weight_decay 0: $(cut -c1-200 "$j.cmp")"
    else bad "training, adamw with --norm_weight_decay 0"; cat "$j.cmp"; fi
    if "$PY" "$REF" train "$j/checkpoints" --init "$TMP/w.h5" --data "$TMP/data" --batch 16 --steps 4 --lr 0.003 \
            --optimizer adamw --wd 0.05 --eps 1e-3 --no_decay_1d --tol 1e-5 >"$TMP/tw.out" 2>&1; then
        bad "--norm_weight_decay 0 against PyTorch told --no_decay_1d (the linear bias undecayed) went unnoticed"
    else
        ok "--norm_weight_decay 0 against --no_decay_1d detected: $(tail -1 "$TMP/tw.out" | cut -c1-120)"
    fi
else
    bad "adamw with --norm_weight_decay 0: ddptrain failed: $(tail -2 "$j.out")"
fi

# ---- 3. checkpoints ------------------------------------------------------------------------
resume() {   # $1 = label, rest = flags: 8 steps straight against 3 + resume to 8, bit for bit
    label=$1; shift
    s="$TMP/straight-$label" r="$TMP/resumed-$label"
    timeout -k 5 60 "$DDPTRAIN" $RUN --job_dir "$s" --epochs 2 --max_steps 8 "$@" >"$s.out" 2>&1 &&
        timeout -k 5 60 "$DDPTRAIN" $RUN --job_dir "$r" --epochs 2 --max_steps 3 "$@" >"$r.out" 2>&1 &&
        timeout -k 5 60 "$DDPTRAIN" $RUN --job_dir "$r" --epochs 2 --max_steps 8 "$@" >"$r.2.out" 2>&1 ||
        { bad "$label: a run failed: $(tail -2 "$s.out" "$r.out" "$r.2.out" 2>/dev/null)"; return; }
    grep -q "resume: .*ckpt-000000003.h5" "$r.2.out" || { bad "$label: the second run did not resume step 3"; return; }
    if out=$("$PY" "$CMP" --all "$(ckpt "$s" 8)" "$(ckpt "$r" 8)" 2>&1); then ok "$label: 3 + resume 5 = 8 steps: $out"
    else bad "$label: $out"; fi
}
resume adamw --optimizer adamw --weight_decay 0.05 --no_decay_1d --clip_grad_norm 1 --lr 0.003
resume lamb --optimizer lamb --weight_decay 0.05 --no_decay_1d --lr 0.01 --save_every_steps 3

refused() {   # $1 = label, $2 = text, rest = ddptrain flags: one line on stderr, exit non-zero
    label=$1 want=$2; shift 2
    "$DDPTRAIN" "$@" >"$TMP/r.out" 2>"$TMP/r.err"
    rc=$?
    if [ $rc -ne 0 ] && [ "$(wc -l <"$TMP/r.err")" -eq 1 ] && grep -qF -- "$want" "$TMP/r.err"; then
        ok "$label: exit $rc: $(cat "$TMP/r.err")"
    else
        bad "$label: exit $rc, stderr: $(cat "$TMP/r.err") (wanted '$want')"
    fi
}
a=$(ckpt "$TMP/straight-adamw" 8)
refused "adamw's checkpoint resumed with --optimizer sgd" "holds the state of optimizer adamw, not of this run's sgd" \
    $RUN --job_dir "$TMP/straight-adamw" --epochs 3 --max_steps 12
[ -e "$(ckpt "$TMP/straight-adamw" 12)" ] && bad "the refused resume wrote a checkpoint"
cp "$a" "$TMP/renamed.h5" && cp "$(ckpt "$TMP/run-sgd" 4)" "$TMP/unnamed.h5"
"$PY" - "$TMP/renamed.h5" "$TMP/unnamed.h5" <<'PYEOF' || bad "editing /optimizer/name"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    del f["optimizer/name"]
    f["optimizer/name"] = np.bytes_("adamx")
with h5py.File(sys.argv[2], "r+") as f:
    del f["optimizer/name"]
PYEOF
refused "/optimizer/name adamx" "/optimizer/name is 'adamx', no optimizer this ddptrain knows" \
    $RUN --job_dir "$TMP/renamed" --optimizer adamw --resume "$TMP/renamed.h5" --epochs 3 --max_steps 12
if timeout -k 5 60 "$DDPTRAIN" --data_dir "$TMP/data" --width 4 --blocks 1 --image_size 8 --batch_size 16 --threads 1 \
        --job_dir "$TMP/unnamed" --resume "$TMP/unnamed.h5" --no-augment --no-shuffle --lr_schedule constant \
        --lr 0.05 --weight_decay 0.05 --no_decay_1d --clip_grad_norm 1 --epochs 2 --max_steps 5 >"$TMP/unnamed.out" 2>&1 &&
   grep -q "resume: .*unnamed.h5" "$TMP/unnamed.out"; then
    ok "a checkpoint without /optimizer/name resumes as SGD"
else
    bad "a checkpoint without /optimizer/name: $(tail -2 "$TMP/unnamed.out")"
fi

# ---- 4. bad flags ----------------------------------------------------------------------------
flag() {   # $1 = text, rest = flags: exit 2, one line, no job directory
    want=$1; shift
    rm -rf "$TMP/nojob"
    "$DDPTRAIN" --data_dir "$TMP/data" --job_dir "$TMP/nojob" "$@" >"$TMP/f.out" 2>"$TMP/f.err"
    rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/f.err")" -eq 1 ] && grep -qF -- "$want" "$TMP/f.err" && [ ! -e "$TMP/nojob" ]; then
        ok "$* -> exit 2: $(cat "$TMP/f.err")"
    else
        bad "$* -> exit $rc: $(cat "$TMP/f.err") (wanted '$want', no job directory)"
    fi
}
flag "--optimizer: 'adam' is not one of sgd|adamw|rmsprop|lamb|lars" --optimizer adam
flag "--nesterov: --optimizer rmsprop has no Nesterov momentum" --optimizer rmsprop --nesterov
flag "--adam_beta1 1: must be below 1 (--optimizer lamb)" --optimizer lamb --adam_beta1 1
flag "--adam_beta2 1: must be below 1 (--optimizer adamw)" --optimizer adamw --adam_beta2 1
flag "--opt_eps: -1 is out of range" --optimizer adamw --opt_eps -1
flag "--clip_grad_norm: -1 is out of range" --clip_grad_norm -1
flag "--nesterov: needs a nonzero --momentum" --optimizer lars --nesterov --momentum 0
finish
