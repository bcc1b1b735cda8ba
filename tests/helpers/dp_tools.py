# SPDX-License-Identifier: BSD-3-Clause
"""dp_tools.py - helpers of the data-parallel shell tests (h5py, numpy, json).

    dp_tools.py interleave SRC_DIR DST_DIR B
        DST_DIR/train-00000-of-00001.h5 holds the samples the ranks of a --no-shuffle run on
        SRC_DIR's W train shards (one per rank) see, in the order one rank with batch W*B sees
        them: [shard0[0:B], shard1[0:B], ..., shard0[B:2B], ...]. The test split is copied.
    dp_tools.py uneven SRC_DIR DST_DIR N1 N2 ...
        DST_DIR's train split: shards of N1, N2, ... samples cut in order from SRC_DIR's train
        samples; the test split is copied.
    dp_tools.py corrupt SHARD.h5
        Rewrites the shard with its images in checksummed (fletcher32) chunks, then damages
        bytes inside the first chunk: the file still opens and its header is valid, but
        reading its images fails (only the rank that reads this shard notices).
    dp_tools.py compare A.h5 B.h5
        Prints, per tensor of /model, max|a-b| / max|b| (max|a-b| where max|b| is 0), then a
        last line "max_rel_diff X tensors N". Exit 1 when the tensor sets or shapes differ.
    dp_tools.py trace JOB_DIR WORLD
        Checks trace-rank-*.json of every rank: valid Chrome trace JSON, the event kinds, and,
        per step, that every all-reduce bucket but the last was posted before that step's
        backward pass ended. Prints ok:/FAIL: lines; exit 1 on a failure.
"""
import glob
import json
import os
import sys

import h5py
import numpy as np


def copy_attrs(src, dst):
    for k, v in src.attrs.items():
        dst.attrs[k] = v


def read_split(d, split):
    files = sorted(glob.glob(os.path.join(d, split + "-*-of-*.h5")))
    if not files:
        sys.exit("dp_tools: no %s shards in %s" % (split, d))
    return files


def write_shard(path, images, labels, like):
    with h5py.File(path, "w") as f:
        f["images"] = images
        f["labels"] = labels.astype(np.int32)
        copy_attrs(like, f)


def copy_test(src_dir, dst_dir):
    for p in read_split(src_dir, "test"):
        with h5py.File(p, "r") as s:
            write_shard(os.path.join(dst_dir, os.path.basename(p)), s["images"][()], s["labels"][()], s)


def interleave(src_dir, dst_dir, b):
    os.makedirs(dst_dir, exist_ok=True)
    shards = [h5py.File(p, "r") for p in read_split(src_dir, "train")]
    n = min(s["labels"].shape[0] for s in shards)
    xs, ys = [], []
    for k in range(0, n - n % b, b):
        for s in shards:
            xs.append(s["images"][k:k + b])
            ys.append(s["labels"][k:k + b])
    write_shard(os.path.join(dst_dir, "train-00000-of-00001.h5"), np.concatenate(xs), np.concatenate(ys), shards[0])
    for s in shards:
        s.close()
    copy_test(src_dir, dst_dir)


def uneven(src_dir, dst_dir, sizes):
    os.makedirs(dst_dir, exist_ok=True)
    xs, ys, like = [], [], None
    for p in read_split(src_dir, "train"):
        with h5py.File(p, "r") as s:
            xs.append(s["images"][()])
            ys.append(s["labels"][()])
            if like is None:
                like = {k: v for k, v in s.attrs.items()}
    x, y = np.concatenate(xs), np.concatenate(ys)
    if sum(sizes) > len(y):
        sys.exit("dp_tools: %d samples asked for, %s has %d" % (sum(sizes), src_dir, len(y)))

    class Like:
        attrs = like

    at = 0
    for i, n in enumerate(sizes):
        name = "train-%05d-of-%05d.h5" % (i, len(sizes))
        write_shard(os.path.join(dst_dir, name), x[at:at + n], y[at:at + n], Like)
        at += n
    copy_test(src_dir, dst_dir)


def corrupt(path):
    with h5py.File(path, "r") as s:
        x, y, attrs = s["images"][()], s["labels"][()], dict(s.attrs)
    with h5py.File(path, "w") as f:
        f.create_dataset("images", data=x, chunks=(min(64, len(x)),) + x.shape[1:], fletcher32=True)
        f["labels"] = y.astype(np.int32)
        for k, v in attrs.items():
            f.attrs[k] = v
    with h5py.File(path, "r") as f:
        info = f["images"].id.get_chunk_info(0)
    with open(path, "r+b") as fh:
        fh.seek(info.byte_offset + info.size // 2)
        fh.write(bytes(range(1, 65)))
    with h5py.File(path, "r") as f:
        try:
            f["images"][0:1]
        except OSError:
            return 0
    sys.exit("dp_tools: %s: damaged chunk still reads" % path)


def compare(pa, pb):
    with h5py.File(pa, "r") as fa, h5py.File(pb, "r") as fb:
        ka, kb = sorted(fa["model"].keys()), sorted(fb["model"].keys())
        if ka != kb or not ka:
            print("FAIL: tensor sets differ: %s vs %s" % (ka, kb))
            return 1
        worst = 0.0
        for k in ka:
            a = np.asarray(fa["model"][k][()], dtype=np.float64)
            b = np.asarray(fb["model"][k][()], dtype=np.float64)
            if a.shape != b.shape:
                print("FAIL: %s: shape %s vs %s" % (k, a.shape, b.shape))
                return 1
            den = float(np.max(np.abs(b))) if b.size else 0.0
            num = float(np.max(np.abs(a - b))) if a.size else 0.0
            rel = num / den if den > 0 else num
            print("%-40s %.3e" % (k, rel))
            worst = max(worst, rel)
        print("max_rel_diff %.6e tensors %d" % (worst, len(ka)))
    return 0


def trace(job_dir, world):
    fails = 0

    def ok(msg):
        print("ok: " + msg)

    def bad(msg):
        nonlocal fails
        fails += 1
        print("FAIL: " + msg)

    files = sorted(glob.glob(os.path.join(job_dir, "trace-rank-*.json")))
    if len(files) != world:
        bad("%d trace files for %d ranks: %s" % (len(files), world, files))
        return 1
    for path in files:
        name = os.path.basename(path)
        try:
            with open(path) as f:
                doc = json.load(f)
            ev = doc["traceEvents"]
            assert isinstance(ev, list)
        except (ValueError, KeyError, AssertionError) as e:
            bad("%s: not Chrome trace JSON: %s" % (name, e))
            continue
        spans = [e for e in ev if e.get("ph") == "X"]
        malformed = [e for e in spans if not all(k in e for k in ("name", "ts", "dur", "pid", "tid"))
                     or not isinstance(e["ts"], (int, float)) or e["dur"] < 0]
        if malformed or any(e.get("ph") not in ("X", "M") for e in ev):
            bad("%s: malformed events, e.g. %s" % (name, (malformed or ev)[0]))
            continue
        kinds = {}
        for e in spans:
            kind = e["name"].rstrip("0123456789 ")
            kinds[kind] = kinds.get(kind, 0) + 1
        want = ["data wait", "forward", "backward", "backward layer", "allreduce bucket", "gradient wait", "optimizer"]
        missing = [k for k in want if k not in kinds]
        if missing:
            bad("%s: no %s events (have %s)" % (name, missing, kinds))
            continue
        ok("%s: Chrome trace JSON, %d events: %s" % (name, len(spans),
                                                    ", ".join("%s %d" % (k, kinds[k]) for k in want)))
        # Steps in trace order: a step is one 'forward' .. 'optimizer' window.
        spans.sort(key=lambda e: e["ts"])
        buckets = sorted({e["args"]["index"] for e in spans if e["name"].startswith("allreduce bucket")})
        nb = len(buckets)
        if nb < 3 or buckets != list(range(nb)):
            bad("%s: bucket indices %s (want 0..N-1, N >= 3)" % (name, buckets))
            continue
        bwd = [e for e in spans if e["name"] == "backward"]
        opt = [e for e in spans if e["name"] == "optimizer"]
        if len(bwd) != len(opt) or not bwd:
            bad("%s: %d backward but %d optimizer events" % (name, len(bwd), len(opt)))
            continue
        checked, late = 0, []
        for i, (b, o) in enumerate(zip(bwd, opt)):
            start = b["ts"]
            end_step = o["ts"] + o["dur"]
            posted = {}
            for e in spans:
                if e["name"].startswith("allreduce bucket") and start <= e["ts"] <= end_step:
                    posted[e["args"]["index"]] = e["ts"]
            if sorted(posted) != buckets:
                bad("%s: step %d: buckets %s posted (want %s)" % (name, i + 1, sorted(posted), buckets))
                break
            bwd_end = b["ts"] + b["dur"]
            checked += 1
            late += [(i + 1, k) for k in buckets[:-1] if posted[k] >= bwd_end]
            if i == 0:
                first = ", ".join("%d at +%.0f us" % (k, posted[k] - start) for k in buckets)
                print("   step 1: backward %.0f us; buckets posted: %s" % (b["dur"], first))
        if checked < 3:
            bad("%s: only %d steps could be checked" % (name, checked))
        elif late:
            bad("%s: bucket posted after backward ended (step, bucket): %s" % (name, late[:10]))
        else:
            ok("%s: %d steps, %d buckets: every bucket but the last started before backward ended"
               % (name, checked, nb))
    return 1 if fails else 0


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    cmd, args = argv[1], argv[2:]
    if cmd == "interleave" and len(args) == 3:
        interleave(args[0], args[1], int(args[2]))
        return 0
    if cmd == "uneven" and len(args) >= 3:
        uneven(args[0], args[1], [int(a) for a in args[2:]])
        return 0
    if cmd == "corrupt" and len(args) == 1:
        return corrupt(args[0])
    if cmd == "compare" and len(args) == 2:
        return compare(args[0], args[1])
    if cmd == "trace" and len(args) == 2:
        return trace(args[0], int(args[1]))
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
