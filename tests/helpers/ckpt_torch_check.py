# SPDX-License-Identifier: BSD-3-Clause
"""Checks a tests/helpers/ckpt_dump checkpoint in PyTorch: loads it with
scripts/ddptrain_to_torch.py (strict state_dict: every name and shape must match), checks
num_batches_tracked and the optimizer/train-state groups, runs the reference images in eval mode
and compares the logits with ddptrain's (max|diff| / max|ref| <= --tol) and the number of correct
predictions. Exit 0 on success, 1 otherwise."""
import argparse
import os
import sys

import h5py
import numpy as np
import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "..", "..", "scripts"))
import ddptrain_to_torch as d2t  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("shard", help="the test shard ckpt_dump wrote (images, labels, ref_logits)")
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))
    fails = []
    model, meta = d2t.load_model(args.checkpoint)
    nparams = sum(p.numel() for p in model.parameters())
    if nparams != meta["num_params"]:
        fails.append(f"num_params attribute {meta['num_params']} but the module has {nparams}")
    if int(model.bn1.num_batches_tracked) != 1234:
        fails.append(f"bn1.num_batches_tracked is {int(model.bn1.num_batches_tracked)}, expected 1234")
    with h5py.File(args.checkpoint, "r") as f:
        mom = f["optimizer/momentum"]
        names = set(dict(model.named_parameters()))
        if set(mom.keys()) != names:
            fails.append("optimizer/momentum names differ from the parameter names")
        for n, p in model.named_parameters():
            if n in mom and tuple(mom[n].shape) != tuple(p.shape):
                fails.append(f"optimizer/momentum/{n} shape {mom[n].shape} != {tuple(p.shape)}")
        if int(f["optimizer/steps"][()]) != 42 or meta.get("global_step") != 25:
            fails.append("optimizer steps / global_step not as written")
    with h5py.File(args.shard, "r") as f:
        images = np.asarray(f["images"])
        labels = np.asarray(f["labels"]).astype(np.int64)
        mean = np.asarray(f.attrs["mean"], dtype=np.float32)
        std = np.asarray(f.attrs["std"], dtype=np.float32)
        ref = np.asarray(f["ref_logits"], dtype=np.float64)
        ref_correct = int(f.attrs["ref_correct"])
    with torch.no_grad():
        logits = model(d2t.normalise(images, mean, std)).numpy().astype(np.float64)
    err = float(np.max(np.abs(logits - ref)) / max(np.max(np.abs(ref)), 1e-30))
    correct = int((logits.argmax(1) == labels).sum())
    print(f"{nparams:,} parameters; eval logits rel err {err:.3e} (tol {args.tol:g}); "
          f"correct {correct} (ddptrain {ref_correct}) of {len(labels)}")
    if not err <= args.tol:
        fails.append(f"logits rel err {err:.3e} > {args.tol:g}")
    if correct != ref_correct:
        fails.append(f"torch gets {correct} correct, ddptrain {ref_correct}")
    for msg in fails:
        print("FAIL: " + msg)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
