#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""ddptrain-predict against PyTorch and torchvision, for tests/test_predict.sh.

  predict_torch.py make DIR
        train/ and test/ of 4 classes of JPEG and PNG files (colour, grey, palette, RGBA) of sizes
        from 21x30 to 97x64, some test images two folders deep and one hidden (.x.png), a class
        a colour pattern so that a few steps learn something

  predict_torch.py dataset CKPT SHARD
        the checkpoint's /dataset (mean, std, class names) equals the shard's attributes

  predict_torch.py compare CKPT FOLDER CSV INPUTS LOGITS RESIZE CROP [--tta flip] [--jsonl FILE] [--no_ema]
        ddptrain-predict's rows (CSV, K = its topk), its dumped inputs and logits for the files
        under FOLDER, against torchvision's Resize(RESIZE) + CenterCrop(CROP) + ToTensor +
        Normalize on PIL's Image.open().convert("RGB") of each file, in the order of a walk
        written here (folders sorted by path, files sorted in each, hidden names left out), and
        the checkpoint loaded into PyTorch by scripts/ddptrain_to_torch.py (its EMA when it holds
        one, unless --no_ema): the pixels bit for bit, the logits within 1e-4, the same top-K classes, the
        probabilities within 1e-5. With --tta flip the logits are torch's 0.5 f(x) + 0.5 f(flip(x)).
        --jsonl: the JSON Lines output of the same run says what the CSV says.

  predict_torch.py top1 CSV
        the share of the CSV's rows whose top1 is their label, as the run's test_acc prints it

  predict_torch.py shards DATA LOGITS JOB
        the logits ddptrain-predict dumped for DATA's test shards against the run's last
        evaluation (JOB/metrics.jsonl): the accuracy (first maximum) the same to the image, the
        mean cross-entropy (in double, labels read from the shards here) within 2e-6 of its
        test_loss: the same logits as the evaluation's

Exits 1, naming what differs, when a check fails.
"""
import csv
import io
import json
import os
import sys

import h5py
import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
sys.path.insert(0, HERE)

CLASSES = ["blue", "green", "red", "yellow"]
SIZES = [(64, 64), (97, 64), (40, 75), (21, 30), (56, 48), (80, 33), (48, 48), (70, 91)]
KINDS = ["jpeg", "png", "jpeg_grey", "png_palette", "png_rgba", "jpeg_q60"]


def image(cls, seed, w, h):
    r = np.random.RandomState(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.zeros((h, w, 3), np.float64)
    base[..., cls % 3] = 160 + 60 * np.sin(x / (3.0 + cls))
    base[..., (cls + 1) % 3] = 80 * ((x // 8 + y // 8) % 2) + 40 * (cls == 3)
    base += r.randint(-30, 31, size=(h, w, 3))
    return Image.fromarray(np.clip(base, 0, 255).astype(np.uint8))


def save(im, path, kind):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if kind == "jpeg":
        im.save(path, "JPEG", quality=90)
    elif kind == "jpeg_q60":
        im.save(path, "JPEG", quality=60, subsampling=0)
    elif kind == "jpeg_grey":
        im.convert("L").save(path, "JPEG", quality=85)
    elif kind == "png":
        im.save(path, "PNG")
    elif kind == "png_palette":
        im.convert("P", palette=Image.ADAPTIVE, colors=50).save(path, "PNG")
    elif kind == "png_rgba":
        rgba = im.convert("RGBA")
        rgba.putalpha(128)
        rgba.save(path, "PNG")


def make(root):
    n = 0
    for split, per in (("train", 20), ("test", 6)):
        for c, name in enumerate(CLASSES):
            for i in range(per):
                w, h = SIZES[(n * 5 + c) % len(SIZES)]
                kind = KINDS[n % len(KINDS)]
                ext = ".jpg" if kind.startswith("jpeg") else ".png"
                sub = "deep/er/" if split == "test" and i % 3 == 2 else ""
                save(image(c, n, w, h), os.path.join(root, split, name, f"{sub}img{i:02d}{ext}"), kind)
                n += 1
    save(image(0, 999, 30, 30), os.path.join(root, "test", "blue", ".hidden.png"), "png")


def walk(top):
    """The files under top in ddptrain-data import's order, hidden names left out."""
    folders = []
    for root, dirs, _ in os.walk(top, followlinks=True):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        folders.append(root)
    out = []
    for f in sorted(folders, key=os.fsencode):
        for name in sorted(os.listdir(f), key=os.fsencode):
            p = os.path.join(f, name)
            if not name.startswith(".") and not os.path.isdir(p):
                out.append(p)
    return out


def checkpoint_dataset(path):
    with h5py.File(path, "r") as f:
        g = f["dataset"]
        names = [n.decode() for n in g["class_names"][()]] if "class_names" in g else None
        return np.asarray(g["mean"][()], np.float32), np.asarray(g["std"][()], np.float32), names


def cmd_dataset(ckpt, shard):
    mean, std, names = checkpoint_dataset(ckpt)
    with h5py.File(shard, "r") as f:
        smean = np.asarray(f.attrs["mean"], np.float32)
        sstd = np.asarray(f.attrs["std"], np.float32)
        snames = [n.decode() if isinstance(n, bytes) else str(n) for n in f.attrs["class_names"]]
    if not (np.array_equal(mean, smean) and np.array_equal(std, sstd) and names == snames):
        print(f"/dataset {mean} {std} {names} but the shard has {smean} {sstd} {snames}")
        return 1
    print(f"/dataset: mean {mean.tolist()}, std {std.tolist()}, classes {names}: the test shard's")
    return 0


def cmd_compare(ckpt, folder, csv_path, inputs_path, logits_path, resize, crop, tta, jsonl, no_ema):
    import torch
    import torchvision.transforms as T
    from ddptrain_to_torch import load_model
    torch.set_num_threads(1)
    with h5py.File(ckpt, "r") as f:
        ema = "ema" in f and not no_ema
    model, meta = load_model(ckpt, ema=ema)
    mean, std, names = checkpoint_dataset(ckpt)
    K = meta["num_classes"]
    tf = T.Compose([T.Resize(resize), T.CenterCrop(crop), T.ToTensor(),
                    T.Normalize(mean.astype(np.float64).tolist(), std.astype(np.float64).tolist())])
    files = walk(folder)
    x = torch.stack([tf(Image.open(p).convert("RGB")) for p in files])   # N,3,V,V
    with torch.no_grad():
        z = model(x)
        if tta == "flip":
            z = 0.5 * z + 0.5 * model(torch.flip(x, dims=[3]))
    rows = list(csv.reader(open(csv_path, newline="")))
    head, body = rows[0], rows[1:]
    k = (len(head) - 1) // 2
    bad = []
    if [r[0] for r in body] != files:
        bad.append(f"the rows' files {[r[0] for r in body][:4]}... are not the walk's {files[:4]}...")
    ours_x = np.fromfile(inputs_path, dtype="<f4")
    want_x = x.permute(0, 2, 3, 1).numpy()
    if ours_x.size != want_x.size:
        bad.append(f"{ours_x.size} input floats dumped, {want_x.size} expected")
        dx = float("inf")
    else:
        dx = float(np.abs(ours_x.reshape(want_x.shape) - want_x).max())
        # the same float for the same pixel: any difference is a pixel that differs
        if dx != 0.0:
            bad.append(f"inputs differ from torchvision's by up to {dx}")
    ours_z = np.fromfile(logits_path, dtype="<f4")
    want_z = z.numpy()
    if ours_z.size != want_z.size:
        bad.append(f"{ours_z.size} logits dumped, {want_z.size} expected")
        dz = float("inf")
    else:
        ours_z = ours_z.reshape(want_z.shape)
        dz = float(np.abs(ours_z - want_z).max())
        if dz > 1e-4:
            bad.append(f"logits differ from torch's by up to {dz:.3g}")
    p = torch.softmax(z.double(), 1).numpy()
    dp = 0.0
    for i, r in enumerate(body[:len(files)]):
        order = np.argsort(-want_z[i], kind="stable")[:k]
        got = r[1::2]
        if got != [names[c] for c in order]:
            # a tie within torch's rounding may order two classes either way
            gap = np.sort(want_z[i])[::-1][:k + 1]
            if np.min(np.abs(np.diff(gap))) > 1e-4:
                bad.append(f"{r[0]}: top-{k} {got}, torch {[names[c] for c in order]}")
        for j, c in enumerate(order):
            if r[1 + 2 * j] == names[c]:
                dp = max(dp, abs(float(r[2 + 2 * j]) - p[i, c]))
    if dp > 1e-5:
        bad.append(f"probabilities differ from torch's softmax by up to {dp:.3g}")
    if jsonl:
        lines = [json.loads(s) for s in open(jsonl)]
        same = len(lines) == len(body) and all(
            o["file"] == r[0] and [t["class"] for t in o["topk"]] == r[1::2] and
            [names[t["index"]] for t in o["topk"]] == r[1::2] and
            all(abs(t["prob"] - float(q)) <= 1e-12 for t, q in zip(o["topk"], r[2::2])) for o, r in zip(lines, body))
        if not same:
            bad.append("the JSON Lines output says otherwise than the CSV")
    for b in bad:
        print(b)
    if bad:
        return 1
    print(f"{len(files)} files of {K} classes, top-{k}{' (TTA flip)' if tta else ''}{' (EMA)' if ema else ''}: "
          f"pixels equal (max diff {dx}), logits within {dz:.2g}, probabilities within {dp:.2g}"
          f"{', JSON Lines as the CSV' if jsonl else ''}")
    return 0


def cmd_top1(csv_path):
    rows = list(csv.DictReader(open(csv_path, newline="")))
    hits = sum(r["top1"] == r["label"] for r in rows)
    print(f"{hits / len(rows):.6f} {hits} {len(rows)}")
    return 0


def cmd_shards(data, logits_path, job):
    import glob
    labels = []
    for p in sorted(glob.glob(os.path.join(data, "test-*-of-*.h5"))):
        with h5py.File(p, "r") as f:
            labels.append(np.asarray(f["labels"], np.int64))
    y = np.concatenate(labels)
    z = np.fromfile(logits_path, dtype="<f4").reshape(len(y), -1).astype(np.float64)
    acc = float(np.mean(np.argmax(z, 1) == y))
    m = z.max(1)
    loss = float(np.mean(m + np.log(np.exp(z - m[:, None]).sum(1)) - z[np.arange(len(y)), y]))
    last = [json.loads(s) for s in open(os.path.join(job, "metrics.jsonl")) if '"test_acc"' in s][-1]
    if f"{acc:.6f}" != f"{last['test_acc']:.6f}" or abs(loss - last["test_loss"]) > 2e-6:
        print(f"the dumped logits give accuracy {acc:.6f} and loss {loss:.7f}; the run's evaluation "
              f"{last['test_acc']:.6f} and {last['test_loss']:.6f}")
        return 1
    print(f"{len(y)} test images: accuracy {acc:.6f}, loss {loss:.7f}; the run's {last['test_acc']:.6f}, "
          f"{last['test_loss']:.6f}")
    return 0


def main(argv):
    if argv[:1] == ["make"]:
        make(argv[1])
        return 0
    if argv[:1] == ["dataset"]:
        return cmd_dataset(argv[1], argv[2])
    if argv[:1] == ["shards"]:
        return cmd_shards(argv[1], argv[2], argv[3])
    if argv[:1] == ["top1"]:
        return cmd_top1(argv[1])
    if argv[:1] == ["compare"]:
        a = argv[1:]
        tta = a[a.index("--tta") + 1] if "--tta" in a else None
        jsonl = a[a.index("--jsonl") + 1] if "--jsonl" in a else None
        return cmd_compare(a[0], a[1], a[2], a[3], a[4], int(a[5]), int(a[6]), tta, jsonl, "--no_ema" in a)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
