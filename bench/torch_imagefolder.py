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
--sync_bn. Needs torch and torchvision."""
import argparse
import json
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

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
OPTIONS = dict(DEFAULTS, model="resnet18", train_crop_size=0, val_resize_size=0, val_crop_size=0,
               rrc_scale="0.08,1", zero_init_residual=False, progressive_min_crop=0, progressive_start_epoch=1,
               progressive_end_epoch=0, progressive_step=32, use_blurpool=False)
# how the data is held and shaped in ddptrain, which changes nothing here
HERE_IGNORED = IGNORED | {"data_in_memory", "data_window_chunks", "data_chunk_images", "data_workers",
                          "crop_padding", "alternating_flip", "width", "blocks", "init_from", "print_model"}


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
    train_tf = transforms.Compose([rrc,
                                   transforms.RandomHorizontalFlip(), transforms.ToTensor(), norm])
    val_tf = transforms.Compose([transforms.Resize(vresize), transforms.CenterCrop(vcrop), transforms.ToTensor(), norm])
    train_set = torchvision.datasets.ImageFolder(a.train, train_tf)
    val_set = torchvision.datasets.ImageFolder(a.val, val_tf)
    global_batch = c["batch_size"] * c["grad_accum_steps"] * a.ranks
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=global_batch, shuffle=True, drop_last=True,
                                               num_workers=a.workers,
                                               persistent_workers=a.workers > 0 and not c["progressive_min_crop"])
    val_loader = torch.utils.data.DataLoader(val_set, batch_size=c["eval_batch_size"], num_workers=a.workers)
    steps_per_epoch = len(train_loader)
    total = steps_per_epoch * c["epochs"]
    lr, min_lr = float(c["lr"]), float(c["min_lr"])
    if c["lr_ref_batch"] > 0 and global_batch != c["lr_ref_batch"]:
        lr *= global_batch / c["lr_ref_batch"]
        min_lr *= global_batch / c["lr_ref_batch"]
    model = getattr(torchvision.models, c["model"])(num_classes=len(train_set.classes),
                                                      zero_init_residual=bool(c["zero_init_residual"]))
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
        te, data_wait = time.time(), 0.0
        tw = time.time()
        for x, y in train_loader:
            data_wait += time.time() - tw
            if sched is None:
                k = lr_factor(c, epoch, step, total, steps_per_epoch, lr, min_lr)
                for g, b in zip(opt.param_groups, base):
                    g["lr"] = b * k
            x = x.contiguous(memory_format=torch.channels_last)
            loss = train_step(model, (opt, base, sched, criterion, ema), c, x, y, step, epoch)
            step += 1
            tw = time.time()
        train_s = time.time() - te
        line = (f"epoch {epoch + 1} step {step} crop {rrc.size[0]} loss {float(loss):.4f} train {train_s:.1f} s "
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
