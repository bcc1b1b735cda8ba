#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A ddptrain checkpoint is a PyTorch state_dict in HDF5: scripts/ddptrain_to_torch.py loads it
# into the PyTorch MiniResNet (strict names and shapes) and reproduces ddptrain's eval-mode
# logits within 1e-4 relative and its test accuracy; the HDF5 tools open it; a perturbed
# filter is caught (the comparison can fail). With --ema it loads a run's moving average
# (/ema), which gives the run's own final test accuracy; a checkpoint without one is refused.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "torch, h5py, numpy") || { echo "SKIP: no python3 with torch, h5py and numpy"; exit $SKIP; }
DUMP="$top_builddir/tests/helpers/ckpt_dump"
CHECK="$top_srcdir/tests/helpers/ckpt_torch_check.py"
CONVERT="$top_srcdir/scripts/ddptrain_to_torch.py"

case_() {   # $1 = label, rest = ckpt_dump flags
    label=$1; shift
    rm -rf "$TMP/data"
    if "$DUMP" "$TMP/c.h5" "$TMP/data" "$@" >"$TMP/dump.out" &&
       "$PY" "$CHECK" "$TMP/c.h5" "$TMP/data/test-00000-of-00001.h5" >"$TMP/check.out" 2>&1; then
        ok "$label: $(cat "$TMP/check.out")"
    else
        bad "$label"; cat "$TMP/dump.out" "$TMP/check.out"
    fi
}
case_ "width 8, 1 block, 16x16"  --width 8 --blocks 1 --image_size 16 --batch 32 --seed 3
case_ "width 16, 2 blocks, 32x32" --width 16 --blocks 2 --image_size 32 --batch 16 --seed 4

# The conversion script on its own: parameter count and accuracy over the shard directory
# (the last checkpoint written above: width 16, 2 blocks).
if "$PY" "$CONVERT" "$TMP/c.h5" --data "$TMP/data" --save "$TMP/c.pt" >"$TMP/conv.out" 2>&1; then
    want=$("$PY" -c "import h5py,sys; f=h5py.File(sys.argv[1],'r'); print(int(f.attrs['ref_correct']), f['labels'].shape[0])" \
           "$TMP/data/test-00000-of-00001.h5")
    acc=$(sed -n 's/.*accuracy: .* (\([0-9]*\)\/\([0-9]*\)).*/\1 \2/p' "$TMP/conv.out")
    if grep -q "parameters" "$TMP/conv.out" && [ "$acc" = "$want" ] && [ -s "$TMP/c.pt" ]; then
        ok "ddptrain_to_torch.py: $(tr '\n' ' ' <"$TMP/conv.out")"
    else
        bad "ddptrain_to_torch.py: accuracy '$acc', expected '$want'"; cat "$TMP/conv.out"
    fi
else
    bad "ddptrain_to_torch.py failed"; cat "$TMP/conv.out"
fi

# A run with --ema_decay: --ema reproduces its last evaluation (of the average), image for image.
make_synth "$TMP/sdata" --train 512 --test 128 --shards 1
if "$DDPTRAIN" --data_dir "$TMP/sdata" --job_dir "$TMP/ema" --width 8 --blocks 1 --threads 1 --batch_size 32 \
       --epochs 3 --lr 0.05 --ema_decay 0.8 >"$TMP/ema.out" 2>&1; then
    f=$TMP/ema/checkpoints/ckpt-000000048.h5
    want=$(grep '"test_acc"' "$TMP/ema/metrics.jsonl" | tail -1 | sed 's/.*"test_acc": \([0-9.]*\).*/\1/')
    "$PY" "$CONVERT" "$f" --ema --data "$TMP/sdata" >"$TMP/conv.out" 2>&1
    got=$(sed -n 's/.*accuracy: .* (\([0-9]*\)\/\([0-9]*\)).*/\1 \2/p' "$TMP/conv.out")
    if grep -q "the EMA of 48 updates" "$TMP/conv.out" && awk -v g="$got" -v w="$want" 'BEGIN{split(g, a, " "); exit !(a[2] > 0 && a[1] / a[2] - w < 1e-6 && w - a[1] / a[2] < 1e-6)}'; then
        ok "ddptrain_to_torch.py --ema: $got correct, ddptrain's test_acc $want"
    else
        bad "ddptrain_to_torch.py --ema: '$got', ddptrain's test_acc $want: $(cat "$TMP/conv.out")"
    fi
    if "$PY" "$CONVERT" "$f" >"$TMP/conv.out" 2>&1 && grep -q "the run evaluated its EMA: --ema loads it" "$TMP/conv.out"; then
        ok "without --ema: the trained weights, and a note"
    else
        bad "without --ema: $(cat "$TMP/conv.out")"
    fi
else
    bad "ddptrain --ema_decay 0.8 failed: $(tail -3 "$TMP/ema.out")"
fi
if "$PY" "$CONVERT" "$TMP/c.h5" --ema >"$TMP/conv.out" 2>&1; then
    bad "--ema on a checkpoint without /ema went through"
else
    ok "--ema on a checkpoint without /ema refused: $(head -1 "$TMP/conv.out")"
fi

if command -v h5ls >/dev/null 2>&1; then
    if h5ls -r "$TMP/c.h5" >"$TMP/ls.out" 2>&1 && grep -q '^/model/layer1.0.conv1.weight .*{16, 16, 3, 3}' "$TMP/ls.out" &&
       grep -q '^/optimizer/momentum/fc.weight' "$TMP/ls.out" && grep -q '^/train_state/global_step' "$TMP/ls.out"; then
        ok "h5ls -r opens the checkpoint ($(wc -l <"$TMP/ls.out") entries)"
    else
        bad "h5ls -r"; cat "$TMP/ls.out"
    fi
else
    echo "note: h5ls not installed, skipping that check"
fi

# One filter scaled by 1.1 after the fact (h5py rewrites the chunk and its checksum): the
# comparison must notice.
"$DUMP" "$TMP/p.h5" "$TMP/pdata" --width 8 --blocks 1 --image_size 16 --batch 32 --seed 3 >/dev/null
"$PY" -c "import h5py,sys; f=h5py.File(sys.argv[1],'r+'); d=f['model/layer2.0.conv1.weight']; d[0]=d[0]*1.1" "$TMP/p.h5"
if "$PY" "$CHECK" "$TMP/p.h5" "$TMP/pdata/test-00000-of-00001.h5" >"$TMP/p.out" 2>&1; then
    bad "a perturbed filter went unnoticed: $(cat "$TMP/p.out")"
else
    ok "a perturbed filter is detected: $(grep FAIL "$TMP/p.out" | head -1)"
fi

# The PyTorch side refuses what is not a checkpoint with one line.
printf 'not hdf5' >"$TMP/bad.h5"
if "$PY" "$CONVERT" "$TMP/bad.h5" >"$TMP/bad.out" 2>&1; then
    bad "ddptrain_to_torch.py accepted a garbage file"
else
    ok "ddptrain_to_torch.py refuses a garbage file: $(head -1 "$TMP/bad.out")"
fi
finish
