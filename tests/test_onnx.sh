#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ddptrain-export against runtimes that share no code with it (tests/helpers/onnx_check.py):
# a small network of every family trained one step on synthetic data (batch 8, 10 classes, at the
# smallest input it takes: 32 px, SqueezeNet 66 so that its ceil_mode pools add a row, AlexNet 64,
# Inception v3 75), exported with --test_data, then onnx.checker (full_check), OpenCV's cv2.dnn
# image by image and PyTorch's operators node by node (tests/helpers/onnx_torch.py) must give
# ddptrain's logits of the test batch to 1e-4 of their largest magnitude. The built-in networks
# are trained from their --print_model files with every batch norm's momentum 1: their running
# statistics are then those of a real batch, and the logits depend on the input (onnx_check.py
# checks that they do); at the built-ins' 0.1 or 0.01, one step leaves statistics that shrink
# every input to the same logits. VGG's and AlexNet's classifiers are cut to 64 features (their
# 4096 would be 0.5 GB). ConvNeXt's layer norm, a ReduceMean over the channels and a broadcast
# Div, is what OpenCV 4.6 cannot run: its check is the checker and onnx_torch. Left out: ResNeXt
# and wide ResNets (grouped and wide convolutions, which RegNet and MobileNet cover) for time,
# and RegNetY, which amplifies round-off at such a checkpoint beyond any 1e-4 comparison
# (PyTorch's own float32 is 5e-3 of the logits' scale from float64 there).
# Then: wrong models made from right ones must fail the comparison (weights swapped, a batch
# norm's statistics swapped, a flatten in NHWC's order); the EMA's weights and the trained ones;
# opset 17's HardSwish; the metadata against the dataset's attributes as h5py reads them; bad
# input (a ceil_mode pool ONNX counts otherwise too), one line and no file.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "onnx, cv2, torch, numpy, h5py") || {
    echo "SKIP: no python3 with onnx, cv2 (python3-onnx, python3-opencv), torch, numpy, h5py"; exit $SKIP; }
EXPORT="$top_builddir/ddptrain-export"
CHECK="$top_srcdir/tests/helpers/onnx_check.py"
t_start=$(date +%s.%N)

for s in 32 64 66 75; do make_synth "$TMP/d$s" --size $s --train 8 --test 2; done

# net_file OUT [ddptrain flags]: the network of the flags as a file, every batch norm's momentum
# 1, the linear layers of 4096 features cut to 64.
net_file() {
    out=$1; shift
    "$DDPTRAIN" --print_model "$@" >"$TMP/print.json" || { bad "--print_model $*"; return 1; }
    "$PY" - "$TMP/print.json" "$out" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for n in d["nodes"]:
    if n["kind"] == "bn":
        n["momentum"] = 1.0
    if n["kind"] == "linear" and n.get("out_features") == 4096:
        n["out_features"] = 64
json.dump(d, open(sys.argv[2], "w"), indent=1)
EOF
}

# train LABEL SIZE [ddptrain flags]: one SGD step at batch 8 into $TMP/job_LABEL; sets ckpt.
train() {
    label=$1 size=$2; shift 2
    ckpt=$TMP/job_$label/checkpoints/ckpt-000000001.h5
    "$DDPTRAIN" --data_dir "$TMP/d$size" --image_size "$size" --job_dir "$TMP/job_$label" --max_steps 1 --batch_size 8 \
        --num_classes 10 --threads 2 --lr 0.001 "$@" >"$TMP/train.out" 2>&1 && [ -f "$ckpt" ] && return 0
    bad "$label: training one step: $(tail -n 1 "$TMP/train.out")"
    return 1
}

# export LABEL [onnx_check flags]: $ckpt as $TMP/LABEL.onnx with test data, onto the list that
# onnx_check.py checks at the end (one Python for all: its modules take seconds to load).
export_one() {
    label=$1; shift
    if "$EXPORT" "$ckpt" --out "$TMP/$label.onnx" --test_data "$TMP/td_$label" >"$TMP/export.out" 2>&1; then
        echo "$label $TMP/$label.onnx $TMP/td_$label $*" >>"$TMP/list"
    else
        bad "$label: ddptrain-export: $(cat "$TMP/export.out")"
    fi
    rm -rf "$TMP/job_$label"
}

# family LABEL SIZE [onnx_check flags] -- [ddptrain flags]: the built-in of the flags, as a file.
family() {
    label=$1 size=$2; shift 2
    cflags=""
    while [ "$1" != "--" ]; do cflags="$cflags $1"; shift; done
    shift
    net_file "$TMP/$label.json" --image_size "$size" "$@" && train "$label" "$size" --model "$TMP/$label.json" &&
        export_one "$label" $cflags
}

# ---- every family ----------------------------------------------------------------------------
# MiniResNet as the built-in (its batch norms' momentum 0.1: a shallow network whose logits
# still depend on the input), wrong models too.
: >"$TMP/list"
train miniresnet 32 --width 4 && cp "$ckpt" "$TMP/mini.h5" && export_one miniresnet --mutate
# ResNet-18 with --use_blurpool as the built-in's flag (FFCV's blur nodes before its strided
# convolutions): the plain ResNet-18 is the same graph less the blurs
train resnet18-blurpool 32 --model resnet18 --use_blurpool && export_one resnet18-blurpool
family mobilenet_v2 32 --mutate -- --model mobilenet_v2
# MobileNet V3 at the default opset 13 (hardswish as x * HardSigmoid(x)) and at 17 (HardSwish)
if net_file "$TMP/v3.json" --model mobilenet_v3_small && train mobilenet_v3_small 32 --model "$TMP/v3.json"; then
    if "$EXPORT" "$ckpt" --out "$TMP/v3-opset17.onnx" --opset 17 --test_data "$TMP/td_v3-opset17" >"$TMP/export.out" 2>&1; then
        echo "mobilenet_v3_small-opset17 $TMP/v3-opset17.onnx $TMP/td_v3-opset17" >>"$TMP/list"
    else
        bad "--opset 17: $(cat "$TMP/export.out")"
    fi
    export_one mobilenet_v3_small
fi
family efficientnet_b0 32 -- --model efficientnet_b0
family regnet_x_400mf 32 -- --model regnet_x_400mf
family mnasnet0_5 32 -- --model mnasnet0_5
family shufflenet_v2_x0_5 32 -- --model shufflenet_v2_x0_5
# SqueezeNet at 66 px: its stem's 32x32 map, where every ceil_mode max pool adds a row and a column
family squeezenet1_1 66 -- --model squeezenet1_1
family densenet121 32 -- --model densenet121
# VGG at 32 px: its 1x1 map made 7x7 by the adaptive pool's general path, then flattened
family vgg11_bn 32 --mutate -- --model vgg11_bn
family alexnet 64 -- --model alexnet
# GoogLeNet with its auxiliary classifiers (left out of the export) and --transform_input
family googlenet-transform_input 32 -- --model googlenet --transform_input
family inception_v3 75 -- --model inception_v3 --no-aux_logits
family convnext_tiny 32 --cv2 cannot -- --model convnext_tiny
# a network file of the tree, as it is
train resnet9 32 --model "$top_srcdir/networks/resnet9.json" && export_one resnet9

# ---- the EMA's weights and the trained ones ------------------------------------------------
ckpt=$TMP/job_ema/checkpoints/ckpt-000000002.h5
if "$DDPTRAIN" --data_dir "$TMP/d32" --job_dir "$TMP/job_ema" --width 4 --max_steps 2 --batch_size 4 --threads 2 \
    --lr 0.1 --ema_decay 0.5 >"$TMP/train.out" 2>&1 && [ -f "$ckpt" ]; then
    "$EXPORT" "$ckpt" --out "$TMP/no_ema.onnx" --no_ema --test_data "$TMP/td_no_ema" >"$TMP/export.out" 2>&1 ||
        bad "--no_ema: $(cat "$TMP/export.out")"
    echo "no_ema $TMP/no_ema.onnx $TMP/td_no_ema" >>"$TMP/list"
    cp "$ckpt" "$TMP/ema.h5"
    export_one ema
    if "$PY" - "$TMP/ema.onnx" "$TMP/no_ema.onnx" "$TMP/ema.h5" <<'EOF' >"$TMP/ema.out" 2>&1 &&
import sys, h5py, numpy as np, onnx
from onnx import numpy_helper
f = h5py.File(sys.argv[3], "r")
for path, group, weights in ((sys.argv[1], "ema", "ema"), (sys.argv[2], "model", "trained")):
    m = onnx.load(path)
    meta = {p.key: p.value for p in m.metadata_props}
    assert meta["weights"] == weights, meta
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    names = [k for k in f[group] if k in inits]
    assert len(names) >= 10 and len(names) == len(inits), (len(names), len(inits))
    for k in names:
        assert np.array_equal(inits[k], f[group][k][()]), (path, k)
    print("%s: its %d initializers are /%s's tensors;" % (weights, len(names), group))
EOF
        ! cmp -s "$TMP/td_ema/test_data_set_0/output_0.pb" "$TMP/td_no_ema/test_data_set_0/output_0.pb"; then
        ok "the EMA's weights by default, --no_ema the trained ones, other logits: $(tr '\n' ' ' <"$TMP/ema.out")"
    else
        bad "EMA and --no_ema: $(tail -n 3 "$TMP/ema.out")"
    fi
else
    bad "training with --ema_decay: $(tail -n 1 "$TMP/train.out")"
fi

# ---- metadata against the dataset's attributes ---------------------------------------------
"$EXPORT" "$TMP/mini.h5" --out "$TMP/meta.onnx" >"$TMP/export.out" 2>&1 &&
    if "$PY" - "$TMP/meta.onnx" "$TMP/d32" <<'EOF' >"$TMP/meta.out" 2>&1; then
import glob, json, sys, h5py, numpy as np, onnx
m = onnx.load(sys.argv[1])
meta = {p.key: p.value for p in m.metadata_props}
a = h5py.File(sorted(glob.glob(sys.argv[2] + "/test-*.h5"))[0], "r").attrs
names = [n.decode() if isinstance(n, bytes) else str(n) for n in a["class_names"]]
assert meta["architecture"] == "MiniResNet" and meta["num_classes"] == "10" and meta["image_size"] == "32", meta
assert np.allclose(json.loads(meta["mean"]), a["mean"], rtol=1e-6) and np.allclose(json.loads(meta["std"]), a["std"], rtol=1e-6), meta
assert json.loads(meta["class_names"]) == names, (meta["class_names"], names)
dims = [d.dim_param or d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
assert dims == ["batch", 3, 32, 32], dims
print("architecture, classes, size, mean, std and the %d class names as the shards hold them; input %s" % (len(names), dims))
EOF
        ok "metadata: $(cat "$TMP/meta.out")"
    else
        bad "metadata"; tail -n 3 "$TMP/meta.out"
    fi

# ---- the checks of every model exported above ---------------------------------------------
echo "$(elapsed "$t_start") s to train and export"
"$PY" "$CHECK" --list "$TMP/list" >"$TMP/check.out" 2>"$TMP/check.err"
rc=$?
while read -r line; do
    case $line in
        "ok: "*) ok "${line#ok: }" ;;
        "FAIL: "*) bad "${line#FAIL: }" ;;
    esac
done <"$TMP/check.out"
[ "$(grep -c '^ok: \|^FAIL: ' "$TMP/check.out")" -ge "$(wc -l <"$TMP/list")" ] && { [ $rc -eq 0 ] || grep -q '^FAIL' "$TMP/check.out"; } ||
    bad "onnx_check.py ended early (status $rc): $(grep -v '^\[' "$TMP/check.err" | tail -n 3)"
grep -q "^ok: mobilenet_v3_small-opset17: .*opset 17, .*HardSwish" "$TMP/check.out" ||
    bad "--opset 17: no HardSwish node in mobilenet_v3_small's model"

# ---- bad input: one line, the status, no file ----------------------------------------------
# refuse LABEL STATUS CMD...: exits STATUS with one line on stderr, and $TMP/out holds nothing
refuse() {
    label=$1 want=$2; shift 2
    rm -rf "$TMP/out"; mkdir "$TMP/out"
    "$@" >"$TMP/r.out" 2>"$TMP/r.err"
    rc=$?
    if [ $rc -eq "$want" ] && [ "$(wc -l <"$TMP/r.err")" -eq 1 ] && [ -z "$(ls -A "$TMP/out")" ]; then
        ok "$label: exit $rc, $(cut -c1-120 "$TMP/r.err")"
    else
        bad "$label: exit $rc (want $want), $(wc -l <"$TMP/r.err") line(s): $(head -n 3 "$TMP/r.err"); out: $(ls -A "$TMP/out")"
    fi
}
good=$TMP/mini.h5
refuse "no checkpoint named" 2 "$EXPORT" --out "$TMP/out/m.onnx"
refuse "no --out" 2 "$EXPORT" "$good"
refuse "--opset 12" 2 "$EXPORT" "$good" --out "$TMP/out/m.onnx" --opset 12
refuse "--ema and --no_ema" 2 "$EXPORT" "$good" --out "$TMP/out/m.onnx" --ema --no_ema
refuse "an unknown flag" 2 "$EXPORT" "$good" --out "$TMP/out/m.onnx" --fp16
refuse "a missing checkpoint" 1 "$EXPORT" "$TMP/none.h5" --out "$TMP/out/m.onnx"
refuse "an ONNX file as the checkpoint" 1 "$EXPORT" "$TMP/meta.onnx" --out "$TMP/out/m.onnx"
refuse "--ema on a checkpoint without an average" 1 "$EXPORT" "$good" --out "$TMP/out/m.onnx" --ema
refuse "--model of another network" 1 "$EXPORT" "$good" --out "$TMP/out/m.onnx" --model resnet18 --test_data "$TMP/out/td"
refuse "--out in a missing directory" 1 "$EXPORT" "$good" --out "$TMP/out/no/m.onnx"
# a ceil_mode max pool on a 5x5 map, padding 1: PyTorch's 3x3 windows (it drops the one that
# would start in the right padding), ONNX's 4x4
cat >"$TMP/ceil.json" <<'EOF'
{"network": "ceil", "init": "pytorch", "nodes": [
 {"name": "conv1", "kind": "conv", "in": "input", "out_channels": 8, "kernel": 3, "stride": 4, "padding": 1},
 {"name": "conv2", "kind": "conv", "in": "conv1", "out_channels": 8, "kernel": 4, "stride": 1, "padding": 0},
 {"name": "pool", "kind": "maxpool", "in": "conv2", "kernel": 2, "stride": 2, "padding": 1, "ceil_mode": true},
 {"name": "gap", "kind": "avgpool", "in": "pool"},
 {"name": "fc", "kind": "linear", "in": "gap"}]}
EOF
train ceil 32 --model "$TMP/ceil.json" &&
    refuse "a ceil_mode pool ONNX counts otherwise" 1 "$EXPORT" "$ckpt" --out "$TMP/out/m.onnx" --test_data "$TMP/out/td" &&
    grep -q 'node "pool" (maxpool): ceil_mode' "$TMP/r.err" || bad "the ceil_mode refusal does not name the pool: $(cat "$TMP/r.err")"

echo "$(elapsed "$t_start") s in all"
finish
