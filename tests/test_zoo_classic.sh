#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# torchvision's classic families as ddptrain runs them (--model NAME) against
# torchvision.models.NAME on the same weights and batch (tests/helpers/torch_compare.py, which
# replays ddptrain's ReLU masks, DenseNet's functional F.relu included, its max-pool choices and
# its dropout draws): densenet121 (dense blocks: every layer reads the concatenation of all the
# block's maps so far; transitions with their 2x2 average pool), vgg11_bn (a 25088 x 4096 linear
# layer after the adaptive average pool, which makes 7x7 of the 2x2 map of a 64x64 image),
# alexnet (64x64: its windows need 63x63 or more) and squeezenet1_1 (Fire modules, max pools of
# ceil_mode, class maps averaged into the logits), one SGD step at batch 4, 3 for SqueezeNet,
# to 1e-3 with --ref64 4 (VGG's convolution biases before a batch norm have a zero gradient,
# float32 noise on both sides). Then wrong variants that must fail: SqueezeNet's max pools
# without ceil_mode (other sizes: torch_compare reports the difference as a FAIL), and DenseNet's
# concatenation of a block's maps in the reverse order. Last, weights both ways for densenet121,
# vgg11_bn and squeezenet1_1: torchvision's 1000-class state_dict into a 10-class run by
# --init_from (the classifier, SqueezeNet's final convolution, kept at its initialisation), the
# checkpoint back into torchvision's module, strict.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
. "${top_srcdir:-.}/tests/helpers/zoo_compare.sh"

check() {   # $1 = label, $2 = the dump's copy, rest = dump_model flags
    label=$1; keep=$2; shift 2
    if "$DUMP" "$keep" "$@" >"$TMP/d.out" 2>&1 && "$PY" "$CMP" "$keep" --tol 1e-3 --ref64 4 >"$TMP/c.out" 2>&1; then
        ok "$label: $(grep '^compared' "$TMP/c.out" | sed 's/ ([0-9]* ReLU mask.*//' | cut -c1-150)$(sed -n 's/^float64 reference: \([0-9]* of the [0-9]* tensors\) beyond tol are\(.*\)/; float64 reference: \1 beyond tol\2/p' "$TMP/c.out" | cut -c1-150)"
    else
        bad "$label"; cat "$TMP/d.out" "$TMP/c.out" | tail -n 15
    fi
}
must_fail() {   # $1 = label, $2 = dump, rest = torch_compare flags: the comparison must report a FAIL
    label=$1; dump=$2; shift 2
    if "$PY" "$CMP" "$dump" --tol 1e-3 --ref64 4 "$@" >"$TMP/w.out" 2>&1; then
        bad "$label passed for torchvision's definition"; tail -n 3 "$TMP/w.out"
    elif grep -q '^FAIL' "$TMP/w.out" && ! grep -q '^Traceback' "$TMP/w.out"; then
        ok "$label detected: $(grep '^FAIL' "$TMP/w.out" | head -1 | cut -c1-120)"
    else
        bad "$label: the comparison ended without a FAIL line"; tail -n 5 "$TMP/w.out"
    fi
}

check "densenet121, batch 4, 1 SGD step at lr 0.01" "$TMP/densenet.h5" --model densenet121 --batch 4 \
    --image_size 64 --seed 3 --lr 0.01 --steps 1
check "vgg11_bn, batch 4, 1 SGD step at lr 0.01" "$TMP/vgg.h5" --model vgg11_bn --batch 4 --image_size 64 \
    --seed 3 --lr 0.01 --steps 1
rm -f "$TMP/vgg.h5"
check "alexnet, batch 4, 1 SGD step at lr 0.01" "$TMP/alexnet.h5" --model alexnet --batch 4 --image_size 64 \
    --seed 3 --lr 0.01 --steps 1
rm -f "$TMP/alexnet.h5"
# 66x66: the stem's 32x32 map, so that every max pool's ceil_mode adds a row and a column
# (at 64x64 the three pools' windows fit exactly, and ceil_mode changes nothing)
check "squeezenet1_1 at 66x66, batch 4, 3 SGD steps at lr 0.01" "$TMP/squeezenet.h5" --model squeezenet1_1 \
    --batch 4 --image_size 66 --seed 3 --lr 0.01 --steps 3

must_fail "SqueezeNet's max pools without ceil_mode in PyTorch" "$TMP/squeezenet.h5" --set ceil_mode=0
must_fail "DenseNet's concatenation in the reverse order in PyTorch" "$TMP/densenet.h5" --set concat_reversed=1

# Weights both ways: torchvision's (1000 classes) into --init_from at 10 classes, then a
# checkpoint of a training step into torchvision's module.
"$top_builddir/ddptrain-data" synth --out "$TMP/data" --train 32 --test 8 --size 64 >/dev/null ||
    bad "ddptrain-data synth"
weights_both_ways "$TMP/data" 64 densenet121 vgg11_bn squeezenet1_1
finish
