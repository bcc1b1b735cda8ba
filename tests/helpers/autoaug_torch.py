# SPDX-License-Identifier: BSD-3-Clause
"""Recomputes with torchvision 0.14 on PIL images what tests/helpers/autoaug_dump writes
(src/data/pil_ops.c, src/data/autoaug.c), for tests/test_autoaug_torch.sh. Exit 0 when
everything agrees, 1 otherwise (printing the first disagreements).

  autoaug_torch.py ops DIR [--against bilinear] [--tol T]
        every image through torchvision.transforms.autoaugment._apply_op(img, OP, MAGNITUDE,
        NEAREST, fill=None) (F.adjust_hue for Hue) on the PIL image: the same pixels, at most T
        apart (default 0); --against bilinear runs the geometric ops with BILINEAR instead, which
        the check must tell apart
  autoaug_torch.py ops DIR --tensor [--against nearest]
        the same through _apply_op(tensor, OP, MAGNITUDE, BILINEAR, fill=None) on the image as a
        uint8 tensor, AugMix's path (--against nearest: NEAREST, which the check must tell apart)
  autoaug_torch.py policy DIR POLICY RA_MAGNITUDE RA_NUM_OPS B,C,S,H [--against swap_m|nearest]
        AutoAugment(POLICY) / RandAugment / TrivialAugmentWide, then ColorJitter, replayed on the
        recorded draws (torch.randint and torch.rand patched to hand them out in order and to
        check what was asked: the bounds and the sizes; ColorJitter.get_params to return the
        recorded permutation and factors, each checked within its range). augmix: AugMix(severity
        RA_MAGNITUDE) with its _sample_dirichlet handing out the recorded weights; --against
        swap_m hands it Beta's two weights swapped, --against nearest runs it with NEAREST, which
        the check must both tell apart
  autoaug_torch.py dirichlet FILE
        AugMix's weights drawn by autoaug_dump dirichlet against Beta(1, 1) and Dirichlet(1, 1, 1):
        sums of 1, the means, variances and the covariance within 5 standard errors, and the
        Kolmogorov-Smirnov distance of m[0] to the uniform and of each w[i] to Beta(1, 2) within
        its 0.1% critical value
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
    if args.tensor:
        interp = InterpolationMode.NEAREST if args.against == "nearest" else InterpolationMode.BILINEAR
    for line in open(f"{args.dir}/index.txt"):
        k, w, h, op, mag = line.split()
        k, w, h, mag = int(k), int(w), int(h), float.fromhex(mag)
        src = Image.fromarray(load(args.dir, k, w, h, "src"), "RGB")
        if args.tensor:
            t = torch.from_numpy(load(args.dir, k, w, h, "src")).permute(2, 0, 1).contiguous()
            want = AA._apply_op(t, op, mag, interpolation=interp, fill=None).permute(1, 2, 0)
        elif op == "Hue":
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

    def randint(self, *args, low=0, high=None, size=None, dtype=None):
        if len(args) == 3:
            low, high, size = args
        elif len(args) == 2:
            high, size = args
        elif len(args) == 1:
            high = args[0]
        n = int(np.prod(size))
        vals = [int(self.pop("i", int(high))) for _ in range(n)]
        if any(v < low for v in vals):
            raise AssertionError(f"a draw below randint's low {low}: {vals}")
        return torch.tensor(vals, dtype=dtype or torch.int64)

    def dirichlet(self, params, swap=False):
        """AugMix._sample_dirichlet: the recorded weights of a group of params' size."""
        n = params.shape[-1]
        if not bool((params == 1.0).all()):
            raise AssertionError(f"Dirichlet parameters {params.tolist()}, the draws are of alpha 1")
        v = [self.pop("d", n) for _ in range(n)]
        if swap and n == 2:
            v = v[::-1]
        return torch.tensor([v], dtype=torch.float32)

    def rand(self, size):
        n = size if isinstance(size, int) else int(np.prod(size))
        return torch.tensor([self.pop("f", 0) for _ in range(n)], dtype=torch.float32)


def make_augs(name, mag, nops, jitter, against=None):
    """torchvision's transforms for a policy name of autoaug.h and a B,C,S,H jitter."""
    if name == "augmix":
        interp = InterpolationMode.NEAREST if against == "nearest" else InterpolationMode.BILINEAR
        aug = T.AugMix(severity=mag, interpolation=interp)
        aug.swap_m = against == "swap_m"
    elif name == "ra":
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
        if isinstance(aug, T.AugMix):
            aug._sample_dirichlet = lambda params: rp.dirichlet(params, aug.swap_m)
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
    aug, cj = make_augs(args.name, int(args.ra_magnitude), int(args.ra_num_ops), [float(x) for x in args.jitter.split(",")],
                        args.against)
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
        elif pol == "augmix":
            space = T.AugMix()._augmentation_space(10, (h, w))
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


def dirichlet(args):
    d = np.array([[float.fromhex(v) for v in line.split()] for line in open(args.file)], dtype=np.float64)
    n, bad = len(d), []
    m, w = d[:, :2], d[:, 2:]
    if np.abs(m.sum(1) - 1).max() > 1e-6 or np.abs(w.sum(1) - 1).max() > 1e-6 or d.min() < 0:
        bad.append("weights that are negative or do not sum to 1")

    def near(label, got, want, se):
        if abs(got - want) > 5 * se:
            bad.append(f"{label}: {got:.5f}, want {want:.5f} within {5 * se:.5f}")
        return f"{label} {got:.4f} ({want:.4f})"

    # Beta(1, 1): mean 1/2, variance 1/12; a Dirichlet(1, 1, 1) weight: Beta(1, 2), mean 1/3,
    # variance 1/18; two of them: covariance -1/36. Standard errors from the fourth moments of
    # the uniform (1/80) and of Beta(1, 2) (mu4 = 1/135), and of the product's variance.
    out = [near("m0 mean", m[:, 0].mean(), 0.5, np.sqrt(1 / 12 / n)),
           near("m0 var", m[:, 0].var(), 1 / 12, np.sqrt((1 / 80 - 1 / 144) / n))]
    for i in range(3):
        out.append(near(f"w{i} mean", w[:, i].mean(), 1 / 3, np.sqrt(1 / 18 / n)))
        out.append(near(f"w{i} var", w[:, i].var(), 1 / 18, np.sqrt((1 / 135 - 1 / 324) / n)))
    c = (w[:, 0] - w[:, 0].mean()) * (w[:, 1] - w[:, 1].mean())
    out.append(near("cov(w0, w1)", c.mean(), -1 / 36, c.std() / np.sqrt(n)))
    crit = 1.95 / np.sqrt(n)   # Kolmogorov's 0.1% critical value

    def ks(label, x, cdf):
        x = np.sort(x)
        f = cdf(x)
        dist = max((np.arange(1, n + 1) / n - f).max(), (f - np.arange(n) / n).max())
        if dist > crit:
            bad.append(f"{label}: Kolmogorov-Smirnov distance {dist:.4f} above {crit:.4f}")
        return f"KS {label} {dist:.4f}"

    out.append(ks("m0 ~ U(0, 1)", m[:, 0], lambda x: x))
    for i in range(3):
        out.append(ks(f"w{i} ~ Beta(1, 2)", w[:, i], lambda x: 1 - (1 - x) ** 2))
    return report(bad, f"{n} draws: " + ", ".join(out) + f" (KS critical {crit:.4f})")


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
    o.add_argument("--against", default=None, choices=["bilinear", "nearest"])
    o.add_argument("--tol", type=int, default=0)
    o.add_argument("--tensor", action="store_true")
    p = sub.add_parser("policy")
    for a in ("dir", "name", "ra_magnitude", "ra_num_ops", "jitter"):
        p.add_argument(a)
    p.add_argument("--tol", type=int, default=0)
    p.add_argument("--against", default=None, choices=["swap_m", "nearest"])
    dr = sub.add_parser("dirichlet")
    dr.add_argument("file")
    ld = sub.add_parser("loader")
    for a in ("dir", "name", "ra_magnitude", "ra_num_ops", "jitter"):
        ld.add_argument(a)
    ld.add_argument("--against", default="flip_then_aug")
    ld.add_argument("--padding_mode", default="constant", choices=["constant", "reflect"])
    ld.add_argument("--tol", type=int, default=0)
    t = sub.add_parser("tables")
    t.add_argument("file")
    args = ap.parse_args()
    return {"ops": ops, "policy": policy, "loader": loader, "tables": tables, "dirichlet": dirichlet}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
