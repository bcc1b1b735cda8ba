# SPDX-License-Identifier: BSD-3-Clause
"""make_h5_links.py - a copy of an HDF5 file (a shard, a checkpoint, a weights file) with one
object made hostile, for tests/test_h5_links.sh:

  make_h5_links.py KIND SRC OUT OBJ [ARG]

  ext        OBJ, a dataset, keeps its raw data in file ARG (external storage)
  elink      OBJ, a group or dataset, becomes an external link to OBJ of file ARG
  soft       OBJ becomes a soft link to a copy of it at /hidden
  vds        OBJ, a dataset, becomes a virtual dataset mapping OBJ of file ARG
  nofletcher OBJ, a dataset, rewritten with its values but without the Fletcher-32 filter
  set        element 0 of dataset OBJ set to ARG (nan, inf, -1, ...), in place
  unwritten  OBJ, a dataset, recreated chunked with no chunk ever written
  btree_undef  OBJ ignored: the first child of every group B-tree node (h5py writes old-style
             groups) set to the undefined address, as make_bad_shards.py damages a shard
  weights    OBJ ignored: /model of a checkpoint SRC, as torch_to_ddptrain.py writes it
             (contiguous, no filter, root attribute format = "ddptrain-weights")

Needs h5py and numpy."""
import shutil
import sys

import h5py
import numpy as np


def replace(f, name, make):
    """Deletes dataset `name` and creates what make(f, name, old_shape, old_dtype, old_data) makes."""
    d = f[name]
    shape, dtype, data = d.shape, d.dtype, d[()]
    del f[name]
    make(f, name, shape, dtype, data)


def main():
    kind, src, out, obj = sys.argv[1:5]
    arg = sys.argv[5] if len(sys.argv) > 5 else None
    if kind == "weights":
        with h5py.File(src, "r") as s, h5py.File(out, "w") as f:
            f.attrs["format"] = "ddptrain-weights"
            g = f.create_group("model")
            for k, v in s["model"].items():
                g[k] = v[()]
        return 0
    shutil.copyfile(src, out)
    if kind == "btree_undef":
        with open(out, "r+b") as f:
            data = f.read()
            # "TREE", type 0 (group nodes): the first child follows the 24-byte node header
            # and the first key (8-byte addresses)
            at = data.find(b"TREE\x00")
            if at < 0:
                print("make_h5_links.py: no group B-tree node (not old-style groups?)", file=sys.stderr)
                return 1
            while at >= 0:
                f.seek(at + 32)
                f.write(b"\xff" * 8)
                at = data.find(b"TREE\x00", at + 1)
        return 0
    with h5py.File(out, "r+") as f:
        if kind == "ext":
            def ext(f, name, shape, dtype, data):
                n = int(np.prod(shape)) * dtype.itemsize
                f.create_dataset(name, shape=shape, dtype=dtype, external=[(arg, 0, n)])
            replace(f, obj, ext)
        elif kind == "elink":
            del f[obj]
            f[obj] = h5py.ExternalLink(arg, obj)
        elif kind == "soft":
            f.copy(obj, "/hidden")
            del f[obj]
            f[obj] = h5py.SoftLink("/hidden")
        elif kind == "vds":
            def vds(f, name, shape, dtype, data):
                layout = h5py.VirtualLayout(shape=shape, dtype=dtype)
                layout[...] = h5py.VirtualSource(arg, name, shape=shape)
                f.create_virtual_dataset(name, layout)
            replace(f, obj, vds)
        elif kind == "nofletcher":
            replace(f, obj, lambda f, name, shape, dtype, data: f.create_dataset(name, data=data))
        elif kind == "set":
            d = f[obj]
            v = d[()].copy()
            v.flat[0] = float(arg)
            d[...] = v
        elif kind == "unwritten":
            replace(f, obj, lambda f, name, shape, dtype, data:
                    f.create_dataset(name, shape=shape, dtype=dtype, chunks=shape))
        else:
            print(f"make_h5_links.py: unknown kind {kind}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
