#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A second runtime for the ONNX models of ddptrain-export, beside OpenCV's cv2.dnn: the graph
as onnx's own parser reads it, each node run by PyTorch's functional operators as the ONNX
operator specification defines it (https://onnx.ai/onnx/operators/, opset 13 to 17), over the
whole batch at once. It knows only the operators such a model uses and refuses any other, and
any attribute or input it does not read; it shares no code with the writer (src/model/onnx.c)
or with ddptrain's kernels.

    import onnx_torch; logits = onnx_torch.run(onnx.load(path), x)   # x: numpy [N, 3, S, S]
"""
import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper


def _attrs(node, known):
    a = {x.name: onnx.helper.get_attribute_value(x) for x in node.attribute}
    extra = set(a) - set(known)
    if extra:
        raise ValueError("%s %s: attributes %s not read" % (node.op_type, node.name, sorted(extra)))
    return a


def _pads2(node, a):
    """ONNX's [top, left, bottom, right] as PyTorch's symmetric (top, left)."""
    p = list(a.get("pads", [0, 0, 0, 0]))
    if p[0] != p[2] or p[1] != p[3]:
        raise ValueError("%s %s: asymmetric pads %s" % (node.op_type, node.name, p))
    return p[0], p[1]


def _conv(n, i):
    a = _attrs(n, ["kernel_shape", "strides", "pads", "dilations", "group"])
    if "kernel_shape" in a and list(a["kernel_shape"]) != list(i[1].shape[2:]):
        raise ValueError("Conv %s: kernel_shape %s, weight %s" % (n.name, a["kernel_shape"], tuple(i[1].shape)))
    return F.conv2d(i[0], i[1], i[2] if len(i) > 2 else None, a.get("strides", [1, 1]), _pads2(n, a),
                    a.get("dilations", [1, 1]), a.get("group", 1))


def _pool(n, i):
    a = _attrs(n, ["kernel_shape", "strides", "pads", "ceil_mode", "count_include_pad"])
    k, s, p = a["kernel_shape"], a.get("strides", [1, 1]), _pads2(n, a)
    ceil = bool(a.get("ceil_mode", 0))
    if n.op_type == "MaxPool":
        return F.max_pool2d(i[0], k, s, p, ceil_mode=ceil)
    return F.avg_pool2d(i[0], k, s, p, ceil_mode=ceil, count_include_pad=bool(a.get("count_include_pad", 0)))


def _bn(n, i):
    a = _attrs(n, ["epsilon"])
    # inputs X, scale, B, input_mean, input_var
    return F.batch_norm(i[0], i[3], i[4], i[1], i[2], False, 0.0, a.get("epsilon", 1e-5))


def _slice(n, i):
    _attrs(n, [])
    if len(i) != 4 or len(i[1]) != 1:
        raise ValueError("Slice %s: one axis with starts, ends and axes only" % n.name)
    axis, start, end = int(i[3][0]), int(i[1][0]), int(i[2][0])
    return i[0].narrow(axis, start, min(end, i[0].shape[axis]) - start)


def _pad(n, i):
    a = _attrs(n, ["mode"])
    if a.get("mode", b"constant") not in (b"constant", "constant") or len(i) > 2 and float(i[2]) != 0.0:
        raise ValueError("Pad %s: zeros only" % n.name)
    p = [int(v) for v in i[1]]
    half = len(p) // 2
    torch_pads = []
    for ax in reversed(range(half)):   # F.pad: the last axis first, (begin, end) each
        torch_pads += [p[ax], p[ax + half]]
    return F.pad(i[0], torch_pads)


def _reshape(n, i):
    _attrs(n, [])
    shape = [int(v) if int(v) != 0 else i[0].shape[j] for j, v in enumerate(i[1])]   # 0 copies the dimension
    return i[0].reshape(shape)


def _unsqueeze(n, i):
    _attrs(n, [])
    y = i[0]
    for ax in sorted(int(v) for v in i[1]):
        y = y.unsqueeze(ax)
    return y


def _gemm(n, i):
    a = _attrs(n, ["transB", "transA", "alpha", "beta"])
    if a.get("transA", 0) or a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0:
        raise ValueError("Gemm %s: transA, alpha, beta not read" % n.name)
    w = i[1].t() if a.get("transB", 0) else i[1]
    return i[0] @ w + (i[2] if len(i) > 2 else 0)


def _plain(fn):
    def op(n, i):
        _attrs(n, [])
        return fn(*i)
    return op


def _with(names, fn):
    def op(n, i):
        return fn(_attrs(n, names), *i)
    return op


OPS = {
    "Conv": _conv,
    "BatchNormalization": _bn,
    "MaxPool": _pool,
    "AveragePool": _pool,
    "GlobalAveragePool": _plain(lambda x: x.mean((2, 3), keepdim=True)),
    "ReduceMean": _with(["axes", "keepdims"], lambda a, x: x.mean(tuple(a["axes"]), keepdim=bool(a.get("keepdims", 1)))),
    "Relu": _plain(F.relu),
    "Sigmoid": _plain(torch.sigmoid),
    "Tanh": _plain(torch.tanh),
    "Erf": _plain(torch.erf),
    "Sqrt": _plain(torch.sqrt),
    "HardSigmoid": _with(["alpha", "beta"], lambda a, x: torch.clamp(a.get("alpha", 0.2) * x + a.get("beta", 0.5), 0, 1)),
    "HardSwish": _plain(lambda x: x * torch.clamp(x / 6 + 0.5, 0, 1)),
    "LeakyRelu": _with(["alpha"], lambda a, x: torch.where(x >= 0, x, a.get("alpha", 0.01) * x)),
    "Add": _plain(torch.add),
    "Sub": _plain(torch.sub),
    "Mul": _plain(torch.mul),
    "Div": _plain(torch.div),
    "Concat": lambda n, i: torch.cat(i, _attrs(n, ["axis"])["axis"]),
    "Slice": _slice,
    "Pad": _pad,
    "Reshape": _reshape,
    "Unsqueeze": _unsqueeze,
    "Transpose": _with(["perm"], lambda a, x: x.permute(a["perm"])),
    "Flatten": _with(["axis"], lambda a, x: torch.flatten(x, a.get("axis", 1))),
    "Gemm": _gemm,
    "Identity": _plain(lambda x: x),
}


def run(model, x, values=None, dtype=np.float32):
    """The graph's outputs for input x (its one input); every value into `values` when a dict is
    given. dtype np.float64 evaluates the float32 graph in double precision: the reference that
    tells a float32 runtime's round-off from a difference of meaning."""
    def tensor(a):
        return torch.from_numpy(np.array(a, dtype=dtype if a.dtype == np.float32 else a.dtype))   # a copy, writable
    env = {t.name: tensor(numpy_helper.to_array(t)) for t in model.graph.initializer}
    env[model.graph.input[0].name] = tensor(np.asarray(x, dtype=np.float32))
    for n in model.graph.node:
        if n.domain not in ("", "ai.onnx"):
            raise ValueError("node %s: domain %s" % (n.name, n.domain))
        if n.op_type not in OPS:
            raise ValueError("node %s: operator %s not known here" % (n.name, n.op_type))
        with torch.no_grad():
            env[n.output[0]] = OPS[n.op_type](n, [env[k] for k in n.input if k])
    if values is not None:
        values.update(env)
    return [env[o.name].numpy() for o in model.graph.output]
