#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# GoogLeNet and Inception v3 as ddptrain runs them (--model googlenet, inception_v3) against
# torchvision.models.googlenet and inception_v3 on the same weights and batch: logits, the
# training loss (the main logits' cross-entropy plus 0.3 x each of GoogLeNet's two auxiliary
# classifiers', 0.4 x Inception v3's one), every gradient, the running statistics and the
# weights after an SGD step (tests/helpers/torch_compare.py, which replays ddptrain's ReLU masks
# by module: GoogLeNet's aux1 runs after inception5b here, after inception4a in torchvision), to
# 1e-3 or within 4 times PyTorch float32's own distance from its float64 result. One step: at
# torchvision's initialisation (weights of std 0.01 or 0.1 before batch norms) the first moves
# the weights so far that a second amplifies round-off, PyTorch's own float32 leaving float64 by
# 1e-2. GoogLeNet at 64 pixels; Inception v3 with its auxiliary classifier at 299, the smallest
# size its 5x5 convolution takes (a 17x17 map after Mixed_6e), and without it at 139 (at its
# smallest, 75, the last modules' maps are 1x1 and their batch norms see 4 values: round-off
# then decides, on both sides). Then --aux_logits false and --transform_input against
# torchvision's aux_logits=False and transform_input=True, the smallest image sizes against
# torchvision's documented ones, and wrong variants that must fail: the auxiliary losses at
# weight 0.4 for GoogLeNet, Inception v3's 1x7 and 7x1 kernels transposed, no transform_input.
# Last, the weights both ways: torchvision's into --init_from and a checkpoint into
# torchvision's module, strict (without the auxiliary classifiers and with transform_input
# too, PyTorch's evaluation of the checkpoint then ddptrain's).
. "${top_srcdir:-.}/tests/helpers/lib.sh"
. "${top_srcdir:-.}/tests/helpers/zoo_compare.sh"

check() {   # $1 = label, $2 = dump to keep, rest = dump_model flags
    label=$1; keep=$2; shift 2
    if "$DUMP" "$TMP/$keep.h5" "$@" >"$TMP/d.out" 2>&1 &&
        "$PY" "$CMP" "$TMP/$keep.h5" --tol 1e-3 --ref64 4 >"$TMP/c.out" 2>&1; then
        ok "$label: $(grep '^compared' "$TMP/c.out" | cut -c1-150)"
    else
        bad "$label"; cat "$TMP/d.out" "$TMP/c.out" | tail -n 15
    fi
}

common="--batch 4 --seed 3 --lr 0.01 --steps 1"
check "googlenet, 64 px, batch 4, its 2 auxiliary classifiers" g --model googlenet --image_size 64 $common
grep -q "^loss: cross-entropy of the logits + 0.3 x that of each of the 2 auxiliary" "$TMP/c.out" ||
    bad "googlenet: the comparison's loss has not its auxiliary classifiers"
check "inception_v3, 299 px, batch 4, its auxiliary classifier" i --model inception_v3 --image_size 299 $common
grep -q "^loss: cross-entropy of the logits + 0.4 x that of each of the 1 auxiliary" "$TMP/c.out" ||
    bad "inception_v3: the comparison's loss has not its auxiliary classifier"
check "googlenet --aux_logits false --transform_input true (aux_logits=False, transform_input=True)" gt \
    --model googlenet --image_size 64 $common --aux_logits 0 --transform_input 1
check "inception_v3 --aux_logits false, 139 px (aux_logits=False)" in --model inception_v3 --image_size 139 $common \
    --aux_logits 0

# The initialisation: every convolution's and linear layer's weights drawn with the standard
# deviation of torchvision's (GoogLeNet's 0.01, Inception v3's 0.1 but its auxiliary fc's
# 0.001: its conv1's stddev of 0.01 sits on the BasicConv2d, which the initialisation does not
# read), the classifier's bias within PyTorch's default bound (dump_model randomises the other
# one-dimensional tensors)
"$PY" - "$TMP/g.h5" googlenet "$TMP/i.h5" inception_v3 >"$TMP/init.out" 2>&1 <<'PYEOF'
import sys
import h5py
import numpy as np
import torch
import torchvision
bad, n = [], 0
for path, arch in zip(sys.argv[1::2], sys.argv[2::2]):
    torch.manual_seed(0)
    ref = dict(getattr(torchvision.models, arch)(num_classes=10, init_weights=True).named_parameters())
    params = h5py.File(path, "r")["params"]
    for name, p in ref.items():
        if ".bn." in name:
            continue
        got, want = np.array(params[name], dtype=np.float64), p.detach().double().numpy()
        if p.dim() >= 2 and p.numel() >= 1000:
            n += 1
            if not 0.9 < got.std() / want.std() < 1.1:
                bad.append(f"{arch} {name}: std {got.std():.4g}, torchvision {want.std():.4g}")
        elif name == "fc.bias":
            n += 1
            bound = 1.0 / np.sqrt(ref[name[:-len("bias")] + "weight"].shape[1])
            if np.abs(got).max() > bound or (p.numel() >= 100 and got.std() < 0.5 * bound):
                bad.append(f"{arch} {name}: max |b| {np.abs(got).max():.4g}, std {got.std():.4g}, bound {bound:.4g}")
print("\n".join(bad[:5]) if bad else f"{n} weights and biases")
sys.exit(1 if bad else 0)
PYEOF
[ $? -eq 0 ] && ok "initialisation as torchvision's: $(cat "$TMP/init.out")" || { bad "initialisation"; cat "$TMP/init.out"; }

# Wrong variants, each against a dump that passed above
must_fail "GoogLeNet's auxiliary losses at weight 0.4 in PyTorch (0.3)" "$TMP/g.h5" --set aux_weight=0.4
must_fail "Inception v3's rectangular kernels transposed in PyTorch (1x7 as 7x1)" "$TMP/in.h5" --set rect_transposed=1
must_fail "GoogLeNet without transform_input in PyTorch" "$TMP/gt.h5" --set transform_input=0

# The smallest image: torchvision's min_size (its weights' meta data, for evaluation) for
# GoogLeNet and for Inception v3 without its auxiliary classifier; 299 with it
sizes=$("$PY" -c "import torchvision.models as m
print(m.GoogLeNet_Weights.IMAGENET1K_V1.meta['min_size'][0], m.Inception_V3_Weights.IMAGENET1K_V1.meta['min_size'][0])")
set -- $sizes
resolves() { "$DDP" --model "$1" --image_size "$2" $3 --print_model >/dev/null 2>"$TMP/r.err"; }
if resolves googlenet "$1" && ! resolves googlenet $(($1 - 1)) && resolves inception_v3 "$2" --no-aux_logits &&
    ! resolves inception_v3 $(($2 - 1)) --no-aux_logits && resolves inception_v3 299 &&
    ! resolves inception_v3 298 && grep -q 'node "AuxLogits.conv1.conv"' "$TMP/r.err"; then
    ok "smallest images: googlenet $1, inception_v3 $2 without its auxiliary classifier (torchvision's min_size), 299 with it"
else
    bad "smallest images, torchvision's $sizes: $(cat "$TMP/r.err")"
fi
out=$("$DDP" --model resnet18 --aux_logits=false --print_model 2>&1); rc=$?
[ $rc -eq 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && printf '%s' "$out" | grep -q "no auxiliary classifier" &&
    ok "--aux_logits false on a network without auxiliary classifiers: $out" || bad "--aux_logits false on resnet18: $rc $out"
n=$("$DDP" --model googlenet --aux_logits=false --transform_input --print_model | grep -c '"kind": "\(aux_loss\|transform_input\)"')
[ "$n" = 1 ] && ok "--print_model --aux_logits false --transform_input: no aux_loss node, one transform_input" ||
    bad "--print_model --aux_logits false --transform_input: $n aux_loss and transform_input nodes"

# Weights both ways: torchvision's (1000 classes) into --init_from at 10 classes, then a
# checkpoint of a training step into torchvision's module, strict
"$top_builddir/ddptrain-data" synth --out "$TMP/d64" --train 32 --test 16 --size 64 >/dev/null &&
    "$top_builddir/ddptrain-data" synth --out "$TMP/d299" --train 16 --test 8 --size 299 >/dev/null ||
    bad "ddptrain-data synth"
weights_both_ways "$TMP/d64" 64 googlenet
weights_both_ways "$TMP/d299" 299 inception_v3
# A checkpoint of --aux_logits false --transform_input loads into torchvision's GoogLeNet of
# aux_logits=False, transform_input=True, and PyTorch's evaluation of it is ddptrain's
rm -rf "$TMP/job"
"$DDP" --model googlenet --aux_logits=false --transform_input --data_dir "$TMP/d64" --image_size 64 --max_steps 2 \
    --batch_size 8 --save_every_steps 2 --threads 2 --job_dir "$TMP/job" >"$TMP/gt.out" 2>&1 ||
    { bad "googlenet --aux_logits false --transform_input run"; tail -n 3 "$TMP/gt.out"; }
want=$(sed -n 's/.*step 2 test_acc \([0-9.]*\) test_loss \([0-9.]*\).*/\1 \2/p' "$TMP/gt.out" | tail -1)
"$PY" "$D2T" "$TMP/job/checkpoints/ckpt-000000002.h5" --data "$TMP/d64" >"$TMP/gtt.out" 2>&1
got=$(sed -n 's/^test accuracy: [0-9.]*% (\([0-9]*\)\/\([0-9]*\)), loss \([0-9.]*\).*/\1 \2 \3/p' "$TMP/gtt.out" |
      awk '{printf "%.4f %.4f", $1 / $2, $3}')
if grep -q "torchvision.models.googlenet with transform_input without its auxiliary classifiers" "$TMP/gtt.out" &&
    [ -n "$want" ] && [ -n "$got" ] && echo "$got $want" | awk '{exit !($1 == $3 && ($2 - $4) * ($2 - $4) <= 1.1e-8)}'; then
    ok "ddptrain_to_torch.py on a googlenet checkpoint without auxiliary classifiers, with transform_input: test_acc and loss $got, as ddptrain's"
else
    bad "ddptrain_to_torch.py on googlenet --aux_logits false --transform_input: '$got' against ddptrain's '$want'"
    cat "$TMP/gtt.out"
fi
finish
