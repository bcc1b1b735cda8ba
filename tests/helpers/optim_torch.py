# SPDX-License-Identifier: BSD-3-Clause
"""ddptrain's optimizers against PyTorch's (tests/test_optim_torch.sh).

  optim_torch.py steps DUMP.h5 [--tol T] [--set KEY=VALUE ...]
      replays tests/helpers/optim_dump's file: the same parameters, gradients and learning
      rates through torch.optim.SGD, AdamW or RMSprop (torch 1.13, foreach=False), or through
      Lamb and Lars below (timm's update rules, transcribed), in PyTorch's parameter groups of
      --no_decay_1d and --bn_bias_lr_mult, after torch.nn.utils.clip_grad_norm_ when the dump
      clipped; every parameter after every step and every state tensor after the last must
      agree to T relative (max |a - b| / max |b| per tensor, default 1e-6), and the clipped
      norms too. Prints the worst error and how many values agree bit for bit. --set changes a
      setting on PyTorch's side only (a comparison that must then fail).
  optim_torch.py init OUT.h5 --width W --blocks B --classes K --seed S
      MiniResNet's initial state_dict (tests/helpers/miniresnet_torch.py) as /model/<name>,
      for ddptrain's --init_from.
  optim_torch.py train CKPT_DIR --init W.h5 --data DIR --batch N --steps S --lr LR
                 --optimizer NAME [--wd WD] [--momentum M] [--nesterov] [--beta1 B] [--beta2 B]
                 [--eps E] [--trust_coeff T] [--max_grad_norm G] [--no_decay_1d] [--clip MAX]
                 [--norm_wd W] [--metrics FILE] [--tol T] [--set KEY=VALUE ...]
      the training of a ddptrain run of 1 rank with --no-augment --no-shuffle, a constant
      learning rate, W.h5's weights (--init_from) and a checkpoint after every step in CKPT_DIR,
      on the one training shard of DIR in its order, normalised as ddptrain does: step k in
      PyTorch (MiniResNet, cross-entropy, clip_grad_norm_, the optimizer) from the state of
      ddptrain's checkpoint k - 1 (weights, batch-norm buffers and counters, the optimizer's
      state and step count), against ddptrain's checkpoint k: every parameter, buffer and
      optimizer state tensor, and with --metrics the step's grad_norm in metrics.jsonl. One
      step at a time, so that the float32 round-off of the two implementations' convolutions
      does not compound (a network this small can turn 1e-6 into percents within two steps).
Exit 0 when everything agrees, 1 otherwise."""
import argparse
import glob
import json
import math
import os
import sys

import h5py
import numpy as np
import torch
from torchvision.ops._utils import split_normalization_params

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from miniresnet_torch import MiniResNet  # noqa: E402

TENSOR_BN_BIAS = 2   # src/model/model.h's TensorRole


class Lamb(torch.optim.Optimizer):
    """timm.optim.Lamb's update as timm 1.0 defines it (bias_correction, grad_averaging,
    trust_clip, always_adapt, caution and decoupled_decay at their defaults), single-tensor form:
    the gradients divided by max(1, global norm / max_grad_norm); Adam's moments; the update
    (m / bc1) / (sqrt(v) / sqrt(bc2) + eps), plus weight_decay * p and scaled by the trust ratio
    |p| / |update| (1 where either norm is 0) only where the group's weight decay is not 0."""

    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01, max_grad_norm=1.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        self.max_grad_norm = max_grad_norm

    @torch.no_grad()
    def step(self):
        one = torch.tensor(1.0)
        clip = None
        if self.max_grad_norm:
            grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
            norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(x) for x in grads]))
            clip = (norm / self.max_grad_norm).clamp_(min=1.0)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            group["step"] = group.get("step", 0) + 1
            bc1, bc2 = 1 - beta1 ** group["step"], 1 - beta2 ** group["step"]
            for p in group["params"]:
                grad = p.grad if clip is None else p.grad / clip
                st = self.state[p]
                if not st:
                    st["exp_avg"], st["exp_avg_sq"] = torch.zeros_like(p), torch.zeros_like(p)
                m, v = st["exp_avg"], st["exp_avg_sq"]
                m.mul_(beta1).add_(grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                update = (m / bc1).div_((v.sqrt() / math.sqrt(bc2)).add_(group["eps"]))
                wd = group["weight_decay"]
                if wd != 0:
                    update.add_(p, alpha=wd)
                    w, u = p.norm(2.0), update.norm(2.0)
                    update.mul_(torch.where(w > 0, torch.where(u > 0, w / u, one), one))
                p.add_(update, alpha=-group["lr"])


class Lars(torch.optim.Optimizer):
    """timm.optim.Lars's update (dampening 0, trust_clip and always_adapt off): where the group's
    weight decay is not 0, the gradient plus weight_decay * p times the trust ratio
    trust_coeff |p| / (|g| + |p| weight_decay + eps) (1 where either norm is 0); then
    torch.optim.SGD's momentum (its buffer a copy of the first step's), Nesterov or not."""

    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0, nesterov=False, trust_coeff=0.001, eps=1e-8):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov,
                                      trust_coeff=trust_coeff, eps=eps))

    @torch.no_grad()
    def step(self):
        one = torch.tensor(1.0)
        for group in self.param_groups:
            wd, mom = group["weight_decay"], group["momentum"]
            for p in group["params"]:
                grad = p.grad.clone()
                if wd != 0:
                    w, g = p.norm(2.0), grad.norm(2.0)
                    ratio = group["trust_coeff"] * w / (g + w * wd + group["eps"])
                    ratio = torch.where(w > 0, torch.where(g > 0, ratio, one), one)
                    grad.add_(p, alpha=wd)
                    grad.mul_(ratio)
                if mom != 0:
                    st = self.state[p]
                    if "momentum_buffer" not in st:
                        buf = st["momentum_buffer"] = torch.clone(grad).detach()
                    else:
                        buf = st["momentum_buffer"]
                        buf.mul_(mom).add_(grad)
                    grad = grad.add(buf, alpha=mom) if group["nesterov"] else buf
                p.add_(grad, alpha=-group["lr"])


# ddptrain's checkpoint names of the state -> PyTorch's
TORCH_STATE = {"momentum": "momentum_buffer"}


def make_groups(named, decay_1d_off, mult, wd, bn_bias):
    """docs/recipes.md's parameter groups: decay, no decay (1-D with --no_decay_1d), and the
    batch-norm biases at mult x lr. Each group keeps its multiplier under "mult"."""
    decay = [p for n, p in named if n not in bn_bias and not (decay_1d_off and p.ndim == 1)]
    no_decay = [p for n, p in named if n not in bn_bias and decay_1d_off and p.ndim == 1]
    biases = [p for n, p in named if n in bn_bias]
    out = [{"params": decay, "weight_decay": wd, "mult": 1.0},
           {"params": no_decay, "weight_decay": 0.0, "mult": 1.0},
           {"params": biases, "weight_decay": 0.0 if decay_1d_off else wd, "mult": mult}]
    return [g for g in out if g["params"]]


def make_optimizer(kind, groups, s):
    if kind == "sgd":
        return torch.optim.SGD(groups, lr=1.0, momentum=s["momentum"], weight_decay=s["weight_decay"],
                               nesterov=bool(s["nesterov"]))
    if kind == "adamw":
        return torch.optim.AdamW(groups, lr=1.0, betas=(s["beta1"], s["beta2"]), eps=s["eps"],
                                 weight_decay=s["weight_decay"])
    if kind == "rmsprop":
        return torch.optim.RMSprop(groups, lr=1.0, alpha=s["beta2"], eps=s["eps"], weight_decay=s["weight_decay"],
                                   momentum=s["momentum"], centered=False)
    if kind == "lamb":
        return Lamb(groups, lr=1.0, betas=(s["beta1"], s["beta2"]), eps=s["eps"], weight_decay=s["weight_decay"],
                    max_grad_norm=s["max_grad_norm"] or None)
    if kind == "lars":
        return Lars(groups, lr=1.0, momentum=s["momentum"], weight_decay=s["weight_decay"],
                    nesterov=bool(s["nesterov"]), trust_coeff=s["trust_coeff"], eps=s["eps"])
    sys.exit(f"optim_torch.py: no optimizer {kind}")


def set_lr(opt, lr):
    for g in opt.param_groups:
        g["lr"] = lr * g["mult"]   # a Python float, as ddptrain's lr * lr_mult in double


def apply_sets(s, sets):
    for kv in sets:
        k, _, v = kv.partition("=")
        if k not in s:
            sys.exit(f"optim_torch.py: --set {kv}: no setting {k}")
        s[k] = type(s[k])(float(v)) if not isinstance(s[k], str) else v


class Report:
    """The worst relative error per kind of tensor and the values that agree bit for bit."""

    def __init__(self, tol):
        self.tol, self.fails, self.worst, self.same, self.total = tol, [], {}, 0, 0

    def compare(self, what, name, ours, ref):
        a = np.asarray(ours, np.float32).reshape(-1)
        b = ref.detach().numpy().astype(np.float32).reshape(-1)
        if a.shape != b.shape:
            self.fails.append(f"{what} {name}: {a.size} values here, {b.size} in PyTorch")
            return
        den = float(np.max(np.abs(b.astype(np.float64)))) if b.size else 0.0
        num = float(np.max(np.abs(a.astype(np.float64) - b))) if b.size else 0.0
        rel = num / den if den > 0 else num
        self.same += int(np.count_nonzero(a.view(np.uint32) == b.view(np.uint32)))
        self.total += a.size
        if what not in self.worst or not rel <= self.worst[what][0]:
            self.worst[what] = (rel, name)
        if not rel <= self.tol:
            self.fails.append(f"{what} {name}: relative error {rel:.3g} > {self.tol:g}")

    def finish(self, label):
        worst = ", ".join(f"{w} {r:.2g} ({n})" for w, (r, n) in sorted(self.worst.items()))
        if self.fails:
            for f in self.fails[:6]:
                print("FAIL:", f)
            print(f"FAIL: {label}: {len(self.fails)} comparisons above {self.tol:g}; worst: {worst}")
            return 1
        print(f"compared {label}: worst {worst}; {self.same} of {self.total} values bit for bit")
        return 0


def cmd_steps(args):
    with h5py.File(args.dump, "r") as f:
        names = [n.decode() if isinstance(n, bytes) else n for n in f["names"][()]]
        roles = list(f["roles"][()])
        a = dict(f.attrs)
        kind = a["optimizer"].decode() if isinstance(a["optimizer"], bytes) else str(a["optimizer"])
        s = {k: float(a[k]) for k in ("weight_decay", "momentum", "beta1", "beta2", "eps", "trust_coeff",
                                      "max_grad_norm", "clip", "bn_bias_lr_mult")}
        s["nesterov"] = int(a["nesterov"])
        s["no_decay_1d"] = int(a["no_decay_1d"])
        apply_sets(s, args.set)
        lrs = f["lr"][()]
        params = {n: torch.from_numpy(np.array(f["params0/" + n])).requires_grad_() for n in names}
        named = [(n, params[n]) for n in names]
        bn_bias = {n for n, r in zip(names, roles) if r == TENSOR_BN_BIAS}
        opt = make_optimizer(kind, make_groups(named, s["no_decay_1d"], s["bn_bias_lr_mult"], s["weight_decay"],
                                               bn_bias), s)
        rep = Report(args.tol)
        for k, lr in enumerate(lrs):
            for n in names:
                params[n].grad = torch.from_numpy(np.array(f[f"grads/{k}/{n}"]))
            if s["clip"] > 0:
                norm = torch.nn.utils.clip_grad_norm_([params[n] for n in names], s["clip"])
                rep.compare("clipped norm", f"step {k}", f["grad_norm"][k], norm)
            set_lr(opt, float(lr))
            opt.step()
            for n in names:
                rep.compare("parameters", f"{n} after step {k}", f[f"after/{k}/{n}"], params[n])
        for st in f["state"]:
            for n in names:
                ref = opt.state[params[n]].get(TORCH_STATE.get(st, st), torch.zeros_like(params[n]))
                rep.compare(st, n, f[f"state/{st}/{n}"], ref)
        return rep.finish(f"{kind}, {len(lrs)} steps of {len(names)} tensors")


def cmd_init(args):
    torch.manual_seed(args.seed)
    m = MiniResNet(args.width, args.blocks, args.classes)
    with h5py.File(args.out, "w") as f:
        for n, t in m.state_dict().items():
            f["model/" + n] = t.numpy()
    return 0


def load_state(opt, kind, model, f, k):
    """The optimizer state of ddptrain's checkpoint f after k steps into PyTorch's optimizer, in
    the form each keeps it (the step count where one is kept)."""
    params = dict(model.named_parameters())
    for g in opt.param_groups:
        if kind == "lamb":
            g["step"] = k
    if k == 0:
        return
    for n, p in params.items():
        st = opt.state[p]
        for name in f["optimizer"]:
            if isinstance(f["optimizer/" + name], h5py.Group):
                st[TORCH_STATE.get(name, name)] = torch.from_numpy(np.array(f[f"optimizer/{name}/{n}"]))
        if kind == "adamw":
            st["step"] = torch.tensor(float(k))
        elif kind == "rmsprop":
            st["step"] = k
            if opt.param_groups[0]["momentum"] == 0:
                del st["momentum_buffer"]


def cmd_train(args):
    torch.set_num_threads(1)
    s = {"weight_decay": args.wd, "momentum": args.momentum, "beta1": args.beta1, "beta2": args.beta2,
         "eps": args.eps, "trust_coeff": args.trust_coeff, "max_grad_norm": args.max_grad_norm, "clip": args.clip,
         "nesterov": int(args.nesterov), "no_decay_1d": int(args.no_decay_1d)}
    apply_sets(s, args.set)
    shards = sorted(glob.glob(os.path.join(args.data, "train-*-of-*.h5")))
    if len(shards) != 1:
        sys.exit(f"optim_torch.py: {args.data}: one training shard expected, found {len(shards)}")
    with h5py.File(shards[0], "r") as f:
        images, labels = np.array(f["images"]), np.array(f["labels"]).astype(np.int64)
        mean, std = np.asarray(f.attrs["mean"], np.float32), np.asarray(f.attrs["std"], np.float32)
    # ddptrain's lookup table: (v / 255 - mean) / std in float32 (dataloader.c)
    x_all = ((images.astype(np.float32) / np.float32(255.0)) - mean) / std
    logged = {}
    if args.metrics:
        with open(args.metrics) as fm:
            logged = {r["step"]: r["grad_norm"] for r in map(json.loads, fm) if "grad_norm" in r}
    rep = Report(args.tol)
    # Step k from ddptrain's state after step k - 1 (the --init_from weights before the first):
    # PyTorch's one step against ddptrain's, so that round-off does not compound over the steps.
    for k in range(1, args.steps + 1):
        before = args.init if k == 1 else os.path.join(args.ckpt_dir, "ckpt-%09d.h5" % (k - 1))
        with h5py.File(before, "r") as f:
            sd = {n: torch.from_numpy(np.array(f["model/" + n])) for n in f["model"]}
            width = sd["conv1.weight"].shape[0]
            blocks = sum(1 for n in sd if n.startswith("layer1.") and n.endswith(".conv1.weight"))
            model = MiniResNet(width, blocks, sd["fc.weight"].shape[0])
            model.load_state_dict(sd)
            model.train()
            bn_bias = {f"{n}.bias" for n, mod in model.named_modules() if isinstance(mod, torch.nn.BatchNorm2d)}
            if args.norm_wd is not None:   # torchvision's train.py: its own split, not ours
                norm, other = split_normalization_params(model)
                groups = [{"params": other, "weight_decay": s["weight_decay"], "mult": 1.0},
                          {"params": norm, "weight_decay": args.norm_wd, "mult": 1.0}]
            else:
                groups = make_groups(list(model.named_parameters()), s["no_decay_1d"], 1.0, s["weight_decay"], bn_bias)
            opt = make_optimizer(args.optimizer, groups, s)
            load_state(opt, args.optimizer, model, f, k - 1)
        b = slice((k - 1) * args.batch, k * args.batch)
        x = torch.from_numpy(np.ascontiguousarray(x_all[b])).permute(0, 3, 1, 2).contiguous()
        torch.nn.functional.cross_entropy(model(x), torch.from_numpy(labels[b])).backward()
        if s["clip"] > 0:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), s["clip"])
            if args.metrics:
                if k not in logged:
                    rep.fails.append(f"{args.metrics}: no grad_norm at step {k}")
                else:
                    rep.compare("grad_norm", f"step {k}", [logged[k]], norm.reshape(1))
        set_lr(opt, args.lr)
        opt.step()
        with h5py.File(os.path.join(args.ckpt_dir, "ckpt-%09d.h5" % k), "r") as f:
            for n, t in model.state_dict().items():
                if not n.endswith("num_batches_tracked"):
                    rep.compare("model", f"{n} at step {k}", f["model/" + n], t)
            for n, p in model.named_parameters():
                for st in f["optimizer"]:
                    if isinstance(f["optimizer/" + st], h5py.Group):
                        ref = opt.state[p].get(TORCH_STATE.get(st, st), torch.zeros_like(p))
                        rep.compare(st, f"{n} at step {k}", f[f"optimizer/{st}/{n}"], ref)
    return rep.finish(f"{args.optimizer}, {args.steps} training steps")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("steps")
    a.add_argument("dump")
    a.add_argument("--tol", type=float, default=1e-6)
    a.add_argument("--set", action="append", default=[])
    a = sub.add_parser("init")
    a.add_argument("out")
    for k, d in (("--width", 4), ("--blocks", 1), ("--classes", 10), ("--seed", 1)):
        a.add_argument(k, type=int, default=d)
    a = sub.add_parser("train")
    a.add_argument("ckpt_dir")
    a.add_argument("--init", required=True)
    a.add_argument("--data", required=True)
    a.add_argument("--batch", type=int, required=True)
    a.add_argument("--steps", type=int, required=True)
    a.add_argument("--lr", type=float, required=True)
    a.add_argument("--optimizer", required=True)
    for k, d in (("--wd", 1e-4), ("--momentum", 0.9), ("--beta1", 0.9), ("--beta2", 0.999), ("--eps", 1e-8),
                 ("--trust_coeff", 0.001), ("--max_grad_norm", 1.0), ("--clip", 0.0), ("--tol", 1e-4)):
        a.add_argument(k, type=float, default=d)
    a.add_argument("--nesterov", action="store_true")
    a.add_argument("--no_decay_1d", action="store_true")
    a.add_argument("--norm_wd", type=float, help="the norms' weight decay, torchvision's --norm-weight-decay: "
                   "the groups of torchvision.ops._utils.split_normalization_params")
    a.add_argument("--metrics")
    a.add_argument("--set", action="append", default=[])
    args = ap.parse_args()
    return {"steps": cmd_steps, "init": cmd_init, "train": cmd_train}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
