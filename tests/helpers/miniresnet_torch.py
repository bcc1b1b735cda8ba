# SPDX-License-Identifier: BSD-3-Clause
"""MiniResNet in PyTorch: the reference ddptrain is checked against.

Module and parameter names are the state_dict names ddptrain uses for its flat parameter
buffer and its checkpoints (conv1, bn1, layer{1,2,3}.{i}.{conv1,bn1,conv2,bn2,shortcut.0,
shortcut.1}, fc)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class MiniResNet(nn.Module):
    def __init__(self, width=64, blocks=2, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        cin = width
        stages = []
        for s in range(3):
            cout = width << s
            layers = []
            for b in range(blocks):
                layers.append(BasicBlock(cin, cout, 2 if (s > 0 and b == 0) else 1))
                cin = cout
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3 = stages
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
