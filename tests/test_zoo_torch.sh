#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# torchvision's ResNet-18/34/50 as ddptrain runs them (--model resnetN) against
# torchvision.models.resnetN on the same weights and batch of 64x64 images: logits, loss, every
# gradient, the running statistics and the weights after SGD steps (tests/helpers/torch_compare.py,
# which loads ddptrain's tensors into torchvision's module by name, strict). ResNet-34 and -50 are
# held to 1e-3: through 34 and 50 layers of float32 both sides drift from a float64 reference by
# 1e-4 (ResNet-50, batch 8: ddptrain 2.1e-4, PyTorch 1.4e-4 on the gradients). ResNet v1 (the
# stride on the first 1x1 of a bottleneck), written as a network file, must fail the check. So
# must a network of --use_blurpool (FFCV's blur) against torchvision's module without the blur.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
. "${top_srcdir:-.}/tests/helpers/zoo_compare.sh"

check() {   # $1 = label, $2 = tolerance, rest = dump_model flags
    label=$1; tol=$2; shift 2
    if "$DUMP" "$TMP/d.h5" "$@" >/dev/null && "$PY" "$CMP" "$TMP/d.h5" --tol "$tol" >"$TMP/c.out" 2>&1; then
        ok "$label: $(grep '^compared' "$TMP/c.out" | cut -c1-150)"
    else
        bad "$label"; cat "$TMP/c.out"
    fi
}
check "resnet18, batch 4, 3 SGD steps" 1e-4 --model resnet18 --batch 4 --image_size 64 --seed 3
check "resnet34, batch 4, 3 SGD steps at lr 0.01" 1e-3 --model resnet34 --batch 4 --image_size 64 --seed 4 --lr 0.01
check "resnet50, batch 8, 1 SGD step at lr 0.01" 1e-3 --model resnet50 --batch 8 --image_size 64 --seed 4 --lr 0.01 \
    --steps 1
"$DDP" --model resnet18 --print_model >"$TMP/r18.json" || bad "--print_model"
check "resnet18 printed as a file and read back" 1e-4 --model "$TMP/r18.json" --batch 4 --image_size 64 --seed 3

# FFCV's blurpool (--use_blurpool): a blur node before every strided convolution of 16 or more
# input channels, against tests/helpers/blurpool_torch.py on torchvision's module; the same dump
# against torchvision's module without the blur must fail
check "resnet18 with blurpool, batch 4, 3 SGD steps" 1e-4 --model resnet18 --batch 4 --image_size 64 --seed 3 \
    --blurpool 1
if "$PY" "$CMP" "$TMP/d.h5" --tol 1e-4 --set blurpool=0 >"$TMP/nb.out" 2>&1; then
    bad "resnet18 with blurpool passed for torchvision's resnet18 without the blur"
else
    ok "blurpool's blur detected against a plain resnet18: $(grep FAIL "$TMP/nb.out" | head -1 | cut -c1-100)"
fi
"$DDP" --model resnet18 --use_blurpool --print_model >"$TMP/r18b.json" || bad "--use_blurpool --print_model"
n=$(grep -c '"kind": "blur"' "$TMP/r18b.json")
[ "$n" = 3 ] && grep -q '"network": "resnet18-blurpool"' "$TMP/r18b.json" &&
    ok "--use_blurpool --print_model: $n blur nodes, one for each of layer2-4's strided pair" ||
    bad "--use_blurpool --print_model: $n blur nodes"
check "resnet18 with blurpool printed as a file and read back" 1e-4 --model "$TMP/r18b.json" --batch 4 \
    --image_size 64 --seed 3
check "miniresnet width 16 with blurpool" 1e-4 --width 16 --batch 4 --seed 3 --blurpool 1

# ResNet v1: the stride of each downsampling bottleneck on conv1 instead of conv2
"$DDP" --model resnet50 --print_model >"$TMP/r50.json" || bad "--print_model"
"$PY" - "$TMP/r50.json" "$TMP/r50v1.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
byname = {n["name"]: n for n in d["nodes"]}
moved = 0
for n in d["nodes"]:
    if n["name"].endswith(".conv2") and n["stride"] == 2:
        n["stride"] = 1
        byname[n["name"][:-1] + "1"]["stride"] = 2
        moved += 1
assert moved == 3, moved
json.dump(d, open(sys.argv[2], "w"), indent=1)
PYEOF
"$DUMP" "$TMP/v1.h5" --model "$TMP/r50v1.json" --batch 8 --image_size 64 --seed 4 --lr 0.01 --steps 1 >/dev/null ||
    bad "dump_model of ResNet v1"
if "$PY" "$CMP" "$TMP/v1.h5" --tol 1e-3 >"$TMP/v1.out" 2>&1; then
    bad "ResNet v1 passed for torchvision's ResNet-50"
else
    ok "ResNet v1 against torchvision's v1.5 detected: $(grep FAIL "$TMP/v1.out" | head -1 | cut -c1-120)"
fi

# The parameter counts of torchvision's models at 1000 classes
for m in resnet18 resnet34 resnet50; do
    want=$("$PY" -c "import torchvision; print(sum(p.numel() for p in torchvision.models.$m().parameters()))")
    got=$("$DUMP" "$TMP/p.h5" --model "$m" --classes 1000 --batch 2 --image_size 32 --steps 1 |
          sed -n 's/.* \([0-9]*\) parameters.*/\1/p')
    [ "$got" = "$want" ] && ok "$m: $got parameters, as torchvision's" || bad "$m: $got parameters, torchvision $want"
done

# torchvision -> ddptrain (--init_from, scripts/torch_to_ddptrain.py): the weights loaded are
# torchvision's to the bit, and the logits of the first forward, every gradient and the steps
# are torchvision's on the same batch
"$PY" "$T2D" resnet18 "$TMP/w18.h5" --num-classes 10 --seed 5 >/dev/null || bad "torch_to_ddptrain.py resnet18"
"$DUMP" "$TMP/i.h5" --model resnet18 --init_from "$TMP/w18.h5" --batch 4 --image_size 64 --seed 3 --lr 0.01 \
    >"$TMP/i.out" || bad "dump_model --init_from"
if "$PY" - "$TMP/i.h5" <<'PYEOF'
import sys, h5py, numpy as np, torch, torchvision
torch.manual_seed(5)
sd = torchvision.models.resnet18(num_classes=10).state_dict()
f = h5py.File(sys.argv[1])
bad = [k for k, v in sd.items() if not k.endswith("num_batches_tracked") and
       not np.array_equal((f["params"] if k in f["params"] else f["buffers"])[k][()], v.numpy())]
print(f"{len(sd)} tensors of torchvision's resnet18 against what --init_from loaded: {len(bad)} differ")
sys.exit(1 if bad else 0)
PYEOF
then ok "--init_from: torchvision's resnet18 loaded bit for bit"; else bad "--init_from: weights differ"; fi
if "$PY" "$CMP" "$TMP/i.h5" >"$TMP/c.out" 2>&1; then
    ok "--init_from: first forward and steps are torchvision's: $(grep '^compared' "$TMP/c.out" | cut -c1-110)"
else
    bad "--init_from: first forward against torchvision"; cat "$TMP/c.out"
fi

# Fine-tuning: 1000-class weights into a 10-class run keep the classifier's initialisation and
# say so; the run's checkpoint loads into torchvision.models.resnet18 (strict)
"$PY" "$T2D" resnet18 "$TMP/w1000.h5" --seed 5 >/dev/null || bad "torch_to_ddptrain.py resnet18 (1000 classes)"
"$top_builddir/ddptrain-data" synth --out "$TMP/data" >/dev/null 2>&1 || bad "synth"
"$DDP" --model resnet18 --init_from "$TMP/w1000.h5" --data_dir "$TMP/data" --max_steps 1 --threads 2 \
    --save_every_steps 1 --job_dir "$TMP/ft" >"$TMP/ft.out" 2>&1 || { bad "fine-tuning run"; cat "$TMP/ft.out"; }
grep -q "120 tensors loaded; kept at their initialisation, another shape: fc.weight (1000x512 in the file), fc.bias (1000 in the file)" \
    "$TMP/ft.out" && ok "fine-tuning: $(grep -o 'init_from .*' "$TMP/ft.out" | head -1 | cut -c1-150)" ||
    { bad "fine-tuning: the log does not name the classifier kept"; grep init_from "$TMP/ft.out"; }
if "$PY" "$D2T" "$TMP/ft/checkpoints/ckpt-000000001.h5" --save "$TMP/ft.pt" >"$TMP/d2t.out" 2>&1 &&
    grep -q "torchvision.models.resnet18 classes 10" "$TMP/d2t.out"; then
    ok "ddptrain_to_torch.py: $(head -1 "$TMP/d2t.out" | cut -c1-140)"
else
    bad "ddptrain_to_torch.py on a resnet18 checkpoint"; cat "$TMP/d2t.out"
fi
# A checkpoint of --use_blurpool loads into torchvision's module with blurpool_torch's blur, and
# PyTorch's evaluation of it is ddptrain's: the same hits and loss on the test split
"$DDP" --model resnet18 --use_blurpool --data_dir "$TMP/data" --max_steps 2 --save_every_steps 2 --threads 2 \
    --job_dir "$TMP/bp" >"$TMP/bp.out" 2>&1 || { bad "--use_blurpool run"; cat "$TMP/bp.out"; }
want=$(sed -n 's/.*step 2 test_acc \([0-9.]*\) test_loss \([0-9.]*\).*/\1 \2/p' "$TMP/bp.out" | tail -1)
"$PY" "$D2T" "$TMP/bp/checkpoints/ckpt-000000002.h5" --data "$TMP/data" >"$TMP/bpt.out" 2>&1
got=$(sed -n 's/^test accuracy: [0-9.]*% (\([0-9]*\)\/\([0-9]*\)), loss \([0-9.]*\).*/\1 \2 \3/p' "$TMP/bpt.out" |
      awk '{printf "%.4f %.4f", $1 / $2, $3}')
# the accuracy exactly, the loss to the 4 decimals ddptrain prints
if grep -q "torchvision.models.resnet18 with blurpool" "$TMP/bpt.out" && [ -n "$want" ] && [ -n "$got" ] &&
    echo "$got $want" | awk '{exit !($1 == $3 && ($2 - $4) * ($2 - $4) <= 1.1e-8)}'; then
    ok "ddptrain_to_torch.py on a --use_blurpool checkpoint: test_acc and loss $got, as ddptrain's"
else
    bad "ddptrain_to_torch.py on a --use_blurpool checkpoint: '$got' against ddptrain's '$want'"; cat "$TMP/bpt.out"
fi
# Weights of another network: one line, exit 2, no job directory
out=$("$DDP" --model resnet34 --init_from "$TMP/w18.h5" --data_dir "$TMP/data" --job_dir "$TMP/never" 2>&1); rc=$?
[ $rc -eq 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && printf '%s' "$out" | grep -q "w18.h5: no readable tensor" &&
    [ ! -e "$TMP/never" ] &&
    ok "weights of another network: $(printf '%s' "$out" | grep error)" || bad "weights of another network: $rc $out"
finish
