#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Training on a GPU with ddptrain; skipped (77) where ddptrain has no CUDA backend or sees no GPU.
#  0. One forward, backward and 3 SGD steps on the GPU (tests/helpers/dump_model --device cuda, float32,
#     TF32 off) against PyTorch on the same weights and batch (tests/helpers/torch_compare.py: logits,
#     loss, every gradient, running statistics, parameters after 3 steps; 1e-4 relative, each
#     dump's ReLU masks replayed), and against the same on the CPU backend (logits and loss, and
#     every gradient when both took the same ReLU masks; 1e-4 relative); also with the parameter
#     groups of docs/recipes.md (--nesterov and --label_smoothing are refused on the GPU).
#  1. GPU and CPU agree: the same 5 fp32 steps (--no-use_amp, TF32 off) from the same weights and
#     batches give the same parameters and running statistics to a relative error
#     (max|a-b| / max|b| per tensor) of 1e-3, and momentum to 1e-2: float32 round-off in a
#     different summation order makes a few ReLU masks fall the other way on one device, and
#     each such element moves one channel's gradient by percents.
#  2. bf16 and fp16 (activations stored in 16 bits, the default) and bf16 with 32-bit activations
#     lower the loss like fp32: 200 steps each from the same start; the loss of the last log
#     interval must fall below half the first interval's, and be within 20% (+0.05) of fp32's.
#  3. fp16 writes its loss-scaler state into the checkpoint (a power of two), and a resumed fp16
#     run takes it back (its log says so).
#  4. A checkpoint moves between devices: 4 steps on the GPU, 2 more on the CPU from its
#     checkpoint, 2 more on the GPU from the CPU's; the result matches 8 straight GPU steps to
#     1e-4 (the same fp32 tolerance as 1).
# The one-rank NCCL communicator is tested by tests/test_ops_cuda (NCCL refuses two ranks on one
# GPU, so several GPU ranks need several GPUs; the reducer is the one tested over MPI).
# shellcheck disable=SC2086  # $COMMON is a word list
# shellcheck source=tests/helpers/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "h5py, numpy") || { echo "SKIP: no python3 with h5py and numpy"; exit "$SKIP"; }

# Is there a GPU ddptrain can use? The device is chosen before the data is read, so a run on a
# missing dataset says so without making one.
timeout -k 5 60 "$DDPTRAIN" --data_dir "$TMP/none" --device cuda >"$TMP/probe.out" 2>&1
if grep -qE "no CUDA device|built without the CUDA backend|does not exist" "$TMP/probe.out"; then
    echo "SKIP: $(head -1 "$TMP/probe.out")"
    exit "$SKIP"
fi

make_synth "$TMP/data" --train 6400 --test 512
# Batch 32 where the CPU trains too (a GPU machine's build may have only the reference CPU
# convolutions), 128 on the GPU alone.
COMMON="--data_dir $TMP/data --width 16 --blocks 1 --threads ${OMP_NUM_THREADS:-2}"
if ! timeout -k 5 120 "$DDPTRAIN" $COMMON --batch_size 32 --device cuda --max_steps 1 --job_dir "$TMP/probe" >"$TMP/probe.out" 2>&1; then
    bad "a 1-step run on the GPU failed: $(tail -3 "$TMP/probe.out")"
    finish
fi
grep -m1 "device:" "$TMP/probe.out"

# run NAME FLAGS...: ddptrain into $TMP/NAME (log $TMP/NAME.out); 0 on success
run() {
    name=$1; shift
    timeout -k 5 300 "$DDPTRAIN" $COMMON --job_dir "$TMP/$name" "$@" >"$TMP/$name.out" 2>&1 && return 0
    bad "$name failed: $(tail -3 "$TMP/$name.out")"
    return 1
}
last_ckpt() {   # the newest checkpoint of a run (the glob sorts by step)
    f=
    for c in "$TMP/$1"/checkpoints/ckpt-*.h5; do [ -e "$c" ] && f=$c; done
    echo "$f"
}

# Relative difference of every /model and /optimizer dataset of two checkpoints; exit 1 when one
# is above tol. An optional fourth argument is the tolerance of the momentum buffers alone.
cat >"$TMP/close.py" <<'EOF'
import sys
import h5py
import numpy as np
a, b, tol = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r"), float(sys.argv[3])
mtol = float(sys.argv[4]) if len(sys.argv) > 4 else tol
names = []
for g in ("model", "optimizer"):
    b[g].visititems(lambda n, o, g=g: names.append(g + "/" + n)
                    if isinstance(o, h5py.Dataset) and o.dtype.kind in "fiu" else None)   # not /optimizer/name
worst = {False: (0.0, ""), True: (0.0, "")}   # keyed by "is a momentum buffer"
for n in names:
    x, y = np.asarray(a[n][()], np.float64), np.asarray(b[n][()], np.float64)
    if x.shape != y.shape:
        sys.exit(f"{n}: shape {x.shape} vs {y.shape}")
    d = float(np.max(np.abs(x - y))) / max(float(np.max(np.abs(y))), 1e-30) if y.size else 0.0
    m = "momentum" in n
    if not d <= worst[m][0]:
        worst[m] = (d, n)
(w, wn), (wm, wmn) = worst[False], worst[True]
msg = f"{len(names)} tensors, worst relative difference {w:.2e} ({wn}), tol {tol:g}"
if wmn:
    msg += f"; momentum {wm:.2e} ({wmn}), tol {mtol:g}"
print(msg)
sys.exit(0 if w <= tol and wm <= mtol else 1)
EOF

# 0. dump_model on the GPU against PyTorch and against the CPU.
DUMP="${top_builddir:-.}/tests/helpers/dump_model"
TPY=$(find_python "torch, h5py, numpy") || TPY=
cat >"$TMP/dumps.py" <<'EOF'
# logits and loss of the two dumps; the gradients too when both took the same ReLU masks (a
# pre-activation within round-off of zero may fall either way, and one such element moves a
# batch-norm gradient by percents: then the gradients are compared through PyTorch, which
# replays each dump's own masks).
import sys
import h5py
import numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
masks = []
b["masks"].visititems(lambda n, o: masks.append("masks/" + n) if isinstance(o, h5py.Dataset) else None)
flips = sum(int(np.count_nonzero(a[m][()] != b[m][()])) for m in masks)
names = ["logits", "loss"] + (["grads/" + k for k in b["grads"]] if flips == 0 else [])
worst, where = 0.0, names[0]
for n in names:
    x, y = np.asarray(a[n][()], np.float64), np.asarray(b[n][()], np.float64)
    d = float(np.max(np.abs(x - y))) / max(float(np.max(np.abs(y))), 1e-30)
    if not d <= worst:
        worst, where = d, n
what = f"logits, loss and {len(names) - 2} gradients" if flips == 0 else \
    f"logits and loss ({flips} ReLU mask elements differ: gradients compared through PyTorch)"
print(f"{what}: worst relative difference {worst:.2e} ({where}), tol 1e-4")
sys.exit(0 if worst <= 1e-4 else 1)
EOF
if [ -x "$DUMP" ]; then
    for shape in "--width 8 --blocks 1 --batch 8 --image_size 16 --seed 3" \
                 "--width 16 --blocks 2 --batch 6 --image_size 32 --seed 4" \
                 "--width 64 --blocks 2 --batch 4 --image_size 32 --seed 5" \
                 "--width 8 --blocks 2 --batch 8 --image_size 16 --seed 12 --wd 0.05 --no_decay_1d 1 --bn_bias_lr_mult 3"; do
        if ! "$DUMP" "$TMP/gpu.h5" $shape --device cuda >"$TMP/dump.out" 2>&1 ||
           ! "$DUMP" "$TMP/cpu.h5" $shape --device cpu >>"$TMP/dump.out" 2>&1; then
            bad "dump_model $shape: $(tail -2 "$TMP/dump.out")"
            continue
        fi
        if out=$("$PY" "$TMP/dumps.py" "$TMP/gpu.h5" "$TMP/cpu.h5" 2>&1); then ok "GPU vs CPU backend, $shape: $out"
        else bad "GPU vs CPU backend, $shape: $out"; fi
        if [ -n "$TPY" ]; then
            if out=$("$TPY" "$top_srcdir/tests/helpers/torch_compare.py" "$TMP/gpu.h5" 2>&1); then
                ok "GPU vs PyTorch, $shape: $(echo "$out" | grep -m1 worst)"
            else
                bad "GPU vs PyTorch, $shape: $(echo "$out" | grep FAIL | head -2)"
            fi
        fi
    done
    [ -n "$TPY" ] || echo "(no python3 with torch: the GPU was compared with the CPU backend only)"
else
    echo "(tests/helpers/dump_model not found: the one-batch comparisons were not run)"
fi

# 1. GPU vs CPU, fp32.
FP32="--batch_size 32 --no-use_amp --no-augment --no-shuffle --lr_schedule constant --max_steps 5 --log_interval 1 --save_every_steps 5"
if run agree-gpu --device cuda $FP32 && run agree-cpu --device cpu $FP32; then
    # Parameters and running statistics to 1e-3, momentum to 1e-2: five steps from a fresh start
    # on two devices take a few ReLU masks differently (pre-activations within round-off of
    # zero, see dumps.py), and one such element moves a batch-norm channel's gradient by
    # percents (measured on an H200: momentum 2.3e-3, a batch-norm bias 3.4e-4). The one-batch
    # comparisons above replay the masks and hold every gradient to 1e-4; the checkpoint round
    # trip below holds everything to 1e-4.
    if out=$("$PY" "$TMP/close.py" "$(last_ckpt agree-gpu)" "$(last_ckpt agree-cpu)" 1e-3 1e-2 2>&1); then
        ok "GPU vs CPU after 5 fp32 steps: $out"
    else
        bad "GPU vs CPU after 5 fp32 steps: $out"
    fi
fi

# 2. 200 steps in fp32, bf16 and fp16.
loss_of() {   # first and last logged loss of a run
    "$PY" -c "
import json, sys
l = [json.loads(s)['loss'] for s in open(sys.argv[1]) if '\"loss\"' in s]
print(l[0], l[-1])" "$TMP/$1/metrics.jsonl"
}
LONG="--batch_size 128 --max_steps 200 --log_interval 10 --save_every_steps 100"
run long-fp32 --device cuda --no-use_amp $LONG && fp32=$(loss_of long-fp32)
for t in bf16 fp16 bf16-act32; do
    run "long-$t" --device cuda --use_amp --amp_dtype "${t%-act32}" --amp_activations "$(case $t in *act32) echo 32 ;; *) echo 16 ;; esac)" $LONG || continue
    # shellcheck disable=SC2046  # two numbers each, split on purpose
    set -- $(loss_of "long-$t") ${fp32:-nan nan}
    if "$PY" -c "import sys; f, l, rf, rl = map(float, sys.argv[1:5]); sys.exit(0 if l < 0.5 * f and l <= 1.2 * rl + 0.05 else 1)" "$@"; then
        ok "$t over 200 steps: loss $1 -> $2 (fp32: $3 -> $4)"
    else
        bad "$t over 200 steps: loss $1 -> $2 (fp32: $3 -> $4): not falling like fp32's"
    fi
done
grep -h "skipped: fp16" "$TMP/long-fp16.out" | tail -2

# 3. fp16 scaler state in the checkpoint and back.
if [ -s "$TMP/long-fp16/checkpoints/ckpt-000000100.h5" ]; then
    st=$("$PY" -c "
import math, sys, h5py
a = h5py.File(sys.argv[1], 'r')['train_state/amp'][()]
s = float(a[0])
print(s, int(a[1]), 'ok' if s > 0 and math.log2(s) == int(math.log2(s)) else 'bad')" "$TMP/long-fp16/checkpoints/ckpt-000000100.h5" 2>&1)
    case $st in
        *" ok") ok "fp16 checkpoint holds the loss scale and growth tracker: $st" ;;
        *) bad "fp16 checkpoint: /train_state/amp: $st" ;;
    esac
    cp -r "$TMP/long-fp16" "$TMP/resume-fp16"
    rm -f "$TMP/resume-fp16/checkpoints/ckpt-000000200.h5"
    echo "ckpt-000000100.h5" >"$TMP/resume-fp16/checkpoints/latest"
    if run resume-fp16 --device cuda --batch_size 128 --use_amp --amp_dtype fp16 --max_steps 110 --log_interval 10; then
        if grep -q "resume: fp16 loss scale" "$TMP/resume-fp16.out"; then
            ok "resumed fp16 run restores the loss scale: $(grep -m1 -o 'resume: fp16 loss scale.*' "$TMP/resume-fp16.out")"
        else
            bad "resumed fp16 run does not mention the restored loss scale"
        fi
    fi
else
    bad "fp16 run wrote no checkpoint at step 100"
fi

# 4. GPU -> CPU -> GPU.
MOVE="--batch_size 32 --no-use_amp --no-augment --lr_schedule constant --log_interval 1 --save_every_steps 2"
if run straight --device cuda $MOVE --max_steps 8 &&
    run moved --device cuda $MOVE --max_steps 4 &&
    run moved --device cpu $MOVE --max_steps 6 &&
    run moved --device cuda $MOVE --max_steps 8; then
    if out=$("$PY" "$TMP/close.py" "$(last_ckpt moved)" "$(last_ckpt straight)" 1e-4 2>&1); then
        ok "8 steps as GPU 4 + CPU 2 + GPU 2 (resumed from each other's checkpoints) vs 8 on the GPU: $out"
    else
        bad "GPU -> CPU -> GPU resume: $out"
    fi
fi

finish
