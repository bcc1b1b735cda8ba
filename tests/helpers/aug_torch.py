# SPDX-License-Identifier: BSD-3-Clause
"""Recomputes with torch what tests/helpers/aug_dump writes (src/data/random_erase.c, mix.c,
ra_sampler.c and the mixed loss of src/ops/ops_cpu.c), for tests/test_mixup_torch.sh. Exit 0
when everything agrees, 1 otherwise (printing the first disagreements).

  aug_torch.py batches DIR [--wrong no_roll|cutmix_lambda]
      every batch without erasing and mixing, each sample through torchvision's own
      RandomErasing(p, value=0) with torch.rand, torch.empty(1).uniform_ and torch.randint
      replaying the loader's draws, then the batch through a rendering of the reference
      scripts' RandomMixup / RandomCutmix (references/classification/transforms.py) with the
      loader's lambda draw and cutmix centre: the loader's batch within 1e-6 in every float, and
      the soft targets (labels, lambda, labels rolled by one) those of the rendering within 1e-6.
      --wrong renders mixup without the roll, or cutmix keeping the drawn lambda: must disagree
  aug_torch.py ra FILE DATA REPS WORLD [--wrong no_repeat]
      RASampler (references/classification/sampler.py; ra_indices renders it) with torch.randperm
      returning the loader's permutation: every rank's index sequence, and its labels those of
      the split's shards (DATA/train-*.h5, concatenated in order) at those indices
  aug_torch.py beta FILE ALPHA
      the Beta draws against torch's Dirichlet([alpha, alpha])[0]: two-sample Kolmogorov-Smirnov
      statistic under the 0.001 level's critical value
  aug_torch.py xent FILE [--wrong no_smooth]
      the loss and every gradient element against torch.nn.CrossEntropyLoss(label_smoothing=E)
      with probability targets MIX * onehot(y) + (1 - MIX) * onehot(roll(y, 1)), and the count of
      rows whose argmax is the label of the larger weight"""
import argparse
import glob
import math
import os
import sys

import numpy as np
import torch
import torchvision.transforms as T

fails = []


def disagree(msg):
    fails.append(msg)


def finish(summary):
    if fails:
        for m in fails[:10]:
            print(m)
        print(f"{len(fails)} disagreement(s)")
        sys.exit(1)
    print(summary)


class Replay:
    """Hands out recorded draws in order to torch.rand, torch.empty(1).uniform_ and torch.randint."""

    def __init__(self, coin, floats, ints):
        self.coin, self.floats, self.ints = coin, list(floats), list(ints)

    def rand(self, *a, **k):
        return torch.tensor([self.coin], dtype=torch.float32)

    def empty(self, *a, **k):
        replay = self

        class Draw:
            def uniform_(self, lo, hi):
                return torch.tensor([replay.floats.pop(0)], dtype=torch.float32)
        return Draw()

    def randint(self, lo, hi, size):
        return torch.tensor([self.ints.pop(0)])


def erase(img, p, coin, floats, ints):
    """torchvision's RandomErasing(p, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0) on the CHW image."""
    r = Replay(coin, floats, ints)
    saved = torch.rand, torch.empty, torch.randint
    torch.rand, torch.empty, torch.randint = r.rand, r.empty, r.randint
    try:
        out = T.RandomErasing(p=p, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0)(img.clone())
    finally:
        torch.rand, torch.empty, torch.randint = saved
    return out


def mixup(batch, target, lam, wrong=None):
    """RandomMixup.forward after its draws: the batch and targets rolled by one, mixed at lambda."""
    batch, target = batch.clone(), target.clone()
    batch_rolled = batch if wrong == "no_roll" else batch.roll(1, 0)
    target_rolled = target.roll(1, 0)
    batch_rolled = batch_rolled.clone()
    batch_rolled.mul_(1.0 - lam)
    batch.mul_(lam).add_(batch_rolled)
    target_rolled.mul_(1.0 - lam)
    target.mul_(lam).add_(target_rolled)
    return batch, target


def cutmix(batch, target, lam, r_x, r_y, wrong=None):
    """RandomCutmix.forward after its draws (lambda, then torch.randint(W), torch.randint(H))."""
    batch, target = batch.clone(), target.clone()
    batch_rolled = batch.roll(1, 0)
    target_rolled = target.roll(1, 0)
    _, _, H, W = batch.shape
    r = 0.5 * math.sqrt(1.0 - lam)
    r_w_half = int(r * W)
    r_h_half = int(r * H)
    x1 = int(torch.clamp(torch.tensor([r_x]) - r_w_half, min=0))
    y1 = int(torch.clamp(torch.tensor([r_y]) - r_h_half, min=0))
    x2 = int(torch.clamp(torch.tensor([r_x]) + r_w_half, max=W))
    y2 = int(torch.clamp(torch.tensor([r_y]) + r_h_half, max=H))
    batch[:, :, y1:y2, x1:x2] = batch_rolled[:, :, y1:y2, x1:x2]
    if wrong != "cutmix_lambda":
        lam = float(1.0 - (x2 - x1) * (y2 - y1) / (W * H))
    target_rolled.mul_(1.0 - lam)
    target.mul_(lam).add_(target_rolled)
    return batch, target


def check_batches(d, wrong):
    lines = open(os.path.join(d, "index.txt")).read().split("\n")
    head = lines[0].split()
    S, p = int(head[1]), float.fromhex(head[3])
    K = 10
    counts = {"batches": 0, "erased": 0, "kept": 0, "mixup": 0, "cutmix": 0}
    i = 1
    while i < len(lines) and lines[i].startswith("batch"):
        b = lines[i].split()
        e, bi, lam_given = int(b[1]), int(b[2]), float.fromhex(b[3])
        labels = torch.tensor([int(v) for v in b[4:]])
        n = len(labels)
        m = lines[i + 1].split()
        kind, lam_drawn, rx, ry = int(m[1]), float.fromhex(m[2]), int(m[3]), int(m[4])
        x = torch.from_numpy(np.fromfile(os.path.join(d, f"{e}_{bi}.plain"), dtype=np.float32).reshape(n, S, S, 3))
        got = torch.from_numpy(np.fromfile(os.path.join(d, f"{e}_{bi}.aug"), dtype=np.float32).reshape(n, S, S, 3))
        x = x.permute(0, 3, 1, 2).contiguous()
        got = got.permute(0, 3, 1, 2).contiguous()
        imgs = []
        for s in range(n):
            t = lines[i + 2 + s].split()
            coin, tries = float.fromhex(t[1]), int(t[2])
            drawn = min(tries, 10)
            floats = [float.fromhex(v) for v in t[3:3 + 2 * drawn]]
            ints = [int(v) for v in t[3 + 2 * drawn:t.index("=")]]
            out = erase(x[s], p, coin, floats, ints)
            counts["erased" if not torch.equal(out, x[s]) else "kept"] += 1
            imgs.append(out)
        batch = torch.stack(imgs)
        target = torch.nn.functional.one_hot(labels, K).float()
        if kind == 1:
            batch, target = mixup(batch, target, lam_drawn, wrong)
            counts["mixup"] += 1
        elif kind == 2:
            batch, target = cutmix(batch, target, lam_drawn, rx, ry, wrong)
            counts["cutmix"] += 1
        # the loader's targets: its labels at lambda, the labels rolled by one at 1 - lambda
        ours = torch.nn.functional.one_hot(labels, K).double() * lam_given + \
            torch.nn.functional.one_hot(labels.roll(1, 0), K).double() * (1.0 - lam_given)
        dx = (batch - got).abs().max().item()
        if dx > 1e-6:
            disagree(f"epoch {e} batch {bi} (kind {kind}): pixels differ by {dx:g}")
        dt = (target.double() - ours).abs().max().item()
        if dt > 1e-6:
            disagree(f"epoch {e} batch {bi} (kind {kind}): targets differ by {dt:g} (lambda {lam_given})")
        counts["batches"] += 1
        i += 2 + n
    if counts["batches"] == 0 or (p > 0 and counts["erased"] == 0) or (p < 1 and counts["kept"] == 0):
        disagree(f"nothing to compare: {counts}")
    finish(f"{counts['batches']} batches agree within 1e-6 (pixels and targets): {counts['erased']} samples erased, "
           f"{counts['kept']} not; {counts['mixup']} mixup, {counts['cutmix']} cutmix batches")


def ra_indices(n, world, rank, epoch, reps, seed=0):
    """What RASampler (references/classification/sampler.py) hands rank `rank` in `epoch`, from
    its documented behaviour: a permutation of the n images from a generator seeded with
    seed + epoch (torch.randperm, patched by the caller), each index repeated reps times in
    place, the list wrapped round to a multiple of the world size, every world-th entry from
    the rank's, and of those the first floor((n // 256) * 256 / world)."""
    g = torch.Generator()
    g.manual_seed(seed + epoch)
    rep = [int(i) for i in torch.randperm(n, generator=g).tolist() for _ in range(reps)]
    per_rank = math.ceil(n * reps / world)
    padded = (rep * 2)[: per_rank * world]
    return padded[rank::world][: (n // 256) * 256 // world]


def check_ra(path, data, reps, world, wrong):
    import h5py
    labels = np.concatenate([h5py.File(f, "r")["labels"][:] for f in sorted(glob.glob(os.path.join(data, "train-*.h5")))])
    perms, ranks, labs = {}, {}, {}
    for line in open(path):
        t = line.split()
        if t[0] == "perm":
            perms[int(t[1])] = [int(v) for v in t[2:]]
        elif t[0] == "rank":
            ranks[(int(t[1]), int(t[2]))] = [int(v) for v in t[3:]]
        elif t[0] == "labels":
            labs[(int(t[1]), int(t[2]))] = [int(v) for v in t[3:]]
    n = len(labels)
    checked = 0
    for (e, r), ours in sorted(ranks.items()):
        perm = perms[e]
        if sorted(perm) != list(range(n)):
            disagree(f"epoch {e}: the permutation is not one of 0..{n - 1}")
        real = torch.randperm
        torch.randperm = lambda m, generator=None: torch.tensor(perm)
        try:
            want = ra_indices(n, world, r, e, 1 if wrong == "no_repeat" else reps)
        finally:
            torch.randperm = real
        B = 16   # aug_dump's batch: the loader keeps whole batches
        want = want[: len(want) // B * B]
        if ours != want:
            k = next((j for j in range(min(len(ours), len(want))) if ours[j] != want[j]), min(len(ours), len(want)))
            disagree(f"epoch {e} rank {r}: {len(ours)} indices, RASampler {len(want)}; first difference at {k}")
        if labs[(e, r)] != [int(labels[j]) for j in ours]:
            disagree(f"epoch {e} rank {r}: the labels are not those of the indices in the shards")
        checked += len(ours)
    finish(f"{len(ranks)} rank-epochs, {checked} indices as RASampler's, labels as the shards'")


def check_beta(path, alpha):
    ours = np.sort(np.array([float.fromhex(v) for v in open(path).read().split()]))
    torch.manual_seed(0)
    n = len(ours)
    theirs = torch._sample_dirichlet(torch.tensor([alpha, alpha], dtype=torch.float64).expand(n, 2).contiguous())[:, 0]
    theirs = np.sort(theirs.numpy())
    allv = np.concatenate([ours, theirs])
    cdf1 = np.searchsorted(ours, allv, side="right") / n
    cdf2 = np.searchsorted(theirs, allv, side="right") / n
    ks = float(np.abs(cdf1 - cdf2).max())
    crit = 1.95 * math.sqrt(2.0 / n)
    if ks > crit:
        disagree(f"Beta({alpha}, {alpha}): KS statistic {ks:.4f} over {crit:.4f} ({n} draws each)")
    finish(f"Beta({alpha}, {alpha}): KS statistic {ks:.4f} under {crit:.4f} ({n} draws each, mean {ours.mean():.4f})")


def check_xent(path, wrong):
    t = {}
    for line in open(path):
        w = line.split()
        t[w[0]] = w[1:]
    N, K, mix, eps = int(t["xent"][0]), int(t["xent"][1]), float.fromhex(t["xent"][2]), float.fromhex(t["xent"][3])
    y = torch.tensor([int(v) for v in t["labels"]])
    z = torch.tensor([float.fromhex(v) for v in t["logits"]], dtype=torch.float64).reshape(N, K).requires_grad_()
    target = mix * torch.nn.functional.one_hot(y, K).double() + (1.0 - mix) * torch.nn.functional.one_hot(y.roll(1, 0), K).double()
    loss = torch.nn.CrossEntropyLoss(label_smoothing=0.0 if wrong == "no_smooth" else eps)(z, target)
    loss.backward()
    ours_loss = float.fromhex(t["loss"][0])
    ours_grad = torch.tensor([float.fromhex(v) for v in t["grad"]], dtype=torch.float64).reshape(N, K)
    if abs(ours_loss - loss.item()) > 1e-5 * max(1.0, abs(loss.item())):
        disagree(f"loss {ours_loss} against torch's {loss.item()}")
    dg = (ours_grad - z.grad).abs().max().item()
    if dg > 1e-6:
        disagree(f"gradient differs by {dg:g}")
    big = y if mix >= 0.5 else y.roll(1, 0)
    correct = int((z.detach().argmax(1) == big).sum())
    if correct != int(t["loss"][2]):
        disagree(f"correct {t['loss'][2]}, want {correct}")
    finish(f"N {N} K {K} mix {mix:.4f} smoothing {eps:g}: loss {ours_loss:.6f} (torch {loss.item():.6f}), "
           f"gradient within {dg:.2g}, correct {correct}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode")
    ap.add_argument("args", nargs="*")
    ap.add_argument("--wrong", default=None)
    a = ap.parse_args()
    torch.set_default_dtype(torch.float32)
    if a.mode == "batches":
        check_batches(a.args[0], a.wrong)
    elif a.mode == "ra":
        check_ra(a.args[0], a.args[1], int(a.args[2]), int(a.args[3]), a.wrong)
    elif a.mode == "beta":
        check_beta(a.args[0], float(a.args[1]))
    elif a.mode == "xent":
        check_xent(a.args[0], a.wrong)
    else:
        sys.exit("unknown mode " + a.mode)


if __name__ == "__main__":
    main()
