#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# --auto_augment augmix (src/data/augmix.c, src/data/tensor_ops.c) against torchvision 0.14's
# AugMix on PIL images (tests/helpers/autoaug_dump.c writes, tests/helpers/autoaug_torch.py
# recomputes):
#   - every op of _apply_op on a uint8 tensor (AugMix's path: the shears, translations and
#     rotations through grid_sample with BILINEAR and zeros outside, the four enhancements
#     through _blend, Posterize down to 0 bits, Solarize, AutoContrast, Equalize) on 100 random
#     images of 1x1 to 48x40 at random magnitudes: pixel for pixel; NEAREST in place of BILINEAR
#     must fail the check.
#   - AugMix's magnitude tables against its _augmentation_space: equal or one float32 ulp apart.
#   - 150 and 100 images through AugMix at severity 3 (train.py's default) and 10, and 60 with
#     ColorJitter after it, replayed on ddptrain's draws (torch.randint patched, and
#     _sample_dirichlet handing out the recorded weights): pixel for pixel (the float32 mix is
#     summed in torchvision's order and truncated as .to(uint8) does). Beta's two weights
#     swapped (m and 1 - m), and NEAREST geometry, must each fail the check.
#   - 20000 draws of the Dirichlet weights against Beta(1, 1) and Dirichlet(1, 1, 1): the
#     moments within 5 standard errors, Kolmogorov-Smirnov within its 0.1% critical value.
#   - the loader's first batch of 64 with --crop_padding 4 and augmix against RandomCrop,
#     RandomHorizontalFlip, AugMix, PILToTensor, ConvertImageDtype, Normalize: the same levels.
# Skips (77) without python3 with torch, torchvision, PIL and numpy.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "torch, torchvision, PIL, numpy") || {
    echo "SKIP: no python3 with torch, torchvision, PIL and numpy"; exit $SKIP; }
DUMP="$top_builddir/tests/helpers/autoaug_dump"
CMP="$top_srcdir/tests/helpers/autoaug_torch.py"

echo "== AugMix's ops on a tensor"
mkdir "$TMP/ops" && "$DUMP" tensor_ops "$TMP/ops" 100 9 || bad "autoaug_dump tensor_ops"
check "every op, exact" ops "$TMP/ops" --tensor
refused "NEAREST in place of BILINEAR" ops "$TMP/ops" --tensor --against nearest

echo "== magnitude tables"
"$DUMP" tables | grep '^augmix ' >"$TMP/tables.txt" || bad "autoaug_dump tables"
check "AugMix's tables" tables "$TMP/tables.txt"

echo "== AugMix"
mkdir "$TMP/s3" "$TMP/s10" "$TMP/cj"
"$DUMP" policy "$TMP/s3" 150 11 augmix 3 2 0,0,0,0 || bad "autoaug_dump policy augmix 3"
check "severity 3, exact" policy "$TMP/s3" augmix 3 2 0,0,0,0
"$DUMP" policy "$TMP/s10" 100 12 augmix 10 2 0,0,0,0 || bad "autoaug_dump policy augmix 10"
check "severity 10, exact" policy "$TMP/s10" augmix 10 2 0,0,0,0
"$DUMP" policy "$TMP/cj" 60 13 augmix 3 2 0.4,0.4,0.4,0.1 || bad "autoaug_dump policy augmix with ColorJitter"
check "severity 3 then ColorJitter" policy "$TMP/cj" augmix 3 2 0.4,0.4,0.4,0.1 --tol 1
refused "m and 1 - m swapped" policy "$TMP/s10" augmix 10 2 0,0,0,0 --against swap_m
refused "NEAREST geometry" policy "$TMP/s10" augmix 10 2 0,0,0,0 --against nearest

echo "== the Dirichlet weights"
"$DUMP" dirichlet 20000 7 >"$TMP/dir.txt" || bad "autoaug_dump dirichlet"
check "Beta(1, 1) and Dirichlet(1, 1, 1)" dirichlet "$TMP/dir.txt"

echo "== the loader's batch"
"$DDPDATA" synth --out "$TMP/data" --size 32 --train 128 --test 16 >/dev/null || bad "ddptrain-data synth"
mkdir "$TMP/ld" && "$DUMP" loader "$TMP/data" "$TMP/ld" augmix 0,0,0,0 || bad "autoaug_dump loader augmix"
check "the loader with augmix" loader "$TMP/ld" augmix 3 2 0,0,0,0
finish
