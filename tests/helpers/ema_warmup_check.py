#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The EMA of a run with --ema_adjust and --lr_warmup_epochs against torchvision 0.14's
reference train.py: utils.ExponentialMovingAverage (torch.optim.swa_utils.AveragedModel with
use_buffers=True, ema = decay * ema + (1 - decay) * model) updated every --ema_every steps, its
n_averaged set back to 0 after every update of a warm-up epoch, so that the next update copies
the weights again.

    ema_warmup_check.py CKPT_DIR --decay D --every E --steps_per_epoch S --warmup_epochs W [--no_reset]

CKPT_DIR holds a checkpoint at every update (--save_every_steps E, enough --keep_checkpoints).
The model's tensors of each checkpoint are loaded into a module of the same names and the
average is rebuilt with AveragedModel itself; each checkpoint's /ema must equal it (1e-6
relative), and a checkpoint must hold no /ema exactly where the reference's n_averaged is 0.
--no_reset builds the reference without the restarts (a variant the run must not match).
Prints one line; exits 1 on a mismatch."""
import argparse
import glob
import os
import re
import sys

import h5py
import torch
from torch.optim.swa_utils import AveragedModel


class Holder(torch.nn.Module):
    """A module whose float tensors carry the checkpoint's names, as parameters and buffers."""

    def __init__(self, names, shapes):
        super().__init__()
        self.names = names
        for n, s in zip(names, shapes):
            self.register_buffer(n.replace(".", "__"), torch.zeros(s, dtype=torch.float64))

    def load(self, tensors):
        for n, t in zip(self.names, tensors):
            getattr(self, n.replace(".", "__")).copy_(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--decay", type=float, required=True)
    ap.add_argument("--every", type=int, required=True)
    ap.add_argument("--steps_per_epoch", type=int, required=True)
    ap.add_argument("--warmup_epochs", type=int, required=True)
    ap.add_argument("--no_reset", action="store_true")
    a = ap.parse_args()
    files = sorted(glob.glob(os.path.join(a.dir, "ckpt-*.h5")))
    steps = [int(re.search(r"ckpt-(\d+)\.h5$", f).group(1)) for f in files]
    if not files or steps != list(range(a.every, a.every * len(files) + 1, a.every)):
        print(f"ema_warmup_check: {a.dir}: wanted a checkpoint at every {a.every} steps, found steps {steps}")
        return 1
    with h5py.File(files[0], "r") as f:
        names = sorted(k for k in f["model"].keys() if f["model"][k].dtype.kind == "f")
        shapes = [f["model"][k].shape for k in names]
    model = Holder(names, shapes)
    decay = a.decay

    def ema_avg(avg, p, n):   # torchvision 0.14's ExponentialMovingAverage
        return decay * avg + (1 - decay) * p

    ema = AveragedModel(model, avg_fn=ema_avg, use_buffers=True)
    worst, copies, averaged = 0.0, 0, 0
    for f_, step in zip(files, steps):
        with h5py.File(f_, "r") as f:
            model.load([torch.from_numpy(f["model"][n][()]).double() for n in names])
            ema.update_parameters(model)
            epoch = (step - 1) // a.steps_per_epoch
            if epoch < a.warmup_epochs and not a.no_reset:
                ema.n_averaged.fill_(0)
            has = "ema" in f
            if has != (int(ema.n_averaged) > 0):
                print(f"ema_warmup_check: step {step}: the checkpoint {'holds' if has else 'lacks'} /ema where the "
                      f"reference's n_averaged is {int(ema.n_averaged)}")
                return 1
            if not has:
                continue
            copies += int(ema.n_averaged) == 1
            averaged += int(ema.n_averaged) > 1
            for n in names:
                got = torch.from_numpy(f["ema"][n][()]).double()
                want = getattr(ema.module, n.replace(".", "__"))
                err = (got - want).abs().max().item() / max(want.abs().max().item(), 1e-30)
                worst = max(worst, err)
    if worst > 1e-6 or copies + averaged == 0:
        print(f"ema_warmup_check: /ema off by {worst:.3g} relative (limit 1e-6) over {len(files)} checkpoints")
        return 1
    print(f"{len(files)} checkpoints: no /ema during the warm-up, then a copy ({copies}) and averages ({averaged}) "
          f"within {worst:.2g} of AveragedModel's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
