#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# --use_amp on the CPU stores in 16 bits a bf16 convolution's output that batch norms alone
# read (oneDNN rounds it to bf16 already; each batch norm widens it back exactly), and a batch
# norm's output that bf16 convolutions alone read (rounded as they round their input, which is
# all they read; the batch norm's backward recomputes the float32 output for its ReLU's mask):
# model.c's choose_bf16_storage. So nothing the network computes may change. Checked against
# the float32 storage of the same outputs (tests/helpers/dump_model --bf16_storage 0, the
# backend without conv2d_bf16_io): the ReLUs' masks, the logits, loss, every gradient, the
# running statistics and the weights after 3 SGD steps must be the same bits, on MiniResNet,
# ResNet-18 and DenseNet-121 (whose convolutions a concatenation reads too, and whose batch
# norms' outputs convolutions alone). Which outputs are stored is counted independently from
# --print_model's node table (below) and must match the model's count; a dump with another seed
# must differ, so that the comparison can fail. Then a --use_amp run's log names the count.
# Skipped (77) where oneDNN has no bf16 kernels on this CPU.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "h5py, numpy") || { echo "SKIP: no python3 with h5py and numpy"; exit $SKIP; }
DUMP="$top_builddir/tests/helpers/dump_model"

"$DUMP" "$TMP/probe.h5" --width 4 --blocks 1 --batch 2 --image_size 8 --amp 1 >/dev/null 2>"$TMP/probe.err"
rc=$?
if [ $rc -eq 77 ]; then echo "SKIP: $(cat "$TMP/probe.err")"; exit $SKIP; fi
[ $rc -eq 0 ] || { bad "dump_model --amp 1: rc $rc: $(cat "$TMP/probe.err")"; finish; }

# Every dataset of two dumps, byte for byte: "same N" or "differ N: names".
cat >"$TMP/same.py" <<'PYEOF'
import sys, h5py
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
def names(f):
    out = []
    f.visititems(lambda n, o: out.append(n) if isinstance(o, h5py.Dataset) else None)
    return sorted(out)
na, nb = names(a), names(b)
if na != nb:
    print("differ: the datasets are not the same: %s" % sorted(set(na) ^ set(nb))[:5]); sys.exit(1)
d = [n for n in na if a[n][()].tobytes() != b[n][()].tobytes()]
print(("differ %d of %d: %s" % (len(d), len(na), " ".join(d[:4]))) if d else "same %d datasets" % len(na))
sys.exit(1 if d else 0)
PYEOF
# The outputs stored in 16 bits, from the node table alone: a convolution's without bias that
# batch norms alone read as their input, and a batch norm group's (the bn, and the add taking it
# as input and the relu after that, or the relu or act after it, each the only reader of the
# one before, as model.c fuses them) that convolutions alone read as their input.
cat >"$TMP/count.py" <<'PYEOF'
import json, sys
nodes = json.load(sys.stdin)["nodes"]
def inputs(n):
    out = []
    for key in ("in", "residual", "scale"):
        v = n.get(key)
        out += v if isinstance(v, list) else [v] if v else []
    return out
def readers(name):
    return [n for n in nodes for i in inputs(n) if i == name]
def only_by(name, kind):
    r = readers(name)
    return bool(r) and all(n["kind"] == kind and n["in"] == name and inputs(n).count(name) == 1 for n in r)
def group_end(b):
    r = readers(b["name"])
    if len(r) != 1:
        return b
    j = r[0]
    if j["kind"] == "add" and j["in"] == b["name"] and j.get("residual") != b["name"]:
        k = readers(j["name"])
        return k[0] if len(k) == 1 and k[0]["kind"] == "relu" else j
    return j if j["kind"] in ("relu", "act") else b
count = 0
for n in nodes:
    if n["kind"] == "conv" and not n.get("bias") and only_by(n["name"], "bn"):
        count += 1
    if n["kind"] == "bn" and only_by(group_end(n)["name"], "conv"):
        count += 1
print(count)
PYEOF

check() {   # $1 = label, $2 = --print_model flags, rest = dump_model flags
    label=$1; pm=$2; shift 2
    # shellcheck disable=SC2086
    want=$("$DDPTRAIN" $pm --print_model 2>/dev/null | "$PY" "$TMP/count.py") || { bad "$label: --print_model"; return; }
    "$DUMP" "$TMP/s1.h5" "$@" --amp 1 >"$TMP/s1.out" 2>&1 || { bad "$label: dump_model: $(tail -n 2 "$TMP/s1.out")"; return; }
    "$DUMP" "$TMP/s0.h5" "$@" --amp 1 --bf16_storage 0 >"$TMP/s0.out" 2>&1 || { bad "$label: dump_model --bf16_storage 0"; return; }
    got=$(sed -n 's/^bf16-stored outputs: \([0-9]*\) .*/\1/p' "$TMP/s1.out")
    f32=$(sed -n 's/.*float32 convolutions: \([0-9]*\).*/\1/p' "$TMP/s1.out")
    none=$(sed -n 's/^bf16-stored outputs: \([0-9]*\) .*/\1/p' "$TMP/s0.out")
    # a convolution oneDNN leaves float32 (no bf16 kernel for its shape) keeps a float32 output
    if [ -n "$got" ] && [ "$got" -gt 0 ] && [ "$none" = 0 ] && { [ "$got" = "$want" ] || { [ "${f32:-0}" -gt 0 ] && [ "$got" -le "$want" ]; }; }; then
        ok "$label: $got outputs stored in bf16, as the node table has them ($want; $f32 float32 convolutions)"
    else
        bad "$label: $got outputs stored in bf16 ($none with --bf16_storage 0), the node table has $want: $(cat "$TMP/s1.out")"
    fi
    if "$PY" "$TMP/same.py" "$TMP/s1.h5" "$TMP/s0.h5" >"$TMP/same.out" 2>&1; then
        ok "$label: the 16-bit storage changes nothing: $(cat "$TMP/same.out")"
    else
        bad "$label: 16-bit and float32 storage $(cat "$TMP/same.out")"
    fi
}
check "MiniResNet width 8, batch 8, 16x16" "--width 8 --blocks 1" --width 8 --blocks 1 --batch 8 --image_size 16 --seed 3
"$DUMP" "$TMP/seed4.h5" --width 8 --blocks 1 --batch 8 --image_size 16 --seed 4 --amp 1 >/dev/null 2>&1
"$PY" "$TMP/same.py" "$TMP/s1.h5" "$TMP/seed4.h5" >"$TMP/seed.out" 2>&1 &&
    bad "another seed gives the same dump: the comparison cannot fail" ||
    ok "another seed's dump: $(cut -c1-100 "$TMP/seed.out")"
check "ResNet-18, batch 4, 64x64" "--model resnet18" --model resnet18 --batch 4 --image_size 64 --seed 3
check "DenseNet-121, batch 2, 32x32" "--model densenet121" --model densenet121 --batch 2 --image_size 32 --seed 3

# A run's log names the count, the node table's
"$DDPDATA" synth --out "$TMP/d" --size 16 --train 32 --test 16 >/dev/null 2>&1 || bad "synth"
want=$("$DDPTRAIN" --width 4 --print_model 2>/dev/null | "$PY" "$TMP/count.py")
"$DDPTRAIN" --data_dir "$TMP/d" --job_dir "$TMP/j" --image_size 16 --batch_size 8 --width 4 --epochs 1 --max_steps 1 --use_amp >"$TMP/run.out" 2>&1 ||
    { bad "--use_amp run failed"; tail -n 3 "$TMP/run.out"; }
grep -q -- "--use_amp: .* at batch 8.*; $want of their outputs stored in 16 bits ([0-9]* MiB less)" "$TMP/run.out" &&
    ok "the log: $(grep -o -- "$want of their outputs stored .*" "$TMP/run.out")" ||
    { bad "no log line with $want outputs stored in 16 bits"; grep -- "--use_amp" "$TMP/run.out"; }
finish
