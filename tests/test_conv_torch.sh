#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The CPU backend's grouped, depthwise and dilated convolutions with a bias (tests/test_conv
# --dump: oneDNN's kernels and depthwise.c's, as the backend selects them) against PyTorch's
# torch.nn.functional.conv2d(groups=, dilation=, bias=) on the same data: output, input, weight
# and bias gradients within 1e-5 of the largest value (tests/helpers/conv_torch.py). Then made
# to fail with one weight-gradient element of each convolution off by 1%.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "torch, numpy") || { echo "SKIP: no python3 with torch and numpy"; exit $SKIP; }
CMP="$top_srcdir/tests/helpers/conv_torch.py"

"$top_builddir/tests/test_conv" --dump "$TMP/conv.bin" >"$TMP/dump.out" 2>&1 || { bad "test_conv --dump"; cat "$TMP/dump.out"; }
if "$PY" "$CMP" "$TMP/conv.bin" >"$TMP/cmp.out" 2>&1; then
    ok "$(tail -n 1 "$TMP/cmp.out")"
else
    bad "against torch.nn.functional.conv2d:"; cat "$TMP/cmp.out"
fi
if "$PY" "$CMP" "$TMP/conv.bin" --perturb >"$TMP/bad.out" 2>&1; then
    bad "a weight gradient off by 1% passed: $(tail -n 1 "$TMP/bad.out")"
else
    ok "a weight gradient off by 1% is caught: $(tail -n 1 "$TMP/bad.out")"
fi
finish
