#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Checkpoint and resume: a run stopped half way (--max_steps) and resumed in the same job
# directory (--resume auto) ends with the same final checkpoint, bit for bit, as a run that was
# never stopped: every dataset but /config (parameters, batch-norm buffers and counters,
# momentum, optimizer steps, the train state with the per-rank running statistics) and every
# attribute (tests/helpers/ckpt_compare.py --all); on 1 rank (stop mid-epoch, end mid-epoch; stop at
# an epoch boundary, end at one), on 2 ranks and on 3 (mpirun), and streamed from the shards
# (--data_in_memory no) on 1 rank and on 2, from JPEG shards with RandomResizedCrop, and with
# progressive resizing stopped between two crop sizes, and for a network with dropout and
# stochastic depth on 1 rank and 2, and under --use_amp (bf16 on the CPU, float32 checkpoints); a resume that holds the streamed share otherwise is
# refused naming the flag, --data_in_memory auto follows the checkpoint, and its ranks stream
# together when one must. On several ranks the checkpoint's
# /model running statistics are the average of the ranks' own, which /train_state/rank_buffers
# holds (and which differ: no rank's were overwritten by an average), and PyTorch loads it
# (when installed). A 2-rank checkpoint resumes on 1 and on 3 ranks, from the averaged
# statistics; --resume PATH works; a checkpoint of another width is refused with one line
# naming it; a truncated newest checkpoint is passed over for the previous one (and the log
# says so); h5ls opens every checkpoint written.
# shellcheck disable=SC2086  # $FLAGS and $MPIRUN are word lists
# shellcheck source=tests/helpers/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/helpers/lib.sh"
mpi_leak_checks_off   # ranks started by mpirun/srun (see tests/helpers/lib.sh)
PY=$(find_python "h5py, numpy") || { echo "SKIP: no python3 with h5py and numpy"; exit "$SKIP"; }
CMP="$top_srcdir/tests/helpers/ckpt_compare.py"
export OMP_NUM_THREADS=1
# 256 training images, batch 32: 8 steps per epoch on 1 rank, 4 per rank on 2, 2 on 3.
make_synth "$TMP/data" --train 256 --test 64 --shards 2
FLAGS="--data_dir $TMP/data --width 4 --blocks 1 --threads 1 --batch_size 32 --log_interval 1"
MPIRUN="mpirun --allow-run-as-root --oversubscribe"


# bitexact LABEL NRANKS HALF FULL [TAG]: FULL steps straight vs HALF + resume, every dataset but
# /config and every attribute of the final checkpoints bit for bit (TAG keeps the job
# directories of another set of $FLAGS apart).
bitexact() {
    label=$1 np=$2 half=$3 full=$4 tag=${5:-}
    s="$TMP/straight$tag-$np-$full" r="$TMP/resumed$tag-$np-$half-$full"
    if ! train_job "$s" "$np" --max_steps "$full"; then bad "$label: straight run failed: $(tail -3 "$s.out")"; return; fi
    if ! train_job "$r" "$np" --max_steps "$half"; then bad "$label: first half failed: $(tail -3 "$r.out")"; return; fi
    [ -s "$(ckpt "$r" "$half")" ] || { bad "$label: no checkpoint at step $half"; return; }
    mv "$r.out" "$r.first.out"
    if ! train_job "$r" "$np" --max_steps "$full"; then bad "$label: resumed run failed: $(tail -3 "$r.out")"; return; fi
    if ! grep -q "resume: .*ckpt-$(printf %09d "$half").h5: .*global step $half" "$r.out"; then
        bad "$label: second run did not say it resumed from step $half"; return
    fi
    if out=$("$PY" "$CMP" --all "$(ckpt "$s" "$full")" "$(ckpt "$r" "$full")" 2>&1); then
        ok "$label: $out"
    else
        bad "$label: $out"
    fi
}

bitexact "1 rank, 12 steps = 6 + resume 6 (stop and end mid-epoch)" 1 6 12
bitexact "1 rank, 16 steps = 8 + resume 8 (stop and end on epoch boundaries)" 1 8 16
# Dropout and stochastic depth draw from (seed, step, rank, micro-batch): a network of them
# (act, mul, grouped and dilated convolutions, a bias too) resumes bit for bit, on 1 rank and 2
FLAGS_PLAIN=$FLAGS
FLAGS="$FLAGS --model $top_srcdir/tests/fuzz/netfile/squeeze_excitation"
bitexact "dropout and stochastic depth, 1 rank, 12 steps = 6 + resume 6" 1 6 12 -drop
bitexact "dropout and stochastic depth, 2 ranks, 8 steps = 4 + resume 4" 2 4 8 -drop
FLAGS=$FLAGS_PLAIN
# --use_amp on the CPU (bf16 convolutions and linear layers where oneDNN has bf16 kernels; the
# network with grouped and dilated convolutions too): the resumed run is the straight one bit
# for bit, and the checkpoints hold float32 weights, whatever the precision of the products
if "$DDPTRAIN" $FLAGS --use_amp --job_dir "$TMP/amp-probe" --max_steps 1 >"$TMP/amp-probe.out" 2>&1; then
    FLAGS="$FLAGS_PLAIN --use_amp"
    bitexact "--use_amp (bf16), 1 rank, 12 steps = 6 + resume 6" 1 6 12 -amp
    FLAGS="$FLAGS_PLAIN --use_amp --model $top_srcdir/tests/fuzz/netfile/squeeze_excitation"
    bitexact "--use_amp (bf16), grouped and dilated convolutions, 1 rank, 8 steps = 4 + resume 4" 1 4 8 -amp-se
    FLAGS=$FLAGS_PLAIN
    if out=$("$PY" -c '
import sys, h5py
bad = []
def visit(name, o):
    if isinstance(o, h5py.Dataset) and o.dtype.kind == "f" and o.dtype.itemsize != 4 and not name.startswith("config"):
        bad.append(f"{name} {o.dtype}")
with h5py.File(sys.argv[1], "r") as f:
    f["model"].visititems(visit)
print("; ".join(bad) if bad else "every floating-point tensor of /model is float32")
sys.exit(1 if bad else 0)' "$(ckpt "$TMP/straight-amp-1-12" 12)" 2>&1); then
        ok "--use_amp checkpoint: $out"
    else
        bad "--use_amp checkpoint: $out"
    fi
else
    echo "note: --use_amp cases skipped: $(tail -1 "$TMP/amp-probe.out")"
fi
# A run resumed at its last step trains nothing and evaluates the checkpoint: the accuracy of the
# run's own final evaluation, and with other evaluation options (--tta flip) their line.
d="$TMP/eval-end"
want=$(sed -n 's/^done: .*final test_acc \([0-9.]*\).*/\1/p' "$TMP/straight-1-12.out")
if ! train_job "$d" 1 --resume "$(ckpt "$TMP/straight-1-12" 12)" --max_steps 12; then
    bad "resume at the last step: $(tail -1 "$d.out")"
elif ! grep -q "^training: the checkpoint is at the run's last step; evaluating it" "$d.out" ||
     ! grep -q "^done: 12 steps in .*, final test_acc $want " "$d.out"; then
    bad "resume at the last step: want the evaluation of test_acc $want: $(grep -E '^(training|epoch|done)' "$d.out" | tail -3)"
elif rm -rf "$d" && train_job "$d" 1 --resume "$(ckpt "$TMP/straight-1-12" 12)" --max_steps 12 --tta flip &&
     grep -q "^epoch 2 step 12 test_acc [0-9.]* test_loss [0-9.]* test_acc5 [0-9.]* (TTA flip)" "$d.out"; then
    ok "resume at the last step evaluates the checkpoint: test_acc $want as the run's own; with --tta flip: $(grep -o 'test_acc [0-9.]* test_loss [0-9.]* test_acc5 [0-9.]* (TTA flip)' "$d.out")"
else
    bad "resume at the last step with --tta flip: $(tail -2 "$d.out")"
fi
# Streamed from the shards: 16 chunks of 16 images, windows of 3 chunks, the order recomputed
# and skipped to the step on resume.
FLAGS_MEM=$FLAGS
FLAGS="$FLAGS --data_in_memory no --data_chunk_images 16 --data_window_chunks 3"
bitexact "1 rank, --data_in_memory no, 20 steps = 11 + resume 9 (stop and end mid-epoch)" 1 11 20 -stream
# How the share is held sets the order, so the checkpoint records it: holding it otherwise on
# resume is refused with a line naming the flag, and --data_in_memory auto (in memory here)
# follows the checkpoint and streams, bit for bit.
half=$(ckpt "$TMP/straight-stream-1-20" 16)
for spec in "--data_in_memory yes:--data_in_memory:held in memory" \
            "--data_chunk_images 32:--data_chunk_images:streamed in chunks of 32 images, windows of 3 chunks" \
            "--data_window_chunks 4:--data_window_chunks:streamed in chunks of 16 images, windows of 4 chunks"; do
    set -f; set -- ${spec%%:*}; set +f
    rest=${spec#*:} name=${rest%%:*} now=${rest#*:}
    d="$TMP/order-refused"
    rm -rf "$d"
    if train_job "$d" 1 "$@" --resume "$half" --max_steps 20; then
        bad "resume with $*: accepted a checkpoint of a streamed order"
    elif grep -q "^ddptrain: error: .*ckpt-000000016.h5: $name: the training split is $now, but the checkpoint was written with it streamed in chunks of 16 images, windows of 3 chunks" "$d.out"; then
        ok "resume with $*: refused, naming $name: $(grep -o -e "$name: the training split is [^:]*" "$d.out")"
    else
        bad "resume with $*: $(tail -1 "$d.out")"
    fi
done
# streams_as LABEL JOB LINE REF STEP: JOB (run by the caller, status in $?) said LINE on a data
# line, and its checkpoint of STEP is REF's, bit for bit.
streams_as() {
    rc=$? label=$1 d=$2 line=$3 ref=$4 step=$5
    if [ $rc -ne 0 ]; then
        bad "$label: $(tail -2 "$d.out")"
    elif ! grep -q "^data: train streamed: .*($line)" "$d.out"; then
        bad "$label: no line '$line': $(grep '^data:' "$d.out")"
    elif out=$("$PY" "$CMP" --all "$(ckpt "$ref" "$step")" "$(ckpt "$d" "$step")" 2>&1); then
        ok "$label: $line: $out"
    else
        bad "$label: $out"
    fi
}
train_job "$TMP/order-auto" 1 --data_in_memory auto --resume "$half" --max_steps 20
streams_as "resume with --data_in_memory auto from a streamed checkpoint" "$TMP/order-auto" \
    "--data_in_memory auto: streamed as when the checkpoint was written" "$TMP/straight-stream-1-20" 20
FLAGS=$FLAGS_MEM

# recipe LABEL FLAGS...: 12 steps straight, keeping the checkpoint of step 6, against a run
# resumed from that checkpoint (--resume PATH) in another job directory with the same flags
# (a one-cycle schedule spans the run's steps, --max_steps included, so the first half cannot
# be a shorter run): the final checkpoints bit for bit. On $NP ranks (default 1).
NP=1
recipe() {
    label=$1; shift
    s="$TMP/recipe-straight" r="$TMP/recipe-resumed"
    rm -rf "$s" "$r"
    if ! train_job "$s" "$NP" --max_steps 12 --save_every_steps 6 "$@"; then bad "$label: straight run failed: $(tail -3 "$s.out")"; return; fi
    mkdir -p "$TMP/recipe-half" && cp "$(ckpt "$s" 6)" "$TMP/recipe-half/" || { bad "$label: no checkpoint at step 6"; return; }
    if ! train_job "$r" "$NP" --max_steps 12 --save_every_steps 6 --resume "$TMP/recipe-half/$(basename "$(ckpt "$s" 6)")" "$@"; then
        bad "$label: resumed run failed: $(tail -3 "$r.out")"; return
    fi
    grep -q "resume: .*global step 6" "$r.out" || { bad "$label: the resumed run did not say it resumed from step 6"; return; }
    if out=$("$PY" "$CMP" --all "$(ckpt "$s" 12)" "$(ckpt "$r" 12)" 2>&1); then ok "$label: $out"; else bad "$label: $out"; fi
}
recipe "1 rank, onecycle, nesterov, param groups, label smoothing, crop padding 2, alternating flip: 6 + resume 6" \
    --lr_schedule onecycle --nesterov --no_decay_1d --bn_bias_lr_mult 2 --label_smoothing 0.1 --onecycle_anneal linear \
    --crop_padding 2 --alternating_flip
# The EMA (/ema, n_averaged 12/K) resumes bit for bit too, with K = 1 and with an update every
# 4 steps, the checkpoint at step 6 falling between two updates.
# ema_checked LABEL CKPT N: the checkpoint holds /ema with n_averaged N, and it differs from /model.
ema_checked() {
    if out=$("$PY" - "$2" "$3" 2>&1 <<'EOF'
import sys

import h5py
import numpy as np

with h5py.File(sys.argv[1], "r") as f:
    n = int(f["ema/n_averaged"][()])
    if n != int(sys.argv[2]):
        sys.exit(f"/ema/n_averaged is {n}, expected {sys.argv[2]}")
    if set(f["ema"]) != set(f["model"]) | {"n_averaged"}:
        sys.exit("/ema does not hold /model's names")
    if np.array_equal(f["ema/fc.weight"][()], f["model/fc.weight"][()]):
        sys.exit("/ema/fc.weight equals /model/fc.weight")
print(f"/ema: n_averaged {n}, every tensor of /model, not equal to it")
EOF
    ); then ok "$1: $out"; else bad "$1: $out"; fi
}
recipe "1 rank, EMA decay 0.9: 6 + resume 6" --ema_decay 0.9
ema_checked "1 rank, EMA decay 0.9" "$(ckpt "$TMP/recipe-straight" 12)" 12
if grep -q "resume: EMA: the average of 6 updates (decay 0.9)" "$TMP/recipe-resumed.out" &&
   grep -q "test_acc .* (EMA)" "$TMP/recipe-resumed.out"; then
    ok "the resumed run says it continues the average of 6 updates, and evaluates it"
else
    bad "EMA resume lines: $(grep -i ema "$TMP/recipe-resumed.out" | head -3)"
fi
recipe "1 rank, EMA decay 0.99 every 4 steps, nesterov, onecycle: 6 + resume 6" --ema_decay 0.99 --ema_every 4 \
    --nesterov --lr_schedule onecycle
ema_checked "1 rank, EMA every 4" "$(ckpt "$TMP/recipe-straight" 12)" 3

HAVE_MPI=0
if command -v mpirun >/dev/null 2>&1; then
    if timeout -k 5 60 $MPIRUN -np 2 "$DDPTRAIN" $FLAGS --job_dir "$TMP/probe" --max_steps 1 >"$TMP/probe.out" 2>&1; then
        HAVE_MPI=1
    elif grep -q "without MPI" "$TMP/probe.out"; then
        echo "skip: ddptrain built without MPI: multi-rank cases"
    else
        bad "mpirun -np 2 ddptrain --max_steps 1 failed: $(tail -3 "$TMP/probe.out")"
    fi
else
    echo "skip: no mpirun: multi-rank cases"
fi
if [ $HAVE_MPI = 1 ]; then
    # The stopped run averages the running statistics over the ranks once more than the
    # straight one (for its checkpoint at step 6); that must change no rank's own statistics,
    # and the resumed ranks must get their own back, not the average.
    bitexact "2 ranks, 12 steps = 6 + resume 6 (stop mid-epoch, end on a boundary)" 2 6 12
    if grep -q "^resume: batch norm: every rank continues from its own running statistics" "$TMP/resumed-2-6-12.out"; then
        ok "2 ranks: the resumed run says every rank continues from its own running statistics"
    else
        bad "2 ranks: no 'continues from its own running statistics' line: $(grep '^resume' "$TMP/resumed-2-6-12.out")"
    fi
    bitexact "3 ranks, 7 steps = 3 + resume 4 (stop and end mid-epoch)" 3 3 7
    FLAGS="$FLAGS_MEM --data_in_memory no --data_chunk_images 16 --data_window_chunks 3"
    bitexact "2 ranks, --data_in_memory no, 7 steps = 3 + resume 4 (stop and end mid-epoch)" 2 3 7 -stream
    # --data_in_memory auto with one rank on a small node (a test hook sets its MemAvailable):
    # every rank streams, as with --data_in_memory no, bit for bit. (The memory check would
    # refuse a rank left 10 kB; it is the data's choice under test here.)
    d="$TMP/auto-one-small"
    DDPTRAIN_TEST_MEMAVAILABLE_KB=1:10 timeout -k 5 60 $MPIRUN -np 2 -x DDPTRAIN_TEST_MEMAVAILABLE_KB "$DDPTRAIN" \
        $FLAGS --data_in_memory auto --no-memory_check --job_dir "$d" --max_steps 7 >"$d.out" 2>&1
    streams_as "2 ranks, --data_in_memory auto, rank 1 short of memory: both stream, as --data_in_memory no" "$d" \
        "--data_in_memory auto: another rank streams its share, so every rank does" "$TMP/straight-stream-2-7" 7
    FLAGS=$FLAGS_MEM
    # The EMA on 2 ranks: of the parameters and of the running statistics averaged over the ranks
    NP=2
    recipe "2 ranks, EMA decay 0.9 every 2 steps: 6 + resume 6" --ema_decay 0.9 --ema_every 2
    NP=1
    ema_checked "2 ranks, EMA every 2" "$(ckpt "$TMP/recipe-straight" 12)" 6

    # /train_state/rank_buffers: [ranks, buffer values], each row a rank's own statistics in
    # state_dict order; they differ between ranks, and /model holds their average: (a + b) / 2
    # in float32 on 2 ranks (the same bits in any order of the sum), to rounding on 3.
    for spec in 2:12 3:7; do
        np=${spec%:*} n=${spec#*:}
        f=$(ckpt "$TMP/straight-$np-$n" "$n")
        [ -e "$f" ] || { bad "$np ranks: no checkpoint $f"; continue; }
        if out=$("$PY" - "$f" 2>&1 <<'EOF'
import re
import sys

import h5py
import numpy as np

with h5py.File(sys.argv[1], "r") as f:
    w = int(f["train_state/world_size"][()])
    rows = f["train_state/rank_buffers"][()]
    # state_dict order is /model's names in natural order (layer1.0.bn1, layer1.0.bn2, layer1.0.shortcut.1, ...)
    key = lambda n: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", n)]
    names = sorted((n for n in f["model"] if n.endswith((".running_mean", ".running_var"))), key=key)
    avg = np.concatenate([f["model"][n][()].ravel() for n in names])
if rows.dtype != np.float32 or rows.shape != (w, avg.size):
    sys.exit(f"rank_buffers is {rows.dtype}{rows.shape}, expected float32({w}, {avg.size})")
same = sum(np.array_equal(rows[i], rows[j]) for i in range(w) for j in range(i + 1, w))
if same:
    sys.exit(f"{same} pair(s) of ranks hold the same running statistics")
if w == 2:
    if not np.array_equal((rows[0] + rows[1]) / np.float32(2), avg):
        sys.exit("/model is not (rank 0 + rank 1) / 2")
    how = "(rank 0 + rank 1) / 2 bit for bit"
else:
    d = float(np.max(np.abs(rows.astype(np.float64).mean(0) - avg)) / np.max(np.abs(avg)))
    if not d <= 1e-6:
        sys.exit(f"/model differs from the mean of the rows by {d:.3g} relative")
    how = f"the mean of the rows (max rel diff {d:.2g})"
print(f"rank_buffers [{w}, {avg.size}], rows all different; /model running statistics = {how}")
EOF
        ); then
            ok "$np ranks, step $n: $out"
        else
            bad "$np ranks, step $n: $out"
        fi
    done

    src=$(ckpt "$TMP/resumed-2-6-12" 6)
    for np in 1 3; do
        d="$TMP/from2on$np"
        if train_job "$d" "$np" --resume "$src" --max_steps 12 && grep -q "resume: $src: .*written by 2 ranks" "$d.out" &&
           grep -q "^resume: batch norm: every rank starts from the running statistics averaged over the checkpoint's 2 ranks" "$d.out" &&
           grep '"test_acc"' "$d/metrics.jsonl" | tail -1 | grep -q '"step": 12,'; then
            ok "2-rank checkpoint resumed with --resume PATH on $np rank(s): from the averaged statistics, trains to step 12, final eval line"
        else
            bad "2-rank checkpoint on $np rank(s): $(grep '^resume' "$d.out"; tail -3 "$d.out")"
        fi
    done

    # PyTorch loads a checkpoint of several ranks (strict state_dict: /model only).
    if TPY=$(find_python "torch, h5py, numpy"); then
        f=$(ckpt "$TMP/straight-2-12" 12)
        if out=$("$TPY" "$top_srcdir/scripts/ddptrain_to_torch.py" "$f" --data "$TMP/data" 2>&1); then
            ok "2-rank checkpoint in PyTorch: $(echo "$out" | tail -1) (ddptrain's final evaluation:" \
               "$(grep '"test_acc"' "$TMP/straight-2-12/metrics.jsonl" | tail -1 | sed 's/.*"test_acc": \([0-9.]*\).*/\1/'))"
        else
            bad "scripts/ddptrain_to_torch.py on a 2-rank checkpoint: $out"
        fi
    else
        echo "skip: no python3 with torch: PyTorch loading of a 2-rank checkpoint"
    fi
fi

# --resume PATH on 1 rank from a 1-rank checkpoint gives the same result as --resume auto.
src=$(ckpt "$TMP/resumed-1-6-12" 6)
d="$TMP/bypath"
if train_job "$d" 1 --resume "$src" --max_steps 12 &&
   out=$("$PY" "$CMP" --all "$(ckpt "$d" 12)" "$(ckpt "$TMP/straight-1-12" 12)" 2>&1); then
    ok "--resume PATH into a new job dir: same final state as the straight run: $out"
else
    bad "--resume PATH: $(tail -3 "$d.out") ${out:-}"
fi

# A checkpoint of another width: refused, one line on stderr naming the file, no training.
d="$TMP/width"
timeout -k 5 60 "$DDPTRAIN" $FLAGS --width 8 --job_dir "$d" --resume "$src" --max_steps 12 >"$d.out" 2>"$d.err"
rc=$?
if [ $rc -ne 0 ] && [ "$(wc -l <"$d.err")" -eq 1 ] && grep -q "$src" "$d.err" && grep -q "width" "$d.err" &&
   ! grep -q '"loss"' "$d/metrics.jsonl" 2>/dev/null; then
    ok "width 8 run refuses a width 4 checkpoint (exit $rc): $(cat "$d.err")"
else
    bad "width mismatch: exit $rc, stderr: $(cat "$d.err")"
fi

# A checkpoint resumed with another batch size, accumulation, seed or training data would go on
# at another data position: refused with one line naming the flag, nothing trained, unless
# --resume_data_change, which goes on from the start of the next epoch.
src=$(ckpt "$TMP/resumed-1-6-12" 6)   # epoch 0, step 6 of 8
mkdir -p "$TMP/data3"
make_synth "$TMP/data3" --train 288 --test 64 --shards 3
for change in "--batch_size 16:--batch_size 16" "--grad_accum_steps 2:--grad_accum_steps 2" "--seed 7:--seed 7" \
        "--data_dir $TMP/data3:--data_dir $TMP/data3"; do
    want=${change%%:*} flags=${change#*:}
    d="$TMP/change-$(echo "$want" | tr -c 'a-z0-9' _)"
    timeout -k 5 60 "$DDPTRAIN" $FLAGS --job_dir "$d" --resume "$src" --max_steps 12 $flags >"$d.out" 2>"$d.err"
    rc=$?
    if [ $rc -ne 0 ] && [ "$(wc -l <"$d.err")" -eq 1 ] && grep -q -- "$src: ${want%% *}" "$d.err" &&
       grep -q -- "--resume_data_change" "$d.err" && ! grep -q '"loss"' "$d/metrics.jsonl" 2>/dev/null; then
        ok "resume with $want refused (exit $rc): $(cat "$d.err")"
    else
        bad "resume with $want: exit $rc, stderr: $(head -3 "$d.err")"
    fi
done
d="$TMP/change-accepted"
if train_job "$d" 1 --resume "$src" --max_steps 12 --batch_size 16 --resume_data_change &&
   grep -q "resume: .*epoch 2, step 0 of the epoch, global step 6" "$d.out" &&
   grep -q "WARNING resume: .*--batch_size 16.*--resume_data_change: going on from the start of the next epoch" "$d/logs/rank-00000.log" &&
   [ -s "$(ckpt "$d" 12)" ]; then
    ok "--resume_data_change: the warning, then epoch 2 from its first step, global step 6 -> 12"
else
    bad "--resume_data_change: $(grep -i resume "$d.out" | head -3) $(tail -2 "$d.out")"
fi

# --resume auto passes over a truncated newest checkpoint, says so, and resumes from the one
# before; the result equals a straight run of the same length.
d="$TMP/corrupt"
cp -r "$TMP/resumed-1-6-12" "$d"
newest=$(ckpt "$d" 12)
size=$(wc -c <"$newest")
truncate -s $((size / 2)) "$newest"
if train_job "$d" 1 --max_steps 16 && grep -q "resume: .*ckpt-000000008.h5: .*global step 8" "$d.out"; then
    ok "truncated newest checkpoint ($size -> $((size / 2)) bytes): resumed from step 8"
else
    bad "truncated newest checkpoint: $(grep -i resume "$d.out" | head -3)"
fi
if grep -q "WARNING resume: skipping .*ckpt-000000012.h5.*falling back" "$d/logs/rank-00000.log"; then
    ok "the rank log says it fell back: $(grep -o 'skipping .*ckpt-000000012.h5: [^:]*: [^:]*' "$d/logs/rank-00000.log" | head -1)"
else
    bad "no fall-back line in the rank log"
fi
if out=$("$PY" "$CMP" --all "$(ckpt "$d" 16)" "$(ckpt "$TMP/straight-1-16" 16)" 2>&1); then
    ok "after the fall-back, step 16 equals the straight 16-step run: $out"
else
    bad "after the fall-back: $out"
fi

# ImageNet-style views on JPEG shards: RandomResizedCrop's boxes, the JPEG decoding and the
# evaluation's Resize + CenterCrop are drawn per (seed, epoch, rank, batch), so a run resumed
# mid-epoch is bit for bit the straight one; on 2 ranks, held in memory and streamed.
IMG_PY=$(find_python "PIL, numpy") || IMG_PY=""
if [ -n "$IMG_PY" ] && "$IMG_PY" "$top_srcdir/tests/helpers/make_image_tree.py" classes "$TMP/tree" 3 24 8 >/dev/null 2>&1 &&
    "$DDPDATA" import --in "$TMP/tree" --out "$TMP/jpeg" --size 40 --encoding jpeg --shards 2 >/dev/null 2>"$TMP/import.err"; then
    FLAGS="--data_dir $TMP/jpeg --num_classes 3 --image_size 40 --train_crop_size 32 --rrc_scale 0.3,1 --val_resize_size 36
           --width 4 --blocks 1 --threads 1 --batch_size 4 --log_interval 1 --data_workers 2"
    bitexact "JPEG shards, --train_crop_size 32: 2 ranks, 14 steps = 5 + resume 9" 2 5 14 -jpeg
    FLAGS="$FLAGS --data_in_memory no --data_chunk_images 5 --data_window_chunks 2"
    bitexact "the same streamed in chunks of 5 images" 2 5 14 -jpeg-stream
    # Progressive resizing: crops of 16, 24 and 32 in epochs 1, 2 and 3 (9 steps each on 2
    # ranks); the run stops in epoch 2 and the resumed one shapes the model for 24 again.
    FLAGS="$FLAGS --progressive_min_crop 16 --progressive_end_epoch 3 --progressive_step 8 --epochs 4"
    bitexact "the same with --progressive_min_crop 16: 30 steps = 13 + resume 17" 2 13 30 -jpeg-prog
    r="$TMP/resumed-jpeg-prog-2-13-30"
    if [ "$(grep -c '^epoch [0-9]*: training crop' "$TMP/straight-jpeg-prog-2-30.out")" = 3 ] &&
       grep -q '^epoch 1: training crop 16x16' "$TMP/straight-jpeg-prog-2-30.out" &&
       grep -q '^epoch 2: training crop 24x24' "$r.out" && grep -q '^epoch 3: training crop 32x32' "$r.out"; then
        ok "crops 16, 24, 32; the resumed run at 24 in its first epoch: $(grep '^epoch 2: training crop' "$r.out")"
    else
        bad "progressive crops: $(grep 'training crop' "$TMP/straight-jpeg-prog-2-30.out" "$r.out")"
    fi
else
    bad "no JPEG dataset for the views: $(cat "$TMP/import.err" 2>/dev/null)"
fi

# Every checkpoint written above opens with the HDF5 tools.
if command -v h5ls >/dev/null 2>&1; then
    n=0 nbad=0
    for f in "$TMP"/*/checkpoints/ckpt-*.h5; do
        [ -e "$f" ] || continue
        n=$((n + 1))
        h5ls -r "$f" >/dev/null 2>&1 || { nbad=$((nbad + 1)); echo "h5ls -r fails on $f"; }
    done
    if [ $n -gt 5 ] && [ $nbad -eq 0 ]; then ok "h5ls -r opens all $n checkpoints"; else bad "h5ls: $nbad of $n checkpoints fail"; fi
else
    echo "skip: no h5ls"
fi
finish
