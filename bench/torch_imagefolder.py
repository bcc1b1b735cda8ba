#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A ddptrain recipe with ImageNet-style input (a --config JSON file such as
recipes/imagenette-resnet18.json) trained by torchvision on folders of JPEG files, printing the
test accuracy and the time of every epoch: the reference ddptrain's Imagenette figure is
measured against (docs/benchmarks.md).

usage: torch_imagefolder.py RECIPE.json --train DIR --val DIR [--ranks R] [--workers W]
                            [--threads T] [--epochs E] [--seed S]

The input is torchvision's, decoded and cropped by its DataLoader from the JPEG files
(ImageFolder): RandomResizedCrop(train_crop_size, scale=rrc_scale) and RandomHorizontalFlip for
training, its size rising from progressive_min_crop by FFCV's ramp (the workers started again every
epoch to take it); Resize(val_resize_size) and CenterCrop(val_crop_size) for evaluation; then ToTensor and
Normalize with ImageNet's mean and std. The model is torchvision.models.<model>(num_classes),
zero_init_residual as the recipe says, with use_blurpool FFCV's blur before its strided
convolutions (tests/helpers/blurpool_torch.py, as ddptrain's --use_blurpool). The optimisation
is torch_recipe.py's (SGD with the recipe's momentum, Nesterov, weight decay and parameter
groups, label smoothing, the lr scaled by lr_ref_batch, the schedule, the EMA and the test-time
augmentation). One process, no DDP: each step takes the global batch of R ranks (batch_size x
grad_accum_steps x R images), so batch norm sees the global batch, as ddptrain does with
--sync_bn. The reference recipes' data options are torchvision's own transforms after the crop
and flip (auto_augment: AutoAugment, RandAugment or TrivialAugmentWide; color_jitter:
ColorJitter; random_erase: RandomErasing after Normalize), mixup and cutmix on each rank's part
of the global batch, and ra_reps as RASampler's shares of R ranks taken together.
Needs torch and torchvision."""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
import torchvision
from torchvision import transforms

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_recipe import DEFAULTS, IGNORED, lr_factor, optimisation, train_step, tta_logits  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "helpers"))
from blurpool_torch import apply_blurpool  # noqa: E402
from aug_torch import ra_indices  # noqa: E402

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
OPTIONS = dict(DEFAULTS, model="resnet18", train_crop_size=0, val_resize_size=0, val_crop_size=0,
               rrc_scale="0.08,1", zero_init_residual=False, progressive_min_crop=0, progressive_start_epoch=1,
               progressive_end_epoch=0, progressive_step=32, use_blurpool=False, auto_augment="none",
               ra_magnitude=9, ra_num_ops=2, color_jitter="", random_erase=0.0, mixup_alpha=0.0, cutmix_alpha=0.0,
               ra_reps=0)
# how the data is held and shaped in ddptrain, which changes nothing here
HERE_IGNORED = IGNORED | {"data_in_memory", "data_window_chunks", "data_chunk_images", "data_workers",
                          "crop_padding", "alternating_flip", "width", "blocks", "init_from", "print_model"}


def pixel_policy(c):
    """--auto_augment and --color_jitter as torchvision's transforms (reference train.py's
    spellings), applied to the PIL image after the crop and the flip."""
    out = []
    name = c["auto_augment"]
    if name == "ra":
        out.append(transforms.RandAugment(num_ops=c["ra_num_ops"], magnitude=c["ra_magnitude"]))
    elif name == "ta_wide":
        out.append(transforms.TrivialAugmentWide())
    elif name != "none":
        out.append(transforms.AutoAugment(transforms.AutoAugmentPolicy(name)))
    if c["color_jitter"]:
        b, k, s, h = (float(v) for v in str(c["color_jitter"]).split(","))
        out.append(transforms.ColorJitter(b, k, s, h))
    return out


def mix_batch(x, y, c, classes, ranks):
    """The reference scripts' RandomChoice of RandomMixup and RandomCutmix (p=1) on each rank's
    part of the global batch, as ddptrain mixes each rank's batch: one-hot targets mixed with the
    part rolled by one; lambda from Dirichlet([a, a])[0], cutmix's recomputed from its box."""
    kinds = [k for k, a in (("mixup", c["mixup_alpha"]), ("cutmix", c["cutmix_alpha"])) if a > 0]
    t = F.one_hot(y, classes).float()
    if not kinds:
        return x, y
    xs, ts = [], []
    for xb, tb in zip(x.chunk(ranks), t.chunk(ranks)):
        kind = kinds[int(torch.randint(len(kinds), (1,)))]
        alpha = c["mixup_alpha"] if kind == "mixup" else c["cutmix_alpha"]
        lam = float(torch._sample_dirichlet(torch.tensor([alpha, alpha]))[0])
        xr, tr = xb.roll(1, 0), tb.roll(1, 0)
        if kind == "mixup":
            xb = xb * lam + xr * (1.0 - lam)
        else:
            h, w = xb.shape[2], xb.shape[3]
            cx, cy = int(torch.randint(w, (1,))), int(torch.randint(h, (1,)))
            r = 0.5 * math.sqrt(1.0 - lam)
            rw, rh = int(r * w), int(r * h)
            x1, y1, x2, y2 = max(cx - rw, 0), max(cy - rh, 0), min(cx + rw, w), min(cy + rh, h)
            xb = xb.clone()
            xb[:, :, y1:y2, x1:x2] = xr[:, :, y1:y2, x1:x2]
            lam = 1.0 - (x2 - x1) * (y2 - y1) / (w * h)
        xs.append(xb)
        ts.append(tb * lam + tr * (1.0 - lam))
    return torch.cat(xs), torch.cat(ts)


class RepeatedBatches(torch.utils.data.Sampler):
    """--ra_reps: each step's global batch is the next batch_size indices of every rank's share
    of RASampler's epoch (tests/helpers/aug_torch.py's ra_indices), rank after rank."""

    def __init__(self, n, ranks, reps, batch, seed):
        self.n, self.ranks, self.reps, self.batch, self.seed, self.epoch = n, ranks, reps, batch, seed, 0

    def __iter__(self):
        shares = [ra_indices(self.n, self.ranks, r, self.epoch, self.reps, self.seed) for r in range(self.ranks)]
        self.epoch += 1
        for k in range(len(shares[0]) // self.batch):
            yield [i for s in shares for i in s[k * self.batch:(k + 1) * self.batch]]

    def __len__(self):
        return (self.n // 256) * 256 // self.ranks // self.batch


def crop_at(c, crop, epoch):
    """The training crop of epoch `epoch` (from 0): FFCV's get_resolution, np.interp between the
    two ends rounded to a multiple of the step with np.round, kept within the ends."""
    lo = c["progressive_min_crop"]
    if not lo:
        return crop
    e, start, end = epoch + 1, c["progressive_start_epoch"], c["progressive_end_epoch"] or c["epochs"]
    if e <= start:
        return lo
    if e >= end:
        return crop
    v = float(np.interp([e], [start, end], [lo, crop])[0])
    return min(max(int(np.round(v / c["progressive_step"])) * c["progressive_step"], lo), crop)


@torch.no_grad()
def evaluate(model, loader, level, device):
    model.eval()
    correct, loss, n = 0, 0.0, 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        z = tta_logits(model, x, level)
        correct += int((z.argmax(1) == y).sum())
        loss += float(F.cross_entropy(z.double(), y, reduction="sum"))
        n += len(y)
    return correct / n, loss / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("recipe")
    ap.add_argument("--train", required=True, help="ImageFolder of the training split")
    ap.add_argument("--val", required=True, help="ImageFolder of the evaluation split")
    ap.add_argument("--ranks", type=int, default=1, help="the world size whose global batch one step takes")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--epochs", type=int, help="override the recipe's epochs")
    ap.add_argument("--seed", type=int, help="override the recipe's seed")
    ap.add_argument("--eval_every", type=int, default=1, help="evaluate every N epochs (and after the last)")
    a = ap.parse_args()
    with open(a.recipe) as f:
        recipe = json.load(f)
    c = dict(OPTIONS)
    for k, v in recipe.items():
        if k not in OPTIONS and k not in HERE_IGNORED:
            sys.exit(f"torch_imagefolder: {a.recipe}: option {k!r} is not known to this script")
        c[k] = v
    if a.epochs:
        c["epochs"] = a.epochs
    if a.seed is not None:
        c["seed"] = a.seed
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(c["seed"])
    crop = c["train_crop_size"] or c["image_size"]
    vcrop = c["val_crop_size"] or crop
    vresize = c["val_resize_size"] or vcrop
    lo, hi = (float(v) for v in str(c["rrc_scale"]).split(","))
    norm = transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)
    rrc = transforms.RandomResizedCrop(crop, scale=(lo, hi))
    erase = [transforms.RandomErasing(p=c["random_erase"])] if c["random_erase"] > 0 else []
    train_tf = transforms.Compose([rrc, transforms.RandomHorizontalFlip()] + pixel_policy(c) +
                                  [transforms.ToTensor(), norm] + erase)
    val_tf = transforms.Compose([transforms.Resize(vresize), transforms.CenterCrop(vcrop), transforms.ToTensor(), norm])
    train_set = torchvision.datasets.ImageFolder(a.train, train_tf)
    val_set = torchvision.datasets.ImageFolder(a.val, val_tf)
    global_batch = c["batch_size"] * c["grad_accum_steps"] * a.ranks
    persistent = a.workers > 0 and not c["progressive_min_crop"]
    if c["ra_reps"] > 1:
        sampler = RepeatedBatches(len(train_set), a.ranks, c["ra_reps"], c["batch_size"] * c["grad_accum_steps"], c["seed"])
        train_loader = torch.utils.data.DataLoader(train_set, batch_sampler=sampler, num_workers=a.workers,
                                                   persistent_workers=persistent)
    else:
        train_loader = torch.utils.data.DataLoader(train_set, batch_size=global_batch, shuffle=True, drop_last=True,
                                                   num_workers=a.workers, persistent_workers=persistent)
    val_loader = torch.utils.data.DataLoader(val_set, batch_size=c["eval_batch_size"], num_workers=a.workers)
    steps_per_epoch = len(train_loader)
    total = steps_per_epoch * c["epochs"]
    lr, min_lr = float(c["lr"]), float(c["min_lr"])
    if c["lr_ref_batch"] > 0 and global_batch != c["lr_ref_batch"]:
        lr *= global_batch / c["lr_ref_batch"]
        min_lr *= global_batch / c["lr_ref_batch"]
    kwargs = {"zero_init_residual": True} if c["zero_init_residual"] else {}   # ResNets' only
    model = getattr(torchvision.models, c["model"])(num_classes=len(train_set.classes), **kwargs)
    if c["use_blurpool"]:
        apply_blurpool(model)
    model = model.to(memory_format=torch.channels_last)
    print(f"{a.recipe}: {c['model']}{' with blurpool' if c['use_blurpool'] else ''}, {len(train_set)} training and {len(val_set)} evaluation images, "
          f"crop {crop} (scale {lo:g}-{hi:g}), evaluation Resize({vresize}) CenterCrop({vcrop}), global batch "
          f"{global_batch} ({a.ranks} x {c['batch_size']} x {c['grad_accum_steps']}), lr {lr:g}, {steps_per_epoch} steps "
          f"per epoch, {total} steps, {torch.get_num_threads()} threads, {a.workers} loader workers", flush=True)
    opt, base, sched, criterion, ema = optimisation(model, c, lr, total, a.ranks)
    level = {"none": 0, "flip": 1, "flip_shift": 2}[c["tta"]]
    step, t0 = 0, time.time()
    for epoch in range(c["epochs"]):
        model.train()
        rrc.size = (crop_at(c, crop, epoch),) * 2
        te, data_wait, loss_sum, nsteps = time.time(), 0.0, 0.0, 0
        tw = time.time()
        for x, y in train_loader:
            data_wait += time.time() - tw
            if sched is None:
                k = lr_factor(c, epoch, step, total, steps_per_epoch, lr, min_lr)
                for g, b in zip(opt.param_groups, base):
                    g["lr"] = b * k
            x, y = mix_batch(x, y, c, len(train_set.classes), a.ranks)
            x = x.contiguous(memory_format=torch.channels_last)
            loss = train_step(model, (opt, base, sched, criterion, ema), c, x, y, step, epoch)
            loss_sum, nsteps = loss_sum + float(loss), nsteps + 1
            step += 1
            tw = time.time()
        train_s = time.time() - te
        line = (f"epoch {epoch + 1} step {step} crop {rrc.size[0]} loss {float(loss):.4f} mean_loss {loss_sum / max(nsteps, 1):.4f} train {train_s:.1f} s "
                f"(data wait {data_wait:.1f} s)")
        if (epoch + 1) % a.eval_every == 0 or epoch + 1 == c["epochs"]:
            net = ema.module if ema is not None and int(ema.n_averaged) > 0 else model
            tv = time.time()
            acc, test_loss = evaluate(net, val_loader, level, "cpu")
            line += f" test_acc {acc:.4f} test_loss {test_loss:.4f} eval {time.time() - tv:.1f} s"
        print(f"{line} ({time.time() - t0:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
