# SPDX-License-Identifier: BSD-3-Clause
"""ddptrain's --use_amp on the CPU, replayed on a PyTorch module: its convolutions and linear
layers round to bfloat16 exactly where ddptrain's do (src/ops/conv_cpu.c, linear_cpu.c,
src/model/kind_conv.c), everything else stays float32 as ddptrain keeps it.

Convolution (oneDNN's bf16 primitives): forward y = bf16(conv(bf16(x), bf16(w))) + b, the bias
(when there is one) added in float32 after the rounded output; backward with g the gradient of
y: dx = bf16(conv_input(bf16(w), bf16(g))), dw = conv_weight(bf16(x), bf16(g)) in float32, not
rounded, db = sum of g (the unrounded g: kind_conv.c sums it before the conv rounds it).
Linear: y = bf16(x) bf16(w)^T + b in float32, dx = bf16(g) bf16(w), dw = bf16(g)^T bf16(x),
db = sum of bf16(g), none of them rounded.
bf16(v) is round to nearest even, v.to(torch.bfloat16).float(). The products and sums are
computed in float64 and rounded once to float32: the replica is the exact value of ddptrain's
formula, from which ddptrain's float32 sums differ by their round-off only.

install(model, variant): variant "nearest" is the above; "truncate" rounds toward zero instead
(dropping the low 16 bits); "conv_out_f32" leaves the convolutions' outputs and input gradients
unrounded. The last two are wrong on purpose, for checks that must fail."""
import types

import torch
import torch.nn.functional as F


def bf16_nearest(v):
    return v.to(torch.bfloat16).float()


def bf16_truncate(v):
    return (v.float().contiguous().view(torch.int32) & -65536).view(torch.float32)


def _same(v):
    return v


class _Conv(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, geom, rnd, rnd_out):
        xr, wr = rnd(x), rnd(w)
        ctx.save_for_backward(xr, wr)
        ctx.geom, ctx.rnd, ctx.rnd_out = geom, rnd, rnd_out
        return rnd_out(F.conv2d(xr.double(), wr.double(), None, *geom).float())

    @staticmethod
    def backward(ctx, g):
        xr, wr = ctx.saved_tensors
        gr = ctx.rnd(g).double()
        with torch.enable_grad():
            xd = xr.double().requires_grad_(ctx.needs_input_grad[0])
            wd = wr.double().requires_grad_()
            y = F.conv2d(xd, wd, None, *ctx.geom)
            wants = (xd, wd) if ctx.needs_input_grad[0] else (wd,)
            grads = torch.autograd.grad(y, wants, gr)
        dw = grads[-1].float()
        dx = ctx.rnd_out(grads[0].float()) if ctx.needs_input_grad[0] else None
        return dx, dw, None, None, None


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, rnd):
        xr, wr = rnd(x), rnd(w)
        ctx.save_for_backward(xr, wr)
        ctx.rnd = rnd
        return (xr.double() @ wr.double().t()).float()

    @staticmethod
    def backward(ctx, g):
        xr, wr = ctx.saved_tensors
        gr = ctx.rnd(g)
        gd = gr.double()
        return (gd @ wr.double()).float(), (gd.t() @ xr.double()).float(), None


class _LinearBias(torch.autograd.Function):
    """The bias of the linear layer: db from the rounded g (linear_cpu.c sums its rounded dy)."""

    @staticmethod
    def forward(ctx, y, b, rnd):
        ctx.rnd = rnd
        return y + b

    @staticmethod
    def backward(ctx, g):
        return g, ctx.rnd(g).double().sum(0).float(), None


def install(model, variant="nearest"):
    """Every nn.Conv2d and nn.Linear of model computes as ddptrain's bf16 path (or a wrong
    variant of it). Returns the number of layers replaced."""
    rnd = {"nearest": bf16_nearest, "truncate": bf16_truncate, "conv_out_f32": bf16_nearest}[variant]
    rnd_out = _same if variant == "conv_out_f32" else rnd
    n = 0
    for mod in model.modules():
        if isinstance(mod, torch.nn.Conv2d):
            if mod.padding_mode != "zeros":
                raise ValueError(f"padding_mode {mod.padding_mode}")

            def conv_forward(self, x, w, b):
                pad = self.padding if not isinstance(self.padding, str) else None
                if pad is None:
                    raise ValueError(f"padding {self.padding!r}")
                y = _Conv.apply(x, w, (self.stride, pad, self.dilation, self.groups), rnd, rnd_out)
                return y if b is None else y + b.view(1, -1, 1, 1)

            mod._conv_forward = types.MethodType(conv_forward, mod)
            n += 1
        elif isinstance(mod, torch.nn.Linear):
            def linear_forward(self, x):
                y = _Linear.apply(x, self.weight, rnd)
                return y if self.bias is None else _LinearBias.apply(y, self.bias, rnd)

            mod.forward = types.MethodType(linear_forward, mod)
            n += 1
    return n
