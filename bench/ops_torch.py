# SPDX-License-Identifier: BSD-3-Clause
# Per-layer-shape conv timings of MiniResNet in PyTorch (fp32), to compare with
# `tests/test_ops --bench -N 64 -t 2`. Needs a python with torch:
#   python3 bench/ops_torch.py [N [threads]] [--cl]      (--cl: channels_last tensors)
# bwd_data and bwd_w are measured as autograd time minus forward time.
import sys, time, torch
args = [a for a in sys.argv[1:] if not a.startswith("--")]
N = int(args[0]) if args else 64
torch.set_num_threads(int(args[1]) if len(args) > 1 else 2)
fmt = torch.channels_last if "--cl" in sys.argv else torch.contiguous_format
# (C_in, C_out, k, stride, pad, H, count per step)
shapes = [(3, 64, 3, 1, 1, 32, 1), (64, 64, 3, 1, 1, 32, 4), (64, 128, 3, 2, 1, 32, 1),
          (128, 128, 3, 1, 1, 16, 3), (64, 128, 1, 2, 0, 32, 1), (128, 256, 3, 2, 1, 16, 1),
          (256, 256, 3, 1, 1, 8, 3), (128, 256, 1, 2, 0, 16, 1)]
def best(f, reps=7):
    f(); f()
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return min(ts) * 1e3
tot = [0.0, 0.0, 0.0]
print("shape                       fwd_ms  bwd_data_ms  bwd_w_ms  (x count)")
for ci, co, k, s, p, h, cnt in shapes:
    conv = torch.nn.Conv2d(ci, co, k, s, p, bias=False).to(memory_format=fmt)
    x = torch.randn(N, ci, h, h).to(memory_format=fmt).requires_grad_(ci != 3)
    y = conv(x); dy = torch.randn_like(y)
    w = conv.weight
    f = best(lambda: conv(x))
    bd = best(lambda: torch.autograd.grad(conv(x), [x], dy)) - f if ci != 3 else 0.0
    bw = best(lambda: torch.autograd.grad(conv(x), [w], dy)) - f
    print(f"{ci:3d}->{co:3d} k{k} s{s} {h:2d}x{h:2d}        {f:7.2f}  {bd:9.2f}  {bw:9.2f}  x{cnt}")
    for i, v in enumerate((f, bd, bw)): tot[i] += v * cnt
print(f"total per step (weighted)    {tot[0]:7.2f}  {tot[1]:9.2f}  {tot[2]:9.2f}  sum {sum(tot):.1f} ms")
bt = 0.0
print("batchnorm+relu              fwd      bwd")
for C, H, cnt in [(64, 32, 5), (128, 16, 5), (256, 8, 5)]:
    bn = torch.nn.BatchNorm2d(C).to(memory_format=fmt)
    x = torch.randn(N, C, H, H).to(memory_format=fmt).requires_grad_()
    dy = torch.randn(N, C, H, H).to(memory_format=fmt)
    f = best(lambda: torch.relu(bn(x)))
    b = best(lambda: torch.autograd.grad(torch.relu(bn(x)), [x, bn.weight, bn.bias], dy)) - f
    print(f"C{C:<3d} {H:2d}x{H:<2d} x{cnt} {f:12.2f} {b:8.2f}")
    bt += (f + b) * cnt
print(f"batchnorm weighted     {bt:8.1f} ms per step")
