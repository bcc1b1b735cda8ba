#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The activation functions of an "act" node (src/ops/act_cpu.c, run by tests/helpers/act_dump)
against PyTorch's: each function's forward and its autograd backward on the same values.

usage: act_torch.py ACT_DUMP [--exact] [--wrong hardsigmoid_fifth]

The values: the bounds of the piecewise functions exactly and a float either side of them
(-3, 0, 3, 6), +-0, large |x| (10 to 1e30), infinities, a NaN, a subnormal, and 200,000 random
ones, normal with standard deviation 4; the output gradients random, one of them a NaN.

The measure of a difference is in units of float32's epsilon (2^-23) times the size of what
the formula combines: |y| and |x| for the forward, |dx| and |dy| * (1 + |x|) for the backward.
A function that rounds as ours does is off by a few units there where PyTorch's exp, erf or
tanh (its vectorised ones: SLEEF's, ATen's own erf) differ from glibc's by an ulp, also where a
difference such as 1 + erf(x) or 1 - sigmoid(x) cancels most digits; a wrong formula is off by
millions. --exact (run under ATEN_CPU_CAPABILITY=default, where PyTorch's float kernels are
plain C++ over the same libm, and with oneDNN off, whose GELU PyTorch runs instead of its own
kernel) asks for the same numbers (+0 and -0 alike, NaN where NaN).
--wrong hardsigmoid_fifth compares our hardsigmoid with a slope of 1/5 instead of 1/6
(clamp(x / 5 + 1/2, 0, 1)): the check must fail.
"""
import struct
import subprocess
import sys
import tempfile
import os

import numpy as np
import torch
import torch.nn.functional as F

TOL_UNITS = 8.0     # vectorised PyTorch: at most this many units (see above)
EPS = float(np.finfo(np.float32).eps)


def values():
    f32 = np.float32
    edges = []
    for b in (-3.0, 0.0, 3.0, 6.0):
        v = f32(b)
        edges += [v, np.nextafter(v, f32(-np.inf)), np.nextafter(v, f32(np.inf))]
    edges += [-0.0, 0.5, -0.5, 1.0, -1.0, 2.5, -2.5]
    for m in (10.0, 15.0, 20.0, 40.0, 88.0, 89.0, 100.0, 1e4, 1e13, 1e20, 1e30):
        edges += [m, -m]
    edges += [np.inf, -np.inf, np.nan, 1e-40, -1e-40]
    rng = np.random.default_rng(1234)
    rand = (rng.standard_normal(200000) * 4.0).astype(np.float32)
    x = np.concatenate([np.array(edges, dtype=np.float32), rand])
    dy = rng.standard_normal(x.size).astype(np.float32)
    dy[7] = np.nan
    return x, dy


def torch_ref(fn, slope, x, dy, wrong, use_mkldnn):
    t = torch.from_numpy(x.copy()).requires_grad_(True)
    with torch.backends.mkldnn.flags(enabled=use_mkldnn):
        return run_ref(fn, slope, t, dy, wrong)


def run_ref(fn, slope, t, dy, wrong):
    if fn == "hardsigmoid" and wrong == "hardsigmoid_fifth":
        y = torch.clamp(t / 5.0 + 0.5, 0.0, 1.0)
    else:
        y = {
            "relu6": lambda: F.relu6(t),
            "hardswish": lambda: F.hardswish(t),
            "hardsigmoid": lambda: F.hardsigmoid(t),
            "silu": lambda: F.silu(t),
            "sigmoid": lambda: torch.sigmoid(t),
            "gelu": lambda: F.gelu(t),
            "gelu_tanh": lambda: F.gelu(t, approximate="tanh"),
            "tanh": lambda: torch.tanh(t),
            "leaky_relu": lambda: F.leaky_relu(t, slope),
        }[fn]()
    y.backward(torch.from_numpy(dy.copy()))
    return y.detach().numpy(), t.grad.numpy()


def compare(got, want, scale, x, exact):
    """(largest difference in units of EPS * scale, what disagrees): NaN and infinities must sit
    in the same places; --exact asks for equal numbers."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan_g, nan_w = np.isnan(g), np.isnan(w)
    fin = np.isfinite(g) & np.isfinite(w)
    with np.errstate(invalid="ignore"):
        diff = np.where(fin, np.abs(g - w), 0.0)
    units = np.where(diff == 0, 0.0, diff / (EPS * np.maximum(scale, np.finfo(np.float32).tiny)))
    bad = (nan_g != nan_w) | (~fin & ~nan_g & ~nan_w & (g != w))
    bad |= fin & ((diff != 0) if exact else (units > TOL_UNITS))
    worst = float(np.max(units)) if not bad.any() else float("inf")
    if not bad.any():
        return worst, ""
    idx = np.flatnonzero(bad)
    return worst, "%d values, e.g. %s" % (idx.size, "; ".join(
        "x=%r: ours %r, PyTorch's %r" % (float(x[i]), float(g[i]), float(w[i])) for i in idx[:3]))


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    dump = args.pop(0)
    exact = "--exact" in args
    wrong = args[args.index("--wrong") + 1] if "--wrong" in args else None
    x, dy = values()
    cases = [("relu6", 0.01), ("hardswish", 0.01), ("hardsigmoid", 0.01), ("silu", 0.01), ("sigmoid", 0.01),
             ("gelu", 0.01), ("gelu_tanh", 0.01), ("tanh", 0.01), ("leaky_relu", 0.01), ("leaky_relu", 0.2),
             ("leaky_relu", -1.5)]
    if wrong:
        cases = [c for c in cases if c[0] == wrong.split("_")[0]]
    failed = 0
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "in"), os.path.join(d, "out")
        np.concatenate([x, dy]).astype("=f4").tofile(src)
        for fn, slope in cases:
            subprocess.run([dump, fn, repr(slope), src, out], check=True)
            res = np.fromfile(out, dtype="=f4")
            y, dx = res[: x.size], res[x.size:]
            ty, tdx = torch_ref(fn, slope, x, dy, wrong, not exact)
            ax = np.abs(x.astype(np.float64))
            fs = np.maximum(np.abs(ty.astype(np.float64)), ax)
            bs = np.maximum(np.abs(tdx.astype(np.float64)), np.abs(dy.astype(np.float64)) * (1.0 + ax))
            for what, got, want, scale in (("forward", y, ty, fs), ("backward", dx, tdx, bs)):
                units, where = compare(got, want, scale, x, exact)
                ok = not where
                failed += not ok
                name = fn if fn != "leaky_relu" else "leaky_relu(%g)" % slope
                if exact:
                    print("%-4s %-18s %-8s %s" % ("ok" if ok else "FAIL", name, what,
                                                  "equal" if ok else "disagreement " + where))
                else:
                    print("%-4s %-18s %-8s %.2f units (tol %g) %s" % ("ok" if ok else "FAIL", name, what, units,
                                                                      TOL_UNITS, "" if ok else "disagreement " + where))
    print("%d of %d comparisons failed" % (failed, 2 * len(cases)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
