#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# MiniResNet forward, backward and SGD against PyTorch on the same weights and batch: logits,
# loss, every gradient, running statistics and parameters after 3 steps within 1e-4 relative.
# Gradient accumulation as ddptrain does it (K micro-batches, each forward's loss gradient
# scaled by 1/K, one SGD step) against PyTorch's K backwards of loss/K: the same measures.
# A run with one gradient entry perturbed by 1% must be caught, with and without accumulation.
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
