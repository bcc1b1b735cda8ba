#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The per-image pixel augmentations (src/data/pil_ops.c, src/data/autoaug.c) against torchvision
# 0.14 on PIL images (tests/helpers/autoaug_dump.c writes, tests/helpers/autoaug_torch.py
# recomputes):
#   - every op of _apply_op (the shears, translations and rotations with nearest-neighbour
#     sampling and fill 0, the four ImageEnhance factors, Posterize, Solarize, AutoContrast,
#     Equalize, Invert, Identity) and ColorJitter's hue, on 150 random images of 1x1 to 48x40 at
#     random magnitudes: pixel for pixel. A sign flipped in the geometric ops, or BILINEAR in
#     place of NEAREST, must fail the check.
#   - the magnitude tables against the policies' _augmentation_space: equal or one float32 ulp
#     apart (torch's own linspace kernels differ by that between CPU capabilities).
#   - 120 images through AutoAugment imagenet, cifar10, svhn, RandAugment (magnitude 9, 2 ops; 30, 3 ops),
#     TrivialAugmentWide and ColorJitter, replayed on the draws ours took: at most 1 apart
#     (an ulp of a magnitude may move a value by one), almost all identical.
#   - the loader's first batch of 64 with --crop_padding 4 and svhn, and ta_wide with ColorJitter,
#     against RandomCrop(32, padding=4) at its offsets, RandomHorizontalFlip, the policy and
#     ColorJitter on PIL, PILToTensor, ConvertImageDtype, Normalize: the same levels; the policy
#     applied before the flip must fail the check. With --crop_pad_mode reflect, ta_wide against
#     RandomCrop(padding_mode="reflect"), which zero padding must fail.
# Skips (77) without python3 with torch, torchvision, PIL and numpy.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "torch, torchvision, PIL, numpy") || {
    echo "SKIP: no python3 with torch, torchvision, PIL and numpy"; exit $SKIP; }
DUMP="$top_builddir/tests/helpers/autoaug_dump"
CMP="$top_srcdir/tests/helpers/autoaug_torch.py"

echo "== single ops"
mkdir "$TMP/ops" && "$DUMP" ops "$TMP/ops" 150 9 || bad "autoaug_dump ops"
check "every op, exact" ops "$TMP/ops"
refused "BILINEAR in place of NEAREST" ops "$TMP/ops" --against bilinear --tol 1
mkdir "$TMP/wrong" && "$DUMP" ops "$TMP/wrong" 40 9 --wrong_sign || bad "autoaug_dump ops --wrong_sign"
refused "the geometric ops' sign flipped" ops "$TMP/wrong"

echo "== magnitude tables"
"$DUMP" tables >"$TMP/tables.txt" || bad "autoaug_dump tables"
check "the tables" tables "$TMP/tables.txt"

echo "== policies"
i=0
for p in "imagenet 9 2 0,0,0,0" "cifar10 9 2 0,0,0,0" "svhn 9 2 0,0,0,0" "ra 9 2 0,0,0,0" "ra 30 3 0,0,0,0" \
         "ta_wide 9 2 0,0,0,0" "none 9 2 0.4,0.4,0.4,0.1" "ta_wide 9 2 0.4,0.3,0.6,0.5"; do
    i=$((i + 1))
    mkdir "$TMP/p$i"
    # shellcheck disable=SC2086
    "$DUMP" policy "$TMP/p$i" 120 $i $p || bad "autoaug_dump policy $p"
    # shellcheck disable=SC2086
    check "$p" policy "$TMP/p$i" $p --tol 1
done

echo "== the loader's batches"
"$DDPDATA" synth --out "$TMP/data" --size 32 --train 128 --test 16 >/dev/null || bad "ddptrain-data synth"
for p in "svhn 9 2 0,0,0,0" "ta_wide 9 2 0.4,0.4,0.4,0.1"; do
    rm -rf "$TMP/ld" && mkdir "$TMP/ld"
    # shellcheck disable=SC2086
    set -- $p
    "$DUMP" loader "$TMP/data" "$TMP/ld" "$1" "$4" || bad "autoaug_dump loader $p"
    # shellcheck disable=SC2086
    check "the loader with $p" loader "$TMP/ld" $p --tol 1
done
rm -rf "$TMP/ld" && mkdir "$TMP/ld" && "$DUMP" loader "$TMP/data" "$TMP/ld" ta_wide 0,0,0,0 reflect || bad "autoaug_dump loader reflect"
check "the loader with ta_wide and --crop_pad_mode reflect" loader "$TMP/ld" ta_wide 9 2 0,0,0,0 --padding_mode reflect --tol 1
refused "reflect padding taken for zeros" loader "$TMP/ld" ta_wide 9 2 0,0,0,0 --tol 1
rm -rf "$TMP/ld" && mkdir "$TMP/ld" && "$DUMP" loader "$TMP/data" "$TMP/ld" svhn 0,0,0,0 || bad "autoaug_dump loader svhn"
refused "the policy before the flip" loader "$TMP/ld" svhn 9 2 0,0,0,0 --against aug_then_flip --tol 1
finish
