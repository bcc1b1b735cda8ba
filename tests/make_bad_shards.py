#!/usr/bin/env python3
"""make_bad_shards.py KIND OUTDIR - a small dataset directory that is broken in one way.

Writes train shards (2) and a test shard (1) of 16 images each, 32x32x3 uint8, 10 classes,
then breaks one file (always OUTDIR/train-00000-of-00002.h5 unless said otherwise):

  truncated       the shard cut to half its size
  corrupt         the shard overwritten with garbage bytes (not HDF5)
  wrong_shape     images stored [N,3,32,32] (channels first)
  wrong_rank      images stored [N,32,32] (no channel axis)
  wrong_dtype     images stored float32
  bad_label       a label equal to num_classes (10)
  missing_labels  no 'labels' dataset
  count_mismatch  'labels' one shorter than 'images'
  no_train        only the test shard exists (the broken "file" is OUTDIR itself)

Prints the path of the broken file (or OUTDIR for no_train) on stdout, so a test can check
that the error message names it. Needs numpy and h5py: without them it exits 77 (the
automake code for "skip") with a one-line message.
"""
import os
import sys

KINDS = ("truncated", "corrupt", "wrong_shape", "wrong_rank", "wrong_dtype", "bad_label",
         "missing_labels", "count_mismatch", "no_train")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in KINDS:
        sys.stderr.write("usage: make_bad_shards.py KIND OUTDIR  (KIND: %s)\n" % ", ".join(KINDS))
        return 2
    try:
        import numpy as np
        import h5py
    except ImportError as e:
        sys.stderr.write("make_bad_shards.py: numpy and h5py are required (%s)\n" % e)
        return 77
    kind, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    n, num_classes = 16, 10

    def write(path, images, labels, with_labels=True):
        with h5py.File(path, "w") as f:
            f.create_dataset("images", data=images)
            if with_labels:
                f.create_dataset("labels", data=labels)
            f.attrs["num_classes"] = np.int32(num_classes)
            f.attrs["class_names"] = np.array([("class%d" % k).encode() for k in range(num_classes)])
            f.attrs["mean"] = np.array([0.5, 0.5, 0.5], np.float32)
            f.attrs["std"] = np.array([0.25, 0.25, 0.25], np.float32)

    def good():
        return (rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8),
                rng.integers(0, num_classes, n).astype(np.int64))

    names = ["train-00000-of-00002.h5", "train-00001-of-00002.h5", "test-00000-of-00001.h5"]
    if kind == "no_train":
        names = names[2:]
    for name in names:
        write(os.path.join(out, name), *good())

    bad = os.path.join(out, names[0])
    images, labels = good()
    if kind == "truncated":
        size = os.path.getsize(bad)
        with open(bad, "r+b") as f:
            f.truncate(size // 2)
    elif kind == "corrupt":
        with open(bad, "wb") as f:
            f.write(bytes(rng.integers(0, 256, 4096, dtype=np.uint8)))
    elif kind == "wrong_shape":
        write(bad, np.ascontiguousarray(images.transpose(0, 3, 1, 2)), labels)
    elif kind == "wrong_rank":
        write(bad, images[:, :, :, 0].copy(), labels)
    elif kind == "wrong_dtype":
        write(bad, images.astype(np.float32) / 255.0, labels)
    elif kind == "bad_label":
        labels[5] = num_classes
        write(bad, images, labels)
    elif kind == "missing_labels":
        write(bad, images, labels, with_labels=False)
    elif kind == "count_mismatch":
        write(bad, images, labels[:-1])
    elif kind == "no_train":
        bad = out
    print(bad)
    return 0


if __name__ == "__main__":
    sys.exit(main())
