#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# MiniResNet forward, backward and SGD against PyTorch on the same weights and batch: logits,
# loss, every gradient, running statistics and parameters after 3 steps within 1e-4 relative.
# Gradient accumulation as ddptrain does it (K micro-batches, each forward's loss gradient
# scaled by 1/K, one SGD step) against PyTorch's K backwards of loss/K: the same measures.
# A run with one gradient entry perturbed by 1% must be caught, with and without accumulation.
# The training recipes' options (Nesterov momentum, label smoothing, the parameter groups)
# against the PyTorch API that has them, and each against PyTorch with the option off or
# changed, which must not agree.
# The moving average of the weights and buffers (--ema_decay, --ema_every) after 6 or 7 steps
# against torch.optim.swa_utils.AveragedModel(use_buffers=True) within 1e-5 relative, and
# against another decay or another update interval, which must not agree.
# Test-time augmentation (--tta flip, flip_shift): the evaluation's averaged logits of a batch
# against airbench's evaluation in PyTorch to 1e-5 relative, the correct count exactly; against
# fewer views or zero padding instead of reflection, which must not agree.
# shellcheck disable=SC2086  # $G is a word list
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "torch, h5py, numpy") || { echo "SKIP: no python3 with torch, h5py and numpy"; exit $SKIP; }
DUMP="$top_builddir/tests/helpers/dump_model"
CMP="$top_srcdir/tests/helpers/torch_compare.py"

check() {   # $1 = label, rest = dump_model flags
    label=$1; shift
    if "$DUMP" "$TMP/d.h5" "$@" && "$PY" "$CMP" "$TMP/d.h5"; then ok "$label"; else bad "$label"; fi
}
check "width 8, 1 block, batch 8, 16x16"      --width 8 --blocks 1 --batch 8 --image_size 16 --seed 3
check "width 16, 2 blocks, batch 6, 32x32"    --width 16 --blocks 2 --batch 6 --image_size 32 --seed 4
check "width 64 (2,777,674 params), batch 4"  --width 64 --blocks 2 --batch 4 --image_size 32 --seed 5
check "width 8, 2 blocks, batch 4 x accum 3"   --width 8 --blocks 2 --batch 4 --image_size 16 --seed 6 --accum 3
check "width 16, 1 block, batch 4 x accum 4"   --width 16 --blocks 1 --batch 4 --image_size 16 --seed 7 --accum 4
check "nesterov, width 8, 2 blocks, batch 8"   --width 8 --blocks 2 --batch 8 --image_size 16 --seed 8 --nesterov 1
check "nesterov, width 16, batch 4 x accum 2"  --width 16 --blocks 1 --batch 4 --image_size 16 --seed 9 --accum 2 \
    --nesterov 1

# $1 = label, $2 = what PyTorch is told instead (torch_compare.py --set), rest = dump_model flags:
# the comparison must fail.
wrong() {
    label=$1; set_=$2; shift 2
    "$DUMP" "$TMP/w.h5" "$@" >/dev/null || { bad "$label: dump_model $*"; return; }
    if "$PY" "$CMP" "$TMP/w.h5" --set "$set_" >"$TMP/w.out" 2>&1; then
        bad "$label went unnoticed"; cat "$TMP/w.out"
    else
        ok "$label detected: $(grep FAIL "$TMP/w.out" | head -1 | cut -c1-160)"
    fi
}
wrong "nesterov against plain momentum" nesterov=0 --width 8 --blocks 2 --batch 8 --image_size 16 --seed 8 --nesterov 1
wrong "plain momentum against nesterov" nesterov=1 --width 8 --blocks 2 --batch 8 --image_size 16 --seed 8
check "label smoothing 0.1, width 8, batch 8"  --width 8 --blocks 2 --batch 8 --image_size 16 --seed 10 --label_smoothing 0.1
check "label smoothing 0.3, batch 4 x accum 3" --width 8 --blocks 1 --batch 4 --image_size 16 --seed 11 --accum 3 \
    --label_smoothing 0.3
wrong "label smoothing 0.1 against none" label_smoothing=0 --width 8 --blocks 2 --batch 8 --image_size 16 --seed 10 \
    --label_smoothing 0.1
wrong "label smoothing 0.1 against 0.11" label_smoothing=0.11 --width 8 --blocks 2 --batch 8 --image_size 16 --seed 10 \
    --label_smoothing 0.1
# Parameter groups, with a weight decay large enough to show in 3 steps
G="--width 8 --blocks 2 --batch 8 --image_size 16 --seed 12 --wd 0.05"
check "no weight decay on 1-D parameters"       $G --no_decay_1d 1
check "batch-norm biases at 3 x lr"             $G --bn_bias_lr_mult 3
check "both groups, nesterov, accum 2"          $G --no_decay_1d 1 --bn_bias_lr_mult 0.5 --nesterov 1 --accum 2
wrong "no_decay_1d against decay everywhere" no_decay_1d=0 $G --no_decay_1d 1
wrong "decay everywhere against no_decay_1d" no_decay_1d=1 $G
wrong "bn_bias_lr_mult 3 against 1" bn_bias_lr_mult=1 $G --bn_bias_lr_mult 3
wrong "bn_bias_lr_mult 1 against 1.1" bn_bias_lr_mult=1.1 $G

E="--width 8 --blocks 2 --batch 8 --image_size 16 --seed 13"
check "EMA decay 0.9 over 6 steps"                 $E --ema_decay 0.9 --steps 6
check "EMA decay 0.99 every 2 of 7 steps, accum 2" $E --ema_decay 0.99 --ema_every 2 --steps 7 --accum 2
check "EMA decay 0.5, nesterov, label smoothing"   $E --ema_decay 0.5 --steps 6 --nesterov 1 --label_smoothing 0.1
wrong "EMA decay 0.9 against 0.899" ema_decay=0.899 $E --ema_decay 0.9 --steps 6
wrong "EMA decay 0.9 against 0.91"  ema_decay=0.91  $E --ema_decay 0.9 --steps 6
wrong "EMA every step against every 2" ema_every=2  $E --ema_decay 0.9 --steps 6

T="--width 8 --blocks 2 --batch 8 --image_size 16 --seed 21"
check "TTA flip, 16x16, 16 images in 2 forwards"  $T --tta flip --accum 2
check "TTA flip_shift, 16x16, 16 images"          $T --tta flip_shift --accum 2
check "TTA flip_shift, width 16, 32x32"           --width 16 --blocks 1 --batch 6 --image_size 32 --seed 22 --tta flip_shift
wrong "TTA flip against none"                     tta=0 $T --tta flip
wrong "TTA flip_shift against flip"               tta=1 $T --tta flip_shift
wrong "TTA flip_shift against zero padding"       tta_pad_zero=1 $T --tta flip_shift

for name in layer2.0.conv1.weight layer3.1.bn2.bias fc.weight; do
    "$DUMP" "$TMP/p.h5" --width 8 --blocks 2 --batch 8 --image_size 16 --perturb "$name" >/dev/null
    if "$PY" "$CMP" "$TMP/p.h5" >"$TMP/p.out" 2>&1; then
        bad "perturbed gradient of $name went unnoticed"; cat "$TMP/p.out"
    else
        ok "perturbed gradient of $name detected: $(grep FAIL "$TMP/p.out" | head -1)"
    fi
done
"$DUMP" "$TMP/p.h5" --width 8 --blocks 2 --batch 4 --image_size 16 --seed 6 --accum 3 \
    --perturb layer2.0.conv1.weight >/dev/null
if "$PY" "$CMP" "$TMP/p.h5" >"$TMP/p.out" 2>&1; then
    bad "perturbed accumulated gradient went unnoticed"; cat "$TMP/p.out"
else
    ok "perturbed accumulated gradient detected: $(grep FAIL "$TMP/p.out" | head -1)"
fi
finish
