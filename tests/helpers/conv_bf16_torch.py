# SPDX-License-Identifier: BSD-3-Clause
"""Checks the bf16 convolutions of a `tests/test_conv --dump-bf16 FILE` (conv2d_use_bf16 on)
against the rounding points of ddptrain's --use_amp (bf16_replica_torch.py), computed here in
float64 from the same float32 data: y = bf16(conv(bf16(x), bf16(w))) + b, dx =
bf16(conv_input(bf16(w), bf16(dy))), dw = conv_weight(bf16(x), bf16(dy)) not rounded, db = the
sum of dy (bf16 = round to nearest even).

The tolerance is derived, not measured. A product of two bf16 values (8-bit significands) is
exact in float32, so the only error before the output rounding is float32 summation: for K
terms, in any order or tree (oneDNN's blocking, AVX512-BF16's pairwise dot products, AMX
tiles), |sum_fl - v| <= gamma_K * A with gamma_K = K u / (1 - K u), u = 2^-24 and A the same
sum of absolute values (Higham, Accuracy and Stability of Numerical Algorithms, 4.2); e = 2
gamma_K A allows as much again for a kernel that rounds partial sums once more. Rounding is
monotone, so ddptrain's output must lie in [bf16(v - e), bf16(v + e)] (+ b, in float32, for y):
the two sides may differ only where a bf16 rounding boundary lies within e of v (a "flip", one
bf16 step, about 2^-8 of the value, rare), and elsewhere not at all. An unrounded output (dw,
db) must lie within e of v. K is C_in/groups*k*k for y, C_out/groups*k*k for dx, N*Ho*Wo for
dw and db. A convolution that the dump marks float32 (no bf16 kernel for its shape) is held to
the same with no rounding.

--spec names what the dump is held to: replica (the above; every element must pass) or, for
checks that must fail, float32 (PyTorch's float32 convolution: nothing rounded), autocast
(torch.autocast("cpu", bfloat16): the same but its weight gradient rounded to bf16, as the
gradient of the bf16 copy of the weight; checked here on PyTorch itself), truncate (rounding
toward zero instead of to nearest even), conv_out_f32 (inputs rounded, y and dx not). Prints
per tensor kind the elements outside their interval; exit 0 when none is (replica) or, with
--must_fail, when at least --min_frac of some tensor kind's elements are outside."""
import argparse
import sys

import numpy as np
import torch
import torch.nn.functional as F

U = 2.0 ** -24


def nearest(v):
    return v.float().to(torch.bfloat16).double()


def truncate(v):
    return (v.float().contiguous().view(torch.int32) & -65536).view(torch.float32).double()


def same(v):
    return v.float().double()


def conv_all(x, w, g, s, p, d, groups):
    """y = conv(x, w), dx = conv_input(w, g), dw = conv_weight(x, g), in float64."""
    x = x.clone().requires_grad_()
    w = w.clone().requires_grad_()
    y = F.conv2d(x, w, None, s, p, d, groups)
    y.backward(g)
    return y.detach(), x.grad, w.grad


def gamma(k):
    return 2.0 * k * U / (1.0 - k * U)


def autocast_rounds_dw():
    """torch.autocast("cpu", bfloat16)'s convolution: whether the weight gradient it leaves on
    the float32 weight is bf16-valued (it is the gradient of the weight's bf16 copy)."""
    torch.manual_seed(0)
    x = torch.randn(2, 8, 6, 6)
    w = torch.randn(8, 8, 3, 3, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = F.conv2d(x, w, None, 1, 1)
    y.backward(torch.randn(y.shape).to(y.dtype))
    return y.dtype == torch.bfloat16 and bool((w.grad == w.grad.to(torch.bfloat16).float()).all())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--spec", default="replica", choices=["replica", "float32", "autocast", "truncate", "conv_out_f32"])
    ap.add_argument("--must_fail", action="store_true")
    ap.add_argument("--min_frac", type=float, default=0.1)
    args = ap.parse_args()
    if args.spec == "autocast" and not autocast_rounds_dw():
        print("FAIL: torch.autocast's convolution does not round the weight gradient to bf16 here")
        return 1
    raw = open(args.dump, "rb").read()
    at, cases, n_bf16 = 0, 0, 0
    out = {k: [0, 0] for k in ("y", "dx", "dw", "db")}   # elements outside, elements
    worst = {k: 0.0 for k in out}   # the largest distance outside, in units of e
    flips = [0, 0]
    while at < len(raw):
        ci, co, k, s, p, g, d, n, h, w, bf = np.frombuffer(raw, np.int32, 11, at).tolist()
        at += 44
        ho = (h + 2 * p - d * (k - 1) - 1) // s + 1
        wo = (w + 2 * p - d * (k - 1) - 1) // s + 1
        shapes = {"x": (n, h, w, ci), "w": (co, ci // g, k, k), "b": (co,), "dy": (n, ho, wo, co),
                  "y": (n, ho, wo, co), "dx": (n, h, w, ci), "dw": (co, ci // g, k, k), "db": (co,)}
        t = {}
        for name, shape in shapes.items():
            cnt = int(np.prod(shape))
            t[name] = torch.from_numpy(np.frombuffer(raw, np.float32, cnt, at).reshape(shape).astype(np.float64))
            at += 4 * cnt
        x, dy = t["x"].permute(0, 3, 1, 2), t["dy"].permute(0, 3, 1, 2)
        spec = args.spec if bf else "float32"
        rin = {"float32": same, "truncate": truncate}.get(spec, nearest)
        rout = {"float32": same, "truncate": truncate, "conv_out_f32": same}.get(spec, nearest)
        rdw = nearest if spec == "autocast" else same
        xr, wr, gr = rin(x), rin(t["w"]), rin(dy)
        vy, vdx, vdw = conv_all(xr, wr, gr, s, p, d, g)
        ay, adx, adw = conv_all(xr.abs(), wr.abs(), gr.abs(), s, p, d, g)
        ey, edx, edw = gamma(ci // g * k * k) * ay, gamma(co // g * k * k) * adx, gamma(n * ho * wo) * adw
        b = t["b"].view(1, co, 1, 1).float()
        vdb = dy.sum((0, 2, 3))
        edb = gamma(n * ho * wo) * dy.abs().sum((0, 2, 3))
        # ddptrain's y = rounded conv + b in float32: monotone in the rounded conv
        ivals = {"y": ((rout(vy - ey).float() + b).double(), (rout(vy + ey).float() + b).double(), ey),
                 "dx": (rout(vdx - edx), rout(vdx + edx), edx),
                 "dw": (rdw(vdw - edw), rdw(vdw + edw), edw),
                 "db": (vdb - edb, vdb + edb, edb)}
        got = {"y": t["y"].permute(0, 3, 1, 2), "dx": t["dx"].permute(0, 3, 1, 2), "dw": t["dw"], "db": t["db"]}
        line = []
        # flips: rounded outputs one bf16 step from the rounding of the exact value
        flips[0] += int((got["y"] != (rout(vy).float() + b).double()).sum()) + int((got["dx"] != rout(vdx)).sum())
        flips[1] += got["y"].numel() + got["dx"].numel()
        for name, (lo, hi, e) in ivals.items():
            # float32 outputs: one float32 rounding of the endpoints' own
            lo, hi = lo - lo.abs() * U, hi + hi.abs() * U
            v = got[name]
            outside = (v < lo) | (v > hi)
            dist = torch.maximum(lo - v, v - hi).clamp(min=0) / e.clamp(min=1e-30)
            out[name][0] += int(outside.sum())
            out[name][1] += v.numel()
            worst[name] = max(worst[name], float(dist.max()))
            line.append(f"{name} {int(outside.sum())}/{v.numel()}")
        cases += 1
        n_bf16 += bool(bf)
        print(f"{ci}->{co} k{k} s{s} p{p} groups {g} dilation {d} N{n} {h}x{w}, {'bf16' if bf else 'float32'}: "
              f"outside: {', '.join(line)}")
    frac = {k: o / max(nn, 1) for k, (o, nn) in out.items()}
    print(f"{args.spec}: {cases} convolutions ({n_bf16} in bf16): elements outside the interval: "
          + ", ".join(f"{k} {o}/{nn} ({frac[k]:.1%}, worst {worst[k]:.3g} e beyond)" for k, (o, nn) in out.items()))
    print(f"{args.spec}: y and dx elements other than the rounding of the exact value: {flips[0]} of {flips[1]}")
    if not cases or not n_bf16:
        print("FAIL: no bf16 convolution in the dump")
        return 1
    if args.must_fail:
        return 0 if max(frac.values()) >= args.min_frac else 1
    return 0 if all(o == 0 for o, _ in out.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
