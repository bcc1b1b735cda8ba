#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
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
  huge_count      images and labels declare 2^62+1 samples in chunks never written (1.7 kB);
                  n * 4 bytes of labels wraps to 4
  huge_count61    the same with 2^61 samples (n * 4 wraps to 2^63: an allocation failure)
  unwritten       2^30 samples declared, within the per-shard limit, in chunks never written:
                  once the loader allocated and filled 4 GiB of labels for a 1.7 kB file
  inf_mean        attribute 'mean' holds an infinity
  nan_std         attribute 'std' holds a NaN
  escape_names    a class name holds an ANSI escape sequence (ESC [ 2 J: clear the screen)
  attr_overrun    the dataspace size of attribute 'mean' (a version 1 attribute message, as
                  h5py writes it) patched to run 8 kB past its message: HDF5 1.10 read past a
                  heap buffer decoding it
  btree_undef     the first child of the root group's B-tree (h5py writes old-style groups: a
                  v1 B-tree of symbol table nodes) set to the undefined address: HDF5 1.10
                  read a symbol table node from address 2^64 - 1 and crashed

JPEG shards (the layout of `import --encoding jpeg`: 'jpeg', 'offsets', 'sizes', attributes
'encoding' and 'image_size' 32; 16 images of 32x32 or 32x48, PIL's JPEGs), broken the same way:

  jpeg_offsets_order  offsets[4] == offsets[3]: sample 3 of no bytes
  jpeg_offsets_end    4 bytes more in 'jpeg' than offsets[N] says
  jpeg_size_zero      sizes[6] == (0, 32)
  jpeg_garbled        the second half of sample 5's bytes (its end marker included) replaced
                      by random bytes: a corrupt JPEG, which libjpeg would pad with grey
  jpeg_no_image_size  no attribute 'image_size'
  jpeg_resized        sample 0 (32x32 in 'sizes') replaced by a valid JPEG of 32x44: at a
                      reduced DCT scale (a crop of 8) both decode to sizes that fit the box
  jpeg_mixed          train-00001-of-00002.h5 raw beside a JPEG train-00000 (the broken file
                      is train-00001)
These need PIL as well and are not in KINDS (JPEG_KINDS): the trainer's tests leave them out.

Prints the path of the broken file (or OUTDIR for no_train) on stdout, so a test can check
that the error message names it. Needs numpy and h5py: without them it exits 77 (the
automake code for "skip") with a one-line message.
"""
import os
import sys

KINDS = ("truncated", "corrupt", "wrong_shape", "wrong_rank", "wrong_dtype", "bad_label",
         "missing_labels", "count_mismatch", "no_train", "huge_count", "huge_count61", "unwritten", "inf_mean",
         "nan_std", "escape_names", "attr_overrun", "btree_undef")
JPEG_KINDS = ("jpeg_offsets_order", "jpeg_offsets_end", "jpeg_size_zero", "jpeg_garbled", "jpeg_no_image_size",
              "jpeg_mixed", "jpeg_resized")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in KINDS + JPEG_KINDS:
        sys.stderr.write("usage: make_bad_shards.py KIND OUTDIR  (KIND: %s)\n" % ", ".join(KINDS + JPEG_KINDS))
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

    def write(path, images, labels, with_labels=True, mean=0.5, std=0.25, names=None):
        with h5py.File(path, "w") as f:
            f.create_dataset("images", data=images)
            if with_labels:
                f.create_dataset("labels", data=labels)
            f.attrs["num_classes"] = np.int32(num_classes)
            names = names or [("class%d" % k).encode() for k in range(num_classes)]
            f.attrs["class_names"] = np.array(names)
            f.attrs["mean"] = np.array([0.5, mean, 0.5], np.float32)
            f.attrs["std"] = np.array([0.25, std, 0.25], np.float32)

    def write_huge(path, count):
        # Only the header claims the samples: chunks never written take no space.
        with h5py.File(path, "w") as f:
            f.create_dataset("images", shape=(count, 32, 32, 3), dtype="u1", chunks=(1, 32, 32, 3))
            f.create_dataset("labels", shape=(count,), dtype="i4", chunks=(16,), fillvalue=3)
            f.attrs["num_classes"] = np.int32(num_classes)

    def good():
        return (rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8),
                rng.integers(0, num_classes, n).astype(np.int64))

    names = ["train-00000-of-00002.h5", "train-00001-of-00002.h5", "test-00000-of-00001.h5"]
    if kind in JPEG_KINDS:
        return jpeg_kind(kind, out, names, rng, n, num_classes, write, good)
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
    elif kind == "huge_count":
        write_huge(bad, 2**62 + 1)
    elif kind == "huge_count61":
        write_huge(bad, 2**61)
    elif kind == "unwritten":
        write_huge(bad, 2**30)
    elif kind == "inf_mean":
        write(bad, images, labels, mean=float("inf"))
    elif kind == "nan_std":
        write(bad, images, labels, std=float("nan"))
    elif kind == "escape_names":
        write(bad, images, labels, names=[b"\x1b[2Jcat"] + [b"c%d" % k for k in range(1, num_classes)])
    elif kind == "attr_overrun":
        with open(bad, "r+b") as f:
            data = f.read()
            # the message: version 1, reserved, name size 5 ("mean" and its NUL), datatype
            # size, dataspace size, then the name
            at = data.find(b"\x01\x00\x05\x00")
            while at >= 0 and data[at + 8:at + 13] != b"mean\x00":
                at = data.find(b"\x01\x00\x05\x00", at + 1)
            if at < 0:
                sys.stderr.write("make_bad_shards.py: attribute 'mean' not found as a version 1 message\n")
                return 1
            f.seek(at + 6)
            f.write((0x2000).to_bytes(2, "little"))
    elif kind == "btree_undef":
        with open(bad, "r+b") as f:
            data = f.read()
            # A group's B-tree node: "TREE", type 0. The shard's one group is the root (the
            # datasets are contiguous, so there is no chunk B-tree, type 1, either); its first
            # child follows the 24-byte node header and the first key (8-byte addresses).
            trees = [i for i in range(len(data)) if data.startswith(b"TREE\x00", i)]
            if len(trees) != 1:
                sys.stderr.write("make_bad_shards.py: %d group B-tree nodes, 1 expected\n" % len(trees))
                return 1
            f.seek(trees[0] + 32)
            f.write(b"\xff" * 8)
    print(bad)
    return 0


def jpeg_kind(kind, out, names, rng, n, num_classes, write_raw, good_raw):
    import io
    import numpy as np
    import h5py
    try:
        from PIL import Image
    except ImportError as e:
        sys.stderr.write("make_bad_shards.py: PIL is required for the JPEG kinds (%s)\n" % e)
        return 77

    def samples():
        blobs, sizes = [], []
        for i in range(n):
            h, w = (32, 48) if i % 3 == 1 else (32, 32)
            if i % 4 == 2:
                h, w = w, h
            b = io.BytesIO()
            Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(b, "JPEG", quality=90)
            blobs.append(b.getvalue())
            sizes.append((h, w))
        return blobs, np.array(sizes, np.uint16), rng.integers(0, num_classes, n).astype(np.int32)

    def write(path, blobs, sizes, labels, extra=b"", image_size=True):
        off = np.cumsum([0] + [len(b) for b in blobs]).astype(np.uint64)
        with h5py.File(path, "w") as f:
            f.create_dataset("jpeg", data=np.frombuffer(b"".join(blobs) + extra, np.uint8))
            f.create_dataset("offsets", data=off)
            f.create_dataset("sizes", data=sizes)
            f.create_dataset("labels", data=labels)
            f.attrs["num_classes"] = np.int32(num_classes)
            f.attrs["encoding"] = "jpeg"
            if image_size:
                f.attrs["image_size"] = np.int32(32)

    for name in names:
        write(os.path.join(out, name), *samples())
    bad = os.path.join(out, names[0])
    blobs, sizes, labels = samples()
    if kind == "jpeg_offsets_order":
        write(bad, blobs, sizes, labels)
        with h5py.File(bad, "r+") as f:
            f["offsets"][4] = f["offsets"][3]
    elif kind == "jpeg_offsets_end":
        write(bad, blobs, sizes, labels, extra=b"\0\0\0\0")
    elif kind == "jpeg_size_zero":
        sizes[6] = (0, 32)
        write(bad, blobs, sizes, labels)
    elif kind == "jpeg_garbled":
        b = bytearray(blobs[5])
        half = len(b) // 2
        b[half:] = rng.integers(0, 256, len(b) - half, dtype=np.uint8).tobytes()
        blobs[5] = bytes(b)
        write(bad, blobs, sizes, labels)
    elif kind == "jpeg_no_image_size":
        write(bad, blobs, sizes, labels, image_size=False)
    elif kind == "jpeg_resized":
        assert tuple(sizes[0]) == (32, 32)
        b = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (32, 44, 3), dtype=np.uint8)).save(b, "JPEG", quality=90)
        blobs[0] = b.getvalue()
        write(bad, blobs, sizes, labels)
    elif kind == "jpeg_mixed":
        bad = os.path.join(out, names[1])
        os.unlink(bad)
        write_raw(bad, *good_raw())
    print(bad)
    return 0


if __name__ == "__main__":
    sys.exit(main())
