#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ImageNet-style input (src/data/crops.c, src/data/resample.c) against torchvision 0.14 on PIL images
# (tests/helpers/crops_dump.c prints, tests/helpers/crops_torch.py recomputes):
#   - RandomResizedCrop's box: 4000 random image sizes (1x1 to 500x300, very elongated ones)
#     and scale ranges (0.08-1, 0.35-1, 1-1, 0.5-0.5), get_params replayed on the draws ours
#     took; the same box every time, the centre fallback included. Under
#     ATEN_CPU_CAPABILITY=default (torch's float32 kernels plain C++) every draw and exp is also
#     bit for bit; under torch's vectorised kernels its exp may differ by an ulp and a box only
#     where it did. Left drawn before top must fail the check.
#   - Resize(size)'s output size and CenterCrop's offsets.
#   - Pixels: resample_box's windows against torchvision's resized_crop (crop, then Pillow's
#     BILINEAR resize of the crop) and CenterCrop(V)(Resize(R)) on PIL, at most 1 apart;
#     Pillow's Image.resize(box=), which reads past the box's edges, must fail that check.
# Skips (77) without python3 with torch, torchvision, PIL and numpy.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "torch, torchvision, PIL, numpy") || {
    echo "SKIP: no python3 with torch, torchvision, PIL and numpy"; exit $SKIP; }
DUMP="$top_builddir/tests/helpers/crops_dump"
CMP="$top_srcdir/tests/helpers/crops_torch.py"

echo "== RandomResizedCrop's boxes"
"$DUMP" boxes 4000 7 >"$TMP/boxes.txt" || bad "crops_dump boxes"
ATEN_CPU_CAPABILITY=default check "4000 boxes, torch's plain kernels" boxes "$TMP/boxes.txt" --exact
check "4000 boxes, torch's vectorised kernels" boxes "$TMP/boxes.txt"
"$DUMP" boxes 4000 7 --wrong_order >"$TMP/wrong.txt" || bad "crops_dump boxes --wrong_order"
ATEN_CPU_CAPABILITY=default refused "left drawn before top" boxes "$TMP/wrong.txt" --exact

echo "== Resize and CenterCrop"
"$DUMP" sizes 2000 7 >"$TMP/sizes.txt" || bad "crops_dump sizes"
check "2000 of each" sizes "$TMP/sizes.txt"

echo "== pixels"
mkdir "$TMP/px" && "$DUMP" pixels "$TMP/px" 600 11 || bad "crops_dump pixels"
check "600 windows" pixels "$TMP/px"
refused "Image.resize(box=) in place of crop + resize" pixels "$TMP/px" --against pil_box
finish
