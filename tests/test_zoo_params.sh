#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Every built-in network against torchvision 0.14's builder of its name, without running either
# (tests/helpers/zoo_params.py builds torchvision's on the meta device): at 1000 classes the
# parameter count, the state_dict's names and shapes in order (tests/helpers/zoo_tensors lays
# ddptrain's out), each batch norm's eps and momentum, each dropout's and stochastic depth's p,
# and the order of the nodes named as modules against the calls of torchvision's forward. Every
# built-in printed with --print_model reads back as the same network, with the same tensors.
# Then the check is made to fail on networks a plausible slip away from torchvision's: a
# MobileNetV3 whose squeeze-excitation is not made a multiple of 8, a ResNeXt of one group, a
# RegNet with its projection after the residual branch, an EfficientNet-B5 of the default batch
# norm, a MobileNetV3 classifier with its dropout before the hardswish, a GoogLeNet with the
# paper's 5x5 convolution in its modules' third branch (torchvision's is 3x3).
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "torch, torchvision") || { echo "SKIP: no python3 with torch and torchvision"; exit $SKIP; }
ZT="$top_builddir/tests/helpers/zoo_tensors"
CMP="$top_srcdir/tests/helpers/zoo_params.py"
DDP="$top_builddir/ddptrain"

want="miniresnet resnet18 resnet34 resnet50 resnet101 resnet152 resnext50_32x4d resnext101_32x8d resnext101_64x4d
wide_resnet50_2 wide_resnet101_2 mobilenet_v2 mobilenet_v3_large mobilenet_v3_small
efficientnet_b0 efficientnet_b1 efficientnet_b2 efficientnet_b3 efficientnet_b4 efficientnet_b5 efficientnet_b6
efficientnet_b7 efficientnet_v2_s efficientnet_v2_m efficientnet_v2_l
regnet_x_400mf regnet_x_800mf regnet_x_1_6gf regnet_x_3_2gf regnet_x_8gf regnet_x_16gf regnet_x_32gf
regnet_y_400mf regnet_y_800mf regnet_y_1_6gf regnet_y_3_2gf regnet_y_8gf regnet_y_16gf regnet_y_32gf regnet_y_128gf
mnasnet0_5 mnasnet0_75 mnasnet1_0 mnasnet1_3
densenet121 densenet161 densenet169 densenet201 vgg11 vgg11_bn vgg13 vgg13_bn vgg16 vgg16_bn vgg19 vgg19_bn alexnet
squeezenet1_0 squeezenet1_1 googlenet inception_v3
shufflenet_v2_x0_5 shufflenet_v2_x1_0 shufflenet_v2_x1_5 shufflenet_v2_x2_0
convnext_tiny convnext_small convnext_base convnext_large"
names=$("$ZT" --list | tr '\n' ' ' | sed 's/ $//')
[ "$names" = "$(echo $want)" ] && ok "$(echo $names | wc -w) built-in networks, torchvision's names" ||
    bad "the built-in networks: $names"

# The image size the shapes are worked out at: torchvision's 224 (AlexNet's windows need 63x63 or
# more), but 299 for Inception v3, whose auxiliary classifier needs a 17x17 map after Mixed_6e
size_of() { case $1 in inception_v3) echo 299 ;; *) echo 224 ;; esac; }

# Printed, read back and printed again: the same file, and the same tensors
tv=""
zt=""
jsons=""
for m in $names; do
    s=$(size_of "$m")
    "$DDP" --model "$m" --num_classes 1000 --image_size "$s" --print_model >"$TMP/$m.json" 2>"$TMP/err" || { bad "$m --print_model: $(cat "$TMP/err")"; continue; }
    "$DDP" --model "$TMP/$m.json" --num_classes 1000 --image_size "$s" --print_model >"$TMP/$m.back.json" 2>"$TMP/err" &&
        cmp -s "$TMP/$m.json" "$TMP/$m.back.json" || bad "$m: its printed file reads back as another network"
    "$ZT" --image_size "$s" "$m" | sed 1d >"$TMP/a.txt" && "$ZT" --image_size "$s" "$TMP/$m.json" | sed 1d >"$TMP/b.txt" &&
        cmp -s "$TMP/a.txt" "$TMP/b.txt" || bad "$m: its printed file lays out other tensors"
    [ "$m" = miniresnet ] && continue
    tv="$tv $m"
    zt="$zt --image_size $s $m"
    jsons="$jsons --json $TMP/$m.json=$m"
done
[ "$FAILS" -eq 0 ] && ok "every built-in printed with --print_model reads back as the same network and tensors"

# Against torchvision
"$ZT" $zt >"$TMP/ddp.txt" || bad "zoo_tensors"
"$PY" "$CMP" "$TMP/ddp.txt" $jsons >"$TMP/cmp.out" 2>&1
while IFS= read -r line; do
    case $line in
        ok:*) echo "$line" ;;
        *) bad "${line#FAIL: }" ;;
    esac
done <"$TMP/cmp.out"
n=$(grep -c '^ok: [a-z0-9_]*: [0-9]* parameters' "$TMP/cmp.out")
[ "$n" -eq "$(echo $tv | wc -w)" ] && ok "$n networks of torchvision's parameter counts and state_dict" ||
    bad "$n networks of torchvision's parameter counts and state_dict, of $(echo $tv | wc -w)"

# The check can fail: each network below, written as a file from a built-in's, must differ
variant() {   # variant NAME BUILTIN EXPECTED: edits $TMP/BUILTIN.json into $TMP/NAME.json (python below)
    "$PY" - "$1" "$TMP/$2.json" "$TMP/$1.json" <<'PYEOF'
import json, sys
mode, src, dst = sys.argv[1:]
d = json.load(open(src))
nodes = d["nodes"]
by = {n["name"]: n for n in nodes}
if mode == "se_unrounded":        # squeeze = expanded // 4, not _make_divisible(expanded // 4, 8)
    for n in nodes:
        if n["name"].endswith(".fc1"):
            n["out_channels"] = by[n["name"][:-1] + "2"]["out_channels"] // 4
elif mode == "one_group":         # ResNeXt's 3x3 convolutions dense
    for n in nodes:
        n.pop("groups", None)
elif mode == "proj_last":         # RegNet's projection after the residual branch
    proj = [n for n in nodes if ".proj." in n["name"]]
    rest = [n for n in nodes if ".proj." not in n["name"]]
    for p in proj:
        add = rest.index(by[p["name"].rsplit(".proj.", 1)[0] + ".add"])
        rest.insert(add, p)
    nodes[:] = rest
elif mode == "default_bn":        # EfficientNet-B5 with nn.BatchNorm2d's own eps and momentum
    for n in nodes:
        n.pop("eps", None)
        n.pop("momentum", None)
elif mode == "dropout_first":     # classifier: linear, dropout, hardswish, linear
    i = nodes.index(by["classifier.1"])
    act, drop = nodes[i], nodes[i + 1]
    drop["in"], act["in"], nodes[i + 2]["in"] = act["in"], drop["name"], act["name"]
    nodes[i], nodes[i + 1] = drop, act
elif mode == "branch3_5x5":       # GoogLeNet's branch3 with the paper's 5x5, not torchvision's 3x3
    for n in nodes:
        if n["name"].endswith(".branch3.1.conv"):
            n["kernel"], n["padding"] = 5, 2
json.dump(d, open(dst, "w"), indent=1)
PYEOF
}
fails_as() {   # fails_as NAME BUILTIN PATTERN: the check of $TMP/NAME.json against BUILTIN fails with PATTERN
    "$ZT" "$TMP/$1.json" >"$TMP/v.txt" 2>"$TMP/v.err" || { bad "$1: $(cat "$TMP/v.err")"; return; }
    if "$PY" "$CMP" "$TMP/v.txt" --as "$TMP/$1.json=$2" --json "$TMP/$1.json=$2" >"$TMP/v.out" 2>&1; then
        bad "$1 passed for torchvision's $2"
    elif grep "^FAIL" "$TMP/v.out" | grep -q "$3"; then
        ok "$1 against torchvision's $2 detected: $(grep '^FAIL' "$TMP/v.out" | head -1 | sed 's/^FAIL: [^:]*: //' | cut -c1-150)"
    else
        bad "$1 against torchvision's $2: not the expected difference"; cat "$TMP/v.out"
    fi
}
variant se_unrounded mobilenet_v3_large && fails_as se_unrounded mobilenet_v3_large "parameters, torchvision"
variant one_group resnext50_32x4d && fails_as one_group resnext50_32x4d "parameters, torchvision"
variant proj_last regnet_x_400mf && fails_as proj_last regnet_x_400mf "tensor [0-9]*: trunk_output"
variant default_bn efficientnet_b5 && fails_as default_bn efficientnet_b5 "eps 1e-05, torchvision 0.001"
variant dropout_first mobilenet_v3_large && fails_as dropout_first mobilenet_v3_large "call [0-9]*: classifier.2"

# Every convolutional builder of torchvision is a built-in: its classification builders less
# the transformers (vit_*, swin_*, maxvit_*), which docs/networks.md says what they would need
"$PY" -c 'import re, torchvision.models as m
print("\n".join(n for n in m.list_models(m) if not re.match("(vit|swin|maxvit)_", n)))' | sort >"$TMP/tv.txt"
"$ZT" --list | grep -v '^miniresnet$' | sort >"$TMP/ours.txt"
if cmp -s "$TMP/tv.txt" "$TMP/ours.txt"; then
    ok "all $(wc -l <"$TMP/tv.txt") convolutional builders of torchvision.models.list_models() are built-ins"
else
    bad "torchvision's convolutional builders and the built-ins differ (< torchvision, > ddptrain):"
    diff "$TMP/tv.txt" "$TMP/ours.txt" | grep '^[<>]' | paste -sd' ' - | cut -c1-400
fi
variant branch3_5x5 googlenet && fails_as branch3_5x5 googlenet "parameters, torchvision"
finish
