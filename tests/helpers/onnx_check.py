#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""An ONNX model of ddptrain-export against ddptrain's own logits (the --test_data it wrote,
the ONNX model zoo's test_data_set_0/input_0.pb and output_0.pb), in runtimes that share no code
with the writer:

  1. onnx.checker.check_model(full_check=True): the model is valid ONNX, its shapes inferred;
  2. OpenCV's cv2.dnn (readNetFromONNX, setInput, forward), one image at a time: OpenCV 4.6
     reads a symbolic batch dimension as 1 and broadcasts wrongly at any other (a
     squeeze-excitation's [N, C, 1, 1] gate times its [N, C, H, W] map fails at N = 2);
  3. onnx_torch.py, PyTorch's operators node by node, the whole batch at once.

A runtime passes when max |its logits - ddptrain's| <= tol * max |ddptrain's logits| (tol 1e-4:
float32 round-off in a deep network, summed in other orders, is some 1e-6 of the logits'
scale). --cv2 cannot: OpenCV 4.6 is expected to refuse the model (ConvNeXt's layer norm: a
ReduceMean over the channels, and the broadcasts of its statistics); the checker and onnx_torch.py stand for it,
and a model OpenCV runs after all is compared as any other.

--mutate: then the comparison must fail for wrong models made from the right one: two
convolutions' weights of one shape swapped; a batch norm's running mean and variance swapped;
a flatten read in (H, W, C) order instead of PyTorch's (C, H, W) where a map larger than 1x1
is flattened into a linear layer. Each is run as the model was (cv2.dnn, else onnx_torch).

The comparison is worth something only where the logits depend on the input: the test batch's
first and last images' logits must differ by 1e-3 of their scale or more (a network whose batch
norms' running statistics are far from its activations' can map every input to the same
logits, to float32's last digits).

usage: onnx_check.py MODEL TEST_DIR [--tol 1e-4] [--cv2 run|cannot] [--mutate]
       onnx_check.py --list FILE [--tol 1e-4]   (lines: LABEL MODEL TEST_DIR [--cv2 cannot] [--mutate])
Prints "ok: LABEL: the figures" for a model that passes every check, else a "FAIL: LABEL: ..." line
per failure; exits 0 when all pass. The Python modules load once for the whole list."""
import argparse
import copy
import os
import re
import sys

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_torch  # noqa: E402


def read_tensor(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t.name, numpy_helper.to_array(t)


def cv2_run(model, x):
    import cv2
    net = cv2.dnn.readNetFromONNX(model.SerializeToString())
    out = []
    for i in range(x.shape[0]):
        net.setInput(np.ascontiguousarray(x[i:i + 1]))
        out.append(net.forward().copy())
    return np.concatenate(out)


def torch_run(model, x):
    return onnx_torch.run(model, x)[0]


def distance(y, ref):
    if y.shape != ref.shape or not np.isfinite(y).all():
        return float("inf")
    return float(np.abs(y.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-30))


def mutants(model):
    """(label, wrong model) for each mutation that applies to this graph."""
    inits = {t.name: t for t in model.graph.initializer}
    out = []
    convs = [n.input[1] for n in model.graph.node if n.op_type == "Conv" and n.input[1] in inits]
    seen = {}
    for w in convs:
        a = numpy_helper.to_array(inits[w])
        if a.shape in seen and not np.array_equal(seen[a.shape][1], a):
            m = copy.deepcopy(model)
            mi = {t.name: t for t in m.graph.initializer}
            mi[w].CopyFrom(numpy_helper.from_array(seen[a.shape][1], w))
            mi[seen[a.shape][0]].CopyFrom(numpy_helper.from_array(a, seen[a.shape][0]))
            out.append(("the weights of %s and %s swapped" % (seen[a.shape][0], w), m))
            break
        seen.setdefault(a.shape, (w, a))
    for k, n in enumerate(model.graph.node):
        if n.op_type == "BatchNormalization":
            m = copy.deepcopy(model)
            bn = m.graph.node[k]
            bn.input[3], bn.input[4] = n.input[4], n.input[3]
            out.append(("%s's running mean and variance swapped" % n.name, m))
            break
    shapes = {}
    for n in model.graph.node:   # the maps flattened: Flatten of a value whose shape the checker inferred
        if n.op_type == "Flatten":
            shapes[n.output[0]] = n.input[0]
    if shapes:
        inferred = onnx.shape_inference.infer_shapes(model)
        dims = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in inferred.graph.value_info}
        for k, n in enumerate(model.graph.node):
            src = shapes.get(n.input[0]) if n.op_type == "Gemm" and n.input else None
            d = dims.get(src)
            if d and len(d) == 4 and d[2] * d[3] > 1:
                C, H, W = d[1], d[2], d[3]
                m = copy.deepcopy(model)
                mi = {t.name: t for t in m.graph.initializer}
                w = numpy_helper.to_array(mi[n.input[1]])   # [out, C*H*W] in (C, H, W) order
                hwc = w.reshape(-1, C, H, W).transpose(0, 2, 3, 1).reshape(w.shape)
                mi[n.input[1]].CopyFrom(numpy_helper.from_array(np.ascontiguousarray(hwc), n.input[1]))
                out.append(("%s's %dx%dx%d map flattened in (H, W, C) order" % (src, C, H, W), m))
                break
    return out


def cv2_error_line(e):
    """The line of an OpenCV error that names the node, else its first error line."""
    lines = [ln.strip("> ").strip() for ln in str(e).splitlines() if ln.strip("> ").strip()]
    line = next((ln for ln in lines if ln.startswith("Node [")), next((ln for ln in lines if "error:" in ln), "?"))
    return re.sub(r"OpenCV\([0-9.]+\) \S+ error: \([-0-9]+:[^)]*\) *", "", line)


def check(label, path, test_dir, tol, cv2_mode, mutate):
    """The checks of one model: prints FAIL lines, or one ok line with the figures; returns the failures."""
    fails = []
    summary = []

    def need(ok, msg):
        if not ok:
            fails.append(msg)

    model = onnx.load(path)
    try:
        onnx.checker.check_model(model, full_check=True)
        summary.append("checker: opset %d, %d nodes (%s)" % (
            model.opset_import[0].version, len(model.graph.node), " ".join(sorted({n.op_type for n in model.graph.node}))))
    except Exception as e:   # the checker's own exception types vary between onnx releases
        need(False, "checker: %s" % str(e).strip().splitlines()[0][:200])
    name_x, x = read_tensor(os.path.join(test_dir, "test_data_set_0", "input_0.pb"))
    name_y, ref = read_tensor(os.path.join(test_dir, "test_data_set_0", "output_0.pb"))
    io = ([i.name for i in model.graph.input], [o.name for o in model.graph.output])
    need(io == ([name_x], [name_y]) and x.dtype == np.float32 and x.shape[1] == 3,
         "graph input %s, output %s; test data %s %s, %s %s" % (io[0], io[1], name_x, x.shape, name_y, ref.shape))
    scale = float(np.abs(ref).max())
    spread = float(np.abs(ref[0] - ref[-1]).max() / max(scale, 1e-30))
    need(spread >= 1e-3, "the logits hardly depend on the input: the first and last images' differ by %.2e of their "
         "scale (1e-3 at least, or the comparison would prove little)" % spread)

    runner = cv2_run
    try:
        d = distance(cv2_run(model, x), ref)
        need(d <= tol, "cv2.dnn, image by image: max |logits - ddptrain's| = %.2e of their scale %.3g (tol %g)" % (
            d, scale, tol))
        summary.insert(0, "cv2.dnn %.1e" % d)
    except Exception as e:   # cv2.error
        need(cv2_mode == "cannot", "cv2.dnn refuses the model: %s" % cv2_error_line(e)[:200])
        summary.insert(0, "cv2.dnn cannot run it (%s)" % cv2_error_line(e)[:160])
        runner = torch_run
    d = distance(torch_run(model, x), ref)
    need(d <= tol, "onnx_torch, batch of %d: max |logits - ddptrain's| = %.2e of their scale %.3g (tol %g)" % (
        x.shape[0], d, scale, tol))
    summary.insert(1, "onnx_torch %.1e of the logits' scale %.3g" % (d, scale))

    if mutate:
        muts = mutants(model)
        need(len(muts) >= 2, "only %d wrong models made" % len(muts))
        caught = []
        for what, m in muts:
            d = distance(runner(m, x), ref)
            need(d > tol, "wrong model (%s) NOT detected: %.2e of the logits' scale" % (what, d))
            caught.append("%s: %.2g" % (what, d))
        summary.append("wrong models detected (%s)" % "; ".join(caught))
    if fails:   # how far float32 itself is from the graph's meaning here: round-off, or a real difference?
        try:
            y64 = onnx_torch.run(model, x, dtype=np.float64)[0]
            fails.append("for comparison, the graph in float64: ddptrain's logits are %.2e of their scale from it, "
                         "onnx_torch's float32 ones %.2e" % (distance(ref, y64), distance(torch_run(model, x), y64)))
        except Exception as e:   # a model onnx_torch cannot run: its failure is reported above
            fails.append("no float64 evaluation: %s" % e)
    for f in fails:
        print("FAIL: %s: %s" % (label, f))
    if not fails:
        print("ok: %s: %s" % (label, ", ".join(summary)))
    return len(fails)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?")
    ap.add_argument("test_dir", nargs="?")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--cv2", choices=["run", "cannot"], default="run")
    ap.add_argument("--mutate", action="store_true")
    ap.add_argument("--list", help="a file of lines LABEL MODEL TEST_DIR [--cv2 cannot] [--mutate]")
    a = ap.parse_args()
    jobs = []
    if a.list:
        for ln in open(a.list):
            w = ln.split()
            if w:
                jobs.append((w[0], w[1], w[2], "cannot" if "cannot" in w[3:] else "run", "--mutate" in w[3:]))
    else:
        jobs.append((os.path.basename(a.model), a.model, a.test_dir, a.cv2, a.mutate))
    fails = sum(check(label, path, td, a.tol, mode, mut) for label, path, td, mode, mut in jobs)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
