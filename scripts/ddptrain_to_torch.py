#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Load a ddptrain checkpoint into the PyTorch MiniResNet (or torchvision's module of the same
name for a run of one of --model's torchvision builders, resnet18 to inception_v3; either
with FFCV's blur before its strided convolutions for a run of --use_blurpool,
blurpool_torch.py; GoogLeNet and Inception v3 with their auxiliary classifiers when the
checkpoint holds them, and with the run's --transform_input), optionally evaluate it on a
dataset directory of shards and/or save a plain PyTorch state_dict.

    ddptrain_to_torch.py CKPT.h5 [--ema] [--data DIR] [--split test] [--batch-size 256] [--save OUT.pt]
                         [--val_resize_size R --val_crop_size V]

The checkpoint's /model group holds one dataset per state_dict name, so loading is a
dictionary copy; see the checkpoint layout in the README. By default the trained weights
(/model) are loaded; --ema loads the moving average of a run with --ema_decay (/ema), the
weights its test_acc was measured on. With --val_crop_size the images (raw or JPEG shards) are
evaluated as ddptrain evaluates a run of --train_crop_size: torchvision's Resize(R) and
CenterCrop(V) on PIL images (needs torchvision and PIL). Needs torch, h5py and numpy."""
import argparse
import collections
import glob
import json
import os
import sys

import h5py
import numpy as np
import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
# The modules live next to this script once installed, and in ../tests/helpers in the source tree.
for _d in (os.path.join(_HERE, "..", "tests", "helpers"), _HERE):
    if os.path.isfile(os.path.join(_d, "miniresnet_torch.py")) and _d not in sys.path:
        sys.path.insert(0, _d)
from miniresnet_torch import MiniResNet  # noqa: E402
from blurpool_torch import apply_blurpool  # noqa: E402

FORMAT = "ddptrain-checkpoint"
BLURPOOL = "-blurpool"   # after the architecture of a run of --use_blurpool
DEFAULT_MEAN, DEFAULT_STD = 0.5, 0.25


def _str(v):
    return v.decode() if isinstance(v, (bytes, np.bytes_)) else str(v)


def base_architecture(arch):
    """The architecture without --use_blurpool's suffix."""
    arch = str(arch)
    return arch[:-len(BLURPOOL)] if arch.endswith(BLURPOOL) else arch


def torchvision_builder(name):
    """torchvision.models.NAME when torchvision lists it among its models, else None: --model's
    built-in torchvision networks carry their builder's name, and loading with strict=True
    checks that the module is the checkpoint's, tensor by tensor."""
    try:
        import torchvision
    except ImportError:
        return None
    listed = torchvision.models.list_models() if hasattr(torchvision.models, "list_models") else [
        n for n in dir(torchvision.models) if n.islower() and not n.startswith("_")]
    return getattr(torchvision.models, name) if name in listed else None


# GoogLeNet's and Inception v3's auxiliary classifiers (the checkpoint holds their tensors unless
# the run had --aux_logits false)
AUX_PREFIX = {"googlenet": "aux1.", "inception_v3": "AuxLogits."}


def inception_kwargs(base, sd, meta):
    """torchvision's GoogLeNet and Inception3 as the run built them: aux_logits when the checkpoint
    holds the auxiliary classifiers, the run's transform_input, and no initialisation of their
    own (init_weights=False: the weights are loaded)."""
    if base not in AUX_PREFIX:
        return {}
    return {"aux_logits": any(k.startswith(AUX_PREFIX[base]) for k in sd),
            "transform_input": bool(meta.get("config", {}).get("transform_input", False)), "init_weights": False}


def read_checkpoint(path, group="model"):
    """Returns (meta, state_dict): meta has the root attributes and the train state (and
    has_ema, ema_n_averaged); the state_dict is /model's, or /ema's with group="ema"."""
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise ValueError(f"{path}: cannot open as HDF5 ({e})") from None
    with f:
        if _str(f.attrs.get("format", b"")) != FORMAT:
            raise ValueError(f"{path}: not a ddptrain checkpoint (format attribute is not '{FORMAT}')")
        meta = {k: (_str(v) if isinstance(v, (bytes, np.bytes_, str)) else int(v)) for k, v in f.attrs.items()}
        base = base_architecture(meta.get("architecture"))
        if base != "MiniResNet" and not torchvision_builder(base):
            raise ValueError(f"{path}: architecture {meta.get('architecture')!r} is neither MiniResNet nor one of "
                             f"torchvision's builders: a network file's, which has no PyTorch module")
        if "train_state" in f:
            for k, v in f["train_state"].items():
                meta[k] = v[()].tolist()
        meta["has_ema"] = "ema" in f
        try:   # the run's options (/config, JSON): GoogLeNet's and Inception v3's transform_input
            meta["config"] = json.loads(_str(f["config"][()])) if "config" in f else {}
        except (ValueError, TypeError):
            meta["config"] = {}
        if meta["has_ema"]:
            meta["ema_n_averaged"] = int(f["ema/n_averaged"][()])
        if group not in f:
            raise ValueError(f"{path}: no /{group} group (the run had no --ema_decay, or had not updated the average yet)")
        sd = {}
        f[group].visititems(lambda n, o: sd.__setitem__(n, torch.from_numpy(np.array(o[()])))
                              if isinstance(o, h5py.Dataset) else None)
    sd.pop("n_averaged", None)
    for k in list(sd):
        if k.endswith("num_batches_tracked"):
            sd[k] = sd[k].to(torch.int64).reshape(())
    return meta, sd


def load_model(path, ema=False):
    """The checkpoint's model in eval mode (its moving average with ema=True), and its meta data:
    MiniResNet, or torchvision.models.resnetN for --model resnetN, loaded with strict=True."""
    meta, sd = read_checkpoint(path, "ema" if ema else "model")
    base = base_architecture(meta["architecture"])
    if base == "MiniResNet":
        model = MiniResNet(meta["width"], meta["blocks"], meta["num_classes"])
    else:
        model = torchvision_builder(base)(num_classes=meta["num_classes"], **inception_kwargs(base, sd, meta))
    if meta["architecture"].endswith(BLURPOOL):
        apply_blurpool(model)
    # the module's own versions of its state_dict (MNASNet refuses a dict without them)
    sd = collections.OrderedDict(sd)
    sd._metadata = getattr(model.state_dict(), "_metadata", None)
    model.load_state_dict(sd, strict=True)
    model.eval()
    return model, meta


def _views(images, resize, crop):
    """torchvision's Resize(resize) + CenterCrop(crop) of uint8 HWC images (arrays, or encoded
    JPEG files as bytes) on PIL images, as uint8 NHWC."""
    import io

    import torchvision.transforms.functional as F
    from PIL import Image
    out = []
    for im in images:
        img = Image.open(io.BytesIO(im)).convert("RGB") if isinstance(im, bytes) else Image.fromarray(im)
        img = F.center_crop(F.resize(img, resize, interpolation=F.InterpolationMode.BILINEAR), crop)
        out.append(np.asarray(img, dtype=np.uint8))
    return np.stack(out)


def iter_shards(data_dir, split, resize=0, crop=0):
    """(images uint8 NHWC, labels, mean[3], std[3]) per shard of the split, in order; with crop,
    each image resized (shorter side to resize, or crop) and centre-cropped. JPEG shards need
    crop (their images differ in size)."""
    paths = sorted(glob.glob(os.path.join(data_dir, f"{split}-*-of-*.h5")))
    if not paths:
        raise FileNotFoundError(f"{data_dir}: no {split}-*-of-*.h5 shards")
    for p in paths:
        with h5py.File(p, "r") as f:
            mean = np.asarray(f.attrs.get("mean", [DEFAULT_MEAN] * 3), dtype=np.float32)
            std = np.asarray(f.attrs.get("std", [DEFAULT_STD] * 3), dtype=np.float32)
            labels = np.asarray(f["labels"]).astype(np.int64)
            if _str(f.attrs.get("encoding", b"raw")) == "jpeg":
                if not crop:
                    raise ValueError(f"{p}: JPEG shards are evaluated with --val_crop_size (images differ in size)")
                data, off = np.asarray(f["jpeg"]), np.asarray(f["offsets"])
                images = [data[off[i]:off[i + 1]].tobytes() for i in range(len(labels))]
            else:
                images = np.asarray(f["images"])
            if crop:
                images = _views(images, resize or crop, crop)
            yield images, labels, mean, std


def normalise(images, mean, std):
    """uint8 NHWC -> float32 NCHW, x = (pixel/255 - mean) / std per channel, as ddptrain does."""
    x = (images.astype(np.float32) / np.float32(255.0) - mean) / std
    return torch.from_numpy(np.ascontiguousarray(x)).permute(0, 3, 1, 2).contiguous()


@torch.no_grad()
def evaluate(model, data_dir, split="test", batch_size=256, resize=0, crop=0):
    """(correct, total, mean cross-entropy)."""
    correct = total = 0
    loss = 0.0
    for images, labels, mean, std in iter_shards(data_dir, split, resize, crop):
        for i in range(0, len(labels), batch_size):
            logits = model(normalise(images[i:i + batch_size], mean, std))
            y = torch.from_numpy(labels[i:i + batch_size])
            correct += int((logits.argmax(1) == y).sum())
            loss += float(torch.nn.functional.cross_entropy(logits.double(), y, reduction="sum"))
            total += len(y)
    return correct, total, loss / max(total, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--ema", action="store_true",
                    help="load the moving average of the weights and buffers (/ema: what the run evaluated) "
                         "instead of the trained weights (/model)")
    ap.add_argument("--data", help="dataset directory to evaluate on (shards <split>-NNNNN-of-MMMMM.h5)")
    ap.add_argument("--split", default="test")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--save", metavar="OUT.pt", help="also write the state_dict with torch.save")
    ap.add_argument("--val_resize_size", type=int, default=0, metavar="R",
                    help="with --val_crop_size: the shorter side resized to R first (default: V)")
    ap.add_argument("--val_crop_size", type=int, default=0, metavar="V",
                    help="evaluate on Resize(R) + CenterCrop(V) of the images, as ddptrain with --train_crop_size")
    args = ap.parse_args()
    if args.val_resize_size and not args.val_crop_size:
        ap.error("--val_resize_size needs --val_crop_size")
    try:
        model, meta = load_model(args.checkpoint, args.ema)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        print(f"ddptrain_to_torch: error: {e}", file=sys.stderr)
        return 1
    nparams = sum(p.numel() for p in model.parameters())
    base = base_architecture(meta["architecture"])
    arch = (f"MiniResNet width {meta['width']} blocks {meta['blocks']}" if base == "MiniResNet"
            else f"torchvision.models.{base}")
    if meta["architecture"].endswith(BLURPOOL):
        arch += " with blurpool"
    if getattr(model, "transform_input", False):
        arch += " with transform_input"
    if base in AUX_PREFIX and not getattr(model, "aux_logits", True):
        arch += " without its auxiliary classifiers"
    print(f"{args.checkpoint}: {arch} "
          f"classes {meta['num_classes']}: {nparams:,} parameters "
          f"(epoch {meta.get('epoch', '?')}, global step {meta.get('global_step', '?')})"
          + (f": the EMA of {meta['ema_n_averaged']} updates" if args.ema else
             ": the trained weights (the run evaluated its EMA: --ema loads it)" if meta["has_ema"] else ""))
    if args.save:
        torch.save(model.state_dict(), args.save)
        print(f"saved state_dict to {args.save}")
    if args.data:
        try:
            correct, total, loss = evaluate(model, args.data, args.split, args.batch_size, args.val_resize_size,
                                            args.val_crop_size)
        except (OSError, KeyError, ValueError) as e:
            print(f"ddptrain_to_torch: error: {e}", file=sys.stderr)
            return 1
        view = (f" at Resize({args.val_resize_size or args.val_crop_size}) + CenterCrop({args.val_crop_size})"
                if args.val_crop_size else "")
        print(f"{args.split} accuracy: {100.0 * correct / max(total, 1):.2f}% ({correct}/{total}), "
              f"loss {loss:.6f}{view}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
