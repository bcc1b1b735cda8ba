# SPDX-License-Identifier: BSD-3-Clause
"""The suite's own PyTorch rendering of airbench94 (its network, whitening, Lookahead and
hyperparameters as its paper and code describe them), for bench/airbench_check.py --reference:
the same comparison as against airbench's own code, without a download.

make_net94(): nn.Sequential with state_dict names 0 (2x2 whitening conv with bias), 1 (GELU),
2..4 (conv-pool-BN-GELU-conv-BN-GELU groups of 64, 256, 256 channels: 3x3 convs without bias,
batch norms with eps 1e-12, momentum 0.4 and their weight not trained), 5 (max pool 3),
6 (flatten), 7 (linear without bias), 8 (times 1/9)."""
import numpy as np
import torch
from torch import nn

hyp = {"opt": {"lr": 11.5, "momentum": 0.85, "weight_decay": 0.0153, "bias_scaler": 64.0, "label_smoothing": 0.2}}


class Group(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.pool = nn.MaxPool2d(2)
        self.norm1 = nn.BatchNorm2d(cout, eps=1e-12, momentum=0.4)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.norm2 = nn.BatchNorm2d(cout, eps=1e-12, momentum=0.4)
        self.norm1.weight.requires_grad_(False)
        self.norm2.weight.requires_grad_(False)

    def forward(self, x):
        x = nn.functional.gelu(self.norm1(self.pool(self.conv1(x))))
        return nn.functional.gelu(self.norm2(self.conv2(x)))


class Scale(nn.Module):
    def forward(self, x):
        return x / 9.0


def make_net94():
    net = nn.Sequential(nn.Conv2d(3, 24, 2, padding=0, bias=True), nn.GELU(), Group(24, 64), Group(64, 256),
                        Group(256, 256), nn.MaxPool2d(3), nn.Flatten(), nn.Linear(256, 10, bias=False), Scale())
    with torch.no_grad():
        net[0].bias.zero_()
        for g in net[2:5]:
            for conv in (g.conv1, g.conv2):
                w = conv.weight
                w[:w.shape[1]] = 0
                for i in range(w.shape[1]):
                    w[i, i, 1, 1] = 1.0
    net[0].weight.requires_grad_(False)
    return net


def init_whitening_conv(layer, x, eps):
    """numpy's eigh in float64 of the 2x2 patches' second moment."""
    a = x.detach().numpy().astype(np.float64)
    n, c, h, w = a.shape
    rows = []
    for y0 in range(h - 1):
        for x0 in range(w - 1):
            rows.append(a[:, :, y0:y0 + 2, x0:x0 + 2].reshape(n, -1))
    p = np.concatenate(rows)
    lam, vec = np.linalg.eigh(p.T @ p / len(p))
    filt = (vec[:, ::-1] / np.sqrt(lam[::-1] + eps)).T.reshape(12, 3, 2, 2)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(np.concatenate([filt, -filt])).float())


class LookaheadState:
    """Every float tensor of the state_dict: slow = decay * slow + (1 - decay) * fast, fast = slow."""

    def __init__(self, net):
        self.slow = {k: v.detach().clone() for k, v in net.state_dict().items() if v.is_floating_point()}

    def update(self, net, decay):
        sd = net.state_dict()
        with torch.no_grad():
            for k, s in self.slow.items():
                s.mul_(decay).add_(sd[k], alpha=1 - decay)
                sd[k].copy_(s)
