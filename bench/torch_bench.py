"""images/s of the same MiniResNet training step in PyTorch (SGD, fixed random batch).
usage: torch_bench.py [--width W] [--blocks B] [--batch N] [--steps S] [--threads T] [--channels_last]
                      [--device cpu|cuda] [--amp bf16|fp16] [--cudnn_benchmark]"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from miniresnet_torch import MiniResNet  # noqa: E402

ap = argparse.ArgumentParser()
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
torch.backends.cudnn.benchmark = a.cudnn_benchmark
torch.set_num_threads(a.threads)
torch.manual_seed(1)
dev = torch.device(a.device)
m = MiniResNet(a.width, a.blocks, 10).to(dev)
x = torch.randn(a.batch, 3, 32, 32, device=dev)
y = torch.randint(0, 10, (a.batch,), device=dev)
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
        loss = torch.nn.functional.cross_entropy(m(x), y)
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
print(f"pytorch {torch.__version__}: width {a.width} batch {a.batch} {where}"
      f"{' channels_last' if a.channels_last else ''}{' ' + a.amp if a.amp else ''}"
      f"{' cudnn.benchmark' if a.cudnn_benchmark else ''}: {a.batch * a.steps / dt:.1f} images/s")
