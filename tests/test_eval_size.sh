#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Evaluation at another size than the training crop (--val_crop_size, src/run/eval.h): runs trained
# on 32-pixel RandomResizedCrops evaluate at 40 (Resize(44) + CenterCrop(40)), on raw shards of
# 48x48 images and on JPEG shards of 80x72 images kept at a shorter side of 48.
# scripts/ddptrain_to_torch.py loads each run's last checkpoint into PyTorch and evaluates the
# same shards with torchvision's Resize and CenterCrop on PIL images (PIL decoding the JPEG
# files): the same accuracy within 2 images and the same loss within 0.5% (the pixels are within
# one level of torchvision's: tests/test_crops_torch.sh). The checkpoint evaluated again (resumed
# at the run's end) at 48 agrees with torch at 48 as well and differs from the 40-pixel loss:
# the size reached the model. A run with progressive resizing (--progressive_min_crop), whose
# model trains at 24 and 28, is evaluated at 32 by that model shaped back up, and agrees with
# torch too. Skips (77) without python3 with torch, torchvision, h5py, PIL and numpy.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "torch, torchvision, h5py, PIL, numpy") || {
    echo "SKIP: no python3 with torch, torchvision, h5py, PIL and numpy"; exit $SKIP; }
CONVERT="$top_srcdir/scripts/ddptrain_to_torch.py"

# metric JOB_DIR FIELD: FIELD of the last evaluation record of the job's metrics.jsonl
metric() { grep '"test_acc"' "$1/metrics.jsonl" | tail -1 | sed "s/.*\"$2\": \([0-9.e-]*\).*/\1/"; }

# agree LABEL CKPT JOB_DIR DATA RESIZE CROP: torch's accuracy and loss of CKPT on DATA against
# the job's last evaluation
agree() {
    a_label=$1 a_ckpt=$2 a_job=$3 a_data=$4 a_resize=$5 a_crop=$6
    if ! "$PY" "$CONVERT" "$a_ckpt" --data "$a_data" --val_resize_size "$a_resize" --val_crop_size "$a_crop" \
           >"$TMP/conv.out" 2>&1; then
        bad "$a_label: ddptrain_to_torch.py failed: $(tail -2 "$TMP/conv.out")"; return
    fi
    got=$(sed -n 's/.*accuracy: .* (\([0-9]*\)\/\([0-9]*\)), loss \([0-9.]*\).*/\1 \2 \3/p' "$TMP/conv.out")
    acc=$(metric "$a_job" test_acc) loss=$(metric "$a_job" test_loss)
    if awk -v g="$got" -v a="$acc" -v l="$loss" 'BEGIN{split(g, t, " "); d = t[1] - a * t[2]; r = (t[3] - l) / l;
                                                       exit !(t[2] > 0 && d * d <= 4.01 && r * r <= 0.005 ^ 2)}'; then
        ok "$a_label: ddptrain test_acc $acc loss $loss; torch $(sed -n 's/.*accuracy: //p' "$TMP/conv.out")"
    else
        bad "$a_label: ddptrain test_acc $acc loss $loss; torch '$got': $(cat "$TMP/conv.out")"
    fi
}

# the training flags of every run here
COMMON="--width 8 --blocks 1 --threads 1 --batch_size 32 --lr 0.05 --train_crop_size 32 --rrc_scale 0.35,1"

# run LABEL DATA JOB ddptrain flags...: trains with evaluation at 40 and checks it against torch,
# then evaluates the checkpoint at 48 by resuming at the run's end
run() {
    label=$1 data=$2 job=$3; shift 3
    if ! "$DDPTRAIN" --data_dir "$data" --job_dir "$job" $COMMON --val_resize_size 44 --val_crop_size 40 "$@" \
           >"$TMP/run.out" 2>&1; then
        bad "$label: ddptrain failed: $(tail -3 "$TMP/run.out")"; return
    fi
    if grep -q "^evaluation: at 40x40 (--val_crop_size; training at 32x32)" "$TMP/run.out"; then
        ok "$label: $(grep '^evaluation: at' "$TMP/run.out")"
    else
        bad "$label: no line on the evaluation size: $(grep -i 'evaluation\|test_acc' "$TMP/run.out" | head -3)"
    fi
    ckpt=$(ls "$job"/checkpoints/ckpt-*.h5 | tail -1)
    agree "$label, at 40 from 44" "$ckpt" "$job" "$data" 44 40
    loss40=$(metric "$job" test_loss)
    if "$DDPTRAIN" --data_dir "$data" --job_dir "$job.48" --resume "$ckpt" $COMMON --val_resize_size 48 \
           --val_crop_size 48 "$@" >"$TMP/run48.out" 2>&1 &&
       grep -q "the checkpoint is at the run's last step; evaluating it" "$TMP/run48.out"; then
        agree "$label, the checkpoint at 48 (resumed at its end)" "$ckpt" "$job.48" "$data" 48 48
        loss48=$(metric "$job.48" test_loss)
        if [ -n "$loss48" ] && [ "$loss48" != "$loss40" ]; then ok "$label: loss $loss40 at 40, $loss48 at 48"
        else bad "$label: the same loss at 40 and 48 ($loss40, $loss48)"; fi
    else
        bad "$label: evaluating the checkpoint at 48 failed: $(tail -3 "$TMP/run48.out")"
    fi
}

echo "== raw shards, 48x48"
make_synth "$TMP/raw" --train 512 --test 200 --shards 1 --size 48
run "raw shards" "$TMP/raw" "$TMP/rawjob" --image_size 48 --epochs 3

echo "== progressive resizing: trained at 24 then 28, evaluated at 32 by the trained model itself"
# --progressive_end_epoch 5 of 3 epochs: 24, 24, 28 (26 and 28 rounded to multiples of 4, ties
# to even); the evaluation at --train_crop_size 32 shapes the model back up for it.
job="$TMP/progjob"
if "$DDPTRAIN" --data_dir "$TMP/raw" --job_dir "$job" $COMMON --image_size 48 --epochs 3 --val_resize_size 36 \
       --progressive_min_crop 24 --progressive_end_epoch 5 --progressive_step 4 >"$TMP/prog.out" 2>&1 &&
   [ "$(grep '^epoch [0-9]*: training crop' "$TMP/prog.out" | sed 's/ (.*//' | tr '\n' ' ')" = \
     "epoch 1: training crop 24x24 epoch 3: training crop 28x28 " ] && ! grep -q '^evaluation: at' "$TMP/prog.out"; then
    ok "progressive: $(grep '^epoch [0-9]*: training crop' "$TMP/prog.out" | sed 's/ (.*//' | tr '\n' ';')"
    agree "progressive, at 32 from 36" "$(ls "$job"/checkpoints/ckpt-*.h5 | tail -1)" "$job" "$TMP/raw" 36 32
else
    bad "progressive run: $(grep -E 'training crop|error' "$TMP/prog.out" | head -4; tail -2 "$TMP/prog.out")"
fi

echo "== JPEG shards, shorter side 48"
if "$PY" "$top_srcdir/tests/helpers/make_image_tree.py" classes "$TMP/tree" 4 64 40 >/dev/null 2>&1 &&
   "$DDPDATA" import --in "$TMP/tree" --out "$TMP/jpeg" --size 48 --encoding jpeg >/dev/null 2>&1; then
    run "JPEG shards" "$TMP/jpeg" "$TMP/jpegjob" --image_size 48 --num_classes 4 --epochs 3
else
    bad "making the JPEG shards failed"
fi
finish
