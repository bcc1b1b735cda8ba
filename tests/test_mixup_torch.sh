#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The reference recipe's random erasing, mixup and cutmix, the mixed loss and the
# repeated-augmentation sampler (src/data/random_erase.c, mix.c, ra_sampler.c, the loss in
# src/ops/ops_cpu.c) against torch (tests/helpers/aug_dump.c writes, aug_torch.py recomputes):
#   - real training batches of the loader (its prefetch thread and 2 workers), 3 epochs: each
#     sample of the same batch made without erasing through torchvision's own RandomErasing
#     replaying the loader's draws, then the batch through the reference scripts' RandomMixup /
#     RandomCutmix (rendered from transforms.py) with the loader's lambda and centre: every
#     float within 1e-6 and the soft targets the same; mixup, cutmix, and the switch between
#     them. Mixup without the roll and cutmix keeping the drawn lambda must fail the check;
#   - Beta(alpha, alpha) draws against torch's Dirichlet (Kolmogorov-Smirnov), alphas 0.2, 1
#     and 3; Beta(0.2, 0.2)'s draws taken for Beta(1, 1)'s must fail;
#   - the loss and every element of its gradient against nn.CrossEntropyLoss(label_smoothing)
#     with the probability targets, at lambda 0.3, 0.8 and 1; without the smoothing must fail;
#   - RASampler's per-rank indices, 3 repetitions on 2 ranks and 2 on 3, with torch.randperm
#     returning the loader's permutation, and the labels those of the shards at the indices;
#     without the repetition must fail.
# Skips (77) without python3 with torch, torchvision, h5py and numpy.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "torch, torchvision, h5py, numpy") || {
    echo "SKIP: no python3 with torch, torchvision, h5py and numpy"; exit $SKIP; }
DUMP="$top_builddir/tests/helpers/aug_dump"
CMP="$top_srcdir/tests/helpers/aug_torch.py"
export OMP_NUM_THREADS=1
make_synth "$TMP/data" --train 600 --test 64 --shards 3

echo "== batches: random erasing, mixup, cutmix"
mkdir "$TMP/both" "$TMP/mixup" "$TMP/cutmix"
"$DUMP" batches "$TMP/data" "$TMP/both" 3 8 0.25 0.2 1.0 9 || bad "aug_dump batches (both)"
check "erasing 0.25, mixup 0.2 and cutmix 1.0 switched" batches "$TMP/both"
refused "mixup without the roll" batches "$TMP/both" --wrong no_roll
refused "cutmix's lambda not recomputed from the box" batches "$TMP/both" --wrong cutmix_lambda
"$DUMP" batches "$TMP/data" "$TMP/mixup" 1 4 1.0 0.8 0 3 || bad "aug_dump batches (mixup)"
check "erasing 1.0, mixup 0.8" batches "$TMP/mixup"
"$DUMP" batches "$TMP/data" "$TMP/cutmix" 1 4 0 0 0.5 4 || bad "aug_dump batches (cutmix)"
check "cutmix 0.5 alone" batches "$TMP/cutmix"

echo "== Beta draws"
for a in 0.2 1 3; do
    "$DUMP" beta 4000 $a 5 >"$TMP/beta$a.txt" || bad "aug_dump beta $a"
    check "Beta($a, $a)" beta "$TMP/beta$a.txt" $a
done
refused "Beta(0.2, 0.2) taken for Beta(1, 1)" beta "$TMP/beta0.2.txt" 1

echo "== the mixed loss"
for m in 0.3 0.8 1; do
    "$DUMP" xent 64 10 $m 0.1 7 >"$TMP/xent$m.txt" || bad "aug_dump xent $m"
    check "lambda $m, label smoothing 0.1" xent "$TMP/xent$m.txt"
done
"$DUMP" xent 32 5 0.45 0 8 >"$TMP/xent0.txt" || bad "aug_dump xent plain"
check "lambda 0.45, no smoothing" xent "$TMP/xent0.txt"
refused "the smoothing left out" xent "$TMP/xent0.3.txt" --wrong no_smooth

echo "== RASampler"
mkdir "$TMP/ra2" "$TMP/ra3"
"$DUMP" ra "$TMP/data" "$TMP/ra2" 3 2 3 11 || bad "aug_dump ra 3 x 2"
check "3 repetitions, 2 ranks, 3 epochs" ra "$TMP/ra2/ra.txt" "$TMP/data" 3 2
refused "without the repetition" ra "$TMP/ra2/ra.txt" "$TMP/data" 3 2 --wrong no_repeat
"$DUMP" ra "$TMP/data" "$TMP/ra3" 2 3 2 12 || bad "aug_dump ra 2 x 3"
check "2 repetitions, 3 ranks, 2 epochs" ra "$TMP/ra3/ra.txt" "$TMP/data" 2 3
finish
