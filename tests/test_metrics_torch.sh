#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# test_metrics_torch.sh - the evaluation's top-1, top-5 and confusion matrix against PyTorch.
# A tiny network trained for 3 epochs with --ema_decay on 199 test images (a prime, in 2
# shards); then tests/helpers/confusion_torch.py loads the checkpoint (scripts/ddptrain_to_torch.py),
# computes the logits of every test image from the shards' pixels and compares confusion.json
# with torch's argmax, topk and stable sort: exactly, or within the number of images whose
# deciding logits are a near tie (|difference| < 1e-5); controls (a transposed matrix, top-4,
# one image moved, the other weights) must each be caught. The same after resuming the
# finished run with --tta flip (the averaged logits) and with --ema_decay 0 (the trained
# weights). The log line, metrics.jsonl and confusion.json give the same test_acc and
# test_acc5. Skips (77) without python3 with torch, h5py and numpy.
# shellcheck source=tests/helpers/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "torch, h5py, numpy") || { echo "SKIP: no python3 with torch, h5py and numpy"; exit "$SKIP"; }
CMP="$top_srcdir/tests/helpers/confusion_torch.py"
JOB="$TMP/job"
RUN="--data_dir $TMP/data --job_dir $JOB --image_size 16 --width 4 --blocks 1 --batch_size 32 --epochs 3 --lr 0.2
     --ema_decay 0.9 --threads 2"

make_synth "$TMP/data" --size 16 --train 1024 --test 199 --shards 2

# run NAME FLAGS...: ddptrain in the one job directory (a resume after the first), then the
# comparison with confusion_torch.py's flags in $cmp_flags
run() {
    name=$1
    shift
    # shellcheck disable=SC2086  # $RUN is a word list
    if ! OMP_NUM_THREADS=2 timeout -k 5 120 "$DDPTRAIN" $RUN "$@" >"$TMP/$name.out" 2>&1; then
        bad "$name: ddptrain failed: $(tail -n 3 "$TMP/$name.out")"; return
    fi
    # shellcheck disable=SC2086
    if out=$("$PY" "$CMP" "$JOB" "$TMP/data" $cmp_flags 2>&1); then ok "$name: $out"; else bad "$name: $out"; fi
    # the evaluation's line, its record and the file agree
    line=$(grep '^epoch 3 step 96 test_acc' "$TMP/$name.out" | tail -n 1)
    if got=$("$PY" - "$JOB" "$line" <<'EOF' 2>&1
import json, os, re, sys
job, line = sys.argv[1:]
d = json.load(open(os.path.join(job, "confusion.json")))
ev = [json.loads(l) for l in open(os.path.join(job, "metrics.jsonl")) if '"test_acc"' in l][-1]
m = re.match(r"epoch 3 step 96 test_acc ([0-9.]+) test_loss [0-9.]+ test_acc5 ([0-9.]+)", line)
if not m:
    sys.exit(f"log line {line!r}")
if (abs(ev["test_acc"] - d["test_acc"]) > 1e-6 or abs(ev["test_acc5"] - d["test_acc5"]) > 1e-6 or
        abs(float(m.group(1)) - d["test_acc"]) > 6e-5 or abs(float(m.group(2)) - d["test_acc5"]) > 6e-5):
    sys.exit(f"log {m.groups()}, metrics.jsonl {ev['test_acc']} {ev['test_acc5']}, confusion.json {d['test_acc']} {d['test_acc5']}")
if ev.get("tta", "none") != d["tta"] or ev.get("ema", False) != d["ema"] or (ev["step"], ev["epoch"]) != (d["step"], d["epoch"]):
    sys.exit(f"metrics.jsonl {ev}, confusion.json tta {d['tta']} ema {d['ema']} step {d['step']}")
print(f"test_acc {d['test_acc']} test_acc5 {d['test_acc5']}")
EOF
    ); then ok "$name: the log line, metrics.jsonl and confusion.json agree: $got"; else bad "$name: $got"; fi
}

cmp_flags="--ema"
run trained
cmp_flags="--ema --tta flip"
run tta_flip --tta flip
grep -q "the checkpoint is at the run's last step; evaluating it" "$TMP/tta_flip.out" ||
    bad "tta_flip: not the evaluation of the finished run: $(tail -n 2 "$TMP/tta_flip.out")"
cmp_flags=""
run trained_weights --ema_decay 0
finish
