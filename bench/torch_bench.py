# SPDX-License-Identifier: BSD-3-Clause
"""images/s of the same MiniResNet training step in PyTorch (SGD, fixed random batch).
usage: torch_bench.py [--width W] [--blocks B] [--batch N] [--steps S] [--threads T] [--channels_last]
                      [--device cpu|cuda] [--amp bf16|fp16] [--cudnn_benchmark]
The last line ends in "N images/s" (tests/gpu/run-on-device.sh reads it); the line before it
gives the GFLOP/s, counted from the module's own layers as ddptrain's model_train_flops_per_image
counts them (direct-convolution and linear multiply-adds of a forward, x 2 FLOPs, x 3 for
forward, backward-data and backward-weights), and the process's peak resident memory."""
import argparse
import os
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "helpers"))
from miniresnet_torch import MiniResNet  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--model", default="miniresnet", help="miniresnet or a torchvision model name (resnet18, ...)")
ap.add_argument("--size", type=int, default=32)
ap.add_argument("--classes", type=int, default=10)
ap.add_argument("--width", type=int, default=64)
ap.add_argument("--blocks", type=int, default=2)
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--warmup", type=int, default=3)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--channels_last", action="store_true")
ap.add_argument("--device", default="cpu")
ap.add_argument("--amp", choices=["bf16", "fp16"], default=None)
ap.add_argument("--cudnn_benchmark", action="store_true", help="let cuDNN time its algorithms (PyTorch's fastest setting)")
a = ap.parse_args()


# GoogLeNet's and Inception v3's auxiliary classifiers, which train with the network as in
# ddptrain: their losses' weights (the papers')
AUX_WEIGHT = {"googlenet": 0.3, "inception_v3": 0.4}


def make_model():
    if a.model == "miniresnet":
        return MiniResNet(a.width, a.blocks, a.classes)
    import torchvision
    kwargs = {"init_weights": True} if a.model in AUX_WEIGHT else {}   # their default, without its warning
    return getattr(torchvision.models, a.model)(num_classes=a.classes, **kwargs)


def train_loss(out, y):
    """The cross-entropy of the logits, plus the auxiliary classifiers' times their weight where
    the model returns them (GoogLeNetOutputs, InceptionOutputs in training)."""
    if not isinstance(out, tuple):
        return torch.nn.functional.cross_entropy(out, y)
    loss = torch.nn.functional.cross_entropy(out[0], y)
    for aux in out[1:]:
        if aux is not None:
            loss = loss + AUX_WEIGHT.get(a.model, 0.0) * torch.nn.functional.cross_entropy(aux, y)
    return loss


def train_flops_per_image(width, blocks):
    """From the layers a forward of one image goes through, read off by hooks."""
    macs = []

    def hook(mod, inp, out):
        if isinstance(mod, torch.nn.Conv2d):
            k = mod.kernel_size[0] * mod.kernel_size[1]
            macs.append(out.numel() * mod.in_channels // mod.groups * k)
        else:
            macs.append(out.numel() * mod.in_features)

    probe = make_model()
    for mod in probe.modules():
        if isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear)):
            mod.register_forward_hook(hook)
    with torch.no_grad():   # two images: a training forward (auxiliary heads included) needs more than one
        probe(torch.zeros(2, 3, a.size, a.size))
    return 2 * 3 * sum(macs) // 2


flops = train_flops_per_image(a.width, a.blocks)
torch.backends.cudnn.benchmark = a.cudnn_benchmark
torch.set_num_threads(a.threads)
torch.manual_seed(1)
dev = torch.device(a.device)
m = make_model().to(dev)
x = torch.randn(a.batch, 3, a.size, a.size, device=dev)
y = torch.randint(0, a.classes, (a.batch,), device=dev)
amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.amp)
scaler = torch.cuda.amp.GradScaler() if a.amp == "fp16" else None
if a.channels_last:
    m = m.to(memory_format=torch.channels_last)
    x = x.to(memory_format=torch.channels_last)
opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
def sync():
    if dev.type == "cuda":
        torch.cuda.synchronize()


for s in range(a.warmup + a.steps):
    if s == a.warmup:
        sync()
        t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    with torch.autocast(dev.type, dtype=amp_dtype, enabled=amp_dtype is not None):
        loss = train_loss(m(x), y)
    if scaler:
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    else:
        loss.backward()
        opt.step()
sync()
dt = time.perf_counter() - t0
where = f"threads {a.threads}" if dev.type == "cpu" else a.device
ips = a.batch * a.steps / dt
rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024   # KiB on Linux
print(f"pytorch: {ips * flops / 1e9:.1f} GFLOP/s ({flops / 1e9:.3f} GFLOP per image), peak RSS {rss_mib} MiB")
print(f"pytorch {torch.__version__}: {a.model} width {a.width} batch {a.batch} {where}"
      f"{' channels_last' if a.channels_last else ''}{' ' + a.amp if a.amp else ''}"
      f"{' cudnn.benchmark' if a.cudnn_benchmark else ''}: {ips:.1f} images/s")
