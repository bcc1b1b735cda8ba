# SPDX-License-Identifier: BSD-3-Clause
"""FFCV's use_blurpool on a PyTorch module, as ddptrain's --use_blurpool runs it: every
nn.Conv2d with a stride above 1 and at least 16 input channels reads its input blurred by the
fixed per-channel kernel [1 2 1]^T [1 2 1] / 16 (stride 1, zero padding 1) first. FFCV wraps each
such convolution in a BlurPoolConv2d, which renames its weight (conv1.conv.weight) and adds the
kernel as a buffer; a forward pre-hook does the same arithmetic and leaves the state_dict as it
was, so torchvision's names and weights load as they are, into either side."""
import torch
import torch.nn.functional as F

KERNEL = torch.tensor([[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]) / 16.0
MIN_CHANNELS = 16


def blur(x):
    """The blur of an NCHW batch, channel by channel (a depthwise convolution)."""
    c = x.shape[1]
    w = KERNEL.to(device=x.device, dtype=x.dtype).expand(c, 1, 3, 3)
    return F.conv2d(x, w, stride=1, padding=1, groups=c)


def _blur_input(module, args):
    return (blur(args[0]),) + tuple(args[1:])


def apply_blurpool(model):
    """Blurs the input of every strided convolution of `model` with 16 or more input channels;
    returns how many."""
    n = 0
    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d) and max(m.stride) > 1 and m.in_channels >= MIN_CHANNELS:
            m.register_forward_pre_hook(_blur_input)
            n += 1
    return n
