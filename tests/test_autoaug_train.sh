#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Training with --auto_augment and --color_jitter (src/data/transform_aug.c): a short run with
# every policy (imagenet, cifar10, svhn, ra, ta_wide, augmix, ColorJitter alone) trains; the pixel
# augmentations change the weights a run ends with (against --auto_augment none, same seed),
# and depend only on (seed, epoch, rank, sample): three workers with prefetch end bit for bit
# where one worker without prefetch does (ta_wide; augmix with RandomResizedCrop), and a run
# stopped half way and resumed (--resume auto, augmix) ends with the final checkpoint, every
# dataset but /config and every attribute, of a run never stopped. The log names AugMix. Bad
# values are refused with one line, no job directory made.
# shellcheck disable=SC2086  # $FLAGS is a word list
# shellcheck source=tests/helpers/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "h5py, numpy") || { echo "SKIP: no python3 with h5py and numpy"; exit "$SKIP"; }
CMP="$top_srcdir/tests/helpers/ckpt_compare.py"
export OMP_NUM_THREADS=1
make_synth "$TMP/data" --train 128 --test 32
FLAGS="--data_dir $TMP/data --width 4 --blocks 1 --threads 1 --batch_size 16 --log_interval 1 --epochs 2"
train() { dir=$1; shift; timeout -k 5 60 "$DDPTRAIN" $FLAGS --job_dir "$dir" "$@" >"$dir.out" 2>&1; }

# same LABEL A B: the final checkpoints of job directories A and B at step $2 agree bit for bit
same() {
    if out=$("$PY" "$CMP" --all "$(ckpt "$2" "$4")" "$(ckpt "$3" "$4")" 2>&1); then ok "$1: $out"; else bad "$1: $out"; fi
}

echo "== every policy trains"
for p in imagenet cifar10 svhn ra ta_wide augmix; do
    if train "$TMP/p-$p" --max_steps 3 --auto_augment $p --ra_magnitude 20 --ra_num_ops 3; then
        grep -q '"auto_augment": "'$p'"' "$TMP/p-$p/config.json" && ok "--auto_augment $p: 3 steps" ||
            bad "--auto_augment $p: config.json does not say so"
    else bad "--auto_augment $p: $(tail -3 "$TMP/p-$p.out")"; fi
done
grep -q "augment: .*--auto_augment augmix (AugMix, severity 3)" "$TMP/p-augmix.out" && ok "the log names AugMix" ||
    bad "no augment: line naming AugMix: $(grep augment: "$TMP/p-augmix.out")"
train "$TMP/p-cj" --max_steps 3 --color_jitter 0.4,0.4,0.4,0.1 && ok "--color_jitter alone: 3 steps" ||
    bad "--color_jitter: $(tail -3 "$TMP/p-cj.out")"

echo "== the augmentations change the batches"
train "$TMP/none" --max_steps 3 || bad "plain run: $(tail -3 "$TMP/none.out")"
if "$PY" "$CMP" "$(ckpt "$TMP/none" 3)" "$(ckpt "$TMP/p-ta_wide" 3)" >"$TMP/cmp.out" 2>&1; then
    bad "--auto_augment ta_wide ends where --auto_augment none does"
else ok "ta_wide's weights differ from none's: $(head -1 "$TMP/cmp.out" | cut -c1-120)"; fi

echo "== the same pixels whichever thread makes them"
for view in "--auto_augment ta_wide" "--auto_augment augmix --augmix_severity 5 --train_crop_size 24"; do
    train "$TMP/w1" --max_steps 10 --color_jitter 0.3,0.3,0.3,0.2 --data_workers 1 --no-prefetch $view &&
        train "$TMP/w3" --max_steps 10 --color_jitter 0.3,0.3,0.3,0.2 --data_workers 3 --prefetch $view ||
        bad "workers runs ($view): $(tail -3 "$TMP/w1.out" "$TMP/w3.out")"
    same "1 worker without prefetch and 3 with ($view)" "$TMP/w1" "$TMP/w3" 10
    rm -rf "$TMP/w1" "$TMP/w3"
done

echo "== resume"
train "$TMP/straight" --max_steps 12 --auto_augment augmix --color_jitter 0.4,0,0.4,0 || bad "straight: $(tail -3 "$TMP/straight.out")"
train "$TMP/resumed" --max_steps 5 --auto_augment augmix --color_jitter 0.4,0,0.4,0 || bad "first half: $(tail -3 "$TMP/resumed.out")"
train "$TMP/resumed" --max_steps 12 --auto_augment augmix --color_jitter 0.4,0,0.4,0 || bad "resumed: $(tail -3 "$TMP/resumed.out")"
grep -q "resume: .*global step 5" "$TMP/resumed.out" || bad "the second run did not resume from step 5"
same "stopped at step 5 (mid-epoch) and resumed" "$TMP/straight" "$TMP/resumed" 12

echo "== refusals"
refuse() {
    label=$1; want=$2; shift 2
    if "$DDPTRAIN" $FLAGS --job_dir "$TMP/refused" "$@" >"$TMP/r.out" 2>&1; then bad "$label: accepted"
    elif [ -e "$TMP/refused" ]; then bad "$label: a job directory was made"
    elif [ "$(wc -l <"$TMP/r.out")" = 1 ] && grep -q -- "$want" "$TMP/r.out"; then ok "$label: $(cat "$TMP/r.out")"
    else bad "$label: $(cat "$TMP/r.out")"; fi
}
refuse "a bad policy" "auto_augment" --auto_augment autoaugment
refuse "three jitter numbers" "--color_jitter 0.1,0.1,0.1" --color_jitter 0.1,0.1,0.1
refuse "a hue above 0.5" "--color_jitter" --color_jitter 0,0,0,0.6
refuse "--ra_magnitude 31" "ra_magnitude" --auto_augment ra --ra_magnitude 31
refuse "--augmix_severity 11" "augmix_severity" --auto_augment augmix --augmix_severity 11
refuse "without --augment" "needs --augment" --no-augment --auto_augment ta_wide
finish
