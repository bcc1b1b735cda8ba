#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# --use_amp on the CPU (bfloat16 convolutions and linear layers through oneDNN, float32 master
# weights), in two parts.
# 1. Each convolution alone, tight (tests/test_conv --dump-bf16, tests/helpers/conv_bf16_torch.py):
#    dense, strided 1x1, grouped, depthwise and dilated shapes against ddptrain's rounding points
#    computed in float64 from the same data (y = bf16(conv(bf16(x), bf16(w))) + b, dx rounded,
#    dw float32 not rounded). The bound is derived, not measured: products of bf16 values are
#    exact in float32, so before the output rounding the two sides differ only by float32
#    summation, |sum - v| <= gamma_K A (K terms, u = 2^-24, A the sum of |terms|, any order),
#    doubled; every output must lie in [bf16(v - e), bf16(v + e)]: equal, or one bf16 step
#    (about 2^-8 of the value) away where a rounding boundary lies within e of v. No element
#    may fall outside. The same dump held to float32 PyTorch, to torch.autocast's rounding
#    points (its weight gradient rounded to bf16: ddptrain keeps it float32), to truncation
#    instead of round-to-nearest-even and to unrounded convolution outputs must put at least
#    10% of some tensor's elements outside (measured here: 74% to 99%, thousands of e beyond).
# 2. Whole networks (tests/helpers/dump_model --amp 1, tests/helpers/torch_compare.py): MiniResNet
#    and ResNet-18 on the same weights and batch: logits, loss, every gradient, running
#    statistics and the weights after 3 SGD steps, against PyTorch with bf16_replica_torch.py's
#    replica of ddptrain's rounding points (--set amp=2) and against torch.autocast("cpu",
#    bfloat16) (the dump's amp=1). These bounds are loose on purpose and are no test of the
#    rounding: through a network, every bf16 rounding turns a float32 round-off difference d of
#    its input into a one-step jump (2^-8 relative) with probability about d / step, and the
#    jumps feed the next roundings, so the two sides drift apart towards bf16's step with depth
#    whatever the rounding points (measured on an AVX-512 Xeon, emulated bf16, median / worst
#    rel err per tensor: MiniResNet replica 2.4e-4 / 8.9e-3, autocast 5.2e-4 / 1.3e-2, float32
#    PyTorch 1.1e-3 / 2.0e-2; ResNet-18 replica 4.2e-3 / 6.1e-2, autocast 5.8e-3 / 7.4e-2,
#    float32 8.4e-3 / 0.24). The bounds (per tensor max|d - t| / max|t|: 2^-4 MiniResNet, 2^-2
#    ResNet-18; the median over the tensors 2^-9 and 2^-6, 3.7x to 8x the replica's) catch a
#    wrong network, layer or gradient, as PyTorch with label smoothing 0.5 shows by failing them
#    (medians 3.0e-2 and 3.9e-2); the replica's figures and autocast's are printed with their
#    ratio to float32 PyTorch's, and autocast's are held to the same bounds. ddptrain keeps
#    batch norm, ReLU, residual sums and the weight gradients in float32 where PyTorch 1.13's
#    CPU autocast (found by running it) returns bf16 from batch norm, ReLU, adds and pools and
#    leaves bf16-valued weight gradients; its cross-entropy is float32. Grouped and depthwise
#    convolutions are checked in part 1; a MobileNetV3's network comparison is ill-conditioned
#    here (its batch-norm biases followed by another batch norm get gradients that cancel to
#    round-off: rel err above 1 on every side, 1e4 for float32 PyTorch).
# Also: the device line names the path, and a line at model build counts the convolutions in
# bf16 (as many as --print_model has) or names those that stay float32 (the default and the
# refusals: test_amp_cpu_refused.sh, on every CPU). Skipped (77) where oneDNN has no bf16
# kernels on this CPU.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "torch, h5py, numpy") || { echo "SKIP: no python3 with torch, h5py and numpy"; exit $SKIP; }
DUMP="$top_builddir/tests/helpers/dump_model"
CMP="$top_srcdir/tests/helpers/torch_compare.py"

"$DUMP" "$TMP/probe.h5" --width 4 --blocks 1 --batch 2 --image_size 8 --amp 1 >/dev/null 2>"$TMP/probe.err"
rc=$?
if [ $rc -eq 77 ]; then echo "SKIP: $(cat "$TMP/probe.err")"; exit $SKIP; fi
[ $rc -eq 0 ] || { bad "dump_model --amp 1: rc $rc: $(cat "$TMP/probe.err")"; finish; }

# 1. Each convolution alone against the rounding points, tight; the wrong ones must fail
CONV="$top_srcdir/tests/helpers/conv_bf16_torch.py"
"$top_builddir/tests/test_conv" --dump-bf16 "$TMP/c.bin" >"$TMP/c.out" 2>&1 || { bad "test_conv --dump-bf16"; cat "$TMP/c.out"; }
if "$PY" "$CONV" "$TMP/c.bin" >"$TMP/cr.out" 2>&1; then
    ok "$(tail -n 2 "$TMP/cr.out" | head -n 1)"; ok "$(tail -n 1 "$TMP/cr.out")"
else
    bad "convolutions against ddptrain's rounding points:"; cat "$TMP/cr.out"
fi
for spec in float32 autocast truncate conv_out_f32; do
    if "$PY" "$CONV" "$TMP/c.bin" --spec $spec --must_fail >"$TMP/cw.out" 2>&1; then
        ok "held to $(tail -n 2 "$TMP/cw.out" | head -n 1 | cut -c1-300)"
    else
        bad "held to $spec, the convolutions pass:"; tail -n 3 "$TMP/cw.out"
    fi
done

# 2. Whole networks, loose bounds (see above)
n=0
median_of() { sed -n 's/^median rel err over the [0-9]* tensors \([^,]*\),.*/\1/p' "$1"; }
net() {   # $1 = label, $2 = tol, $3 = median tol, rest = dump_model flags
    label=$1; tol=$2; med=$3; shift 3
    n=$((n + 1))
    "$DUMP" "$TMP/a$n.h5" "$@" --amp 1 >/dev/null || { bad "$label: dump_model $*"; return; }
    for side in replica autocast float32; do
        case $side in replica) set_=amp=2 ;; autocast) set_=amp=1 ;; float32) set_=amp=0 ;; esac
        "$PY" "$CMP" "$TMP/a$n.h5" --tol "$tol" --median_tol "$med" --set "$set_" >"$TMP/$side$n.out" 2>&1
        rc=$?
        case $side in replica) rc_replica=$rc ;; autocast) rc_autocast=$rc ;; esac
    done
    r=$(median_of "$TMP/replica$n.out"); a=$(median_of "$TMP/autocast$n.out"); f=$(median_of "$TMP/float32$n.out")
    ratios=$("$PY" -c "print('median rel err: replica %s, autocast %s, float32 PyTorch %s (float32 / replica %.1f, float32 / autocast %.1f)' % ('$r', '$a', '$f', float('$f') / float('$r'), float('$f') / float('$a')))" 2>/dev/null)
    if [ "$rc_replica" -eq 0 ]; then ok "$label, replica: $(grep -o 'worst .* rel err [^,]*' "$TMP/replica$n.out"); $ratios"
    else bad "$label against the replica"; cat "$TMP/replica$n.out"; fi
    if [ "$rc_autocast" -eq 0 ]; then ok "$label, autocast: $(grep -o 'worst .* rel err [^,]*' "$TMP/autocast$n.out")"
    else bad "$label against torch.autocast"; cat "$TMP/autocast$n.out"; fi
    if "$PY" "$CMP" "$TMP/a$n.h5" --tol "$tol" --median_tol "$med" --set amp=2 --set label_smoothing=0.5 >"$TMP/w$n.out" 2>&1; then
        bad "$label: the replica with label smoothing 0.5 passed too"; cat "$TMP/w$n.out"
    else
        ok "$label: the replica with label smoothing 0.5 fails: $(grep FAIL "$TMP/w$n.out" | head -1 | cut -c1-120)"
    fi
}
net "MiniResNet width 8, batch 8, 16x16" 0.0625 0.001953125 --width 8 --blocks 1 --batch 8 --image_size 16 --seed 3
net "ResNet-18, batch 4, 64x64" 0.25 0.015625 --model resnet18 --batch 4 --image_size 64 --seed 3

# The run: the device line names the path
"$DDPDATA" synth --out "$TMP/d" --size 16 --train 32 --test 16 >/dev/null 2>&1 || bad "synth"
"$DDPTRAIN" --data_dir "$TMP/d" --job_dir "$TMP/j" --image_size 16 --batch_size 8 --width 4 --epochs 1 --max_steps 1 --use_amp >"$TMP/run.out" 2>&1 ||
    { bad "--use_amp run failed"; cat "$TMP/run.out"; }
nconv=$("$DDPTRAIN" --width 4 --print_model 2>/dev/null | grep -c '"kind": "conv"')
if grep -q -- "--use_amp: all $nconv convolutions compute in bf16 at batch 8" "$TMP/run.out"; then
    ok "the log counts the $nconv convolutions of --print_model in bf16"
elif grep -q -- "--use_amp: [0-9]* of $nconv convolutions compute in bf16 at batch 8; [0-9]* stay float32, .*: [a-z]" "$TMP/run.out"; then
    ok "the log names the convolutions that stay float32: $(grep -o -- '--use_amp: .*' "$TMP/run.out")"
else
    bad "no log line counting the $nconv convolutions in bf16"; grep -- "--use_amp" "$TMP/run.out"
fi
grep -q "device: .*mixed precision bf16, float32 master weights: bf16 \(native\|emulated on avx512_core: slower than float32\)" \
    "$TMP/run.out" && ok "device line: $(grep -o 'bf16 \(native\|emulated\)[^(]*' "$TMP/run.out" | head -1)" ||
    { bad "device line names no bf16 path"; grep device: "$TMP/run.out"; }
finish
