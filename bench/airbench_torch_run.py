#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""airbench94's own training (its lib_airbench94.py and utils.py) on the CPU in
float32, on the CIFAR-10 shards ddptrain trains on: the reference recipes/cifar10-airbench.json's
accuracy and time are measured against (docs/benchmarks.md).

    airbench_torch_run.py --airbench CHECKOUT --data DIR [--work DIR] [--threads T] [--seed S]
                          [--epochs E] [--verbose]

DIR holds ddptrain's shards (train-*.h5 and test-*.h5 of 32x32 images); they are written into
WORK/cifar10/train.pt and test.pt in the form airbench's CifarLoader caches CIFAR-10 (uint8 NHWC
images, labels, class names), so that its loader reads them instead of downloading. Its GPU
calls are made to run on the CPU: Module.half() and .cuda() keep the module as it is,
Tensor.half() gives float32, torch.load maps to the CPU, and its CUDA timing events read the
wall clock. One function is replaced: the whitening's patch covariance is summed in float64
(whitening_in_double says why). Then train94() runs as airbench runs it (batch 1024, 9.9
epochs, its whitening, Lookahead, alternating flip and translate), quietly unless --verbose
(its per-epoch evaluation), and the final model is evaluated with its tta_level 2. Prints the
training time, the test accuracy without and with the test-time augmentation. Needs torch, torchvision, h5py and numpy."""
import argparse
import glob
import importlib
import os
import sys
import time
import types

import h5py
import numpy as np
import torch


def write_split(data, split, out):
    paths = sorted(glob.glob(os.path.join(data, f"{split}-*-of-*.h5")))
    if not paths:
        sys.exit(f"airbench_torch_run: {data}: no {split}-*-of-*.h5 shards")
    images, labels, classes = [], [], None
    for p in paths:
        with h5py.File(p, "r") as f:
            images.append(np.asarray(f["images"]))
            labels.append(np.asarray(f["labels"]).astype(np.int64))
            names = f.attrs.get("class_names")
            if names is not None:
                classes = [n.decode() if isinstance(n, bytes) else str(n) for n in names]
    x = np.concatenate(images)
    if x.shape[1:] != (32, 32, 3):
        sys.exit(f"airbench_torch_run: {data}: images of {x.shape[1:]}, airbench needs 32x32x3")
    torch.save({"images": torch.from_numpy(x), "labels": torch.from_numpy(np.concatenate(labels)),
                "classes": classes or [str(k) for k in range(10)]}, out)
    return len(x)


class WallClockEvent:
    """torch.cuda.Event(enable_timing=True) on the CPU: record() notes the time."""

    def __init__(self, **kwargs):
        self.t = 0.0

    def record(self):
        self.t = time.perf_counter()

    def elapsed_time(self, end):
        return 1e3 * (end.t - self.t)


def on_the_cpu():
    torch.nn.Module.half = lambda self: self
    torch.nn.Module.cuda = lambda self, *a, **k: self
    torch.Tensor.half = lambda self, *a, **k: self.float()
    torch.Tensor.cuda = lambda self, *a, **k: self
    load = torch.load
    torch.load = lambda *a, **k: load(*a, **dict(k, map_location="cpu"))
    torch.cuda.Event = WallClockEvent
    torch.cuda.synchronize = lambda *a, **k: None


def whitening_in_double(utils):
    """airbench's get_whitening_parameters with the patches' second moment summed in float64.
    In float32 on the CPU, the sum over 4.8 million patches of 5,000 images is off by about 1e-3
    where the smallest eigenvalues of these JPEG-decoded images are 1.2e-4 and 1.9e-4: three of
    them come out negative, below -eps, and sqrt(eigenvalue + eps) makes the whole first layer
    NaN. The eigenvectors and everything after are airbench's."""
    def get_whitening_parameters(patches):
        n, c, h, w = patches.shape
        flat = patches.reshape(n, -1).double()
        cov = (flat.T @ flat) / n
        eigenvalues, eigenvectors = torch.linalg.eigh(cov, UPLO="U")
        eigenvalues, eigenvectors = eigenvalues.float(), eigenvectors.float()
        return eigenvalues.flip(0).view(-1, 1, 1, 1), eigenvectors.T.reshape(c * h * w, c, h, w).flip(0)
    utils.get_whitening_parameters = get_whitening_parameters


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--airbench", required=True, help="a checkout of KellerJordan/cifar10-airbench")
    ap.add_argument("--data", required=True, help="ddptrain's CIFAR-10 shards")
    ap.add_argument("--work", default="airbench-work", help="where cifar10/train.pt and test.pt are written")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=float, help="override airbench's 9.9")
    ap.add_argument("--verbose", action="store_true", help="airbench's own table: each epoch's loss and test "
                    "accuracy (its evaluations are not in its time), and its time at the end")
    a = ap.parse_args()
    if not os.path.isfile(os.path.join(a.airbench, "airbench", "lib_airbench94.py")):
        sys.exit(f"airbench_torch_run: --airbench {a.airbench}: no airbench/lib_airbench94.py (a checkout of "
                 "KellerJordan/cifar10-airbench is needed)")
    os.makedirs(os.path.join(a.work, "cifar10"), exist_ok=True)
    n_train = write_split(a.data, "train", os.path.join(a.work, "cifar10", "train.pt"))
    n_test = write_split(a.data, "test", os.path.join(a.work, "cifar10", "test.pt"))
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    on_the_cpu()
    pkg = types.ModuleType("airbench")   # its __init__ imports every variant: not needed
    pkg.__path__ = [os.path.join(os.path.abspath(a.airbench), "airbench")]
    sys.modules["airbench"] = pkg
    os.chdir(a.work)   # its loaders read cifar10/ from the working directory
    lib = importlib.import_module("airbench.lib_airbench94")
    utils = importlib.import_module("airbench.utils")
    whitening_in_double(utils)
    epochs = a.epochs or lib.hyp["opt"]["train_epochs"]
    print(f"airbench94 on the CPU (float32, {torch.get_num_threads()} threads): {n_train} training and {n_test} test "
          f"images from {a.data}, {epochs} epochs, seed {a.seed}", flush=True)
    t0 = time.perf_counter()
    model = lib.train94(epochs=epochs, verbose=a.verbose)
    train_s = time.perf_counter() - t0
    test = utils.CifarLoader("cifar10", train=False, batch_size=2000)
    t1 = time.perf_counter()
    acc0 = utils.evaluate(model, test, tta_level=0)
    acc2 = utils.evaluate(model, test, tta_level=lib.hyp["net"]["tta_level"])
    print(f"train {train_s:.1f} s (whitening included); test_acc {acc0:.4f}, with TTA level "
          f"{lib.hyp['net']['tta_level']} {acc2:.4f}; evaluation {time.perf_counter() - t1:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
