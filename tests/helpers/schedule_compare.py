# SPDX-License-Identifier: BSD-3-Clause
"""Compares per-step learning rates ("EPOCH LR" lines, from tests/helpers/schedule_dump or read
out of a run's metrics.jsonl) with torch's own schedulers built as torchvision 0.14's
references/classification/train.py builds them and stepped once per epoch: StepLR,
MultiStepLR, ExponentialLR, CosineAnnealingLR(T_max=epochs - warmup) or constant, behind
SequentialLR([LinearLR | ConstantLR, main], milestones=[warmup]) when --warmup > 0. Error
measure per step: |ddptrain - torch| / torch. Exit 0 when every step is within --tol and the
counts agree, 1 otherwise (printing the worst steps)."""
import argparse
import json
import sys

import warnings

import torch

# SequentialLR calls step(0) on the main scheduler, which torch warns about (the closed form is
# what SequentialLR means there)
warnings.filterwarnings("ignore", category=UserWarning, module="torch.optim.lr_scheduler")


def torch_epoch_lrs(a):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=a.lr, momentum=0.9)
    S = torch.optim.lr_scheduler
    if a.schedule == "step":
        main = S.StepLR(opt, step_size=a.step_size, gamma=a.gamma)
    elif a.schedule == "multistep":
        main = S.MultiStepLR(opt, milestones=[int(m) for m in a.milestones.split(",")], gamma=a.gamma)
    elif a.schedule == "exponential":
        main = S.ExponentialLR(opt, gamma=a.gamma)
    elif a.schedule == "cosine":
        t_max = a.epochs if a.tmax_all else a.epochs - a.warmup
        main = S.CosineAnnealingLR(opt, T_max=t_max, eta_min=a.min_lr)
    else:   # constant
        main = S.LambdaLR(opt, lambda e: 1.0)
    sched = main
    if a.warmup > 0:
        if a.method == "linear":
            w = S.LinearLR(opt, start_factor=a.decay, total_iters=a.warmup)
        else:
            w = S.ConstantLR(opt, factor=a.decay, total_iters=a.warmup)
        sched = S.SequentialLR(opt, schedulers=[w, main], milestones=[a.warmup])
    lrs = []
    for _ in range(a.epochs):
        lrs.append(opt.param_groups[0]["lr"])   # the lr of this epoch's steps
        opt.step()
        sched.step()
    return lrs


def read_got(path, steps_per_epoch):
    got = []
    if path.endswith(".jsonl"):
        with open(path) as f:
            recs = [json.loads(line) for line in f]
        recs = [r for r in recs if "loss" in r and "test_acc" not in r]
        return [((r["step"] - 1) // steps_per_epoch, r["lr"]) for r in recs]
    with open(path) as f:
        for line in f:
            e, lr = line.split()
            got.append((int(e), float(lr)))
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("got", help="schedule_dump's output, or a metrics.jsonl at --log_interval 1")
    ap.add_argument("--schedule", required=True, choices=["step", "multistep", "exponential", "cosine", "constant"])
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--epochs", type=int, required=True)
    ap.add_argument("--steps_per_epoch", type=int, required=True)
    ap.add_argument("--min_lr", type=float, default=0.0)
    ap.add_argument("--step_size", type=int, default=30)
    ap.add_argument("--gamma", type=float, default=0.1)
    ap.add_argument("--milestones", default="")
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--method", choices=["linear", "constant"], default="linear")
    ap.add_argument("--decay", type=float, default=0.01)
    ap.add_argument("--tmax_all", action="store_true", help="a wrong cosine, over all the epochs (the test's variant)")
    ap.add_argument("--tol", type=float, default=1e-12)
    a = ap.parse_args()
    per_epoch = torch_epoch_lrs(a)
    want = [lr for lr in per_epoch for _ in range(a.steps_per_epoch)]
    got = read_got(a.got, a.steps_per_epoch)
    if len(got) != len(want):
        print(f"FAIL: {len(got)} steps read, {len(want)} wanted")
        return 1
    errs = [(abs(g - w) / w, s) for s, ((_, g), w) in enumerate(zip(got, want))]
    worst = max(errs)
    print(f"compared the lr of {len(want)} steps ({a.epochs} epochs) with torch's {a.schedule}"
          f"{f' behind {a.warmup} epochs of {a.method} warm-up' if a.warmup else ''}: worst rel err "
          f"{worst[0]:.3e} at step {worst[1]}, tol {a.tol:g}")
    bad = [(e, s) for e, s in errs if not e <= a.tol]
    for e, s in sorted(bad, reverse=True)[:4]:
        print(f"  step {s}: ddptrain {got[s][1]:.17g}, torch {want[s]:.17g} (rel err {e:.3e})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
