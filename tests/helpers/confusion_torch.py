# SPDX-License-Identifier: BSD-3-Clause
"""Checks a job directory's confusion.json against PyTorch: the checkpoint loaded with
scripts/ddptrain_to_torch.py (its EMA with --ema), the logits of every test image computed from
the shards' pixels (with --tta flip: 0.5 * f(x) + 0.5 * f(flip(x)), as ddptrain averages them),
and from them the top-1 count (torch.argmax: the first maximum), the top-5 count (torch.topk,
and a stable descending sort, ddptrain's tie rule), the confusion matrix and the per-class
images, hits and names (the labels and class names read from the shards with h5py).

Counts must agree exactly, except for images whose float32 logits are a near tie at the
boundary that decides them (|difference| < 1e-5 between the first and second largest logit for
the prediction; between the fifth and sixth for top-5): ddptrain's kernels and PyTorch's round
differently, so each such image may count either way; the tolerance is their number (each moves
at most two cells of the matrix). Then controls: the same comparison against a transposed
matrix, a top-4 count, a matrix with one image moved, and the trained weights when the run
evaluated its EMA (or the EMA's absence when it did not) must fail, so that the comparison can.

    confusion_torch.py JOB_DIR DATA_DIR [--tta flip] [--ema]

Prints one summary line; exit 0 when it agrees and every control fails, 1 otherwise."""
import argparse
import glob
import json
import os
import sys

import h5py
import numpy as np
import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "..", "..", "scripts"))
import ddptrain_to_torch as d2t  # noqa: E402

NEAR = 1e-5


@torch.no_grad()
def logits_of(model, data_dir, tta):
    """(logits [N, K] float32, labels [N]) of the test split, shards in order."""
    out, ys = [], []
    for images, labels, mean, std in d2t.iter_shards(data_dir, "test"):
        x = d2t.normalise(images, mean, std)
        z = model(x)
        if tta == "flip":   # the image and its mirror image (NCHW: the width is dim 3)
            z = 0.5 * z + 0.5 * model(torch.flip(x, dims=[3]))
        out.append(z.float())
        ys.append(torch.from_numpy(labels))
    return torch.cat(out), torch.cat(ys)


def class_names(data_dir):
    path = sorted(glob.glob(os.path.join(data_dir, "test-*-of-*.h5")))[0]
    with h5py.File(path, "r") as f:
        names = f.attrs.get("class_names")
        if names is None and "class_names" in f:
            names = f["class_names"][()]
    return None if names is None else [d2t._str(n) for n in names]


def reference(z, y, k_top=5):
    """The counts ddptrain should report, and the near ties that may move them."""
    K = z.shape[1]
    pred = torch.argmax(z, dim=1)   # the first maximum, documented so
    top1 = int((pred == y).sum())
    # ddptrain's rule (a stable descending sort) and torch.topk's (ties unspecified)
    order = torch.sort(z, dim=1, descending=True, stable=True).indices
    in_top = (order[:, :k_top] == y[:, None]).any(dim=1) if K > k_top else None
    topk_hits = (torch.topk(z, k_top, dim=1).indices == y[:, None]).any(dim=1) if K > k_top else None
    s = torch.sort(z, dim=1, descending=True).values
    ties1 = int(((s[:, 0] - s[:, 1]).abs() < NEAR).sum()) if K > 1 else 0
    ties5 = int(((s[:, k_top - 1] - s[:, k_top]).abs() < NEAR).sum()) if K > k_top else 0
    matrix = np.zeros((K, K), dtype=np.int64)
    np.add.at(matrix, (y.numpy(), pred.numpy()), 1)
    return {"top1": top1, "topk_sorted": None if in_top is None else int(in_top.sum()),
            "topk_torch": None if topk_hits is None else int(topk_hits.sum()),
            "ties1": ties1, "ties5": ties5, "matrix": matrix, "images": np.bincount(y.numpy(), minlength=K)}


def compare(d, ref, names):
    """Empty when confusion.json (d) agrees with the reference, else the reasons."""
    why = []
    K = d["num_classes"]
    m = np.asarray(d["matrix"], dtype=np.int64)
    if m.shape != (K, K):
        return [f"matrix of shape {m.shape}, expected {(K, K)}"]
    if d["images"] != int(ref["images"].sum()) or int(m.sum()) != d["images"]:
        why.append(f"images {d['images']}, matrix total {int(m.sum())}, test split {int(ref['images'].sum())}")
    if list(m.sum(axis=1)) != list(ref["images"]):
        why.append(f"matrix rows sum to {list(m.sum(axis=1))}, the shards' labels count {list(ref['images'])}")
    cls = d["classes"]
    if [c["images"] for c in cls] != list(ref["images"]):
        why.append(f"per-class images {[c['images'] for c in cls]}, labels {list(ref['images'])}")
    if [c["correct"] for c in cls] != [int(m[k, k]) for k in range(K)] or d["correct"] != int(np.trace(m)):
        why.append("per-class correct or correct is not the matrix's diagonal")
    if [c["name"] for c in cls] != (names or [None] * K):
        why.append(f"class names {[c['name'] for c in cls]}, the shards' {names}")
    if abs(d["correct"] - ref["top1"]) > ref["ties1"]:
        why.append(f"top-1 {d['correct']}, torch {ref['top1']} (near ties {ref['ties1']})")
    moved = int(np.abs(m - ref["matrix"]).sum())
    if moved > 2 * ref["ties1"]:
        why.append(f"matrix differs from torch's in {moved} counts (near ties {ref['ties1']})")
    if ref["topk_sorted"] is not None:
        for rule in ("topk_sorted", "topk_torch"):
            if d["correct5"] is None or abs(d["correct5"] - ref[rule]) > ref["ties5"]:
                why.append(f"top-5 {d['correct5']}, torch ({rule}) {ref[rule]} (near ties {ref['ties5']})")
        if abs(d["test_acc5"] - d["correct5"] / d["images"]) > 1e-6:
            why.append(f"test_acc5 {d['test_acc5']} is not correct5 / images")
    elif d["correct5"] is not None:
        why.append("top-5 reported with 5 classes or fewer")
    if abs(d["test_acc"] - d["correct"] / d["images"]) > 1e-6:
        why.append(f"test_acc {d['test_acc']} is not correct / images")
    return why


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("job_dir")
    ap.add_argument("data_dir")
    ap.add_argument("--tta", default="none")
    ap.add_argument("--ema", action="store_true")
    a = ap.parse_args()
    with open(os.path.join(a.job_dir, "confusion.json")) as f:
        d = json.load(f)
    with open(os.path.join(a.job_dir, "checkpoints", "latest")) as f:
        ckpt = os.path.join(a.job_dir, "checkpoints", f.read().strip())
    names = class_names(a.data_dir)
    model, meta = d2t.load_model(ckpt, ema=a.ema)
    z, y = logits_of(model, a.data_dir, a.tta)
    ref = reference(z, y)
    why = compare(d, ref, names)
    if d["tta"] != a.tta or d["ema"] != a.ema or d["step"] != meta["global_step"]:
        why.append(f"tta {d['tta']!r}, ema {d['ema']}, step {d['step']}: expected {a.tta!r}, {a.ema}, the checkpoint's")
    # controls: each must be caught
    controls = {}
    t = dict(d, matrix=np.asarray(d["matrix"]).T.tolist())
    controls["transposed matrix"] = t
    if ref["topk_sorted"] is not None:
        top4 = reference(z, y, 4)["topk_sorted"]
        controls["top-4 for top-5"] = dict(d, correct5=top4, test_acc5=top4 / d["images"])
    m = np.asarray(d["matrix"])
    r = int(np.argmax(m.sum(axis=1)))
    c = int(np.argmax(m[r]))
    m2 = m.copy()
    m2[r, c] -= 1
    m2[r, (c + 1) % m.shape[1]] += 1
    controls["one image moved in the matrix"] = dict(d, matrix=m2.tolist())
    caught = {name: bool(compare(v, ref, names)) for name, v in controls.items()}
    if meta.get("has_ema"):   # the other weights of the same checkpoint
        other, _ = d2t.load_model(ckpt, ema=not a.ema)
        caught["the other weights (EMA / trained)"] = bool(compare(d, reference(*logits_of(other, a.data_dir, a.tta)),
                                                                   names))
    missed = [n for n, c in caught.items() if not c]
    if missed:
        why.append(f"controls not caught (the comparison cannot fail): {', '.join(missed)}")
    summary = (f"{d['images']} images, {d['num_classes']} classes: top-1 {d['correct']} (torch {ref['top1']}), "
               f"top-5 {d['correct5']} (torch sorted {ref['topk_sorted']}, topk {ref['topk_torch']}), "
               f"matrix {int(np.abs(m - ref['matrix']).sum())} counts apart, near ties {ref['ties1']}/{ref['ties5']}; "
               f"{len(caught)} controls caught")
    if why:
        print("FAIL: " + "; ".join(why) + " | " + summary)
        return 1
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
