# SPDX-License-Identifier: BSD-3-Clause
"""Compares two ddptrain checkpoints bit for bit: every dataset under /model and /optimizer
(parameters, batch-norm buffers, num_batches_tracked, momentum, optimizer step count) must
have the same names, shapes, dtypes and bytes. --train-state also compares /train_state.
--all compares every dataset of the files but /config (that is /model, /optimizer and the
whole /train_state, per-rank running statistics included) and every attribute of every
object (root, groups, datasets): what a run that stopped and resumed must reproduce of an
uninterrupted one. /config is left out because it names the run's job directory and flags;
the files hold no timestamps (checkpoint.h).
Prints one line: what matched, or the first differences (name and max |a-b|).
Exit 0 when identical, 1 otherwise, 2 when a file cannot be read."""
import argparse
import sys

import h5py
import numpy as np

EXCLUDED_BY_ALL = {"config"}


def datasets(f, groups):
    """{path: value} of the datasets under the given top-level names (None: all of them)."""
    out = {}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            out[name] = obj[()]

    for g in (groups if groups is not None else [k for k in f if k not in EXCLUDED_BY_ALL]):
        if g not in f:
            continue
        if isinstance(f[g], h5py.Dataset):
            out[g] = f[g][()]
        else:
            f[g].visititems(lambda n, o, g=g: visit(g + "/" + n, o))
    return out


def attributes(f):
    """{'<object path>@<attribute>': value} of every object but the excluded ones."""
    out = {f"/@{k}": v for k, v in f.attrs.items()}

    def visit(name, obj):
        if name.split("/")[0] in EXCLUDED_BY_ALL:
            return
        for k, v in obj.attrs.items():
            out[f"/{name}@{k}"] = v

    f.visititems(visit)
    return out


def same_bytes(x, y):
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    if x.dtype.kind in "OSUa":   # strings: compare the values
        return bool(np.array_equal(x, y))
    return np.ascontiguousarray(x).tobytes() == np.ascontiguousarray(y).tobytes()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--train-state", action="store_true", help="compare /train_state as well")
    ap.add_argument("--all", action="store_true",
                    help="every dataset but /config, and every attribute")
    args = ap.parse_args()
    groups = None if args.all else ["model", "optimizer"] + (["train_state"] if args.train_state else [])
    try:
        with h5py.File(args.a, "r") as fa, h5py.File(args.b, "r") as fb:
            da, db = datasets(fa, groups), datasets(fb, groups)
            aa, ab = (attributes(fa), attributes(fb)) if args.all else ({}, {})
    except (OSError, KeyError) as e:
        print(f"cannot read: {e}")
        return 2
    diffs = []
    for name in sorted(set(da) | set(db)):
        if name not in da or name not in db:
            diffs.append(f"{name}: only in {'a' if name in da else 'b'}")
            continue
        x, y = np.asarray(da[name]), np.asarray(db[name])
        if x.shape != y.shape or x.dtype != y.dtype:
            diffs.append(f"{name}: {x.dtype}{x.shape} vs {y.dtype}{y.shape}")
        elif not same_bytes(x, y):
            if x.dtype.kind in "fiu":
                d = float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64))))
                n = int(np.count_nonzero(x != y))
                diffs.append(f"{name}: {n} of {x.size} values differ, max|a-b| {d:.3g}")
            else:
                diffs.append(f"{name}: differs")
    for name in sorted(set(aa) | set(ab)):
        if name not in aa or name not in ab:
            diffs.append(f"attribute {name}: only in {'a' if name in aa else 'b'}")
        elif not same_bytes(aa[name], ab[name]):
            diffs.append(f"attribute {name}: {aa[name]!r} vs {ab[name]!r}")
    nparams = sum(int(np.asarray(v).size) for k, v in da.items() if k.startswith("model/"))
    if diffs:
        what = "datasets and attributes" if args.all else "datasets"
        print(f"{len(diffs)} of {len(set(da) | set(db)) + len(set(aa) | set(ab))} {what} differ: "
              + "; ".join(diffs[:8]) + ("; ..." if len(diffs) > 8 else ""))
        return 1
    what = f"{len(da)} datasets" + (f" and {len(aa)} attributes" if args.all else "")
    print(f"{what} identical ({nparams} model values)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
