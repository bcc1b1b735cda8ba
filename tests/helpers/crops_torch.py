# SPDX-License-Identifier: BSD-3-Clause
"""Recomputes with torchvision what tests/helpers/crops_dump prints or writes (src/data/crops.c,
src/data/resample.c), for tests/test_crops_torch.sh. Exit 0 when everything agrees, 1 otherwise
(printing the first disagreements).

  crops_torch.py boxes FILE [--exact]
                              RandomResizedCrop.get_params replayed on the draws crops_dump took
                              (torch.empty(1).uniform_ and torch.randint patched to return them
                              in order): the same (top, left, h, w) for every case. --exact (run
                              with ATEN_CPU_CAPABILITY=default, where torch's float32 kernels are
                              plain C++) also wants the log ratio bounds and the exp of every log
                              ratio bit for bit, and torch's own uniform_ drawn as
                              u * (hi - lo) + lo in float32, as crops.c does. Without it torch's
                              vectorised kernels are used as they come: their exp (SLEEF's, within
                              1 ulp) and fused uniform_ are counted, and a box may differ only
                              where its exp did
  crops_torch.py sizes FILE   Resize(size)'s output size and CenterCrop(crop)'s offsets
  crops_torch.py pixels DIR [--against pil_box] [--tol T]
                              every window against torchvision.transforms.functional.resized_crop
                              on the PIL image (img.crop(box).resize(size, BILINEAR)), and
                              CenterCrop(V)(Resize(R)(img)); --against pil_box compares with
                              Pillow's Image.resize(size, BILINEAR, box=box) instead, which reads
                              past the box's edges: the check must tell the two apart"""
import argparse
import sys

import numpy as np
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image
from torchvision.transforms import InterpolationMode

RATIO = (3.0 / 4.0, 4.0 / 3.0)


class Replay:
    """Stands in for torch.empty and torch.randint inside get_params, handing out the recorded
    draws in order and noting what get_params asked for."""

    def __init__(self, floats, ints):
        self.floats, self.ints, self.asked = list(floats), list(ints), []

    def empty(self, *args, **kwargs):
        replay = self

        class Draw:
            def uniform_(self, lo, hi):
                v = replay.floats.pop(0)
                replay.asked.append(("uniform", float(lo), float(hi), v))
                return torch.tensor([v], dtype=torch.float32)
        return Draw()

    def randint(self, lo, hi, size):
        v = self.ints.pop(0)
        self.asked.append(("randint", lo, hi, v))
        return torch.tensor([v])


def f32(x):
    return float(np.float32(x))


def check_uniform_formula(bounds, n=2000):
    """torch's uniform_ on a float tensor against crops.c's u * (hi - lo) + lo in float32: the
    same generator state drawn over [0, 1) gives u, over [lo, hi) the value."""
    bad = 0
    for lo, hi in bounds:
        for k in range(n):
            torch.manual_seed(k)
            u = np.float32(torch.empty(1).uniform_(0.0, 1.0).item())
            torch.manual_seed(k)
            v = np.float32(torch.empty(1).uniform_(lo, hi).item())
            want = u * (np.float32(hi) - np.float32(lo)) + np.float32(lo)
            bad += int(v != want)
    return bad, n * len(bounds)


def boxes(path, exact):
    lines = open(path).read().split("\n")
    b = lines[0].split()
    assert b[0] == "bounds"
    c_bounds = (float.fromhex(b[1]), float.fromhex(b[2]))
    t_bounds = tuple(torch.log(torch.tensor(RATIO)).tolist())
    fails, notes = [], []
    if c_bounds != t_bounds:
        (fails if exact else notes).append("log ratio bounds %r, torch's %r" % (c_bounds, t_bounds))
    bad_u, n_u = check_uniform_formula([(0.08, 1.0), (0.35, 1.0), t_bounds])
    if bad_u and exact:
        fails.append("torch's uniform_ is not u * (hi - lo) + lo in float32 in %d of %d draws" % (bad_u, n_u))
    real_empty, real_randint = torch.empty, torch.randint
    cases = fallbacks = exps = exps_differ = explained = wrong = 0
    for line in lines[1:]:
        if not line:
            continue
        head, box = line.split(" = ")
        f = head.split()
        w, h, lo, hi, tries = int(f[1]), int(f[2]), float.fromhex(f[3]), float.fromhex(f[4]), int(f[5])
        drawn = min(tries, 10)
        floats, k = [], 6
        exp_differs = False
        for _ in range(drawn):
            s, lr, e = (float.fromhex(x) for x in f[k:k + 3])
            k += 3
            floats += [s, lr]
            exps += 1
            if torch.exp(torch.tensor([lr], dtype=torch.float32)).item() != e:
                exps_differ += 1
                exp_differs = True
        ints = [int(x) for x in f[k:]]
        r = Replay(floats, ints)
        img = Image.new("L", (w, h))
        torch.empty, torch.randint = r.empty, r.randint
        try:
            got = T.RandomResizedCrop.get_params(img, [lo, hi], list(RATIO))
        finally:
            torch.empty, torch.randint = real_empty, real_randint
        want = tuple(int(x) for x in box.split())
        cases += 1
        fallbacks += tries > 10
        problem = None
        if tuple(got) != want:
            problem = "torchvision (top, left, h, w) %r" % (tuple(got),)
        elif r.floats or r.ints:
            problem = "draws left over: %r %r" % (r.floats, r.ints)
        else:
            for a in r.asked:   # the bounds torch asked the draws in; a draw outside is no draw
                if a[0] == "uniform" and not f32(a[1]) <= a[3] <= f32(a[2]):
                    problem = "draw %r outside [%r, %r]" % (a[3], a[1], a[2])
                if a[0] == "randint" and not a[1] <= a[3] < a[2]:
                    problem = "offset %d outside [%d, %d)" % (a[3], a[1], a[2])
        if problem and exp_differs and not exact:
            explained += 1
        elif problem:
            wrong += 1
            fails.append("%s = %s: %s" % (head, box, problem) if len(fails) < 20 else None)
    if exact and exps_differ:
        fails.append("%d of %d exps differ from torch's" % (exps_differ, exps))
    if cases < 100 or fallbacks < 10:
        fails.append("only %d cases, %d centre fallbacks" % (cases, fallbacks))
    summary = "%d boxes identical (%d centre fallbacks), %d exps %s, %d uniform_ draws %s" % (
        cases - explained - wrong, fallbacks, exps,
        "bit for bit" if not exps_differ else "(%d differ by torch's vectorised exp, moving %d boxes)" % (exps_differ, explained),
        n_u, "as crops.c draws them" if not bad_u else "(%d rounded once, fused, by torch's kernel)" % bad_u)
    return fails, "; ".join([summary] + notes)


def sizes(path):
    fails, n_resize, n_pil, n_centre = [], 0, 0, 0
    for line in open(path):
        head, res = line.split(" = ")
        f = head.split()
        want = tuple(int(x) for x in res.split())
        if f[0] == "resize":
            w, h, size = int(f[1]), int(f[2]), int(f[3])
            nh, nw = F._compute_resized_output_size((h, w), [size])
            got = (nw, nh)
            n_resize += 1
            if got == want and nw * nh <= 1 << 20:   # the transform itself on a blank image
                got = T.Resize(size)(Image.new("L", (w, h))).size
                n_pil += 1
        else:
            w, h, crop = int(f[1]), int(f[2]), int(f[3])
            out = F.center_crop(torch.arange(h * w).reshape(1, h, w), [crop])
            got = (int(out[0, 0, 0]) // w, int(out[0, 0, 0]) % w, out.shape[1], out.shape[2])
            n_centre += 1
        if got != want:
            fails.append("%s: crops.c %r, torchvision %r" % (head, want, got))
    return fails, "%d Resize output sizes (%d resized PIL images), %d CenterCrop windows" % (n_resize, n_pil, n_centre)


def pixels(d, against, tol):
    fails, worst, n, values, differ = [], 0, 0, 0, 0
    for line in open(d + "/index.txt"):
        i, kind, w, h, bx, by, bw, bh, ow, oh, wx, wy, ww, wh, rsz, crop = (int(x) for x in line.split())
        src = np.fromfile("%s/%d.src" % (d, i), np.uint8).reshape(h, w, 3)
        out = np.fromfile("%s/%d.out" % (d, i), np.uint8).reshape(wh, ww, 3)
        img = Image.fromarray(src)
        if kind == 2:
            if against == "pil_box":
                continue
            ref = np.asarray(T.CenterCrop(crop)(T.Resize(rsz)(img)))
        else:
            if against == "pil_box":
                full = img.resize((ow, oh), Image.BILINEAR, box=(bx, by, bx + bw, by + bh))
            else:
                full = F.resized_crop(img, by, bx, bh, bw, [oh, ow], InterpolationMode.BILINEAR)
            ref = np.asarray(full)[wy:wy + wh, wx:wx + ww]
        n += 1
        if ref.shape != out.shape:
            fails.append("%s: shape %r, torchvision %r" % (line.strip(), out.shape, ref.shape))
            continue
        diff = np.abs(ref.astype(int) - out.astype(int))
        worst = max(worst, int(diff.max()))
        values += diff.size
        differ += int((diff != 0).sum())
        if diff.max() > tol:
            fails.append("%s: largest difference %d" % (line.strip(), diff.max()) if len(fails) < 20 else None)
    what = "Image.resize(box=)" if against == "pil_box" else "resized_crop / Resize + CenterCrop on PIL, BILINEAR"
    return fails, "%d windows, %d values against %s: largest difference %d, %d values differ" % (
        n, values, what, worst, differ)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["boxes", "sizes", "pixels"])
    ap.add_argument("path")
    ap.add_argument("--against", choices=["torchvision", "pil_box"], default="torchvision")
    ap.add_argument("--tol", type=int, default=1)
    ap.add_argument("--exact", action="store_true")
    a = ap.parse_args()
    if a.mode == "boxes":
        fails, summary = boxes(a.path, a.exact)
    elif a.mode == "sizes":
        fails, summary = sizes(a.path)
    else:
        fails, summary = pixels(a.path, a.against, a.tol)
    print(summary)
    for f in [f for f in fails if f][:20]:
        print("  " + f)
    if fails:
        print("%d disagreement(s)" % len(fails))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
