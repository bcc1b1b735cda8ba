#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The smallest ShuffleNet V2 (shufflenet_v2_x0_5) and ConvNeXt (convnext_tiny) as ddptrain runs
# them (--model NAME) against torchvision.models.NAME on the same weights and batch of 64x64
# images (tests/helpers/torch_compare.py, ddptrain's ReLU masks, max-pool choices and
# stochastic-depth draws replayed in torchvision's modules): logits, loss, every gradient, the
# running statistics and the weights after SGD steps, to 1e-3, or within 4 times PyTorch
# float32's own distance from PyTorch's float64 result (the gradient of a batch-norm bias that
# the next batch norm cancels to float32 noise). Their initialisation as torchvision's
# __init__ draws it: ShuffleNet's PyTorch defaults, ConvNeXt's trunc_normal_(std=0.02) weights,
# zero biases, layer norms at 1 and 0 and layer scales at 1e-6. Then wrong variants that must
# fail: ShuffleNet's channel shuffle in 4 groups instead of 2, its halves joined the other way
# round (the split and the concatenation), ConvNeXt's LayerNorm2d over each image's (C, H, W)
# instead of each pixel's channels. Last, each one's weights both ways: torchvision's 1000-class
# state_dict into --init_from at 10 classes, and a checkpoint back into torchvision's module,
# strict.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
. "${top_srcdir:-.}/tests/helpers/zoo_compare.sh"

check() {   # $1 = label, $2 = dump, rest = dump_model flags
    label=$1; d=$2; shift 2
    if "$DUMP" "$d" "$@" >"$TMP/d.out" 2>&1 && "$PY" "$CMP" "$d" --tol 1e-3 --ref64 4 >"$TMP/c.out" 2>&1; then
        ok "$label: $(grep '^compared' "$TMP/c.out" | cut -c1-150)"
    else
        bad "$label"; cat "$TMP/d.out" "$TMP/c.out" | tail -n 15
    fi
}

check "shufflenet_v2_x0_5, batch 4, 2 SGD steps at lr 0.01" "$TMP/s.h5" --model shufflenet_v2_x0_5 --batch 4 \
    --image_size 64 --seed 3 --lr 0.01 --steps 2
check "convnext_tiny, batch 4, 1 SGD step at lr 0.01" "$TMP/c.h5" --model convnext_tiny --batch 4 --image_size 64 \
    --seed 3 --lr 0.01 --steps 1

# The initial weights, as a step at learning rate 0 checkpoints them (10 classes), against the
# draws of torchvision's __init__
"$top_builddir/ddptrain-data" synth --out "$TMP/data" --train 32 --test 8 --size 32 >/dev/null ||
    bad "ddptrain-data synth"
for m in shufflenet_v2_x0_5 convnext_tiny; do
    rm -rf "$TMP/job"
    "$DDP" --model "$m" --data_dir "$TMP/data" --image_size 32 --max_steps 1 --batch_size 8 --threads 2 --lr 0 \
        --weight_decay 0 --save_every_steps 1 --job_dir "$TMP/job" >"$TMP/init.log" 2>&1 &&
        cp "$(ls "$TMP"/job/checkpoints/ckpt-*.h5 | tail -1)" "$TMP/$m.h5" || { bad "$m at learning rate 0"; tail -n 3 "$TMP/init.log"; }
done
if "$PY" - "$TMP/shufflenet_v2_x0_5.h5" "$TMP/convnext_tiny.h5" >"$TMP/init.out" 2>&1 <<'PYEOF'; then
import sys
import h5py
import numpy as np
bad = []
def tensors(path):
    out = {}
    with h5py.File(path) as f:
        f["model"].visititems(lambda n, d: out.__setitem__(n, np.array(d)) if isinstance(d, h5py.Dataset) else None)
    return out
def std_near(what, a, want):   # tensors of 2000 values or more: the std within 10%
    if a.size >= 2000 and abs(a.std() - want) > 0.1 * want:
        bad.append(f"{what}: std {a.std():.4g}, want {want:.4g}")
# ShuffleNet: PyTorch's defaults, weights (and fc's bias) uniform within 1/sqrt(fan_in), of std
# bound/sqrt(3); batch norms 1 and 0
n, s = 0, tensors(sys.argv[1])
for name, a in s.items():
    a = a.astype(np.float64)
    if "running" in name or "num_batches" in name:
        continue
    if a.ndim >= 2 or name == "fc.bias":
        fan_in = int(np.prod(a.shape[1:])) if a.ndim >= 2 else s["fc.weight"].shape[1]
        bound = 1 / np.sqrt(fan_in)
        if np.abs(a).max() > bound:
            bad.append(f"shufflenet {name}: beyond 1/sqrt({fan_in})")
        std_near(f"shufflenet {name}", a, bound / np.sqrt(3))
        n += 1
    elif not np.all(a == (1 if name.endswith(".weight") else 0)):
        bad.append(f"shufflenet {name}: not batch norm's 1 or 0")
print(f"shufflenet_v2_x0_5: {n} tensors within PyTorch's bounds", end="; ")
# ConvNeXt: weights trunc_normal_(std=0.02), biases 0, layer norms 1 and 0, layer scales 1e-6
n = ls = 0
for name, a in tensors(sys.argv[2]).items():
    if name.endswith("layer_scale"):
        if a.shape[1:] != (1, 1) or not np.all(a == np.float32(1e-6)):
            bad.append(f"convnext {name}: not 1e-6 [C, 1, 1]")
        ls += 1
    elif a.ndim >= 2:
        std_near(f"convnext {name}", a.astype(np.float64), 0.02)
        n += 1
    elif not np.all(a == (0 if name.endswith(".bias") else 1)):
        bad.append(f"convnext {name}: not a zero bias or a layer norm's weight 1")
print(f"convnext_tiny: {n} weights of std 0.02, {ls} layer scales 1e-6, biases 0")
if bad:
    print("\n".join(bad[:10]))
    sys.exit(1)
PYEOF
    ok "initialisation as torchvision's: $(cat "$TMP/init.out")"
else
    bad "initialisation"; tail -n 10 "$TMP/init.out"
fi

# Wrong variants, each against a dump that passed above
must_fail "channel shuffle in 4 groups in PyTorch" "$TMP/s.h5" --set shuffle_groups=4
must_fail "a block's halves joined as (branch2(x2), x1) in PyTorch" "$TMP/s.h5" --set shuffle_cat_swapped=1
must_fail "LayerNorm2d over each image's (C, H, W) in PyTorch" "$TMP/c.h5" --set ln2d_axes=1

# Weights both ways: torchvision's (1000 classes) into --init_from at 10 classes, then a
# checkpoint of a training step into torchvision's module.
weights_both_ways "$TMP/data" 32 shufflenet_v2_x0_5 convnext_tiny
finish
