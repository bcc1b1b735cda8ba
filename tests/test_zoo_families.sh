#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The smallest member of each of torchvision's efficient families (ResNeXt, wide ResNet,
# MobileNet v2 and v3, EfficientNet v1 and v2, RegNet X and Y, MNASNet) as ddptrain runs it
# (--model NAME) against torchvision.models.NAME on the same weights and batch of 64x64 images:
# logits, loss, every gradient, the running statistics and the weights after SGD steps
# (tests/helpers/torch_compare.py, which replays ddptrain's ReLU masks and its dropout and
# stochastic-depth draws in torchvision's modules), to 1e-3, or where a tensor is beyond that,
# within 4 times PyTorch float32's own distance from PyTorch's float64 result (the larger of two
# float32 runs, on 1 and 2 threads): the gradient of the last batch norm of a block, which the
# next block's batch norm cancels to about zero, is float32 noise on both sides, and RegNet's
# steps amplify round-off. Then a wrong variant of each new kind, which
# must fail: hardsigmoid's slope, squeeze-excitation's gate on the map before its activation, a
# depthwise convolution's weights run as a dense convolution, dropout without its 1/(1-p),
# stochastic depth drawn per batch instead of per image, batch norm's momentum. Last, each
# builder's weights both ways: torchvision's into --init_from (the classifier of another class
# count kept at its initialisation) and a checkpoint into torchvision's module, strict.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
. "${top_srcdir:-.}/tests/helpers/zoo_compare.sh"

check() {   # $1 = label, $2 = tolerance, rest = dump_model flags
    label=$1; tol=$2; shift 2
    if "$DUMP" "$TMP/d.h5" "$@" >"$TMP/d.out" 2>&1 && "$PY" "$CMP" "$TMP/d.h5" --tol "$tol" --ref64 4 >"$TMP/c.out" 2>&1; then
        ok "$label: $(grep '^compared' "$TMP/c.out" | cut -c1-150)"
    else
        bad "$label"; cat "$TMP/d.out" "$TMP/c.out" | tail -n 15
    fi
}

for m in resnext50_32x4d wide_resnet50_2 mobilenet_v2 mobilenet_v3_small mobilenet_v3_large efficientnet_b0 \
    efficientnet_v2_s regnet_x_400mf regnet_y_400mf mnasnet0_5; do
    steps=3; batch=4
    # one step for the largest (time), and for MNASNet and RegNetX, whose first step moves their
    # weights so far (MNASNet's loss starts at 9) that the next ones amplify round-off beyond the
    # criterion on both sides: PyTorch float32's own distance from float64 grows as fast. RegNetX's
    # first step is within 1.8e-4 of PyTorch's and at most 1.72x its distance from float64; after
    # three, 146 weights differ by up to 15%, and which side is nearer float64 depends on the CPU
    case $m in wide_resnet50_2 | resnext50_32x4d | efficientnet_v2_s | mnasnet0_5 | regnet_x_400mf) steps=1 ;; esac
    check "$m, batch $batch, $steps SGD step(s) at lr 0.01" 1e-3 --model "$m" --batch $batch --image_size 64 \
        --seed 3 --lr 0.01 --steps $steps
    case $m in mobilenet_v3_small) cp "$TMP/d.h5" "$TMP/v3.h5" ;; esac
done

# Wrong variants, each against a dump that passed above (or made here)
must_fail "hardsigmoid with slope 1/5 in PyTorch" "$TMP/v3.h5" --set hardsigmoid_slope=0.2
must_fail "batch norm momentum 0.1 in PyTorch (torchvision's MobileNetV3: 0.01)" "$TMP/v3.h5" --set bn_momentum=0.1
must_fail "a depthwise convolution's weights run dense in PyTorch" "$TMP/v3.h5" --set depthwise_dense=1
"$DDP" --model mobilenet_v3_small --print_model >"$TMP/v3.json" || bad "--print_model mobilenet_v3_small"
"$PY" - "$TMP/v3.json" "$TMP/v3se.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
nodes = {n["name"]: n for n in d["nodes"]}
mul = next(n for n in d["nodes"] if n["kind"] == "mul")
act = nodes[mul["in"]]
assert act["kind"] in ("relu", "act"), act
mul["in"] = act["in"]              # the gate on the map before its activation
json.dump(d, open(sys.argv[2], "w"), indent=1)
PYEOF
d=$TMP/se.h5
if "$DUMP" "$d" --model "$TMP/v3se.json" --batch 4 --image_size 64 --seed 3 --lr 0.01 >/dev/null 2>&1; then
    # the file's network has the builder's name: torch_compare builds torchvision's
    must_fail "squeeze-excitation's gate on the map before its activation" "$d"
else
    bad "dump_model of the wrong squeeze-excitation"
fi
"$DUMP" "$TMP/eb.h5" --model efficientnet_b0 --batch 8 --image_size 64 --seed 5 --lr 0.01 --steps 1 >/dev/null ||
    bad "dump_model efficientnet_b0, batch 8"
if "$PY" "$CMP" "$TMP/eb.h5" --tol 1e-3 --ref64 4 >"$TMP/eb.out" 2>&1; then
    ok "efficientnet_b0, batch 8: $(grep '^compared' "$TMP/eb.out" | cut -c1-120)"
else
    bad "efficientnet_b0, batch 8"; tail -n 5 "$TMP/eb.out"
fi
must_fail "dropout without its 1/(1-p) in PyTorch" "$TMP/eb.h5" --set dropout_scaled=0
must_fail "stochastic depth drawn per batch in PyTorch" "$TMP/eb.h5" --set sd_row=0

# Weights both ways, for every family's smallest member: torchvision's (1000 classes) into
# --init_from at 10 classes, then a checkpoint of a training step into torchvision's module.
"$top_builddir/ddptrain-data" synth --out "$TMP/data" --train 64 --test 16 --size 64 >/dev/null ||
    bad "ddptrain-data synth"
weights_both_ways "$TMP/data" 64 resnext50_32x4d mobilenet_v2 mobilenet_v3_small efficientnet_b0 efficientnet_v2_s regnet_y_400mf regnet_x_400mf mnasnet0_5 wide_resnet50_2
finish
