# SPDX-License-Identifier: BSD-3-Clause
"""Replays a tests/helpers/dump_model output in PyTorch and compares, tensor by tensor:
logits, loss, every parameter gradient, the BN running statistics after the forward, and the
parameters after 3 SGD steps. Error measure per tensor: max|ddptrain - torch| / max|torch|.
A dump made with --accum K holds K micro-batches per step: PyTorch then runs each step as
K forwards and backwards of loss/K into zeroed gradients and one optimizer step.
The dump's /options (weight decay, Nesterov momentum, label smoothing, ...) set up PyTorch's
side through the real APIs (torch.optim.SGD(nesterov=...), nn.CrossEntropyLoss(
label_smoothing=...)); --set NAME=VALUE replaces one of them on PyTorch's
side only, so a test can check that a comparison against the wrong semantics fails.
A dump with options/ema_decay > 0 also holds the moving average of the weights and buffers
after the steps: PyTorch keeps it with torch.optim.swa_utils.AveragedModel(model,
use_buffers=True) and the EMA average (get_ema_multi_avg_fn(D) where PyTorch has it, else
avg_fn = D * e + (1 - D) * p), update_parameters after every ema_every-th step, and every
tensor of the average, num_batches_tracked included, must agree to --ema_tol.
ddptrain's ReLU masks are replayed (MaskedReLU; torchvision's nn.ReLU modules and the F.relu
of DenseNet's forward, in the order they run), and so are its max pools' choices of input
pixel where PyTorch's choice differs only by round-off (ReplayF.max_pool). Its dropout and
stochastic-depth masks are replayed too (ReplayDropout, ReplayStochasticDepth: torchvision's
modules with ddptrain's draws, in the order the modules run); their rates are tested apart.
GoogLeNet's and Inception v3's ReLU masks are replayed by module (each mask names its node,
ReplayF), since ddptrain runs GoogLeNet's auxiliary heads later than torchvision's forward does;
in training their loss is the main logits' cross-entropy plus each auxiliary classifier's times
the paper's weight (0.3 for GoogLeNet's, 0.4 for Inception v3's; --set aux_weight=W for
another), and the dump's options/aux_logits and options/transform_input build torchvision's
module with aux_logits and transform_input; the compared logits are the main ones.
A dump with options/amp 1 (dump_model --amp 1: ddptrain's bf16 convolutions and linear layers)
runs PyTorch's forwards under torch.autocast("cpu", dtype=torch.bfloat16), the loss on the
logits made float32, the optimizer and the weights float32 as autocast leaves them; with
--set amp=2 PyTorch's convolutions and linear layers round where ddptrain's do instead
(bf16_replica_torch.py), 3 and 4 are wrong variants of that (truncation; unrounded outputs).
A dump of a network of --use_blurpool (arch NAME-blurpool) runs PyTorch's NAME with
blurpool_torch.apply_blurpool (--set blurpool=0: without, for a check that must fail).
A dump with options/tta 1 (flip) or 2 (flip_shift) holds the evaluation's test-time augmented
logits of the batch with the initial weights: PyTorch computes them as airbench's evaluation
does (0.5 * f(x) + 0.5 * f(x.flip(-1)); with flip_shift that averaged with the mean of the same
on F.pad(x, (1,) * 4, mode="reflect")[:, :, 0:H, 0:W] and [:, :, 2:H+2, 2:W+2]), and the logits
must agree to --ema_tol, the count of correct predictions exactly and the summed cross-entropy
to --ema_tol. (tta_pad_zero=1: zero padding instead of reflection, for a check that must fail.)
With --ref64 K, PyTorch also runs the same steps in float64, and a tensor beyond --tol still
passes when ddptrain's distance from that float64 result is at most K times PyTorch float32's
own, the larger of two float32 runs on different thread counts (never below one float32 ulp of
the float64 result's largest element): the gradient of a
batch-norm bias that a later batch norm cancels to about zero is float32 noise on both sides,
and some networks amplify each step's round-off, PyTorch's as much as ddptrain's.
Exit 0 when every tensor is within --tol, 1 otherwise (printing the worst offenders); a network
of other shapes (a wrong variant that changes them, as --set ceil_mode=0) is a FAIL line and
exit 1 too, "FAIL: the networks differ: ..."."""
import argparse
import copy
import importlib
import os
import sys
import types

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bf16_replica_torch  # noqa: E402
import miniresnet_torch  # noqa: E402
from miniresnet_torch import MiniResNet  # noqa: E402
from blurpool_torch import apply_blurpool  # noqa: E402


class MaskedReLU(torch.autograd.Function):
    """ReLU whose 0/1 pattern is ddptrain's. Where a pre-activation lies within round-off of
    zero the two implementations may disagree on the mask, and one flipped element moves a BN
    bias gradient by percents: replaying the mask compares the arithmetic instead. Forward
    values differ from relu() only at such elements, by round-off."""

    @staticmethod
    def forward(ctx, x, mask):
        ctx.save_for_backward(mask)
        return x * mask

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        return g * mask, None


class ShapeMismatch(Exception):
    pass


class ReplayF:
    """Stands in for torch.nn.functional inside miniresnet_torch and torchvision's googlenet and
    inception modules: relu() takes the next mask, max_pool2d() the next pool's choices.

    The masks go in the order of ddptrain's steps, or, for a model whose modules track_modules
    follows (keyed), by name: each mask names its ReLU node, "MODULE.relu" for the F.relu that
    MODULE's forward calls, and F.relu takes the next mask of the module running it. GoogLeNet's
    table runs its auxiliary heads after inception5b, where its state_dict has them, but
    torchvision's forward runs aux1 right after inception4a: the order of the calls is not the
    order of the steps."""

    def __init__(self):
        self.masks = None
        self.flips = 0
        self.pools = None       # ddptrain's max-pool choices, where the dump has them
        self.pool_flips = 0
        self.keyed = None       # module -> its masks, in order, for a keyed replay
        self.stack = None       # the modules running, innermost last (track_modules), or None

    def __getattr__(self, name):
        return getattr(torch.nn.functional, name)

    def relu(self, x, inplace=False):
        if self.masks is None:
            return torch.nn.functional.relu(x)
        if self.keyed is not None:
            where = self.stack[-1] if self.stack else ""
            queue = self.keyed.get(where)
            if not queue:
                raise ShapeMismatch(f"a ReLU runs in {where or 'the model'} here that has no ReLU node "
                                    f"{where}.relu left in ddptrain")
            mask = queue.pop(0)
        else:
            mask = next(self.masks)
        if x.dim() == 2 and mask.dim() == 4 and mask.shape[2:] == (1, 1):
            mask = mask.flatten(1)   # after a linear layer: ddptrain's 1x1 map
        if mask.shape != x.shape:
            raise ShapeMismatch(f"a ReLU's input is {tuple(x.shape)} here but {tuple(mask.shape)} in ddptrain")
        self.flips += int(((x > 0) != (mask > 0)).sum())
        return MaskedReLU.apply(x, mask)

    def replay(self, group, pools=None):
        names = sorted(group.keys())
        masks = [torch.from_numpy(np.array(group[n])).permute(0, 3, 1, 2).float() for n in names]
        self.masks = iter(masks)
        self.keyed = None
        if self.stack is not None and names:
            nodes = [group[n].attrs.get("node") for n in names]
            if any(v is None for v in nodes):
                raise ShapeMismatch("the dump's ReLU masks do not name their nodes: no replay by module")
            self.keyed = {}
            for node, mask in zip(nodes, masks):
                node = node.decode() if isinstance(node, bytes) else str(node)
                self.keyed.setdefault(node.rsplit(".", 1)[0] if "." in node else "", []).append(mask)
        if pools is not None:
            self.pools = iter([torch.from_numpy(np.array(pools[n]).astype(np.int64)).permute(0, 3, 1, 2).contiguous()
                               for n in sorted(pools.keys())])

    def left(self):
        """Masks of the last replay that no ReLU took (keyed replay)."""
        return sum(len(q) for q in self.keyed.values()) if self.keyed is not None else 0

    def max_pool2d(self, x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        """F.max_pool2d (Inception v3's modules call it) through max_pool's replay."""
        if return_indices or self.pools is None:
            return torch.nn.functional.max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode=ceil_mode,
                                                  return_indices=return_indices)
        mod = types.SimpleNamespace(kernel_size=kernel_size, stride=kernel_size if stride is None else stride,
                                    padding=padding, dilation=dilation, ceil_mode=ceil_mode)
        return self.max_pool(x, mod)

    def max_pool(self, x, mod):
        """nn.MaxPool2d that takes ddptrain's choice of input pixel where it differs from
        PyTorch's only by round-off (the two inputs within 1e-4 of the largest |x|): a near-tie
        in a window is a coin toss as a pre-activation near zero is. Any other difference stays
        PyTorch's own, so a wrong pool still fails."""
        y, idx = torch.nn.functional.max_pool2d(x, mod.kernel_size, mod.stride, mod.padding, mod.dilation,
                                                ceil_mode=mod.ceil_mode, return_indices=True)
        if self.pools is None:
            return y
        arg = next(self.pools)
        if arg.shape != idx.shape:
            raise ShapeMismatch(f"a max pool's output is {tuple(idx.shape)} here but {tuple(arg.shape)} in ddptrain")
        differ = arg != idx
        if not bool(differ.any()):
            return y
        xf = x.flatten(2)
        theirs = xf.gather(2, arg.flatten(2)).view_as(y).detach()
        near = differ & ((theirs - y.detach()).abs() <= 1e-4 * float(x.detach().abs().max()))
        self.pool_flips += int(near.sum())
        return xf.gather(2, torch.where(near, arg, idx).flatten(2)).view_as(y)


REPLAY = ReplayF()
miniresnet_torch.F = REPLAY
# torchvision's BasicConv2d and GoogLeNet's InceptionAux call F.relu, Inception v3's modules
# F.max_pool2d
for _name in ("torchvision.models.googlenet", "torchvision.models.inception"):
    importlib.import_module(_name).F = REPLAY

# The networks whose ReLU masks are replayed by module (ReplayF), and the weight of their
# auxiliary classifiers' losses: the papers' (GoogLeNet's 0.3 for each of its two, Inception v3's
# 0.4), which torchvision's forward leaves to the training script.
KEYED = ("googlenet", "inception_v3")
AUX_WEIGHT = {"googlenet": 0.3, "inception_v3": 0.4}


def track_modules(model):
    """REPLAY.stack holds the names of the modules whose forward is running, for the keyed
    replay of F.relu."""
    REPLAY.stack = []

    def leave(mod, inputs, output):
        REPLAY.stack.pop()   # returns None: the output stays the module's

    for name, mod in model.named_modules():
        mod.register_forward_pre_hook(lambda m, i, name=name: REPLAY.stack.append(name))
        mod.register_forward_hook(leave)


def replay_functional(arch):
    """torchvision modules whose forward calls F.relu (DenseNet's after norm5) take ddptrain's
    masks there too, in order with the nn.ReLU modules'."""
    if arch.startswith("densenet"):
        import torchvision.models.densenet as densenet
        densenet.F = REPLAY


class ReplayReLU(torch.nn.Module):
    """torchvision's nn.ReLU modules, each call taking the next of ddptrain's masks."""

    def forward(self, x):
        return REPLAY.relu(x)


class ReplayMaxPool(torch.nn.Module):
    """torchvision's nn.MaxPool2d modules, each call taking the next of ddptrain's choices."""

    def __init__(self, pool):
        super().__init__()
        self.pool = pool

    def forward(self, x):
        return REPLAY.max_pool(x, self.pool)


class NoiseReplay:
    """ddptrain's dropout and stochastic-depth masks of one step, in the order they were drawn."""

    def __init__(self):
        self.masks = None
        self.used = 0

    def replay(self, group):
        self.masks = iter([torch.from_numpy(np.array(group[n])) for n in sorted(group.keys())]) if group else iter([])

    def next(self, what, shape):
        try:
            m = next(self.masks)
        except StopIteration:
            raise ShapeMismatch(f"a {what} runs here that dropped nothing in ddptrain")
        if tuple(m.shape) != shape:
            raise ShapeMismatch(f"a {what}'s mask is {tuple(m.shape)} in ddptrain, {shape} here")
        self.used += 1
        return m


NOISE = NoiseReplay()


class ReplayDropout(torch.nn.Module):
    """nn.Dropout(p) with ddptrain's keep flags: x * keep / (1 - p), as F.dropout scales."""

    def __init__(self, p):
        super().__init__()
        self.p = p
        self.scaled = True

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        keep = NOISE.next("dropout", (x.shape[0], *x.shape[2:], x.shape[1]) if x.dim() == 4 else
                          (x.shape[0], 1, 1, x.shape[1]))
        keep = keep.permute(0, 3, 1, 2).reshape(x.shape) if x.dim() == 4 else keep.reshape(x.shape)
        if self.p == 1.0:
            return x * 0.0
        return x * (keep / (1.0 - self.p)) if self.scaled else x * keep


class ReplayStochasticDepth(torch.nn.Module):
    """torchvision.ops.StochasticDepth(p, "row") with ddptrain's factor per image."""

    def __init__(self, p):
        super().__init__()
        self.p = p
        self.row = True

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        s = NOISE.next("stochastic depth", (x.shape[0],))
        if not self.row:
            s = s[:1].expand(x.shape[0])
        return x * s.view(-1, *([1] * (x.dim() - 1)))


def replay_choices(model):
    """torchvision's ReLU and MaxPool2d modules replaced by the replaying ones, and its Dropout
    and StochasticDepth modules by ones that replay ddptrain's draws."""
    from torchvision.ops import StochasticDepth
    for mod in list(model.modules()):
        for name, child in list(mod.named_children()):
            if isinstance(child, torch.nn.ReLU):
                setattr(mod, name, ReplayReLU())
            elif isinstance(child, torch.nn.MaxPool2d):
                setattr(mod, name, ReplayMaxPool(child))
            elif isinstance(child, torch.nn.Dropout):
                setattr(mod, name, ReplayDropout(child.p))
            elif isinstance(child, StochasticDepth):
                if child.mode != "row":
                    raise ShapeMismatch(f"StochasticDepth mode {child.mode}")
                setattr(mod, name, ReplayStochasticDepth(child.p))


class SlopedHardsigmoid(torch.nn.Module):
    """hardsigmoid with another slope: clamp(x * slope + 0.5, 0, 1)."""

    def __init__(self, slope):
        super().__init__()
        self.slope = slope

    def forward(self, x):
        return torch.clamp(x * self.slope + 0.5, 0.0, 1.0)


class TransposedKernel(torch.nn.Module):
    """A rectangular convolution run with its kernel and padding transposed (a 1x7 as 7x1 and the
    reverse): the same shapes, the other axis. It holds the convolution's own parameters."""

    def __init__(self, conv):
        super().__init__()
        self.weight, self.bias = conv.weight, conv.bias
        self.args = (conv.stride, tuple(conv.padding[::-1]), conv.dilation, conv.groups)

    def forward(self, x):
        return torch.nn.functional.conv2d(x, self.weight.transpose(2, 3), self.bias, *self.args)


class DenseFromDepthwise(torch.nn.Module):
    """A depthwise convolution's weights run as a dense one: each output channel's k x k kernel
    applied to every input channel (what a kernel that ignores the groups would compute). It
    holds the convolution's own parameters, under their names."""

    def __init__(self, conv):
        super().__init__()
        self.weight, self.bias = conv.weight, conv.bias
        self.args = (conv.stride, conv.padding, conv.dilation)
        self.shape = (conv.out_channels, conv.in_channels, *conv.kernel_size)

    def forward(self, x):
        return torch.nn.functional.conv2d(x, self.weight.expand(*self.shape), self.bias, *self.args, 1)


def cat_reversed(self, inputs):
    """DenseNet's _DenseLayer.bn_function with torch.cat's inputs in the reverse order."""
    return self.conv1(self.relu1(self.norm1(torch.cat(list(inputs)[::-1], 1))))
class WrongLayerNorm2d(torch.nn.Module):
    """ConvNeXt's LayerNorm2d normalising over other axes than the channels of each pixel:
    (1, 2, 3), each image's C x H x W values, or (2, 3), each channel's map; the same weight and
    bias per channel, under their names."""

    def __init__(self, ln, dims):
        super().__init__()
        self.weight, self.bias, self.eps, self.dims = ln.weight, ln.bias, ln.eps, dims

    def forward(self, x):
        mean = x.mean(self.dims, keepdim=True)
        var = (x - mean).pow(2).mean(self.dims, keepdim=True)
        y = (x - mean) / torch.sqrt(var + self.eps)
        return y * self.weight.view(1, -1, 1, 1) + self.bias.view(1, -1, 1, 1)


def wrong_shufflenet(opts, defaults):
    """ShuffleNet V2's module functions replaced (torchvision.models.shufflenetv2): its
    channel_shuffle of another group count, or an InvertedResidual of stride 1 that joins its
    halves the other way round, torch.cat((branch2(x2), x1))."""
    import torchvision.models.shufflenetv2 as sn
    if opts["shuffle_groups"] != defaults["shuffle_groups"]:
        groups, shuffle = int(opts["shuffle_groups"]), sn.channel_shuffle
        sn.channel_shuffle = lambda x, g: shuffle(x, groups)
    if opts["shuffle_cat_swapped"]:
        forward = sn.InvertedResidual.forward

        def swapped(self, x):
            if self.stride != 1:
                return forward(self, x)
            x1, x2 = x.chunk(2, dim=1)
            return sn.channel_shuffle(torch.cat((self.branch2(x2), x1), dim=1), 2)
        sn.InvertedResidual.forward = swapped


def wrong_semantics(model, opts, defaults):
    """The options that change PyTorch's side away from torchvision's definitions (--set), so
    that a test can see the comparison fail: hardsigmoid's slope, dropout without its 1/(1-p),
    stochastic depth drawn per batch instead of per image, batch norm's momentum, a depthwise
    convolution run dense, max pools without ceil_mode (SqueezeNet's: other output sizes),
    DenseNet's concatenation of a block's maps in the reverse order, rectangular kernels
    transposed (Inception v3's 1x7 run as 7x1), ShuffleNet's channel shuffle of another group
    count (shuffle_groups) or its halves joined the other way round (shuffle_cat_swapped),
    ConvNeXt's LayerNorm2d over each image's (C, H, W) (ln2d_axes=1) or each channel's (H, W)
    (ln2d_axes=2) instead of each pixel's channels. (aux_weight, the auxiliary losses' weight,
    is the loss's.)"""
    if opts["concat_reversed"]:
        import torchvision.models.densenet as densenet
        densenet._DenseLayer.bn_function = cat_reversed
    wrong_shufflenet(opts, defaults)
    for mod in list(model.modules()):
        if isinstance(mod, ReplayMaxPool) and not opts["ceil_mode"]:
            mod.pool.ceil_mode = False
        for name, child in list(mod.named_children()):
            if isinstance(child, torch.nn.Hardsigmoid) and opts["hardsigmoid_slope"] != defaults["hardsigmoid_slope"]:
                setattr(mod, name, SlopedHardsigmoid(opts["hardsigmoid_slope"]))
            elif isinstance(child, ReplayDropout):
                child.scaled = bool(opts["dropout_scaled"])
            elif isinstance(child, ReplayStochasticDepth):
                child.row = bool(opts["sd_row"])
            elif isinstance(child, torch.nn.BatchNorm2d) and opts["bn_momentum"] >= 0:
                child.momentum = opts["bn_momentum"]
            elif (isinstance(child, torch.nn.Conv2d) and opts["depthwise_dense"] and child.groups > 1 and
                  child.groups == child.in_channels):
                setattr(mod, name, DenseFromDepthwise(child))
            elif (isinstance(child, torch.nn.Conv2d) and opts["rect_transposed"] and
                  child.kernel_size[0] != child.kernel_size[1]):
                setattr(mod, name, TransposedKernel(child))
            elif type(child).__name__ == "LayerNorm2d" and opts["ln2d_axes"]:
                setattr(mod, name, WrongLayerNorm2d(child, (1, 2, 3) if opts["ln2d_axes"] == 1 else (2, 3)))


def rel_err(a, b):
    """max|a - b| / max|b| in float64, over chunks: VGG's 25088 x 4096 weight in float64 at
    once would take 800 MB per temporary. A NaN anywhere gives NaN."""
    a = np.asarray(a).reshape(-1)
    b = np.asarray(b).reshape(-1)
    if a.size != b.size:
        raise ShapeMismatch(f"a result of {b.size} values here has {a.size} in ddptrain")
    num = den = np.float64(0.0)
    for i in range(0, max(a.size, 1), 1 << 20):
        aa = a[i:i + (1 << 20)].astype(np.float64)
        bb = b[i:i + (1 << 20)].astype(np.float64)
        if aa.size:
            num = np.maximum(num, np.max(np.abs(aa - bb)))
            den = np.maximum(den, np.max(np.abs(bb)))
    return float(num / max(den, 1e-30))


def param_groups(model, lr, opts):
    """model.parameters(), or with no_decay_1d / bn_bias_lr_mult the usual param groups: weight
    decay on the weights only, and the batch-norm biases at their own learning rate."""
    if not opts["no_decay_1d"] and opts["bn_bias_lr_mult"] == 1.0:
        return model.parameters()
    bn_bias = {f"{n}.bias" for n, m in model.named_modules() if isinstance(m, torch.nn.BatchNorm2d)}
    decay, no_decay, biases = [], [], []
    for name, p in model.named_parameters():
        if name in bn_bias:
            biases.append(p)
        elif opts["no_decay_1d"] and p.ndim == 1:
            no_decay.append(p)
        else:
            decay.append(p)
    wd = opts["weight_decay"]
    groups = [{"params": decay},
              {"params": no_decay, "weight_decay": 0.0},
              {"params": biases, "weight_decay": 0.0 if opts["no_decay_1d"] else wd,
               "lr": lr * opts["bn_bias_lr_mult"]}]
    return [g for g in groups if g["params"]]


def tta_logits(model, x, level, pad_mode="reflect"):
    """airbench's infer(model, loader, tta_level) on one batch."""
    def mirror(v):
        return 0.5 * model(v) + 0.5 * model(v.flip(-1))
    logits = mirror(x)
    if level == 1:
        return logits
    h, w = x.shape[2], x.shape[3]
    p = torch.nn.functional.pad(x, (1,) * 4, mode=pad_mode)
    shifted = [mirror(p[:, :, 0:h, 0:w]), mirror(p[:, :, 2:h + 2, 2:w + 2])]
    return 0.5 * logits + 0.5 * torch.stack(shifted).mean(0)


def compare_tta(f, model, opts):
    """The dump's test-time augmented evaluation against PyTorch's on the initial weights."""
    model.eval()
    x = torch.from_numpy(np.array(f["input_nhwc"])).permute(0, 3, 1, 2).contiguous()
    y = torch.from_numpy(np.array(f["labels"])).long()
    level = int(opts["tta"])
    with torch.no_grad():
        if level == 0:
            z = model(x)
        else:
            z = tta_logits(model, x, level, "constant" if opts["tta_pad_zero"] else "reflect")
        loss_sum = float(torch.nn.functional.cross_entropy(z.double(), y, reduction="sum"))
    correct = int((z.argmax(1) == y).sum())
    got_correct = int(f["tta_correct"][0])
    res = [("tta logits", rel_err(f["tta_logits"][()], z.numpy())),
           ("tta loss sum", rel_err(f["tta_loss_sum"][()], [loss_sum])),
           ("tta correct", 0.0 if got_correct == correct else float("inf"))]
    print(f"TTA level {level}: {correct}/{len(y)} correct in PyTorch, {got_correct} in ddptrain; "
          f"logits rel err {res[0][1]:.3e}, loss sum rel err {res[1][1]:.3e}")
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--ema_tol", type=float, default=1e-5)
    ap.add_argument("--ref64", type=float, default=0.0, metavar="K",
                    help="a tensor beyond --tol passes when ddptrain is within K times PyTorch float32's distance "
                         "from PyTorch's float64 result")
    ap.add_argument("--median_tol", type=float, default=float("inf"),
                    help="also fail when the median over the tensors of the rel err exceeds this (bf16 runs: "
                         "a bound on the typical tensor where --tol bounds the worst)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="PyTorch's side uses VALUE for option NAME instead of the dump's")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))
    f = h5py.File(args.dump, "r")
    meta = [float(v) for v in f["meta"][()]]
    width, blocks, lr, momentum = meta[:4]
    accum = int(meta[4]) if len(meta) > 4 else 1
    defaults = {"weight_decay": 1e-4, "nesterov": 0.0, "label_smoothing": 0.0, "no_decay_1d": 0.0,
                "bn_bias_lr_mult": 1.0, "steps": 3.0, "ema_decay": 0.0, "ema_every": 1.0,
                "tta": 0.0, "tta_pad_zero": 0.0,
                # wrong semantics on PyTorch's side, for checks that must fail
                "hardsigmoid_slope": 1.0 / 6.0, "dropout_scaled": 1.0, "sd_row": 1.0, "bn_momentum": -1.0,
                "depthwise_dense": 0.0, "ceil_mode": 1.0, "concat_reversed": 0.0, "rect_transposed": 0.0,
                "shuffle_groups": 2.0, "shuffle_cat_swapped": 0.0, "ln2d_axes": 0.0,
                # GoogLeNet's and Inception v3's settings (dump_model's --aux_logits,
                # --transform_input), and the weight of their auxiliary losses (-1: the paper's)
                "aux_logits": 1.0, "transform_input": 0.0, "aux_weight": -1.0,
                # --use_amp on the CPU: PyTorch's forwards (and so its backwards) under
                # torch.autocast("cpu", dtype=torch.bfloat16); --set amp=0 for float32,
                # 2 for bf16_replica_torch's replica of ddptrain's roundings, 3 and 4 for its
                # wrong variants (truncation, convolution outputs left unrounded)
                "amp": 0.0}
    arch = f["arch"][()].decode() if "arch" in f else "miniresnet"
    # a network of --use_blurpool (NAME-blurpool) is PyTorch's NAME with blurpool_torch's blur
    defaults["blurpool"] = float(arch.endswith("-blurpool"))
    arch = arch[:-len("-blurpool")] if arch.endswith("-blurpool") else arch
    opts = dict(defaults)
    if "options" in f:
        opts.update({k: float(f["options"][k][()][0]) for k in f["options"]})
    for kv in args.set:
        k, v = kv.split("=", 1)
        if k not in opts:
            print(f"FAIL: --set {k}: no such option (have {sorted(opts)})")
            return 1
        opts[k] = float(v)
    if arch == "miniresnet":
        model = MiniResNet(int(width), int(blocks), 10)
    else:
        import torchvision
        kwargs = {}
        if arch in AUX_WEIGHT:   # torchvision's defaults without weights: aux_logits=True, transform_input=False
            kwargs = {"aux_logits": bool(opts["aux_logits"]), "transform_input": bool(opts["transform_input"]),
                      "init_weights": True}
        model = getattr(torchvision.models, arch)(num_classes=10, **kwargs)
        replay_choices(model)
        replay_functional(arch)
    aux_weight = opts["aux_weight"] if opts["aux_weight"] >= 0 else AUX_WEIGHT.get(arch, 0.0)
    if opts["blurpool"]:
        apply_blurpool(model)
    sd = model.state_dict()
    for name in list(sd.keys()):
        if name.endswith("num_batches_tracked"):
            continue
        src = f["params"][name] if name in f["params"] else f["buffers"][name]
        sd[name] = torch.from_numpy(np.array(src))
    # every ddptrain tensor must exist in the module and vice versa
    names_c = set()
    f["params"].visititems(lambda n, o: names_c.add(n) if isinstance(o, h5py.Dataset) else None)
    if "buffers" in f:   # none in a network without batch norms (SqueezeNet, AlexNet, VGG, ConvNeXt)
        f["buffers"].visititems(lambda n, o: names_c.add(n) if isinstance(o, h5py.Dataset) else None)
    names_t = {n for n in sd.keys() if not n.endswith("num_batches_tracked")}
    if names_c != names_t:
        print("FAIL: tensor names differ: only ddptrain:", sorted(names_c - names_t)[:5],
              "only torch:", sorted(names_t - names_c)[:5])
        return 1
    model.load_state_dict(sd)
    wrong_semantics(model, opts, defaults)   # after the load: it may wrap modules
    if arch in KEYED:
        track_modules(model)
    tta_results = []
    if "tta_logits" in f:
        tta_results = compare_tta(f, model, opts)
    model.train()
    x = torch.from_numpy(np.array(f["input_nhwc"])).permute(0, 3, 1, 2).contiguous()
    y = torch.from_numpy(np.array(f["labels"])).long()
    xs, ys = x.chunk(accum), y.chunk(accum)
    criterion = torch.nn.CrossEntropyLoss(label_smoothing=opts["label_smoothing"])

    model64 = copy.deepcopy(model).double() if args.ref64 else None
    if opts["amp"] >= 2:
        variant = {2: "nearest", 3: "truncate", 4: "conv_out_f32"}[int(opts["amp"])]
        print(f"bf16 replica ({variant}): {bf16_replica_torch.install(model, variant)} convolutions and linear "
              f"layers round as ddptrain's --use_amp does")
    aux_seen = [0]   # auxiliary classifiers in the last training forward

    def step_gradients(step, mdl=model):
        """Gradient accumulation: the mean loss over the micro-batches, as a sum of loss/K."""
        REPLAY.replay(f.get(f"masks/step{step}", {}), f.get(f"pools/step{step}"))
        NOISE.replay(f.get(f"noise/step{step}"))
        logits, losses = [], []
        for xj, yj in zip(xs, ys):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=opts["amp"] == 1 and mdl is model):
                out = mdl(xj.to(next(mdl.parameters()).dtype))
            out = out.float() if not isinstance(out, tuple) else type(out)(*(o.float() if o is not None else o for o in out))
            if isinstance(out, tuple):
                # GoogLeNetOutputs(logits, aux_logits2, aux_logits1), InceptionOutputs(logits,
                # aux_logits) in training: the main logits' loss plus each auxiliary classifier's
                # times its weight
                out, aux = out[0], [a for a in out[1:] if a is not None]
                loss = criterion(out, yj)
                for a in aux:
                    loss = loss + aux_weight * criterion(a, yj)
                aux_seen[0] = len(aux)
            else:
                loss = criterion(out, yj)
            (loss / accum).backward()
            logits.append(out.detach())
            losses.append(loss.item())
        if next(NOISE.masks, None) is not None:
            raise ShapeMismatch("ddptrain dropped values in more places than run here")
        if REPLAY.left():
            raise ShapeMismatch(f"{REPLAY.left()} of ddptrain's ReLU masks were taken by no ReLU here")
        return torch.cat(logits), float(np.mean(losses))

    # What each side computed, by result name: ddptrain's (from the dump) and PyTorch's
    ours, theirs = {}, {}

    def record(results, name, got, want):
        e = rel_err(got, want)
        results.append((name, e))
        if not (e <= args.tol):   # kept for the float64 reference; copies: a grad is reused
            ours[name], theirs[name] = np.array(got), np.array(want)

    def first_step(mdl, results, rec):
        logits, loss = step_gradients(0, mdl)
        rec(results, "logits", f["logits"][()], logits.numpy())
        rec(results, "loss", f["loss"][()], [loss])
        for name, p in mdl.named_parameters():
            rec(results, "grad " + name, f["grads"][name][()], p.grad.numpy())
        for name, b in mdl.named_buffers():
            if not name.endswith("num_batches_tracked"):
                rec(results, "running " + name, f["buffers_after"][name][()], b.numpy())

    results = []
    first_step(model, results, record)
    params = dict(model.named_parameters())

    opt = torch.optim.SGD(param_groups(model, lr, opts), lr=lr, momentum=momentum,
                          weight_decay=opts["weight_decay"], nesterov=bool(opts["nesterov"]))
    ema = None
    if opts["ema_decay"] > 0:
        from torch.optim import swa_utils
        decay = opts["ema_decay"]
        if hasattr(swa_utils, "get_ema_multi_avg_fn"):
            ema = swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(decay), use_buffers=True)
        else:   # PyTorch < 2.1: the EMA as its documentation writes it
            ema = swa_utils.AveragedModel(model, avg_fn=lambda e, p, n: decay * e + (1 - decay) * p, use_buffers=True)
    every = int(opts["ema_every"])
    opt.step()
    if ema is not None and 1 % every == 0:
        ema.update_parameters(model)
    for s in range(1, int(opts["steps"])):
        opt.zero_grad()
        step_gradients(s)
        opt.step()
        if ema is not None and (s + 1) % every == 0:
            ema.update_parameters(model)
    for name, p in params.items():
        record(results, "after 3 steps " + name, f["params_after3"][name][()], p.detach().numpy())

    bad = [(n, e) for n, e in results if not (e <= args.tol)]
    if model64 is not None and bad:
        # The same steps in float64: a tensor beyond tol passes when ddptrain is within
        # --ref64 times PyTorch's own float32 distance of it (a sum that cancels to about zero,
        # a network whose steps amplify round-off).
        def replica(mdl):
            """The dump's steps again on a copy of the initial model: every result by name."""
            out = {}
            first_step(mdl, [], lambda r, name, got, want: out.__setitem__(name, np.array(want, dtype=np.float64)))
            o = torch.optim.SGD(param_groups(mdl, lr, opts), lr=lr, momentum=momentum,
                                weight_decay=opts["weight_decay"], nesterov=bool(opts["nesterov"]))
            o.step()
            for st in range(1, int(opts["steps"])):
                o.zero_grad()
                step_gradients(st, mdl)
                o.step()
            for name, p in mdl.named_parameters():
                out["after 3 steps " + name] = p.detach().numpy().astype(np.float64)
            return out

        # PyTorch float32's distance is one sample of round-off: a second float32 run on another
        # thread count (another order of its parallel sums) moved it by 4x on EfficientNetV2's
        # cancelled batch-norm gradients, so the yardstick is the larger of the two.
        model32 = copy.deepcopy(model64).float() if opts["amp"] == 0 else None
        ref = replica(model64)
        theirs2 = {}
        if model32 is not None:
            threads = torch.get_num_threads()
            torch.set_num_threads(2 if threads == 1 else 1)
            theirs2 = replica(model32)
            torch.set_num_threads(threads)
        rescued = []
        for n, e in bad:
            d_ours = float(np.max(np.abs(ours[n].astype(np.float64) - ref[n])))
            d_theirs = float(np.max(np.abs(theirs[n].astype(np.float64) - ref[n])))
            if n in theirs2:
                d_theirs = max(d_theirs, float(np.max(np.abs(theirs2[n] - ref[n]))))
            scale = float(np.max(np.abs(ref[n]))) * 2.0 ** -23
            if d_ours <= args.ref64 * max(d_theirs, scale):
                rescued.append((n, d_ours / max(d_theirs, scale)))
            else:
                print(f"float64 reference: {n}: ddptrain {d_ours / max(d_theirs, scale):.2f}x PyTorch float32's "
                      f"distance from it ({d_ours:.3e} against {d_theirs:.3e})")
        if rescued:
            worst = max(rescued, key=lambda r: r[1])
            print(f"float64 reference: {len(rescued)} of the {len(bad)} tensors beyond tol are within {args.ref64:g}x "
                  f"PyTorch float32's own distance from it (worst {worst[1]:.2f}x, {worst[0]})")
        names = {n for n, _ in rescued}
        bad = [(n, e) for n, e in bad if n not in names]
    if tta_results:
        bad += [(n, e) for n, e in tta_results if not (e <= args.ema_tol)]
        results += tta_results
    if ema is not None:
        ema_results = []
        if int(f["ema_n_averaged"][0]) != int(ema.n_averaged):
            ema_results.append(("ema n_averaged", float("inf")))
        for name, p in ema.module.named_parameters():
            ema_results.append(("ema " + name, rel_err(f["ema_params"][name][()], p.detach().numpy())))
        nbt = []
        for name, b in ema.module.named_buffers():
            if name.endswith("num_batches_tracked"):
                nbt.append(float(b))
            else:
                ema_results.append(("ema " + name, rel_err(f["ema_buffers"][name][()], b.numpy())))
        ema_results.append(("ema num_batches_tracked", rel_err(f["ema_nbt"][()], nbt)))
        eworst = max(ema_results, key=lambda r: r[1])
        print(f"EMA: compared {len(ema_results)} tensors of the average of {int(ema.n_averaged)} updates "
              f"(decay {opts['ema_decay']:g}, every {every}): worst {eworst[0]} rel err {eworst[1]:.3e}, tol {args.ema_tol:g}")
        bad += [(n, e) for n, e in ema_results if not (e <= args.ema_tol)]
        results += ema_results
    worst = max(results, key=lambda r: r[1])
    nondefault = {k: v for k, v in opts.items() if abs(v - defaults[k]) > 1e-6 * abs(defaults[k])}
    if aux_seen[0]:
        print(f"loss: cross-entropy of the logits + {aux_weight:g} x that of each of the {aux_seen[0]} auxiliary "
              f"classifiers")
    if nondefault:
        print("options: " + ", ".join(f"{k}={v:g}" for k, v in sorted(nondefault.items())))
    print(f"compared {len(results)} tensors ({len(params)} parameters, {accum} micro-batch(es) per step): worst {worst[0]} rel err {worst[1]:.3e}, tol {args.tol:g}"
          f" ({REPLAY.flips} ReLU mask elements at round-off distance from zero replayed"
          f"{f', {REPLAY.pool_flips} max-pool choices between inputs within round-off' if REPLAY.pools is not None else ''})")
    for n, e in sorted(results, key=lambda r: -r[1])[:5]:
        print(f"  {e:.3e}  {n}")
    median = float(np.median([e for _, e in results]))
    if args.median_tol < float("inf"):
        print(f"median rel err over the {len(results)} tensors {median:.3e}, median_tol {args.median_tol:g}")
        if not (median <= args.median_tol):
            print(f"FAIL: the median rel err {median:.3e} exceeds median_tol {args.median_tol:g}")
            return 1
    if bad:
        print(f"FAIL: {len(bad)} tensors exceed tol {args.tol:g}{f' (the average, TTA: {args.ema_tol:g})' if ema is not None or tta_results else ''} (worst {worst[1]:.3e}, {worst[0]}): "
              + ", ".join(n for n, _ in bad[:8]))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ShapeMismatch as e:
        print(f"FAIL: the networks differ: {e}")
        sys.exit(1)
