#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# airbench94 (networks/airbench94.json, recipes/cifar10-airbench.json) against the suite's own
# PyTorch rendering of it (tests/helpers/airbench_torch.py) through bench/airbench_check.py:
# one step of SGD on one batch from the same weights (the loss, every gradient, the weights and
# running statistics after it, the batch norms' weights held at 1), Lookahead's pull and final
# copy, and the whitening ddptrain computes from the same images against numpy's eigh in float64.
# Each must fail when the reference's side is changed (another Lookahead decay, label smoothing
# or whitening eps: --negatives) or the network trains its batch norms' weights.
# The reflected padding of the training crop (--crop_pad_mode reflect; tests/helpers/crops_dump
# padcrop) against F.pad(mode='reflect') + crop + flip exactly, and not against zero padding;
# --lr_schedule triangle against LambdaLR with airbench's get_lr to 1e-12, and not against
# another rise. Lookahead and the whitening bias's freezing resume bit for bit; 2 ranks whiten
# as 1 does from the same images; "dirac" is torch.nn.init.dirac_; the refusals are one line.
# shellcheck disable=SC2086
. "${top_srcdir:-.}/tests/helpers/lib.sh"
mpi_leak_checks_off   # ranks started by mpirun (see tests/helpers/lib.sh)
PY=$(find_python "torch, h5py, numpy") || { echo "SKIP: no python3 with torch, h5py and numpy"; exit $SKIP; }
CHECK="$top_srcdir/bench/airbench_check.py"
REF="$top_srcdir/tests/helpers/airbench_torch.py"
MISC="$top_srcdir/tests/helpers/airbench_misc.py"
NET="$top_srcdir/networks/airbench94.json"
H="$top_builddir/tests/helpers"

# 1. the reflected crop
mkdir -p "$TMP/pc"
"$H/crops_dump" padcrop "$TMP/pc" 200 11 || bad "crops_dump padcrop"
if "$PY" "$MISC" padcrop "$TMP/pc" >"$TMP/pc.out"; then ok "reflect padding: $(cat "$TMP/pc.out")"; else bad "reflect padding: $(cat "$TMP/pc.out")"; fi
if "$PY" "$MISC" padcrop "$TMP/pc" --pad_mode constant >"$TMP/pc.out"; then bad "reflect padding matches zero padding"; else ok "zero padding does not match"; fi

# 2. the triangle schedule of the recipe: 476 steps of 48
"$H/schedule_dump" 48 --lr 1.5 --lr_schedule triangle --epochs 10 --max_steps 476 --onecycle_pct_start 0.23 \
    --onecycle_div_factor 5 --onecycle_final_div_factor 2.857142857142857 >"$TMP/tri.txt" || bad "schedule_dump triangle"
if "$PY" "$MISC" triangle "$TMP/tri.txt" --lr 1.5 --total 476 >"$TMP/tri.out"; then ok "$(cat "$TMP/tri.out")"; else bad "$(cat "$TMP/tri.out")"; fi
if "$PY" "$MISC" triangle "$TMP/tri.txt" --lr 1.5 --total 476 --peak 0.25 >/dev/null; then bad "triangle matches a rise of 25%"; else ok "triangle does not match a rise of 25%"; fi

# 3. one step against the PyTorch rendering, and what must not agree
A="--reference $REF --ddptrain $DDPTRAIN --ddpdata $DDPDATA --network $NET --batch 32 --work $TMP/w"
if "$PY" "$CHECK" $A --negatives >"$TMP/c.out" 2>&1; then ok "one step: $(tail -1 "$TMP/c.out")"; else bad "one step: $(cat "$TMP/c.out")"; fi
sed 's/^/    /' "$TMP/c.out"
sed 's/"affine_weight": false/"affine_weight": true/' "$NET" >"$TMP/trained_bn.json"
rm -rf "$TMP"/w/job-*
if "$PY" "$CHECK" $A --network "$TMP/trained_bn.json" >"$TMP/c.out" 2>&1; then bad "batch norms with a trained weight agree"; else ok "batch norms with a trained weight: $(tail -1 "$TMP/c.out")"; fi

# 4. resume bit for bit with Lookahead and the whitening bias frozen after epoch 1
D="$TMP/w/data"
T="--model $NET --data_dir $D --batch_size 8 --epochs 2 --max_steps 7 --threads 1 --lookahead_every 2 --whiten_bias_epochs 1 --eval_every 0 --no-memory_check"
"$DDPTRAIN" $T --job_dir "$TMP/r1" >"$TMP/r1.out" 2>&1 || bad "straight run: $(tail -2 "$TMP/r1.out")"
# the same run with a checkpoint at step 3, resumed from it (the later ones removed)
"$DDPTRAIN" $T --job_dir "$TMP/r2" --save_every_steps 3 --keep_checkpoints 10 >"$TMP/r2.out" 2>&1 || bad "first run: $(tail -2 "$TMP/r2.out")"
find "$TMP/r2/checkpoints" -name 'ckpt-*.h5' ! -name 'ckpt-000000003.h5' -exec rm {} +
rm -f "$TMP/r2/checkpoints/latest"
"$DDPTRAIN" $T --job_dir "$TMP/r2" >"$TMP/r2.out" 2>&1 || bad "resumed run: $(tail -2 "$TMP/r2.out")"
grep -q "global step 3" "$TMP/r2.out" || bad "not resumed from step 3: $(grep resume "$TMP/r2.out")"
if "$PY" "$top_srcdir/tests/helpers/ckpt_compare.py" --all "$TMP/r1/checkpoints/ckpt-000000007.h5" \
    "$TMP/r2/checkpoints/ckpt-000000007.h5" >"$TMP/cmp.out"; then
    ok "Lookahead and the whitening bias resume bit for bit: $(cat "$TMP/cmp.out")"
else
    bad "resume: $(cat "$TMP/cmp.out")"
fi
grep -q "the whitening convolution's bias is frozen from here" "$TMP/r2.out" && ok "the whitening bias is frozen at epoch 2" \
    || bad "no line of the whitening bias's freezing"

# 5. two ranks whiten as one from all the images (the sums added across ranks)
if command -v mpirun >/dev/null 2>&1; then
    W="--model $NET --data_dir $D --batch_size 8 --epochs 1 --max_steps 1 --lr 0 --threads 1 --whiten_images 100000 --eval_every 0 --no-memory_check"
    "$DDPTRAIN" $W --job_dir "$TMP/one" >"$TMP/one.out" 2>&1 || bad "1 rank: $(tail -2 "$TMP/one.out")"
    mpirun --allow-run-as-root --oversubscribe -np 2 "$DDPTRAIN" $W --job_dir "$TMP/two" >"$TMP/two.out" 2>&1 \
        || bad "2 ranks: $(tail -2 "$TMP/two.out")"
    if "$PY" - "$TMP/one/checkpoints/ckpt-000000001.h5" "$TMP/two/checkpoints/ckpt-000000001.h5" <<'PYEOF'
import sys, h5py, numpy as np
a, b = (h5py.File(f, "r")["model/0.weight"][()] for f in sys.argv[1:])
r = np.abs(a - b).max() / np.abs(a).max()
print("2 ranks' whitening vs 1 rank's: %.3g" % r)
sys.exit(0 if r < 1e-6 and np.abs(a).max() > 0 else 1)
PYEOF
    then ok "2 ranks whiten as 1"; else bad "2 ranks whiten otherwise than 1"; fi
    # "dirac": true against torch.nn.init.dirac_ on the first in-channels filters (--lr 0 above:
    # the convolutions' weights are the initial ones)
    if "$PY" - "$TMP/one/checkpoints/ckpt-000000001.h5" <<'PYEOF'
import sys, h5py, numpy as np, torch
f = h5py.File(sys.argv[1], "r")["model"]
bad = 0
for k in ("2.conv1.weight", "2.conv2.weight", "3.conv1.weight", "4.conv2.weight"):
    w = f[k][()]
    t = torch.from_numpy(w.copy())
    torch.nn.init.dirac_(t[:w.shape[1]])
    if not np.array_equal(t.numpy(), w) or (w.shape[0] > w.shape[1] and not np.abs(w[w.shape[1]:]).max() > 0):
        bad += 1
print("dirac: %d of 4 convolutions differ from torch.nn.init.dirac_" % bad)
sys.exit(1 if bad else 0)
PYEOF
    then ok "dirac initialisation as torch.nn.init.dirac_"; else bad "dirac initialisation"; fi
else
    echo "(no mpirun: the 2-rank whitening was not run)"
fi

# 6. refusals: one line, nothing made
"$DDPTRAIN" --model "$NET" --data_dir "$D" --job_dir "$TMP/no1" --lookahead_every 5 --ema_decay 0.9 >"$TMP/e.out" 2>&1
if [ $? -ne 0 ] && [ "$(wc -l <"$TMP/e.out")" -eq 1 ] && grep -q "lookahead_every" "$TMP/e.out" && [ ! -e "$TMP/no1" ]; then
    ok "Lookahead with an EMA refused: $(cat "$TMP/e.out")"
else
    bad "Lookahead with an EMA: $(cat "$TMP/e.out")"
fi
"$DDPTRAIN" --model "$NET" --data_dir "$D" --job_dir "$TMP/no2" --data_in_memory no --batch_size 8 --max_steps 1 --threads 1 >"$TMP/e.out" 2>&1
if [ $? -ne 0 ] && grep -q "whitening convolution needs the training images in memory" "$TMP/e.out"; then
    ok "whitening from streamed shards refused"
else
    bad "whitening from streamed shards: $(tail -2 "$TMP/e.out")"
fi
finish
