#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Image trees for tests/test_import.sh, and the check of an imported dataset against PIL.

  make_image_tree.py square DIR     train/ and test/ of 3 classes, every image 32x32: JPEG
                                    (colour, grey, progressive), PNG (RGB, grey, 1-bit, palette
                                    with and without tRNS, RGBA, grey+alpha, 16-bit colour and
                                    grey), some with misleading file names
  make_image_tree.py mixed DIR      the same modes at sizes from 16x20 to 120x17
  make_image_tree.py flat DIR       one tree DIR/<class>/* (for --test_fraction)
  make_image_tree.py classes DIR K TRAIN TEST
                                    a learnable set of K classes (tests/test_many_classes.sh):
                                    TRAIN and TEST images per class, 80x72, JPEG and PNG; a
                                    class is a 4x4 grid of colours, an image it shifted by up to
                                    6 pixels, with noise
  make_image_tree.py check_jpeg TREE OUT S Q
                                    the same for OUT's JPEG shards (import --encoding jpeg):
                                    each stored JPEG decoded by PIL has the size 'sizes' records,
                                    the shorter side S and the longer at most 2S, and lies within
                                    a mean absolute difference of 1 level of PIL's JPEG (quality
                                    Q) of Resize(S) with the aspect kept, cut to its centre 2S;
                                    the offsets run from 0 to the end of 'jpeg'; mean/std are
                                    those of the resized pixels
  make_image_tree.py check TREE OUT S [FRACTION]
                                    every image of OUT's shards against PIL's decode of TREE's
                                    file + torchvision's Resize(S) + CenterCrop(S), whatever the
                                    stored order (not class by class: shuffled); prints the
                                    largest difference per kind and exits 1 past the tolerance
"""
import glob
import io
import os
import struct
import sys
import zlib

import h5py
import numpy as np
from PIL import Image


def rng_image(seed, w, h):
    r = np.random.RandomState(seed)
    # Smooth gradients plus noise: JPEG-like content, and something a resize can get wrong.
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 255 // max(w - 1, 1)), (y * 255 // max(h - 1, 1)), ((x + y) * 127 // max(w + h - 2, 1))], -1)
    return np.clip(base + r.randint(-40, 41, size=(h, w, 3)), 0, 255).astype(np.uint8)


def png_chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)


def png16(arr, color_type):
    """A 16-bit PNG (PIL cannot write 16-bit colour): arr uint16 [h, w, c]."""
    h, w = arr.shape[:2]
    raw = b"".join(b"\x00" + arr[y].astype(">u2").tobytes() for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, color_type, 0, 0, 0))
            + png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b""))


def write_kind(path, kind, seed, w, h):
    rgb = rng_image(seed, w, h)
    im = Image.fromarray(rgb)
    b = io.BytesIO()
    if kind == "jpeg":
        im.save(b, "JPEG", quality=90)
    elif kind == "jpeg_grey":
        im.convert("L").save(b, "JPEG", quality=85)
    elif kind == "jpeg_progressive":
        im.save(b, "JPEG", quality=75, progressive=True, subsampling=0)
    elif kind == "png":
        im.save(b, "PNG")
    elif kind == "png_grey":
        im.convert("L").save(b, "PNG")
    elif kind == "png_1bit":
        im.convert("1").save(b, "PNG")
    elif kind == "png_palette":
        im.convert("P", palette=Image.ADAPTIVE, colors=40).save(b, "PNG")
    elif kind == "png_palette_trns":
        p = im.convert("P", palette=Image.ADAPTIVE, colors=16)
        p.save(b, "PNG", transparency=3)
    elif kind == "png_rgba":
        a = np.random.RandomState(seed + 1).randint(0, 256, size=(h, w, 1)).astype(np.uint8)
        Image.fromarray(np.concatenate([rgb, a], -1), "RGBA").save(b, "PNG")
    elif kind == "png_la":
        a = np.random.RandomState(seed + 2).randint(0, 256, size=(h, w)).astype(np.uint8)
        Image.merge("LA", [im.convert("L"), Image.fromarray(a)]).save(b, "PNG")
    elif kind == "png16":
        v = rgb.astype(np.uint16) * 257 + np.random.RandomState(seed + 3).randint(0, 257, size=rgb.shape).astype(np.uint16)
        b.write(png16(v, 2))
    elif kind == "png16_grey":
        g = np.asarray(im.convert("L")).astype(np.uint16) * 256 + 200
        b.write(png16(g[..., None], 0))
    else:
        raise SystemExit("unknown kind " + kind)
    with open(path, "wb") as f:
        f.write(b.getvalue())


KINDS = ["jpeg", "jpeg_grey", "jpeg_progressive", "png", "png_grey", "png_1bit", "png_palette",
         "png_palette_trns", "png_rgba", "png_la", "png16", "png16_grey"]
# Names that do not tell the format (the content does).
NAMES = {"jpeg": "a.jpg", "jpeg_grey": "b.JPEG", "jpeg_progressive": "c.png", "png": "d.png",
         "png_grey": "e", "png_1bit": "f.png", "png_palette": "g.gif", "png_palette_trns": "h.png",
         "png_rgba": "i.png", "png_la": "j.png", "png16": "k.png", "png16_grey": "l.jpg"}
CLASSES = ["cat", "Dog", "bird_2"]   # byte order: Dog, bird_2, cat
MIXED_SIZES = [(40, 30), (30, 50), (64, 64), (33, 47), (24, 24), (120, 17), (16, 20), (25, 24)]


def make(root, mode):
    seed = 0
    splits = ["train", "test"] if mode != "flat" else [""]
    for split in splits:
        for ci, c in enumerate(CLASSES):
            d = os.path.join(root, split, c)
            os.makedirs(d, exist_ok=True)
            kinds = KINDS if split != "test" else KINDS[ci::3]
            for ki, k in enumerate(kinds):
                seed += 1
                w, h = (32, 32) if mode != "mixed" else MIXED_SIZES[(ki + ci) % len(MIXED_SIZES)]
                write_kind(os.path.join(d, NAMES[k]), k, seed, w, h)


def kind_of(path):
    name = os.path.basename(path)
    return [k for k, n in NAMES.items() if n == name][0]


def pil_rgb(path):
    im = Image.open(path)
    if im.mode in ("I;16", "I;16B", "I"):   # 16-bit grey: the high byte (PIL's convert clips)
        g = (np.asarray(im).astype(np.uint32) >> 8).astype(np.uint8)
        return Image.fromarray(np.stack([g, g, g], -1))
    return im.convert("RGB")


def resize_crop(im, s):
    """torchvision's Resize(s) + CenterCrop(s) on a PIL image."""
    w, h = im.size
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = s, int(s * long / short)
    nw, nh = (new_short, new_long) if w <= h else (new_long, new_short)
    if (nw, nh) != (w, h):
        im = im.resize((nw, nh), Image.BILINEAR)
    top, left = int(round((nh - s) / 2.0)), int(round((nw - s) / 2.0))
    return np.asarray(im.crop((left, top, left + s, top + s)))


def class_files(d):
    """The files of class folder d in torchvision ImageFolder's order: sorted(os.walk(d,
    followlinks=True)), each folder's files sorted; hidden names skipped, as the importer does."""
    out = []
    for root, _, files in sorted(os.walk(d, followlinks=True)):
        rel = os.path.relpath(root, d)
        if rel != "." and any(part.startswith(".") for part in rel.split(os.sep)):
            continue
        out += [os.path.join(root, f) for f in sorted(files) if not f.startswith(".")]
    return out


def samples(tree, fraction):
    if fraction is None:
        classes = sorted(os.listdir(os.path.join(tree, "train")))
        out = {}
        for split in ("train", "test"):
            out[split] = [(f, i) for i, c in enumerate(classes)
                          for f in class_files(os.path.join(tree, split, c))]
        return classes, out
    classes = sorted(os.listdir(tree))
    ppm = round(float(fraction) * 1e6)
    out = {"train": [], "test": []}
    for i, c in enumerate(classes):
        for k, f in enumerate(class_files(os.path.join(tree, c))):
            t = (k + 1) * ppm // 1000000 > k * ppm // 1000000
            out["test" if t else "train"].append((f, i))
    return classes, out


def check(tree, out, s, fraction=None):
    classes, want = samples(tree, fraction)
    worst = {}
    bad = 0
    for split in ("train", "test"):
        fs = [h5py.File(p, "r") for p in sorted(glob.glob(os.path.join(out, split + "-*.h5")))]
        x = np.concatenate([f["images"][:] for f in fs])
        y = np.concatenate([f["labels"][:] for f in fs])
        names = [n.decode() if isinstance(n, bytes) else n for n in fs[0].attrs["class_names"]]
        if names != classes or int(fs[0].attrs["num_classes"]) != len(classes):
            print("class names %s, want %s" % (names, classes)); bad += 1
        labels = [l for _, l in want[split]]
        if len(x) != len(want[split]) or sorted(y) != sorted(labels):
            print("%s: %d samples, labels %s; want %d, %s in some order" % (split, len(x), sorted(y),
                                                                           len(labels), sorted(labels))); bad += 1
            continue
        # Stored in a shuffled order (from --seed), not class by class.
        if len(set(labels)) > 1 and list(y) == sorted(y):
            print("%s: stored class by class, not shuffled: %s" % (split, list(y))); bad += 1
        if split == "train":
            m = x.reshape(-1, 3).astype(np.float64) / 255
            mean, std = m.mean(0), m.std(0)
            if np.abs(mean - fs[0].attrs["mean"]).max() > 1e-5 or np.abs(std - fs[0].attrs["std"]).max() > 1e-5:
                print("mean/std %s %s, want %s %s" % (fs[0].attrs["mean"], fs[0].attrs["std"], mean, std)); bad += 1
        # Each file's image is the stored sample of its label closest to PIL's decode of it
        # (the images are random, so the closest is the one), each sample taken once.
        left = list(range(len(x)))
        for path, label in want[split]:
            src = pil_rgb(path)
            resized = src.size != (s, s)
            ref = resize_crop(src, s).astype(int)
            cands = [i for i in left if y[i] == label]
            if not cands:
                print("%s: no stored sample of label %d left for it" % (path, label)); bad += 1
                continue
            ds = [int(np.abs(ref - x[i].astype(int)).max()) for i in cands]
            k = int(np.argmin(ds))
            d = ds[k]
            left.remove(cands[k])
            key = ("jpeg" if kind_of(path).startswith("jpeg") else "png") + (" resized" if resized else " copied")
            worst[key] = max(worst.get(key, 0), d)
            tol = 1 if key != "png copied" else 0
            if d > tol:
                print("%s: differs from PIL by up to %d (tolerance %d)" % (path, d, tol)); bad += 1
    print("largest difference from PIL: " + ", ".join("%s %d" % kv for kv in sorted(worst.items())))
    return 1 if bad else 0


def resize_keep(im, s):
    """torchvision's Resize(s) on a PIL image, a longer side past 2s cut to its centre 2s."""
    w, h = im.size
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = s, int(s * long / short)
    nw, nh = (new_short, new_long) if w <= h else (new_long, new_short)
    if (nw, nh) != (w, h):
        im = im.resize((nw, nh), Image.BILINEAR)
    ow, oh = min(nw, 2 * s), min(nh, 2 * s)
    top, left = int(round((nh - oh) / 2.0)), int(round((nw - ow) / 2.0))
    return np.asarray(im.crop((left, top, left + ow, top + oh)))


def check_jpeg(tree, out, s, quality):
    classes, want = samples(tree, None)
    worst, q_err, bad, same, total = 0.0, 0.0, 0, 0, 0
    for split in ("train", "test"):
        fs = [h5py.File(p, "r") for p in sorted(glob.glob(os.path.join(out, split + "-*.h5")))]
        x, y, blobs = [], [], []
        for f in fs:
            enc = f.attrs["encoding"]
            enc = enc.decode() if isinstance(enc, bytes) else enc
            if enc != "jpeg" or int(f.attrs["image_size"]) != s or "images" in f:
                print("%s: encoding %r, image_size %s; want jpeg, %d, no 'images'" % (f.filename, enc, f.attrs.get("image_size"), s)); bad += 1
            data, off, sizes = f["jpeg"][:], f["offsets"][:], f["sizes"][:]
            if off.dtype != np.uint64 or sizes.dtype != np.uint16 or data.dtype != np.uint8:
                print("%s: types %s %s %s" % (f.filename, data.dtype, off.dtype, sizes.dtype)); bad += 1
            if off[0] != 0 or off[-1] != len(data) or not (np.diff(off.astype(np.int64)) > 0).all() or len(off) != len(sizes) + 1:
                print("%s: offsets %s for %d bytes" % (f.filename, off, len(data))); bad += 1
                continue
            for i, (h, w) in enumerate(sizes):
                im = Image.open(io.BytesIO(data[off[i]:off[i + 1]].tobytes()))
                if im.format != "JPEG" or im.size != (w, h) or min(h, w) != s or max(h, w) > 2 * s:
                    print("%s: sample %d is %s %s, 'sizes' says %dx%d" % (f.filename, i, im.format, im.size, h, w)); bad += 1
                x.append(np.asarray(im.convert("RGB")))
                blobs.append(data[off[i]:off[i + 1]].tobytes())
            y += list(f["labels"][:])
        labels = [l for _, l in want[split]]
        if sorted(y) != sorted(labels):
            print("%s: labels %s, want %s in some order" % (split, sorted(y), sorted(labels))); bad += 1
            continue
        refs = [(resize_keep(pil_rgb(p), s).astype(int), l, p) for p, l in want[split]]
        if split == "train":
            m = np.concatenate([r.reshape(-1, 3) for r, _, _ in refs]).astype(np.float64) / 255
            mean, std = m.mean(0), m.std(0)
            # The importer's resize is PIL's within 1 level on some pixels: 1e-3 is ample.
            if np.abs(mean - fs[0].attrs["mean"]).max() > 1e-3 or np.abs(std - fs[0].attrs["std"]).max() > 1e-3:
                print("mean/std %s %s, want %s %s" % (fs[0].attrs["mean"], fs[0].attrs["std"], mean, std)); bad += 1
        # The test images are noise, which JPEG keeps poorly (4:2:0 chroma above all): the
        # reference is PIL's own round trip of PIL's Resize through its JPEG writer at the same
        # quality (the same libjpeg, so mostly the very bytes stored).
        left = list(range(len(x)))
        for ref, label, path in refs:
            cands = [i for i in left if y[i] == label and x[i].shape == ref.shape]
            if not cands:
                print("%s: no stored sample of label %d and shape %s left for it" % (path, label, ref.shape)); bad += 1
                continue
            b = io.BytesIO()
            Image.fromarray(ref.astype(np.uint8)).save(b, "JPEG", quality=quality)
            rt = np.asarray(Image.open(io.BytesIO(b.getvalue())).convert("RGB")).astype(int)
            ds = [float(np.abs(rt - x[i].astype(int)).mean()) for i in cands]
            k = int(np.argmin(ds))
            left.remove(cands[k])
            same += blobs[cands[k]] == b.getvalue()
            total += 1
            worst = max(worst, ds[k])
            q_err = max(q_err, float(np.abs(ref - x[cands[k]].astype(int)).mean()))
            if ds[k] > 1.0:
                print("%s: differs from PIL's Resize(%d) + JPEG at quality %d by %.2f levels on average (tolerance 1)"
                      % (path, s, quality, ds[k])); bad += 1
    print("%d of %d JPEGs byte-identical to PIL's (Resize(%d), quality %d); largest mean difference from PIL's decode "
          "%.2f levels, from the pixels before encoding %.2f" % (same, total, s, quality, worst, q_err))
    return 1 if bad else 0


def make_classes(root, k, n_train, n_test):
    r = np.random.RandomState(1)
    grids = r.randint(0, 256, size=(k, 4, 4, 3))
    for split, n in (("train", n_train), ("test", n_test)):
        for c in range(k):
            d = os.path.join(root, split, f"c{c:03d}")
            os.makedirs(d, exist_ok=True)
            big = np.kron(grids[c], np.ones((24, 24, 1)))[:72, :80]
            for i in range(n):
                dy, dx = r.randint(-6, 7, size=2)
                img = np.clip(np.roll(big, (dy, dx), (0, 1)) + r.normal(0, 40, big.shape), 0, 255).astype(np.uint8)
                Image.fromarray(img).save(os.path.join(d, f"{i}.png" if i % 2 else f"{i}.jpg"))


if __name__ == "__main__":
    a = sys.argv[1:]
    if a and a[0] in ("square", "mixed", "flat") and len(a) == 2:
        make(a[1], a[0])
    elif a and a[0] == "classes" and len(a) == 5:
        make_classes(a[1], int(a[2]), int(a[3]), int(a[4]))
    elif a and a[0] == "check_jpeg" and len(a) == 5:
        sys.exit(check_jpeg(a[1], a[2], int(a[3]), int(a[4])))
    elif a and a[0] == "check" and len(a) in (4, 5):
        sys.exit(check(a[1], a[2], int(a[3]), a[4] if len(a) == 5 else None))
    else:
        sys.exit(__doc__)
