#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The recipe files of recipes/ (--config FILE): seed.json is the defaults, so a run with it ends
# with the same checkpoint, bit for bit (every dataset but /config, every attribute), and the
# same config.json but for job_dir and config, as a plain run; cifar10-fast.json runs (at width
# 8 here, for time), its lr scaled from its stated global batch of 512 to this run's 64, with
# its EMA and flip TTA on the evaluation line; torchvision's published recipes (torchvision-*.json)
# run 3 steps each and name their augmentations and optimizer; --lr_ref_batch scales --lr and --min_lr linearly
# and leaves them alone at the reference batch.
# shellcheck disable=SC2086  # $FLAGS is a word list
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "h5py, numpy") || { echo "SKIP: no python3 with h5py and numpy"; exit "$SKIP"; }
CMP="$top_srcdir/tests/helpers/ckpt_compare.py"
R="$top_srcdir/recipes"
export OMP_NUM_THREADS=2
make_synth "$TMP/data" --train 512 --test 32 --shards 1

# seed.json against the defaults: 2 steps at the defaults' width 64, batch 64
if timeout -k 5 300 "$DDPTRAIN" --config "$R/seed.json" --data_dir "$TMP/data" --job_dir "$TMP/seed" --max_steps 2 \
       >"$TMP/seed.out" 2>&1 &&
   timeout -k 5 300 "$DDPTRAIN" --data_dir "$TMP/data" --job_dir "$TMP/plain" --max_steps 2 >"$TMP/plain.out" 2>&1; then
    if out=$("$PY" "$CMP" --all "$(ckpt "$TMP/seed" 2)" "$(ckpt "$TMP/plain" 2)" 2>&1); then
        ok "recipes/seed.json: the same checkpoint as the defaults: $out"
    else
        bad "recipes/seed.json against the defaults: $out"
    fi
    if out=$("$PY" "$top_srcdir/tests/helpers/configs_equal.py" "$TMP/seed/config.json" "$TMP/plain/config.json" 2>&1); then
        ok "recipes/seed.json: config.json as the defaults': $out"
    else
        bad "recipes/seed.json: config.json $out"
    fi
else
    bad "seed.json or plain run failed: $(tail -3 "$TMP/seed.out" "$TMP/plain.out")"
fi

# cifar10-fast.json: 5 steps (8 per epoch here), the last evaluation after the first EMA update
# (step 5)
if timeout -k 5 300 "$DDPTRAIN" --config "$R/cifar10-fast.json" --data_dir "$TMP/data" --job_dir "$TMP/fast" \
       --width 8 --max_steps 5 >"$TMP/fast.out" 2>&1; then
    if grep -q "^lr: 0.2 (--lr 0.4 for a global batch of 128, scaled linearly to this run's 64)" "$TMP/fast.out" &&
       grep -q "step 5 test_acc .* (EMA) (TTA flip)" "$TMP/fast.out" &&
       grep -q "averaged with decay 0.98 every 5 steps" "$TMP/fast.out" && [ -s "$(ckpt "$TMP/fast" 5)" ]; then
        ok "recipes/cifar10-fast.json --max_steps 5: $(grep '^lr:' "$TMP/fast.out"); $(grep 'step 5 test_acc' "$TMP/fast.out")"
    else
        bad "recipes/cifar10-fast.json: $(grep -i 'lr:\|test_acc\|EMA' "$TMP/fast.out" | head -5)"
    fi
else
    bad "recipes/cifar10-fast.json --max_steps 5 failed: $(tail -3 "$TMP/fast.out")"
fi

# imagenette-resnet18.json: ResNet-18 with BlurPool on JPEG shards with the ImageNet-style views
# and the progressive crops, 8 steps on a small set (its sizes and classes given on the command
# line: the recipe's are Imagenette's)
IMG_PY=$(find_python "PIL, numpy") || IMG_PY=""
if [ -z "$IMG_PY" ]; then
    echo "skip: imagenette-resnet18.json (no python3 with PIL and numpy to make images)"
elif "$IMG_PY" "$top_srcdir/tests/helpers/make_image_tree.py" classes "$TMP/tree" 3 24 4 >/dev/null 2>&1 &&
     "$DDPDATA" import --in "$TMP/tree" --out "$TMP/jpeg" --size 48 --encoding jpeg >/dev/null 2>&1 &&
     timeout -k 5 300 "$DDPTRAIN" --config "$R/imagenette-resnet18.json" --data_dir "$TMP/jpeg" --job_dir "$TMP/inet" \
       --num_classes 3 --image_size 48 --train_crop_size 32 --progressive_min_crop 16 --progressive_step 16 --val_resize_size 40 \
       --val_crop_size 32 --batch_size 8 --max_steps 8 --threads 1 >"$TMP/inet.out" 2>&1; then
    if grep -q "^model: resnet18-blurpool: .* per 32x32 image" "$TMP/inet.out" &&
       grep -q "^epoch 1: training crop 16x16 (--progressive_min_crop 16 to --train_crop_size 32)" "$TMP/inet.out" &&
       grep -q "^lr: 0.0125 (--lr 0.1 for a global batch of 64, scaled linearly to this run's 8)" "$TMP/inet.out" &&
       grep -q "step 8 test_acc .* (TTA flip)" "$TMP/inet.out" && [ -s "$(ckpt "$TMP/inet" 8)" ]; then
        ok "recipes/imagenette-resnet18.json --max_steps 8 on JPEG shards: $(grep "step 8 test_acc" "$TMP/inet.out")"
    else
        bad "recipes/imagenette-resnet18.json: $(grep -i 'model:\|lr:\|test_acc' "$TMP/inet.out" | head -5)"
    fi
else
    bad "recipes/imagenette-resnet18.json --max_steps 8 failed: $(tail -3 "$TMP/inet.out" 2>/dev/null)"
fi

# torchvision's published recipes (torchvision-*.json: ImageNet, 8 ranks of 128): each runs 3
# steps on a small JPEG set with its augmentations, optimizer, groups and schedule, its sizes and
# classes given on the command line, and says what it does on its log lines
if [ -n "$IMG_PY" ] && "$IMG_PY" "$top_srcdir/tests/helpers/make_image_tree.py" classes "$TMP/tv" 3 100 4 >/dev/null 2>&1 &&
   "$DDPDATA" import --in "$TMP/tv" --out "$TMP/tvjpeg" --size 48 --encoding jpeg >/dev/null 2>&1; then
    for spec in "resnet50-v2|RandomResizedCrop 32 (scale 0.08,1), flip, --auto_augment ta_wide, RandomErasing p=0.1, per batch mixup 0.2 / cutmix 1, RASampler with 4 repetitions|the norms' weights and biases at --norm_weight_decay" \
                "efficientnet_b0|RandomResizedCrop 32 (scale 0.08,1), flip, --auto_augment ta_wide, RandomErasing p=0.1, per batch mixup 0.2 / cutmix 1, RASampler with 4 repetitions|the norms' weights and biases at --norm_weight_decay" \
                "mobilenet_v3_large|RandomResizedCrop 32 (scale 0.08,1), flip, --auto_augment imagenet, RandomErasing p=0.2 (made|optimizer: rmsprop"; do
        name=${spec%%|*} rest=${spec#*|}
        aug=${rest%%|*} opt=${rest#*|}
        out="$TMP/tv-$name.out"
        if timeout -k 5 300 "$DDPTRAIN" --config "$R/torchvision-$name.json" --data_dir "$TMP/tvjpeg" --job_dir "$TMP/tv-$name" \
               --num_classes 3 --image_size 48 --train_crop_size 32 --val_resize_size 36 --val_crop_size 32 --batch_size 8 \
               --epochs 2 --lr_warmup_epochs 1 --max_steps 3 --threads 1 >"$out" 2>&1 &&
           grep -qF "augment: $aug" "$out" && grep -qF "$opt" "$out" && grep -q "step 3 test_acc" "$out" &&
           [ -s "$(ckpt "$TMP/tv-$name" 3)" ]; then
            ok "recipes/torchvision-$name.json --max_steps 3: $(grep '^augment:' "$out" | cut -c1-160)"
        else
            bad "recipes/torchvision-$name.json: $(grep -i 'augment:\|optimizer\|test_acc\|error' "$out" | head -5)"
        fi
    done
else
    echo "skip: torchvision-*.json (no python3 with PIL and numpy to make images)"
fi

# --lr_ref_batch: the constant schedule's lr at a global batch of 32 given for 128, and at 32
FLAGS="--data_dir $TMP/data --width 4 --blocks 1 --batch_size 32 --max_steps 1 --log_interval 1 --lr_schedule constant"
for spec in "128:0.0125" "32:0.05" "0:0.05"; do
    ref=${spec%:*} want=${spec#*:}
    "$DDPTRAIN" $FLAGS --job_dir "$TMP/ref$ref" --lr 0.05 --lr_ref_batch "$ref" >"$TMP/ref.out" 2>&1 ||
        { bad "--lr_ref_batch $ref failed: $(tail -2 "$TMP/ref.out")"; continue; }
    lr=$(grep '"loss"' "$TMP/ref$ref/metrics.jsonl" | head -1 | sed 's/.*"lr": \([0-9.e-]*\).*/\1/')
    if [ "$lr" = "$want" ]; then ok "--lr 0.05 --lr_ref_batch $ref at a global batch of 32: lr $lr"
    else bad "--lr_ref_batch $ref: lr $lr, expected $want"; fi
done
finish
