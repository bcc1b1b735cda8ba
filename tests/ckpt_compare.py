"""Compares two ddptrain checkpoints bit for bit: every dataset under /model and /optimizer
(parameters, batch-norm buffers, num_batches_tracked, momentum, optimizer step count) must
have the same names, shapes, dtypes and bytes. --train-state also compares /train_state.
--buffer-rtol R lets batch-norm running statistics (running_mean, running_var) differ by up to
R * max|value| per tensor: on several ranks they are averaged over the ranks whenever a run
evaluates or checkpoints, so a run that stopped and resumed averages at other points than an
uninterrupted one (the same sum in another order, a rounding-level difference).
Prints one line: what matched, or the first differences (name and max |a-b|).
Exit 0 when identical, 1 otherwise, 2 when a file cannot be read."""
import argparse
import sys

import h5py
import numpy as np


def datasets(f, groups):
    out = {}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            out[name] = obj[()]

    for g in groups:
        if g in f:
            f[g].visititems(lambda n, o, g=g: visit(g + "/" + n, o))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--train-state", action="store_true", help="compare /train_state as well")
    ap.add_argument("--buffer-rtol", type=float, default=0.0)
    args = ap.parse_args()
    groups = ["model", "optimizer"] + (["train_state"] if args.train_state else [])
    try:
        with h5py.File(args.a, "r") as fa, h5py.File(args.b, "r") as fb:
            da, db = datasets(fa, groups), datasets(fb, groups)
    except (OSError, KeyError) as e:
        print(f"cannot read: {e}")
        return 2
    diffs, near = [], []
    for name in sorted(set(da) | set(db)):
        if name not in da or name not in db:
            diffs.append(f"{name}: only in {'a' if name in da else 'b'}")
            continue
        x, y = np.asarray(da[name]), np.asarray(db[name])
        if x.shape != y.shape or x.dtype != y.dtype:
            diffs.append(f"{name}: {x.dtype}{x.shape} vs {y.dtype}{y.shape}")
        elif not np.array_equal(x.view(np.uint8) if x.ndim else x, y.view(np.uint8) if y.ndim else y):
            d = float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64))))
            scale = float(np.max(np.abs(x.astype(np.float64)))) if x.size else 0.0
            if name.endswith((".running_mean", ".running_var")) and d <= args.buffer_rtol * scale:
                near.append(d / scale)
                continue
            diffs.append(f"{name}: max|a-b| {d:.3g}")
    nparams = sum(int(np.asarray(v).size) for k, v in da.items() if k.startswith("model/"))
    if diffs:
        print(f"{len(diffs)} of {len(set(da) | set(db))} datasets differ: " + "; ".join(diffs[:5]))
        return 1
    if near:
        print(f"{len(da) - len(near)} datasets identical ({nparams} model values), {len(near)} running statistics "
              f"within {args.buffer_rtol:g} relative (max {max(near):.2g})")
    else:
        print(f"{len(da)} datasets identical ({nparams} model values)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
