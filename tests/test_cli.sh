#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The command line generated from the config table: --help lists every option of the table with
# its default; bad flags and values give one line naming the flag and exit 2.
. "${top_srcdir:-.}/tests/helpers/lib.sh"

"$DDPTRAIN" --help >"$TMP/help" 2>&1 || bad "--help exits 0"
missing=""
for name in $(sed -n 's/^ *X(\([a-z_0-9]*\), .*/\1/p' "$top_srcdir/src/base/config_table.h"); do
    grep -q -- "--$name" "$TMP/help" || missing="$missing $name"
done
[ -z "$missing" ] && ok "--help lists every option of config_table.h" || bad "--help misses:$missing"
grep -q -- "--use_amp, --no-use_amp" "$TMP/help" && ok "booleans as --use_amp / --no-use_amp" || bad "boolean spelling"
grep -q -- "--batch_size N .*\[64\]" "$TMP/help" && ok "defaults shown" || bad "--help shows default of batch_size"

expect_err() {   # $1 = text expected in the message, rest = args
    want=$1; shift
    "$DDPTRAIN" "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    lines=$(wc -l <"$TMP/err")
    if [ $rc -eq 2 ] && [ "$lines" -eq 1 ] && grep -q -- "$want" "$TMP/err" && [ ! -s "$TMP/out" ]; then
        ok "$* -> exit 2: $(cat "$TMP/err")"
    else
        bad "$* -> rc=$rc, $lines stderr line(s): $(cat "$TMP/err") (wanted '$want')"
    fi
}
expect_err "unknown option --bogus" --bogus 1
expect_err "unknown option --batchsize" --batchsize=3
expect_err "--batch_size: missing value" --batch_size
expect_err "--batch_size: 'abc' is not an integer" --batch_size abc
expect_err "--batch_size: 0 is out of range" --batch_size 0
expect_err "--lr: -1 is out of range" --lr -1
expect_err "--lr: '0.1x' is not a finite number" --lr=0.1x
expect_err "--momentum: 1.5 is out of range" --momentum 1.5
expect_err "--use_amp: 'maybe' is not a boolean" --use_amp=maybe
expect_err "--lr_schedule: 'linear' is not one of" --lr_schedule linear
expect_err "unexpected argument 'train'" train
expect_err "--nesterov: needs a nonzero --momentum" --nesterov --momentum 0
expect_err "--label_smoothing 1: must be below 1" --label_smoothing 1
# ImageNet-style views: checked before any data is opened
expect_err "--rrc_scale 0,1: must be LO,HI with 0 < LO <= HI <= 1" --train_crop_size 16 --rrc_scale 0,1
expect_err "--rrc_scale 0.5,1.5: must be LO,HI" --train_crop_size 16 --rrc_scale 0.5,1.5
expect_err "--rrc_scale 0.8,0.2: must be LO,HI" --train_crop_size 16 --rrc_scale 0.8,0.2
expect_err "--rrc_scale 0.08: must be LO,HI" --rrc_scale 0.08
expect_err "--train_crop_size 40: larger than the stored images (--image_size 32)" --train_crop_size 40
expect_err "--val_crop_size 40: larger than the stored images (--image_size 32)" --train_crop_size 16 --val_crop_size 40
expect_err "--val_resize_size 12: smaller than the centre crop (16)" --train_crop_size 16 --val_resize_size 12
expect_err "--val_resize_size 20: smaller than the centre crop (24)" --train_crop_size 16 --val_crop_size 24 --val_resize_size 20
expect_err "--val_crop_size: needs --train_crop_size" --val_crop_size 32
expect_err "--progressive_min_crop: needs --train_crop_size" --progressive_min_crop 16
expect_err "--progressive_min_crop 24: must be below --train_crop_size 24" --train_crop_size 24 --progressive_min_crop 24
expect_err "--progressive_start_epoch 4: must be before --progressive_end_epoch (4)" --train_crop_size 24 --progressive_min_crop 16 --progressive_start_epoch 4 --progressive_end_epoch 4
expect_err "--progressive_start_epoch 10: must be before --progressive_end_epoch (10)" --train_crop_size 24 --progressive_min_crop 16 --progressive_start_epoch 10
expect_err "--progressive_step: 0 is out of range" --progressive_step 0
expect_err "--label_smoothing: -0.1 is out of range" --label_smoothing -0.1
finish
