#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The activation functions of an "act" node (src/ops/act_cpu.c) against PyTorch 1.13's on the
# same values, forward and autograd backward (tests/helpers/act_dump.c computes ours,
# tests/helpers/act_torch.py PyTorch's and compares; it says which values and which measure):
#   - under ATEN_CPU_CAPABILITY=default, where PyTorch's float32 kernels are plain C++ over the
#     same libm, the same numbers from our scalar path (ONEDNN_MAX_CPU_ISA=SSE41: libm's expf;
#     the AVX2 and AVX-512 paths compute silu's and sigmoid's exp with act_value.h's exp_v,
#     within an ulp of it, as PyTorch's vectorised kernels do with SLEEF's);
#   - under PyTorch's vectorised kernels, within a few units of float32's epsilon, from our
#     widest path and from the AVX2 one;
#   - hardsigmoid with a slope of 1/5 instead of 1/6 must fail the check.
# Skips (77) without python3 with torch and numpy.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "torch, numpy") || { echo "SKIP: no python3 with torch and numpy"; exit $SKIP; }
DUMP="$top_builddir/tests/helpers/act_dump"
CMP="$top_srcdir/tests/helpers/act_torch.py"

check() {   # $1 = label, rest = act_torch.py flags
    label=$1; shift
    if "$PY" "$CMP" "$DUMP" "$@" >"$TMP/c.out" 2>&1; then ok "$label: $(tail -1 "$TMP/c.out")"
    else bad "$label"; fi
    cat "$TMP/c.out"
}
ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41 check "PyTorch's plain kernels, the same numbers" --exact
check "PyTorch's vectorised kernels, within a few units"
ONEDNN_MAX_CPU_ISA=AVX2 check "PyTorch's vectorised kernels, within a few units, our AVX2 path"

if "$PY" "$CMP" "$DUMP" --wrong hardsigmoid_fifth >"$TMP/w.out" 2>&1; then
    bad "hardsigmoid against a slope of 1/5 went unnoticed"; cat "$TMP/w.out"
elif grep -q "disagreement" "$TMP/w.out"; then
    ok "hardsigmoid against a slope of 1/5 detected: $(grep FAIL "$TMP/w.out" | head -1 | cut -c1-160)"
else
    bad "hardsigmoid against a slope of 1/5: the check failed otherwise"; cat "$TMP/w.out"
fi
finish
