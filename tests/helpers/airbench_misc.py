# SPDX-License-Identifier: BSD-3-Clause
"""Two of airbench94's pieces against PyTorch, for tests/test_airbench.sh.

    airbench_misc.py padcrop DIR [--pad_mode reflect|constant]
        every DIR/I.src image of DIR/index.txt ("S PAD OX OY FLIP", tests/helpers/crops_dump
        padcrop) padded by F.pad(mode=...), cropped at the offset, flipped when FLIP: DIR/I.out
        exactly, or exit 1
    airbench_misc.py triangle FILE --lr LR --total T [--peak 0.23] [--end 0.07]
        FILE (schedule_dump's "EPOCH LR" lines) against torch's LambdaLR with airbench's get_lr
        (utils.py: from 0.2 up to 1 over int(T x peak) steps, then down to `end` at T), to 1e-12
        relative, or exit 1"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F


def padcrop(a):
    with open(os.path.join(a.dir, "index.txt")) as f:
        cases = [list(map(int, line.split())) for line in f if line.strip()]
    bad = 0
    for i, (S, pad, ox, oy, flip) in enumerate(cases):
        src = np.fromfile(os.path.join(a.dir, "%d.src" % i), np.uint8).reshape(S, S, 3)
        got = np.fromfile(os.path.join(a.dir, "%d.out" % i), np.float32).reshape(S, S, 3)
        x = torch.from_numpy(src.astype(np.float32)).permute(2, 0, 1)[None]
        p = F.pad(x, (pad,) * 4, mode=a.pad_mode)
        c = p[:, :, pad + oy:pad + oy + S, pad + ox:pad + ox + S]
        if flip:
            c = c.flip(-1)
        want = c[0].permute(1, 2, 0).numpy()
        if not np.array_equal(got, want):
            bad += 1
    print("padcrop: %d of %d views differ from F.pad(mode=%r) + crop + flip" % (bad, len(cases), a.pad_mode))
    return 1 if bad else 0


def triangle(a):
    got = [float(line.split()[1]) for line in open(a.file) if line.strip()]
    total = a.total
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=a.lr)

    def get_lr(step):   # airbench's utils.py, with its lr_peak and lr_end
        warmup_steps = int(total * a.peak)
        warmdown_steps = total - warmup_steps
        if step < warmup_steps:
            frac = step / warmup_steps
            return 0.2 * (1 - frac) + 1.0 * frac
        frac = (step - warmup_steps) / warmdown_steps
        return 1.0 * (1 - frac) + a.end * frac
    sched = torch.optim.lr_scheduler.LambdaLR(opt, get_lr)
    want = []
    for _ in range(total):
        want.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    if len(got) != len(want):
        print("triangle: %d steps, LambdaLR %d" % (len(got), len(want)))
        return 1
    worst = max(abs(g - w) / w for g, w in zip(got, want))
    print("triangle: %d steps, the worst relative difference %.3g" % (total, worst))
    return 0 if worst <= 1e-12 else 1


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("padcrop")
    p.add_argument("dir")
    p.add_argument("--pad_mode", default="reflect")
    t = sub.add_parser("triangle")
    t.add_argument("file")
    t.add_argument("--lr", type=float, required=True)
    t.add_argument("--total", type=int, required=True)
    t.add_argument("--peak", type=float, default=0.23)
    t.add_argument("--end", type=float, default=0.07)
    a = ap.parse_args()
    return padcrop(a) if a.cmd == "padcrop" else triangle(a)


if __name__ == "__main__":
    sys.exit(main())
