#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""One training step of airbench94 in ddptrain against its PyTorch definition, on one batch.

    airbench_check.py --airbench CHECKOUT | --reference FILE.py  [--ddptrain BIN] [--ddpdata BIN]
                      [--network FILE] [--batch N] [--work DIR] [--set NAME=VALUE ...]

--airbench: a checkout of KellerJordan/cifar10-airbench; its airbench/lib_airbench94.py's
make_net94 (on the CPU in float32: its .half() and .cuda() are made no-ops while it builds),
utils.py's init_whitening_conv and LookaheadState are used as they are, and the optimizer as
airbench's train() sets it up (its param groups and lr / weight decay formulas, transcribed).
--reference: a Python file with make_net94(), init_whitening_conv(layer, images, eps) and
LookaheadState of the same meaning (tests/helpers/airbench_torch.py, the suite's own).

On a synthetic batch of N images (ddptrain-data synth), both sides start from the same weights
(PyTorch's, whitened by PyTorch, written for ddptrain --init_from) and take one step of SGD
(Nesterov, momentum 0.85, label smoothing 0.2, the batch-norm biases at 64 x the learning rate
with 1/64 of the weight decay): the loss, every gradient (from ddptrain's momentum buffer, which
is d = g + weight_decay * p after the first step), the weights and batch-norm running statistics
after the step are compared, then Lookahead's pull (decay 0.95) and its final copy. The whitening
ddptrain computes itself from the same images is compared with the reference's, each filter up
to its sign, and with numpy's eigh in float64. --negatives repeats PyTorch's side with another
Lookahead decay, label smoothing and whitening eps, each of which must be caught. Prints one line
per measure and exits 1 when one is out of tolerance (or a negative is not caught)."""
import argparse
import glob
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import types

import h5py
import numpy as np
import torch
import torch.nn.functional as F

TOL = 1e-4   # relative, by the norm of the difference over the norm of the reference


def load_reference(args):
    if args.airbench:
        pkg = types.ModuleType("airbench")   # its __init__ imports every variant: not needed
        pkg.__path__ = [os.path.join(args.airbench, "airbench")]
        sys.modules["airbench"] = pkg
        lib = importlib.import_module("airbench.lib_airbench94")
        utils = importlib.import_module("airbench.utils")
        half, cuda = torch.nn.Module.half, torch.nn.Module.cuda

        def make_net():
            torch.nn.Module.half = lambda self: self
            torch.nn.Module.cuda = lambda self, *a, **k: self
            try:
                return lib.make_net94().float()
            finally:
                torch.nn.Module.half, torch.nn.Module.cuda = half, cuda
        return make_net, utils.init_whitening_conv, utils.LookaheadState, lib.hyp
    spec = importlib.util.spec_from_file_location("reference", args.reference)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.make_net94, mod.init_whitening_conv, mod.LookaheadState, mod.hyp


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit("FAIL: %s\n%s" % (" ".join(cmd), p.stdout[-3000:]))
    return p.stdout


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    d = np.linalg.norm(a - b)
    n = np.linalg.norm(b)
    return d / n if n > 0 else d


def numpy_whitening(x, eps):
    """airbench's whitening of 2x2 patches (x: N, 3, H, W), in float64 with numpy."""
    a = x.numpy().astype(np.float64)
    n, c, h, w = a.shape
    cols = [a[:, :, i:h - 1 + i, j:w - 1 + j] for i in range(2) for j in range(2)]   # (i, j) row-major
    p = np.stack(cols, axis=2).transpose(0, 3, 4, 1, 2).reshape(-1, c * 4)           # [c][i][j]
    lam, vec = np.linalg.eigh(p.T @ p / p.shape[0])
    lam, vec = lam[::-1], vec[:, ::-1]
    return (vec / np.sqrt(lam + eps)).T


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--airbench")
    g.add_argument("--reference")
    ap.add_argument("--ddptrain", default="./ddptrain")
    ap.add_argument("--ddpdata", default="./ddptrain-data")
    ap.add_argument("--network", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "networks",
                                                      "airbench94.json"))
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--jitter", type=float, default=0.1, help="noise on the 3x3 convolutions' initial weights, "
                    "times their standard deviation (ties of the max pools; 0: airbench's initialisation as it is)")
    ap.add_argument("--work")
    ap.add_argument("--negatives", action="store_true", help="also PyTorch's side with another Lookahead decay, "
                    "label smoothing and whitening eps, each of which must be caught")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    make_net, init_whitening_conv, LookaheadState, hyp = load_reference(args)
    ref = {"lookahead_decay": 0.95, "whiten_eps": 5e-4, "label_smoothing": hyp["opt"]["label_smoothing"]}
    work = args.work or tempfile.mkdtemp(prefix="airbench_check.")
    N = args.batch
    data = os.path.join(work, "data")
    if not os.path.isdir(data):
        run([args.ddpdata, "synth", "--out", data, "--size", "32", "--train", str(N), "--test", "16",
             "--seed", str(args.seed)])
        # the synthetic shapes on flat backgrounds give the max pools exact ties, which the two
        # sides' rounding breaks differently: noise added to every pixel (the same file then
        # feeds both sides)
        rng = np.random.default_rng(args.seed)
        for f in sorted(glob.glob(os.path.join(data, "*.h5"))):
            with h5py.File(f, "r+") as h:
                im = h["images"][()].astype(np.int64) + rng.integers(-40, 41, size=h["images"].shape)
                h["images"][...] = np.clip(im, 0, 255).astype(np.uint8)
    imgs, labels = [], []
    for f in sorted(glob.glob(os.path.join(data, "train-*.h5"))):
        with h5py.File(f, "r") as h:
            imgs.append(h["images"][()])
            labels.append(h["labels"][()])
            mean, std = h.attrs["mean"].astype(np.float64), h.attrs["std"].astype(np.float64)
    imgs, labels = np.concatenate(imgs), np.concatenate(labels).astype(np.int64)
    # ddptrain's normalisation table: (v / 255 - mean) / std per channel
    x = torch.from_numpy(((imgs / 255.0 - mean) / std).astype(np.float32)).permute(0, 3, 1, 2).contiguous()
    y = torch.from_numpy(labels)

    # the reference: its network, whitened from these images; the weights both sides start from
    net = make_net()
    init_whitening_conv(net[0], x, eps=ref["whiten_eps"])
    # dirac-initialised convolutions pass flat regions through unchanged: the max pools then
    # see ties that the two sides' rounding breaks differently (each takes the first maximum of
    # what it computed). A little noise on the later convolutions' weights breaks the ties.
    with torch.no_grad():
        for k, p in net.named_parameters():
            if k.endswith("conv1.weight") or k.endswith("conv2.weight"):
                p.add_(torch.randn_like(p) * (args.jitter * p.std()))
    sd0 = {k: v.detach().clone() for k, v in net.state_dict().items()}
    w0 = os.path.join(work, "init.h5")
    with h5py.File(w0, "w") as h:
        for k, v in sd0.items():
            h.create_dataset("model/" + k, data=v.numpy())
    momentum, bias_scaler = hyp["opt"]["momentum"], hyp["opt"]["bias_scaler"]
    kilostep_scale = 1024 * (1 + 1 / (1 - momentum))
    lr = hyp["opt"]["lr"] / kilostep_scale
    wd = hyp["opt"]["weight_decay"] * N / kilostep_scale

    def torch_side(r):
        """airbench's train() for one step from sd0: its param groups, lr and weight decay at
        batch N, the summed loss; then Lookahead's pull and its final copy."""
        net = make_net()
        net.load_state_dict(sd0)
        lookahead = LookaheadState(net)
        lr_biases = lr * bias_scaler
        norm_biases = [p for k, p in net.named_parameters() if "norm" in k and p.requires_grad]
        other = [p for k, p in net.named_parameters() if "norm" not in k and p.requires_grad]
        opt = torch.optim.SGD([dict(params=norm_biases, lr=lr_biases, weight_decay=wd / lr_biases),
                               dict(params=other, lr=lr, weight_decay=wd / lr)], momentum=momentum, nesterov=True)
        net.train()
        loss = F.cross_entropy(net(x), y, label_smoothing=r["label_smoothing"], reduction="none").sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grads = {k: p.grad.detach().clone() / N for k, p in net.named_parameters() if p.grad is not None}
        opt.step()
        sd1 = {k: v.detach().clone() for k, v in net.state_dict().items()}
        lookahead.update(net, decay=r["lookahead_decay"])
        lookahead.update(net, decay=1.0)
        sd2 = {k: v.detach().clone() for k, v in net.state_dict().items()}
        white = make_net()
        init_whitening_conv(white[0], x, eps=r["whiten_eps"])
        return dict(loss=loss.item() / N, grads=grads, sd1=sd1, sd2=sd2,
                    w_ref=white[0].weight.detach().numpy().reshape(24, -1), w_np=numpy_whitening(x, r["whiten_eps"]),
                    params=[k for k, _ in net.named_parameters()])

    # ddptrain: the same step on the mean loss, so lr x N and weight decay / N
    dd_wd = (wd / lr) / N
    common = [args.ddptrain, "--model", args.network, "--data_dir", data, "--batch_size", str(N), "--epochs", "1",
              "--max_steps", "1", "--no-augment", "--no-shuffle", "--threads", str(args.threads), "--lr", repr(lr * N),
              "--lr_schedule", "constant", "--momentum", repr(momentum), "--nesterov", "--weight_decay", repr(dd_wd),
              "--bn_bias_lr_mult", repr(bias_scaler), "--bn_bias_wd_mult", repr(1 / bias_scaler), "--label_smoothing",
              repr(hyp["opt"]["label_smoothing"]), "--whiten_images", str(N), "--log_interval", "1", "--seed",
              str(args.seed), "--no-memory_check"]
    dd = {}
    for name, extra in (("whiten", []), ("step", ["--init_from", w0]),
                        ("lookahead", ["--init_from", w0, "--lookahead_every", "1", "--lookahead_decay", "0.95"])):
        job = os.path.join(work, "job-" + name)
        run(common + ["--job_dir", job] + extra)
        f = sorted(glob.glob(os.path.join(job, "checkpoints", "ckpt-*.h5")))[-1]
        with h5py.File(f, "r") as h:
            dd[name] = {k: h[k][()] for k in list("model/" + n for n in h["model"])
                        + list("optimizer/momentum/" + n for n in h["optimizer/momentum"])}
        if name == "step":
            with open(os.path.join(job, "metrics.jsonl")) as f:
                dd["loss"] = next(json.loads(l)["loss"] for l in f if '"loss"' in l)

    def compare(t):
        """(what, measure, tolerance) of every comparison of ddptrain's runs with torch_side's t"""
        out = [("loss (mean over the batch; |difference|)", abs(dd["loss"] - t["loss"]), 2e-6)]
        c = dd["step"]
        gmax = wmax = 0.0
        gname = wname = ""
        for k in t["params"]:
            if k in t["grads"]:
                decay = dd_wd / bias_scaler if "norm" in k else dd_wd
                r = rel(c["optimizer/momentum/" + k] - decay * sd0[k].numpy(), t["grads"][k].numpy())
                if r >= gmax:
                    gmax, gname = r, k
            r = rel(c["model/" + k], t["sd1"][k].numpy())
            if r >= wmax:
                wmax, wname = r, k
        out.append(("gradients (%d tensors, the worst: %s)" % (len(t["grads"]), gname), gmax, TOL))
        out.append(("weights after the step (%d tensors, the worst: %s)" % (len(t["params"]), wname), wmax, TOL))
        held = max(float(np.abs(c["model/" + k] - 1).max()) for k in t["params"] if k.endswith("norm1.weight")
                   or k.endswith("norm2.weight"))
        out.append(("batch norms' held weights (max |w - 1|)", held, 0.0))
        out.append(("running statistics after the step (the worst)",
                    max(rel(c["model/" + k], t["sd1"][k].numpy()) for k in t["sd1"] if "running" in k), TOL))
        c = dd["lookahead"]
        out.append(("Lookahead's pull (decay 0.95) and final copy (the worst)",
                    max(rel(c["model/" + k], t["sd2"][k].numpy()) for k in t["sd2"] if "num_batches" not in k), TOL))
        w_dd = dd["whiten"]["model/0.weight"].reshape(24, -1)
        d = w_dd.shape[0] // 2

        def worst(w):   # each filter up to its sign (its negative is the filter d further on)
            return max(min(rel(w_dd[i], w[i]), rel(w_dd[i], -w[i])) for i in range(d))
        # the reference's covariance and eigh run in float32: about 1e-2 off in the small
        # eigenvalues' directions; numpy's eigh in float64 on the same patches is the tight one
        out.append(("whitening vs the reference's (float32; the worst filter, up to sign)", worst(t["w_ref"]), 2e-2))
        out.append(("whitening vs numpy.linalg.eigh in float64 (the worst filter)", worst(t["w_np"]), 1e-5))
        out.append(("whitening: the second half is the first's negative", float(np.abs(w_dd[d:] + w_dd[:d]).max()),
                    0.0))
        return out

    fails = []
    for what, r, tol in compare(torch_side(ref)):
        print("%-66s %.3g%s" % (what, r, "" if r <= tol else "  > %g" % tol))
        if not r <= tol:
            fails.append(what)
    wrong = []
    if args.negatives:   # PyTorch's side changed: some comparison must then fail
        for k, v in (("lookahead_decay", 0.9), ("label_smoothing", 0.1), ("whiten_eps", 1e-3)):
            caught = [what for what, r, tol in compare(torch_side(dict(ref, **{k: v}))) if not r <= tol]
            print("PyTorch with %s %g: %s" % (k, v, "caught by " + "; ".join(caught) if caught else "NOT CAUGHT"))
            if not caught:
                wrong.append(k)
    if fails:
        print("FAIL: " + "; ".join(fails))
        return 1
    if wrong:
        print("FAIL: a changed %s on PyTorch's side was not caught" % ", ".join(wrong))
        return 1
    print("OK: ddptrain's step of %s matches %s" % (os.path.basename(args.network),
                                                   "airbench's" if args.airbench else args.reference))
    return 0


if __name__ == "__main__":
    sys.exit(main())
