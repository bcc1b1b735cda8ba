#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A ddptrain recipe (a --config JSON file such as recipes/cifar10-fast.json) trained in PyTorch on
the same HDF5 shards, printing the test accuracy after every epoch: for measuring ddptrain
against PyTorch on real data (e.g. CIFAR-10 made by ddptrain-data).

usage: torch_recipe.py RECIPE.json --data DIR [--ranks R] [--set NAME=VALUE ...]
                       [--epochs E] [--threads T] [--device cpu|cuda] [--seed S]

One process, no DDP: each optimizer step takes the global batch of R ranks (batch_size x
grad_accum_steps x R images, one forward), so batch norm sees the global batch, as ddptrain
does with --sync_bn (without it each ddptrain rank normalises over its own batch). The recipe's
options map onto PyTorch as docs/recipes.md says: the optimizer (torch.optim's SGD, AdamW and
RMSprop; LAMB and LARS as tests/helpers/optim_torch.py writes timm's rules) with the param groups
of no_decay_1d and bn_bias_lr_mult, clip_grad_norm_, CrossEntropyLoss(label_smoothing), the lr
scaled by lr_ref_batch, the schedule (cosine per epoch as CosineAnnealingLR(T_max=epochs less
the warm-up), cosine_step, constant, onecycle as OneCycleLR, step, multistep and exponential as
torchvision's train.py steps them per epoch after lr_warmup_epochs of LinearLR or ConstantLR, or
the linear warm-up of warmup_steps), AveragedModel(use_buffers=True) for ema_decay every
ema_every steps (ema_adjust as torchvision's --model-ema-steps), and airbench's test-time
augmentation for tta. Training batches as data/README.md describes ddptrain's: every epoch a random order (from
numpy, not ddptrain's generator: the same distribution, other samples), crop_padding pixels of
zero padding before normalisation, a random 32x32 crop and a horizontal flip with probability 0.5 (or
alternating: a coin per image, then the other side every epoch),
the last partial batch dropped. The weights are PyTorch's default initialisation (ddptrain draws
the same distributions from its own generator). Options that do not change the arithmetic
(threads, checkpoints, logging, communication) are ignored; an option this script does not
know is refused. Needs torch, h5py and numpy."""
import argparse
import glob
import json
import math
import os
import sys
import time

import h5py
import numpy as np
import torch
import torch.nn.functional as F
from torchvision.ops._utils import split_normalization_params

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "helpers"))
from miniresnet_torch import MiniResNet  # noqa: E402
from optim_torch import Lamb, Lars  # noqa: E402

# ddptrain's defaults for the options that change what is computed (src/base/config_table.h)
DEFAULTS = {
    "width": 64, "blocks": 2, "augment": True, "crop_padding": 4, "alternating_flip": False, "shuffle": True, "batch_size": 64, "grad_accum_steps": 1,
    "epochs": 10, "max_steps": 0, "lr": 0.01, "lr_ref_batch": 0, "momentum": 0.9, "weight_decay": 1e-4,
    "nesterov": False, "no_decay_1d": False, "bn_bias_lr_mult": 1.0, "label_smoothing": 0.0,
    "lr_schedule": "cosine", "onecycle_pct_start": 0.3, "onecycle_anneal": "cos", "onecycle_div_factor": 25.0,
    "onecycle_final_div_factor": 1e4, "min_lr": 0.0, "warmup_steps": 0, "seed": 42, "ema_decay": 0.0,
    "ema_every": 1, "tta": "none", "eval_batch_size": 256, "num_classes": 10, "image_size": 32,
    "optimizer": "sgd", "adam_beta1": 0.9, "adam_beta2": 0.999, "rmsprop_alpha": 0.9, "opt_eps": 0.0,
    "lars_trust_coeff": 0.001, "lamb_max_grad_norm": 1.0, "clip_grad_norm": 0.0, "lr_step_size": 30,
    "lr_gamma": 0.1, "lr_milestones": "", "lr_warmup_epochs": 0, "lr_warmup_method": "linear",
    "lr_warmup_decay": 0.01, "ema_adjust": False, "norm_weight_decay": -1.0,
}
# the optimizers' own epsilon where --opt_eps is 0 (config_table.h)
OPT_EPS = {"sgd": 0.0, "adamw": 1e-8, "rmsprop": 0.0316, "lamb": 1e-6, "lars": 1e-8}
# options that change nothing here (how ddptrain runs, not what it computes)
IGNORED = {"data_dir", "job_dir", "config", "prefetch", "use_amp", "amp_dtype", "amp_activations", "device",
           "tf32", "cudnn_benchmark", "threads", "eval_every", "eval_every_steps", "log_interval", "save_every",
           "save_every_steps", "keep_checkpoints", "resume", "resume_data_change", "preempt_signal", "trace",
           "sync_bn", "bucket_cap_mb", "first_bucket_mb", "comm_progress_us", "comm_allreduce", "comm_dtype",
           "comm_timeout", "straggler_factor", "preflight", "target_accuracy"}


def load_split(data_dir, split):
    paths = sorted(glob.glob(os.path.join(data_dir, f"{split}-*-of-*.h5")))
    if not paths:
        sys.exit(f"torch_recipe: {data_dir}: no {split}-*-of-*.h5 shards")
    images, labels = [], []
    for p in paths:
        with h5py.File(p, "r") as f:
            images.append(np.asarray(f["images"]))
            labels.append(np.asarray(f["labels"]).astype(np.int64))
            mean = np.asarray(f.attrs.get("mean", [0.5] * 3), dtype=np.float32)
            std = np.asarray(f.attrs.get("std", [0.25] * 3), dtype=np.float32)
    return np.concatenate(images), np.concatenate(labels), mean, std


def normalise(images, mean, std):
    """uint8 NHWC -> float32 NCHW, (pixel/255 - mean) / std, as ddptrain."""
    x = (images.astype(np.float32) / np.float32(255.0) - mean) / std
    return torch.from_numpy(np.ascontiguousarray(x)).permute(0, 3, 1, 2).contiguous()


def augment(images, rng, pad, flips=None):
    """Zero padding of pad (before normalisation), a random crop, a flip with probability 0.5, or
    where the flips are given (alternating_flip), those."""
    n, s = images.shape[0], images.shape[1]
    padded = np.zeros((n, s + 2 * pad, s + 2 * pad, 3), dtype=np.uint8)
    padded[:, pad:pad + s, pad:pad + s] = images
    out = np.empty_like(images)
    for i in range(n):
        dx, dy, flip = rng.integers(0, 2 * pad + 1), rng.integers(0, 2 * pad + 1), rng.random() < 0.5
        if flips is not None:
            flip = flips[i]
        crop = padded[i, dy:dy + s, dx:dx + s]
        out[i] = crop[:, ::-1] if flip else crop
    return out


def param_groups(model, lr, c):
    if c["norm_weight_decay"] >= 0:   # torchvision's train.py groups
        if c["no_decay_1d"] or c["bn_bias_lr_mult"] != 1.0:
            sys.exit("torch_recipe: norm_weight_decay with no_decay_1d or bn_bias_lr_mult is not rendered here")
        norm, other = split_normalization_params(model)
        return [{"params": other}, {"params": norm, "weight_decay": c["norm_weight_decay"]}]
    if not c["no_decay_1d"] and c["bn_bias_lr_mult"] == 1.0:
        return model.parameters()
    bn_bias = {f"{n}.bias" for n, m in model.named_modules() if isinstance(m, torch.nn.BatchNorm2d)}
    decay, no_decay, biases = [], [], []
    for name, p in model.named_parameters():
        (biases if name in bn_bias else no_decay if c["no_decay_1d"] and p.ndim == 1 else decay).append(p)
    groups = [{"params": decay}, {"params": no_decay, "weight_decay": 0.0},
              {"params": biases, "weight_decay": 0.0 if c["no_decay_1d"] else c["weight_decay"],
               "lr": lr * c["bn_bias_lr_mult"]}]
    return [g for g in groups if g["params"]]


def make_optimizer(model, c, lr):
    """--optimizer over the recipe's parameter groups: torch.optim's SGD, AdamW and RMSprop, or
    the LAMB and LARS of tests/helpers/optim_torch.py (timm's update rules)."""
    groups = param_groups(model, lr, c)
    kind, eps = c["optimizer"], float(c["opt_eps"]) or OPT_EPS[c["optimizer"]]
    wd = c["weight_decay"]
    if kind == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=c["momentum"], weight_decay=wd, nesterov=bool(c["nesterov"]))
    if kind == "adamw":
        return torch.optim.AdamW(groups, lr=lr, betas=(c["adam_beta1"], c["adam_beta2"]), eps=eps, weight_decay=wd)
    if kind == "rmsprop":
        return torch.optim.RMSprop(groups, lr=lr, alpha=c["rmsprop_alpha"], eps=eps, weight_decay=wd,
                                   momentum=c["momentum"])
    if kind == "lamb":
        return Lamb(groups, lr=lr, betas=(c["adam_beta1"], c["adam_beta2"]), eps=eps, weight_decay=wd,
                    max_grad_norm=c["lamb_max_grad_norm"] or None)
    return Lars(groups, lr=lr, momentum=c["momentum"], weight_decay=wd, nesterov=bool(c["nesterov"]),
                trust_coeff=c["lars_trust_coeff"], eps=eps)


def optimisation(model, c, lr, total, ranks=1):
    """The recipe's optimizer with its parameter groups, the groups' base learning rates,
    OneCycleLR (or None: lr_factor sets the rates), the loss and the EMA (or None)."""
    opt = make_optimizer(model, c, lr)
    base = [g["lr"] for g in opt.param_groups]
    sched = None
    if c["lr_schedule"] == "onecycle":
        sched = torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=base, total_steps=total, pct_start=c["onecycle_pct_start"],
            anneal_strategy=c["onecycle_anneal"], div_factor=c["onecycle_div_factor"],
            final_div_factor=c["onecycle_final_div_factor"], cycle_momentum=False)
    criterion = torch.nn.CrossEntropyLoss(label_smoothing=c["label_smoothing"])
    ema = None
    if c["ema_decay"] > 0:
        d = c["ema_decay"]
        if c["ema_adjust"]:   # torchvision's --model-ema-steps adjustment (train.py)
            d = 1.0 - min(1.0, (1.0 - d) * ranks * c["batch_size"] * c["ema_every"] / c["epochs"])
        ema = torch.optim.swa_utils.AveragedModel(model, avg_fn=lambda e, p, n: d * e + (1 - d) * p, use_buffers=True)
    return opt, base, sched, criterion, ema


def train_step(model, optimisation, c, x, y, step, epoch=0):
    """One SGD step of the recipe (step counts the steps before it); returns the loss."""
    opt, _, sched, criterion, ema = optimisation
    opt.zero_grad(set_to_none=True)
    loss = criterion(model(x), y)
    loss.backward()
    if c["clip_grad_norm"] > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), c["clip_grad_norm"])
    opt.step()
    if sched is not None:
        sched.step()
    if ema is not None and (step + 1) % c["ema_every"] == 0:
        ema.update_parameters(model)
        if c["ema_adjust"] and epoch < c["lr_warmup_epochs"]:
            ema.n_averaged.fill_(0)   # torchvision: the average copies the weights during warm-up
    return loss


def epoch_factor(c, e):
    """torchvision's per-epoch schedules (train.py): SequentialLR of the warm-up (LinearLR or
    ConstantLR from lr_warmup_decay over lr_warmup_epochs) and the main schedule counted from
    the warm-up's end, as a factor of lr; None for the schedules lr_factor computes."""
    w = c["lr_warmup_epochs"]
    if e < w:
        d = c["lr_warmup_decay"]
        return d + (1.0 - d) * e / w if c["lr_warmup_method"] == "linear" else d
    k, e = c["lr_schedule"], e - w
    if k == "step":
        return c["lr_gamma"] ** (e // c["lr_step_size"])
    if k == "multistep":
        marks = [int(v) for v in str(c["lr_milestones"]).split(",") if v.strip()]
        return c["lr_gamma"] ** sum(1 for m in marks if m <= e)
    if k == "exponential":
        return c["lr_gamma"] ** e
    if k == "constant" and w > 0:
        return 1.0
    if k == "cosine" and w > 0:
        return None   # CosineAnnealingLR(T_max=epochs - warm-up): lr_factor
    return None


def lr_factor(c, epoch, step, total, steps_per_epoch, lr, min_lr):
    """The learning rate of a step as a factor of lr (so that the bias group scales alike)."""
    kind = c["lr_schedule"]
    if kind == "onecycle":
        return None   # OneCycleLR
    f = epoch_factor(c, epoch)
    if f is not None:
        return f
    w = c["lr_warmup_epochs"]
    t = {"cosine": (epoch - w) / (c["epochs"] - w), "cosine_step": step / (c["epochs"] * steps_per_epoch),
         "constant": -1.0}[kind]
    v = lr
    if t >= 0.0:
        v = min_lr + (lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * min(t, 1.0)))
    if c["warmup_steps"] > 0 and step < c["warmup_steps"]:
        v *= (step + 1) / c["warmup_steps"]
    return v / lr


def tta_logits(model, x, level):
    """airbench's infer(tta_level): docs/recipes.md, --tta."""
    def mirror(v):
        return 0.5 * model(v) + 0.5 * model(v.flip(-1))
    if level == 0:
        return model(x)
    logits = mirror(x)
    if level == 1:
        return logits
    h, w = x.shape[2], x.shape[3]
    p = F.pad(x, (1,) * 4, mode="reflect")
    return 0.5 * logits + 0.5 * torch.stack([mirror(p[:, :, 0:h, 0:w]), mirror(p[:, :, 2:h + 2, 2:w + 2])]).mean(0)


@torch.no_grad()
def evaluate(model, images, labels, mean, std, c, device):
    model.eval()
    level = {"none": 0, "flip": 1, "flip_shift": 2}[c["tta"]]
    correct, loss = 0, 0.0
    for i in range(0, len(labels), c["eval_batch_size"]):
        x = normalise(images[i:i + c["eval_batch_size"]], mean, std).to(device)
        y = torch.from_numpy(labels[i:i + c["eval_batch_size"]]).to(device)
        z = tta_logits(model, x, level)
        correct += int((z.argmax(1) == y).sum())
        loss += float(F.cross_entropy(z.double(), y, reduction="sum"))
    return correct / len(labels), loss / len(labels)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("recipe")
    ap.add_argument("--data", required=True, help="dataset directory (train-*.h5 and test-*.h5 shards)")
    ap.add_argument("--ranks", type=int, default=1, help="the world size whose global batch one step takes")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override an option")
    ap.add_argument("--epochs", type=int, help="override the recipe's epochs")
    ap.add_argument("--seed", type=int, help="override the recipe's seed")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    with open(a.recipe) as f:
        recipe = json.load(f)
    c = dict(DEFAULTS)
    for k, v in recipe.items():
        if k not in DEFAULTS and k not in IGNORED:
            sys.exit(f"torch_recipe: {a.recipe}: option {k!r} is not known to this script")
        c[k] = v
    for kv in a.set:
        k, v = kv.split("=", 1)
        if k not in DEFAULTS:
            sys.exit(f"torch_recipe: --set {k}: not an option this script uses")
        c[k] = type(DEFAULTS[k])(json.loads(v)) if not isinstance(DEFAULTS[k], str) else v
    if a.epochs:
        c["epochs"] = a.epochs
    if a.seed is not None:
        c["seed"] = a.seed
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(c["seed"])
    rng = np.random.default_rng(c["seed"])
    device = torch.device(a.device)

    xtr, ytr, mean, std = load_split(a.data, "train")
    xte, yte, tmean, tstd = load_split(a.data, "test")
    global_batch = c["batch_size"] * c["grad_accum_steps"] * a.ranks
    steps_per_epoch = len(ytr) // global_batch
    total = steps_per_epoch * c["epochs"]
    if c["max_steps"] > 0:
        total = min(total, c["max_steps"])
    lr, min_lr = float(c["lr"]), float(c["min_lr"])
    if c["lr_ref_batch"] > 0 and global_batch != c["lr_ref_batch"]:
        lr *= global_batch / c["lr_ref_batch"]
        min_lr *= global_batch / c["lr_ref_batch"]
    print(f"{a.recipe}: MiniResNet width {c['width']} blocks {c['blocks']}, global batch {global_batch} "
          f"({a.ranks} x {c['batch_size']} x {c['grad_accum_steps']}), lr {lr:g}, {steps_per_epoch} steps per epoch, "
          f"{total} steps, on {device}", flush=True)

    model = MiniResNet(c["width"], c["blocks"], c["num_classes"]).to(device)
    opt, base, sched, criterion, ema = optimisation(model, c, lr, total, a.ranks)

    coins = rng.integers(0, 2, len(ytr))   # alternating_flip: each image's side in even epochs
    step, t0 = 0, time.time()
    for epoch in range(c["epochs"]):
        if step >= total:
            break
        model.train()
        order = rng.permutation(len(ytr)) if c["shuffle"] else np.arange(len(ytr))
        for s in range(steps_per_epoch):
            if step >= total:
                break
            if sched is None:
                k = lr_factor(c, epoch, step, total, steps_per_epoch, lr, min_lr)
                for g, b in zip(opt.param_groups, base):
                    g["lr"] = b * k
            idx = order[s * global_batch:(s + 1) * global_batch]
            flips = (coins[idx] ^ (epoch & 1)).astype(bool) if c["alternating_flip"] else None
            imgs = augment(xtr[idx], rng, c["crop_padding"], flips) if c["augment"] else xtr[idx]
            x = normalise(imgs, mean, std).to(device)
            y = torch.from_numpy(ytr[idx]).to(device)
            train_step(model, (opt, base, sched, criterion, ema), c, x, y, step, epoch)
            step += 1
        net = ema.module if ema is not None and int(ema.n_averaged) > 0 else model
        acc, test_loss = evaluate(net, xte, yte, tmean, tstd, c, device)
        print(f"epoch {epoch + 1} step {step} test_acc {acc:.4f} test_loss {test_loss:.4f}"
              f"{' (EMA)' if net is not model else ''}{' (TTA ' + c['tta'] + ')' if c['tta'] != 'none' else ''} "
              f"({time.time() - t0:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
