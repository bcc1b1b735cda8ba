# SPDX-License-Identifier: BSD-3-Clause
"""Recomputes with torchvision 0.14 on PIL images what tests/helpers/autoaug_dump writes
(src/data/pil_ops.c, src/data/autoaug.c), for tests/test_autoaug_torch.sh. Exit 0 when
everything agrees, 1 otherwise (printing the first disagreements).

  autoaug_torch.py ops DIR [--against bilinear] [--tol T]
        every image through torchvision.transforms.autoaugment._apply_op(img, OP, MAGNITUDE,
        NEAREST, fill=None) (F.adjust_hue for Hue) on the PIL image: the same pixels, at most T
        apart (default 0); --against bilinear runs the geometric ops with BILINEAR instead, which
        the check must tell apart
  autoaug_torch.py policy DIR POLICY RA_MAGNITUDE RA_NUM_OPS B,C,S,H
        AutoAugment(POLICY) / RandAugment / TrivialAugmentWide, then ColorJitter, replayed on the
        recorded draws (torch.randint and torch.rand patched to hand them out in order and to
        check what was asked: the bounds and the sizes; ColorJitter.get_params to return the
        recorded permutation and factors, each checked within its range)
  autoaug_torch.py loader DIR POLICY RA_MAGNITUDE RA_NUM_OPS B,C,S,H [--against aug_then_flip]
        the loader's batch against RandomCrop(32, padding=4) at its offsets, RandomHorizontalFlip,
        the policy and ColorJitter on the recorded draws, then PILToTensor, ConvertImageDtype and
        Normalize; --against aug_then_flip runs the policy before the flip, which the check must
        tell apart
  autoaug_torch.py tables FILE
        the magnitude tables against the policies' _augmentation_space (float32 linspace): equal,
        or within one float32 ulp where torch's vectorised linspace kernel rounds otherwise"""
import argparse
import sys

import numpy as np
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image
from torchvision.transforms import InterpolationMode
from torchvision.transforms import autoaugment as AA

GEOMETRIC = {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate"}


def load(d, k, w, h, ext):
    return np.fromfile(f"{d}/{k}.{ext}", dtype=np.uint8).reshape(h, w, 3)


def compare(label, got, want, tol, bad):
    diff = np.abs(got.astype(int) - want.astype(int))
    if diff.max() > tol:
        bad.append(f"{label}: {int((diff > tol).sum())} values differ, at most {int(diff.max())}")
        return False
    return True


def ops(args):
    bad, n, exact, ran = [], 0, 0, {}
    interp = InterpolationMode.BILINEAR if args.against == "bilinear" else InterpolationMode.NEAREST
    for line in open(f"{args.dir}/index.txt"):
        k, w, h, op, mag = line.split()
        k, w, h, mag = int(k), int(w), int(h), float.fromhex(mag)
        src = Image.fromarray(load(args.dir, k, w, h, "src"), "RGB")
        if op == "Hue":
            want = F.adjust_hue(src, mag)
        else:
            want = AA._apply_op(src, op, mag, interpolation=interp if op in GEOMETRIC else InterpolationMode.NEAREST,
                                fill=None)
        got = load(args.dir, k, w, h, "out")
        want = np.asarray(want)
        n += 1
        ran[op] = ran.get(op, 0) + 1
        exact += int(np.array_equal(got, want))
        compare(f"image {k} ({w}x{h}) {op} {mag!r}", got, want, args.tol, bad)
    return report(bad, f"{n} images through {len(ran)} ops, {exact} identical to torchvision's")


class Replay:
    """Hands out the recorded draws in order in place of torch.randint and torch.rand, checking
    that torchvision asks for what was drawn."""

    def __init__(self, draws):
        self.draws = list(draws)

    def pop(self, kind, bound=None):
        if not self.draws:
            raise AssertionError(f"torchvision asked for more draws ({kind}) than were made")
        k, b, v = self.draws.pop(0)
        if k != kind or (bound is not None and b != bound):
            raise AssertionError(f"torchvision asked for {kind} {bound}, the draw was {k} {b}")
        return v

    def randint(self, high, size, dtype=None):
        n = int(np.prod(size))
        return torch.tensor([int(self.pop("i", int(high))) for _ in range(n)], dtype=dtype or torch.int64)

    def rand(self, size):
        n = size if isinstance(size, int) else int(np.prod(size))
        return torch.tensor([self.pop("f", 0) for _ in range(n)], dtype=torch.float32)


def make_augs(name, mag, nops, jitter):
    """torchvision's transforms for a policy name of autoaug.h and a B,C,S,H jitter."""
    if name == "ra":
        aug = T.RandAugment(num_ops=nops, magnitude=mag)
    elif name == "ta_wide":
        aug = T.TrivialAugmentWide()
    elif name == "none":
        aug = None
    else:
        aug = T.AutoAugment(T.AutoAugmentPolicy(name))
    cj = T.ColorJitter(*jitter) if any(j > 0 for j in jitter) else None
    return aug, cj


def replay(img, aug, cj, draws):
    """aug then cj on the PIL image, on the recorded draws; AssertionError when torchvision asks
    for other draws than were made."""
    rp = Replay(draws)
    real_randint, real_rand = torch.randint, torch.rand
    try:
        torch.randint, torch.rand = rp.randint, rp.rand
        if aug is not None:
            img = aug(img)
        if cj is not None:
            perm = torch.tensor([int(rp.pop("p", 4)) for _ in range(4)])
            facs = []
            for c, rng in enumerate([cj.brightness, cj.contrast, cj.saturation, cj.hue]):
                if rng is None:
                    facs.append(None)
                    continue
                v = rp.pop("f", c + 1)
                if not (np.float32(rng[0]) <= v <= np.float32(rng[1])):
                    raise AssertionError(f"factor {c} {v} outside {rng}")
                facs.append(v)
            orig = T.ColorJitter.get_params
            T.ColorJitter.get_params = staticmethod(lambda *a: (perm, *facs))
            try:
                img = cj(img)
            finally:
                T.ColorJitter.get_params = orig
        if rp.draws:
            raise AssertionError(f"{len(rp.draws)} draws left over")
    finally:
        torch.randint, torch.rand = real_randint, real_rand
    return img


def parse_draws(fields):
    draws = []
    for d in fields:
        kind, b, v = d.split(":")
        draws.append((kind, int(b), float.fromhex(v)))
    return draws


def loader(args):
    """The loader's batch: RandomCrop(32, padding=4) at the plan's offsets, the flip, the policy
    and the jitter on the PIL image, PILToTensor, ConvertImageDtype, Normalize; compared in
    pixel levels (the float32 values mapped back through the normalisation)."""
    aug, cj = make_augs(args.name, int(args.ra_magnitude), int(args.ra_num_ops), [float(x) for x in args.jitter.split(",")])
    v = [float.fromhex(t) for t in open(f"{args.dir}/norm.txt").read().split()]
    mean, std = v[:3], v[3:]
    norm = T.Compose([T.PILToTensor(), T.ConvertImageDtype(torch.float32), T.Normalize(mean, std)])
    bad, n, exact, S = [], 0, 0, 32
    for line in open(f"{args.dir}/index.txt"):
        head = line.split("|")[0].split()
        k, ox, oy, flip = (int(t) for t in head[:4])
        src = np.pad(load(args.dir, k, S, S, "src"), ((4, 4), (4, 4), (0, 0)), mode=args.padding_mode)
        img = Image.fromarray(np.ascontiguousarray(src[4 + oy:4 + oy + S, 4 + ox:4 + ox + S]), "RGB")
        try:
            if args.against == "aug_then_flip":
                img = replay(img, aug, cj, parse_draws(head[4:]))
                img = F.hflip(img) if flip else img
            else:
                img = F.hflip(img) if flip else img
                img = replay(img, aug, cj, parse_draws(head[4:]))
        except AssertionError as e:
            bad.append(f"sample {k}: {e}")
            continue
        want = norm(img).permute(1, 2, 0).numpy()
        got = np.fromfile(f"{args.dir}/{k}.out", dtype=np.float32).reshape(S, S, 3)
        n += 1
        exact += int(np.array_equal(got, want))
        lv = lambda x: np.rint((x * np.array(std, np.float32) + np.array(mean, np.float32)) * 255.0)
        compare(f"sample {k} (offset {ox},{oy} flip {flip})", lv(got), lv(want), args.tol, bad)
    return report(bad, f"{n} samples of the loader's batch, {exact} identical to torchvision's float32 pipeline")


def policy(args):
    aug, cj = make_augs(args.name, int(args.ra_magnitude), int(args.ra_num_ops), [float(x) for x in args.jitter.split(",")])
    bad, n, exact, seen = [], 0, 0, set()
    for line in open(f"{args.dir}/index.txt"):
        head, ops_part = line.split("|")
        fields = head.split()
        k, w, h = int(fields[0]), int(fields[1]), int(fields[2])
        draws = parse_draws(fields[3:])
        seen.update(o.split(":")[0] for o in ops_part.split())
        img = Image.fromarray(load(args.dir, k, w, h, "src"), "RGB")
        try:
            img = replay(img, aug, cj, draws)
        except AssertionError as e:
            bad.append(f"image {k}: {e}")
            continue
        got, want = load(args.dir, k, w, h, "out"), np.asarray(img)
        n += 1
        exact += int(np.array_equal(got, want))
        compare(f"image {k} ({w}x{h}) {ops_part.strip()}", got, want, args.tol, bad)
    return report(bad, f"{n} images, ops {sorted(seen)}, {exact} identical to torchvision's")


def tables(args):
    bad, n, off = [], 0, 0
    for line in open(args.file):
        f = line.split()
        pol, w, h, op, vals = f[0], int(f[1]), int(f[2]), f[3], [float.fromhex(v) for v in f[4:]]
        if pol == "aa":
            space = T.AutoAugment()._augmentation_space(10, (h, w))
        elif pol == "ra":
            space = T.RandAugment()._augmentation_space(31, (h, w))
        else:
            space = T.TrivialAugmentWide()._augmentation_space(31)
        want = space[op][0].numpy()
        got = np.array(vals, dtype=want.dtype)
        for i, (a, b) in enumerate(zip(got, want)):
            n += 1
            if a == b:
                continue
            if want.dtype == np.float32 and abs(int(np.float32(a).view(np.int32)) - int(np.float32(b).view(np.int32))) <= 1:
                off += 1
                continue
            bad.append(f"{pol} {w}x{h} {op}[{i}]: {a!r}, torchvision {b!r}")
    return report(bad, f"{n} magnitudes, {n - off - len(bad)} equal, {off} one float32 ulp apart")


def report(bad, summary):
    if bad:
        print(f"{len(bad)} disagreements; the first:")
        for b in bad[:10]:
            print("  " + b)
        print(summary)
        return 1
    print(summary)
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("ops")
    o.add_argument("dir")
    o.add_argument("--against", default="nearest")
    o.add_argument("--tol", type=int, default=0)
    p = sub.add_parser("policy")
    for a in ("dir", "name", "ra_magnitude", "ra_num_ops", "jitter"):
        p.add_argument(a)
    p.add_argument("--tol", type=int, default=0)
    ld = sub.add_parser("loader")
    for a in ("dir", "name", "ra_magnitude", "ra_num_ops", "jitter"):
        ld.add_argument(a)
    ld.add_argument("--against", default="flip_then_aug")
    ld.add_argument("--padding_mode", default="constant", choices=["constant", "reflect"])
    ld.add_argument("--tol", type=int, default=0)
    t = sub.add_parser("tables")
    t.add_argument("file")
    args = ap.parse_args()
    return {"ops": ops, "policy": policy, "loader": loader, "tables": tables}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
