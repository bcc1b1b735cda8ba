# SPDX-License-Identifier: BSD-3-Clause
"""Compares the learning rate of every optimizer step of a ddptrain run (metrics.jsonl, written
with --log_interval 1) with torch.optim.lr_scheduler.OneCycleLR stepped once per optimizer step
(cycle_momentum=False) over --total_steps steps. Error measure per step: |ddptrain - torch| /
torch. Exit 0 when every step is within --tol and the run logged exactly total_steps steps
(or --steps), 1 otherwise (printing the worst steps)."""
import argparse
import json
import sys

import torch


def torch_lrs(args):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=args.lr, momentum=0.9)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=args.lr, total_steps=args.total_steps, pct_start=args.pct_start,
        anneal_strategy=args.anneal, div_factor=args.div_factor,
        final_div_factor=args.final_div_factor, cycle_momentum=False)
    lrs = []
    for _ in range(args.total_steps):
        lrs.append(opt.param_groups[0]["lr"])   # the lr this optimizer step uses
        opt.step()
        sched.step()
    return lrs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("metrics")
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--total_steps", type=int, required=True)
    ap.add_argument("--pct_start", type=float, default=0.3)
    ap.add_argument("--anneal", choices=["cos", "linear"], default="cos")
    ap.add_argument("--div_factor", type=float, default=25.0)
    ap.add_argument("--final_div_factor", type=float, default=1e4)
    ap.add_argument("--steps", type=int, help="compare the first STEPS steps only (default: all)")
    ap.add_argument("--tol", type=float, default=1e-6)
    args = ap.parse_args()
    got = {}
    with open(args.metrics) as f:
        for line in f:
            rec = json.loads(line)
            if "loss" in rec and "test_acc" not in rec:   # a training step's line
                got[rec["step"]] = rec["lr"]
    want = torch_lrs(args)[:args.steps]
    if sorted(got) != list(range(1, len(want) + 1)):
        print(f"FAIL: ddptrain logged steps {min(got, default=None)}..{max(got, default=None)} ({len(got)}), "
              f"{len(want)} wanted")
        return 1
    errs = [(abs(got[s + 1] - w) / w, s) for s, w in enumerate(want)]
    worst = max(errs)
    print(f"compared the lr of {len(want)} steps with OneCycleLR(max_lr={args.lr:g}, total_steps={args.total_steps}, pct_start={args.pct_start:g}, "
          f"anneal_strategy='{args.anneal}', div_factor={args.div_factor:g}, final_div_factor={args.final_div_factor:g}): "
          f"worst rel err {worst[0]:.3e} at step {worst[1]}, tol {args.tol:g}")
    bad = [(e, s) for e, s in errs if not e <= args.tol]
    if bad:
        for e, s in sorted(bad, reverse=True)[:4]:
            print(f"  step {s}: ddptrain {got[s + 1]:.9g}, PyTorch {want[s]:.9g} (rel err {e:.3e})")
        print(f"FAIL: {len(bad)} of {len(want)} steps exceed tol {args.tol:g}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
