# SPDX-License-Identifier: BSD-3-Clause
"""ddptrain's networks against torchvision's builders of the same name, for
tests/test_zoo_params.sh.

    zoo_params.py TENSORS [--as FILE=BUILDER ...] [--json FILE=BUILDER ...]

TENSORS is tests/helpers/zoo_tensors's output: per network a line "net MODEL PARAMETERS", then
"NAME SHAPE" per tensor in state_dict order. Each network is compared with
torchvision.models.BUILDER(num_classes=1000) (BUILDER is MODEL, or what --as maps a file to):
the parameter count, and the state_dict's names and shapes in order. --json FILE=BUILDER
compares the network --print_model wrote in FILE with the modules of the same name: each batch
norm's eps and momentum, each layer norm's eps, each dropout's and stochastic depth's p; and
every leaf module that torchvision's forward calls is a node, in the order of the calls (within
each auxiliary classifier, and within the rest of the network).

The modules are made on the meta device (their __init__ gets device="meta"), and the forward
runs there: shapes without memory or arithmetic, so that RegNetY-128GF's 644M parameters cost
nothing. One line per
network, "ok: ..." or "FAIL: ..."; the exit status is the number of failures (at most 100).
"""
import json
import sys

import torch
import torchvision


def on_meta(cls):
    orig = cls.__init__

    def init(self, *args, **kwargs):
        kwargs.setdefault("device", "meta")
        orig(self, *args, **kwargs)

    cls.__init__ = init


for c in (torch.nn.Conv2d, torch.nn.Linear, torch.nn.BatchNorm2d, torch.nn.LayerNorm):
    on_meta(c)

_built = {}
# Builders that warn unless given their init_weights (GoogLeNet's and Inception v3's default,
# True without weights)
INIT_WEIGHTS = ("googlenet", "inception_v3")


def build(name):
    if name not in _built:
        kwargs = {"init_weights": True} if name in INIT_WEIGHTS else {}
        # the parameters a module makes itself (ConvNeXt's layer_scale) moved there too
        _built[name] = getattr(torchvision.models, name)(num_classes=1000, **kwargs).to("meta")
    return _built[name]


def torch_tensors(model):
    return [(k, "x".join(str(d) for d in v.shape) if v.dim() else "-") for k, v in model.state_dict().items()]


def read_tensors(path):
    nets, cur = [], None
    for line in open(path):
        f = line.split()
        if f[0] == "net":
            cur = {"model": f[1], "params": int(f[2]), "tensors": []}
            nets.append(cur)
        else:
            cur["tensors"].append((f[0], f[1]))
    return nets


def compare(net, builder):
    """One line: what differs between ddptrain's `net` and torchvision's `builder`, or ''."""
    model = build(builder)
    want = sum(p.numel() for p in model.parameters())
    tv, dd = torch_tensors(model), net["tensors"]
    why = []
    if net["params"] != want:
        why.append(f"{net['params']} parameters, torchvision {want}")
    if tv != dd:
        first = next((i for i, (a, b) in enumerate(zip(tv, dd)) if a != b), min(len(tv), len(dd)))
        a = " ".join(tv[first]) if first < len(tv) else "(end)"
        b = " ".join(dd[first]) if first < len(dd) else "(end)"
        why.append(f"{len(dd)} tensors against {len(tv)}; tensor {first}: {b}, torchvision {a}")
    return "; ".join(why), want, len(tv)


# What --print_model leaves out: a field at its kind's default
DEFAULTS = {"bn": {"eps": 1e-5, "momentum": 0.1}, "layernorm": {"eps": 1e-5}}


# The image size of the meta forward: 64, but for a network whose training forward needs more
# (Inception v3's auxiliary classifier: a 17x17 map after Mixed_6e)
IMAGE_SIZE = {"inception_v3": 299}


def call_order(model, size=64):
    """The leaf modules in the order of their last call in a training forward (a module called
    twice, as ResNet's relu, counts where it is last called), on the meta device."""
    calls = []
    for name, m in model.named_modules():
        if not list(m.children()):
            m.register_forward_hook(lambda m, i, o, name=name: calls.append(name))
    model.train()(torch.zeros(2, 3, size, size, device="meta"))
    last = {name: i for i, name in enumerate(calls)}
    return sorted(last, key=last.get)


def compare_settings(path, builder):
    """The batch norms' eps and momentum, the layer norms' eps, the dropouts' and stochastic depths' p,
    by module name;
    and the order of the nodes named as modules against the forward's calls of those modules."""
    model = build(builder)
    modules = dict(model.named_modules())
    nodes = json.load(open(path))["nodes"]
    seen, why = 0, []
    for n in nodes:
        m = modules.get(n["name"])
        keys = {"bn": ("eps", "momentum"), "layernorm": ("eps",), "dropout": ("p",),
                "stochastic_depth": ("p",)}.get(n["kind"], ())
        for key in keys:
            seen += 1
            got = n.get(key, DEFAULTS.get(n["kind"], {}).get(key))
            want = getattr(m, key, None)
            if want is None or got is None or abs(got - want) > 1e-6 * max(1.0, abs(want)):
                why.append(f"node {n['name']} {key} {got}, torchvision {want}")
    # every leaf module the forward calls is a node, in the order of the calls (a stochastic
    # depth of p 0 is the identity, which a node may leave out; ConvNeXt's Permute to channels
    # last and back is what ddptrain's NHWC maps are already)
    calls = [k for k in call_order(model, IMAGE_SIZE.get(builder, 64))
             if not (type(modules[k]).__name__ == "StochasticDepth" and modules[k].p == 0)
             and type(modules[k]).__name__ != "Permute"]
    leaves = set(calls)
    order = [n["name"] for n in nodes if n["name"] in leaves]
    # An auxiliary classifier (GoogLeNet's and Inception v3's InceptionAux) runs where its
    # tensors are in the state_dict, which the comparison of tensors checks, not where
    # torchvision's forward calls it (GoogLeNet's aux1 right after inception4a): the order of
    # the calls is compared within each head and within the rest.
    heads = [k for k, m in modules.items() if type(m).__name__ == "InceptionAux"]

    def head(name):
        return next((h for h in heads if name.startswith(h + ".")), "")

    for h in sorted({head(c) for c in calls} | {head(n) for n in order}):
        c_h, o_h = [c for c in calls if head(c) == h], [n for n in order if head(n) == h]
        if o_h != c_h:
            first = next((i for i, (a, b) in enumerate(zip(c_h, o_h)) if a != b), min(len(c_h), len(o_h)))
            why.append(f"{len(o_h)} nodes named as the {len(c_h)} modules the forward calls"
                       f"{' in ' + h if h else ''}; call {first}: {o_h[first] if first < len(o_h) else '(none)'}, "
                       f"torchvision {c_h[first] if first < len(c_h) else '(none)'}")
    text = "; ".join(why[:3]) + (f" (and {len(why) - 3} more)" if len(why) > 3 else "")
    return text, seen, len(calls)


def main(argv):
    path, alias, settings = argv[1], {}, []
    i = 2
    while i < len(argv):
        key, value = argv[i + 1].split("=", 1)
        if argv[i] == "--as":
            alias[key] = value
        elif argv[i] == "--json":
            settings.append((key, value))
        i += 2
    fails = 0
    for net in read_tensors(path):
        builder = alias.get(net["model"], net["model"])
        why, want, n = compare(net, builder)
        if why:
            fails += 1
            print(f"FAIL: {net['model']} against torchvision's {builder}: {why}")
        else:
            print(f"ok: {net['model']}: {want} parameters, {n} state_dict tensors, as torchvision's {builder}")
    for path, builder in settings:
        why, seen, calls = compare_settings(path, builder)
        if why:
            fails += 1
            print(f"FAIL: {path} against torchvision's {builder}: {why}")
        else:
            print(f"ok: {builder}: {seen} batch-norm, layer-norm, dropout and stochastic-depth settings and the order of "
                  f"{calls} module calls as torchvision's")
    return min(fails, 100)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
