#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Write a PyTorch state_dict as a weights file for ddptrain --init_from.

    torch_to_ddptrain.py SOURCE OUT.h5 [--num-classes K] [--seed S]

SOURCE is a file torch.save wrote (a state_dict, or a whole module), or the name of a
torchvision model (resnet18, mobilenet_v3_large, ...) built with its own initialisation from --seed
(torchvision's pretrained weights are such a file: torch.hub's cache holds them). OUT.h5 gets a
/model group with one float32 dataset per tensor under its state_dict name (num_batches_tracked
as int64), the layout of a ddptrain checkpoint's /model. ddptrain loads every tensor whose
shape matches and keeps its own initialisation for the others (the classifier, when
--num_classes differs): the fine-tuning workflow. Needs torch, h5py and numpy."""
import argparse
import os
import sys

import h5py
import numpy as np
import torch


def state_dict_of(source, num_classes, seed):
    if os.path.exists(source):
        obj = torch.load(source, map_location="cpu")
        if isinstance(obj, torch.nn.Module):
            obj = obj.state_dict()
        if isinstance(obj, dict) and "state_dict" in obj and isinstance(obj["state_dict"], dict):
            obj = obj["state_dict"]
        if not isinstance(obj, dict):
            raise ValueError(f"{source}: holds a {type(obj).__name__}, not a state_dict")
        return obj
    import torchvision
    if not hasattr(torchvision.models, source):
        raise ValueError(f"{source}: neither a file nor a torchvision model")
    torch.manual_seed(seed)
    return getattr(torchvision.models, source)(num_classes=num_classes).state_dict()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source")
    ap.add_argument("out")
    ap.add_argument("--num-classes", type=int, default=1000, help="classes of a torchvision model built here")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    try:
        sd = state_dict_of(args.source, args.num_classes, args.seed)
    except (OSError, ValueError, RuntimeError) as e:
        print(f"torch_to_ddptrain: error: {e}", file=sys.stderr)
        return 1
    tmp = args.out + ".tmp"
    with h5py.File(tmp, "w") as f:
        f.attrs["format"] = "ddptrain-weights"
        g = f.create_group("model")
        for name, t in sd.items():
            if not torch.is_tensor(t):
                continue
            a = t.detach().cpu().numpy()
            g[name] = a.astype(np.int64) if name.endswith("num_batches_tracked") else a.astype(np.float32)
    os.replace(tmp, args.out)
    print(f"torch_to_ddptrain: {len(sd)} tensors of {args.source} written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
