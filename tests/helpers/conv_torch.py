# SPDX-License-Identifier: BSD-3-Clause
"""Compares the convolutions of a `tests/test_conv --dump FILE` with PyTorch's
torch.nn.functional.conv2d(x, w, b, stride, padding, dilation, groups) on the same data: the
output (bias included) and, through autograd from the same output gradient, the gradients of
the input, the weight and the bias. Error per tensor: max|ddptrain - torch| / max|torch|, in
float64 on PyTorch's side. --perturb scales the largest element of each of ddptrain's weight
gradients by 1.01 first, for a run that must fail. Exit 0 when every tensor is within --tol."""
import argparse
import sys

import numpy as np
import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--perturb", action="store_true")
    args = ap.parse_args()
    raw = open(args.dump, "rb").read()
    at, worst, failed, cases = 0, 0.0, 0, 0
    while at < len(raw):
        ci, co, k, s, p, g, d, n, h, w = np.frombuffer(raw, np.int32, 10, at).tolist()
        at += 40
        ho = (h + 2 * p - d * (k - 1) - 1) // s + 1
        wo = (w + 2 * p - d * (k - 1) - 1) // s + 1
        shapes = {"x": (n, h, w, ci), "w": (co, ci // g, k, k), "b": (co,), "dy": (n, ho, wo, co),
                  "y": (n, ho, wo, co), "dx": (n, h, w, ci), "dw": (co, ci // g, k, k), "db": (co,)}
        t = {}
        for name, shape in shapes.items():
            cnt = int(np.prod(shape))
            t[name] = np.frombuffer(raw, np.float32, cnt, at).reshape(shape).astype(np.float64)
            at += 4 * cnt
        x = torch.tensor(t["x"]).permute(0, 3, 1, 2).requires_grad_()
        wt = torch.tensor(t["w"]).requires_grad_()
        b = torch.tensor(t["b"]).requires_grad_()
        y = torch.nn.functional.conv2d(x, wt, b, stride=s, padding=p, dilation=d, groups=g)
        y.backward(torch.tensor(t["dy"]).permute(0, 3, 1, 2))
        want = {"y": y.detach().permute(0, 2, 3, 1), "dx": x.grad.permute(0, 2, 3, 1), "dw": wt.grad, "db": b.grad}
        if args.perturb:
            dw = t["dw"].copy()
            j = np.unravel_index(np.argmax(np.abs(want["dw"].numpy())), dw.shape)
            dw[j] *= 1.01
            t["dw"] = dw
        errs = []
        for name, ref in want.items():
            ref = ref.numpy()
            err = np.max(np.abs(t[name] - ref)) / max(np.max(np.abs(ref)), 1e-30)
            errs.append("%s %.1e" % (name, err))
            worst = max(worst, err)
            if not err <= args.tol:
                failed += 1
        cases += 1
        print("%d->%d k%d s%d p%d groups %d dilation %d N%d %dx%d: %s" % (ci, co, k, s, p, g, d, n, h, w,
                                                                            ", ".join(errs)))
    print("compared %d convolutions with torch.nn.functional.conv2d: worst %.1e (tol %.0e), %d tensors over"
          % (cases, worst, args.tol, failed))
    return 1 if failed or not cases else 0


if __name__ == "__main__":
    sys.exit(main())
