#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""make_seeds.py BUILDDIR [TARGET] - writes the seed corpora of the fuzz targets into tests/fuzz/<target>/.

Run once (the outputs are committed); needs numpy and h5py, and ddptrain and ddptrain-data
built in BUILDDIR. Seeds are kept small, since a fuzzer mutates every byte:
  shard/       tiny shards (2 images of 4x4) in HDF5's oldest format (no metadata checksums,
               so a mutation reaches the values rather than a checksum), one per way the tests
               break a shard, one written by ddptrain-data itself, and two with the class names
               in a dataset (fixed-length strings, and variable-length ones, refused); JPEG shards (2 images
               of shorter side 8, PIL's JPEGs at quality 50; needs PIL) good, with offsets out
               of order, and with one sample's bytes garbled
  checkpoint/  a checkpoint of the model fuzz_checkpoint.c loads (width 4, 1 block, 10 classes,
               16x16), from a 2-step run on 2 ranks' worth of data, rewritten in that format:
               the float tensors keep the Fletcher-32 checksum the loader requires (one chunk
               each), nothing else is filtered; plus variants (amp state, per-rank rows,
               /config shapes, the state of other optimizers and of an unknown one)
  init_from/   weights files of that model, as --init_from reads them: /model of checkpoint/good
               as torch_to_ddptrain.py writes it (contiguous, no filter) and as a checkpoint holds
               it (chunked, Fletcher-32); a tensor whose data is in an external file, /model an
               external link, a virtual dataset, a soft link, a group B-tree child at the
               undefined address, NaN, an infinity, a negative running_var, chunks never written
               (what --init_from refuses; the names they point to exist nowhere)
  cli/         argument lists, NUL-separated
  env/         launcher environments, NAME=VALUE lines
  rendezvous/  rendezvous files of key fuzz.0, 4 ranks, 128 bytes, and broken ones
  image/       small JPEG and PNG files (colour, grey, progressive, CMYK, palette with tRNS,
               1-bit, RGBA, 16-bit, interlaced, 1x40) and broken ones (truncated, a bad CRC,
               text, a palette index past the palette);
               needs PIL
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def out(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def h5_bytes(build):
    fd, p = tempfile.mkstemp(suffix=".h5")
    os.close(fd)
    with h5py.File(p, "w", libver="earliest") as f:
        build(f)
    with open(p, "rb") as f:
        data = f.read()
    os.unlink(p)
    return data


def shard_seeds():
    rng = np.random.default_rng(0)

    def shard(n=2, s=4, labels=None, names=True, norm=True, dtype=np.uint8, shape=None, nc=3, chunks=None):
        def build(f):
            img = rng.integers(0, 256, shape or (n, s, s, 3)).astype(dtype)
            f.create_dataset("images", data=img, chunks=chunks)
            f.create_dataset("labels", data=np.array(labels if labels is not None else [0, 2][:n] + [1] * (n - 2), np.int32))
            f.attrs["num_classes"] = np.int32(nc)
            if names:
                f.attrs["class_names"] = np.array([b"a", b"b", b"c"][:nc])
            if norm:
                f.attrs["mean"] = np.array([0.5, 0.4, 0.3], np.float32)
                f.attrs["std"] = np.array([0.2, 0.2, 0.2], np.float32)
        return h5_bytes(build)

    out("shard", "good", shard())
    out("shard", "good_chunked", shard(n=4, chunks=(1, 4, 4, 3)))
    out("shard", "bare", shard(names=False, norm=False))
    out("shard", "bad_label", shard(labels=[0, 3]))
    out("shard", "wrong_dtype", shard(dtype=np.float32))
    out("shard", "wrong_shape", shard(shape=(2, 3, 4, 4)))
    out("shard", "count_mismatch", shard(labels=[0]))

    def huge(f):
        f.create_dataset("images", shape=(2**62 + 1, 4, 4, 3), dtype="u1", chunks=(1, 4, 4, 3))
        f.create_dataset("labels", shape=(2**62 + 1,), dtype="i4", chunks=(16,), fillvalue=1)
        f.attrs["num_classes"] = np.int32(3)
    out("shard", "huge_count", h5_bytes(huge))

    # class names as a dataset (ddptrain-data's fixed-length strings beyond 1,024 classes;
    # h5py's variable-length ones, refused)
    def names_dataset(vlen):
        def build(f):
            f.create_dataset("images", data=np.zeros((2, 4, 4, 3), np.uint8))
            f.create_dataset("labels", data=np.array([0, 2], np.int32))
            f.attrs["num_classes"] = np.int32(3)
            f["class_names"] = ["a", "b", "c"] if vlen else np.array([b"a", b"b", b"c"])
        return build
    out("shard", "names_dataset", h5_bytes(names_dataset(False)))
    out("shard", "names_dataset_vlen", h5_bytes(names_dataset(True)))


def jpeg_shard_seeds():
    import io
    from PIL import Image
    rng = np.random.default_rng(1)
    blobs = []
    for h, w in ((8, 8), (16, 8)):
        b = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (h, w, 3)).astype(np.uint8)).save(b, "JPEG", quality=50)
        blobs.append(b.getvalue())

    def jshard(off=None, data=None):
        def build(f):
            d = data if data is not None else b"".join(blobs)
            f.create_dataset("jpeg", data=np.frombuffer(d, np.uint8))
            f.create_dataset("offsets", data=np.array(off or [0, len(blobs[0]), len(d)], np.uint64))
            f.create_dataset("sizes", data=np.array([[8, 8], [16, 8]], np.uint16))
            f.create_dataset("labels", data=np.array([0, 2], np.int32))
            f.attrs["num_classes"] = np.int32(3)
            f.attrs["encoding"] = "jpeg"
            f.attrs["image_size"] = np.int32(8)
        return h5_bytes(build)

    out("shard", "jpeg_good", jshard())
    n = len(blobs[0]) + len(blobs[1])
    out("shard", "jpeg_offsets_order", jshard(off=[0, len(blobs[0]) + len(blobs[1]) // 2 + len(blobs[1]), n]))
    garbled = bytearray(b"".join(blobs))
    garbled[len(blobs[0]) + len(blobs[1]) // 2:] = rng.integers(0, 256, n - len(blobs[0]) - len(blobs[1]) // 2).astype(np.uint8).tobytes()
    out("shard", "jpeg_garbled", jshard(data=bytes(garbled)))


def checkpoint_seeds(build):
    tmp = tempfile.mkdtemp()
    try:
        data, job = os.path.join(tmp, "data"), os.path.join(tmp, "job")
        subprocess.check_call([os.path.join(build, "ddptrain-data"), "synth", "--out", data, "--train", "64",
                               "--test", "16", "--size", "16"], stdout=subprocess.DEVNULL)
        subprocess.check_call([os.path.join(build, "ddptrain"), "--data_dir", data, "--job_dir", job, "--width", "4",
                               "--blocks", "1", "--image_size", "16", "--batch_size", "8", "--max_steps", "2",
                               "--threads", "1", "--no-augment"], stdout=subprocess.DEVNULL)
        ck = os.path.join(job, "checkpoints")
        src = os.path.join(ck, sorted(n for n in os.listdir(ck) if n.startswith("ckpt-"))[-1])

        def plain(variant=None):
            def build_file(f):
                with h5py.File(src, "r") as s:
                    for k, v in s.attrs.items():
                        f.attrs[k] = v

                    def copy(name, obj):
                        if name == "config":
                            # It names this machine's temporary paths: neutral ones instead.
                            cfg = json.loads(obj[()].decode())
                            cfg["data_dir"], cfg["job_dir"] = "data", "job"
                            f.create_dataset(name, data=json.dumps(cfg).encode())
                        elif isinstance(obj, h5py.Dataset) and obj.fletcher32:
                            # the float tensors keep their checksum, which the loader requires
                            f.create_dataset(name, data=obj[()], chunks=obj.shape, fletcher32=True)
                        elif isinstance(obj, h5py.Dataset):
                            f.create_dataset(name, data=obj[()])
                    s.visititems(copy)
                if variant:
                    variant(f)
            return h5_bytes(build_file)

        out("checkpoint", "good", plain())

        def amp(f):
            f.create_dataset("/train_state/amp", data=np.array([65536.0, 3, 0, 0]))
        out("checkpoint", "amp", plain(amp))

        def rows(f):
            nb = sum(f["/model/" + k].size for k in f["/model"] if k.endswith("running_mean") or k.endswith("running_var"))
            del f["/train_state/world_size"]
            f.create_dataset("/train_state/world_size", data=np.int64(2))
            f.create_dataset("/train_state/rank_buffers", data=np.ones((2, nb), np.float32), chunks=(2, nb), fletcher32=True)
        out("checkpoint", "rank_rows", plain(rows))

        def config_array(f):
            del f["/config"]
            f.create_dataset("/config", data=np.array([b"{}", b"[]", b"{x}"]))
        out("checkpoint", "config_array", plain(config_array))

        def dataset(f):
            # /dataset as a run writes it (checkpoint.h): mean and std, one fixed-length name a class
            if "dataset" in f:
                del f["dataset"]
            g = f.create_group("dataset")
            for k, v in (("mean", [0.49, 0.48, 0.45]), ("std", [0.25, 0.24, 0.26])):
                g.create_dataset(k, data=np.array(v, np.float32), chunks=(3,), fletcher32=True)
            names = np.array([b"class-%d" % k for k in range(10)])
            g.create_dataset("class_names", data=names, chunks=names.shape, fletcher32=True)
        out("checkpoint", "dataset", plain(dataset))

        def negative_step(f):
            del f["/train_state/global_step"]
            f.create_dataset("/train_state/global_step", data=np.int64(-5))
        out("checkpoint", "negative_step", plain(negative_step))

        def optimizer(name, states):
            # /optimizer of another optimizer (checkpoint.h): its name and its state groups, made
            # of the momentum's tensors under the checksum
            def variant(f):
                mom = {k: f["/optimizer/momentum/" + k][()] for k in f["/optimizer/momentum"]}
                del f["/optimizer/momentum"]
                if "name" in f["/optimizer"]:
                    del f["/optimizer/name"]
                f.create_dataset("/optimizer/name", data=np.bytes_(name))
                for st in states:
                    g = f.create_group("/optimizer/" + st)
                    for k, v in mom.items():
                        g.create_dataset(k, data=np.abs(v), chunks=v.shape or None, fletcher32=True)
            return variant
        out("checkpoint", "optimizer_adamw", plain(optimizer("adamw", ["exp_avg", "exp_avg_sq"])))
        out("checkpoint", "optimizer_lars", plain(optimizer("lars", ["momentum_buffer"])))
        out("checkpoint", "optimizer_unknown", plain(optimizer("adamq", ["exp_avg"])))
    finally:
        shutil.rmtree(tmp)


def init_from_seeds():
    with open(os.path.join(HERE, "checkpoint", "good"), "rb") as f:
        good = f.read()
    fd, src = tempfile.mkstemp(suffix=".h5")
    with os.fdopen(fd, "wb") as f:
        f.write(good)
    try:
        def weights(variant=None, chunked=False):
            def build_file(f):
                f.attrs["format"] = "ddptrain-weights"
                g = f.create_group("model")
                with h5py.File(src, "r") as s:
                    for k, v in s["model"].items():
                        a = v[()]
                        if chunked and a.ndim > 0:
                            g.create_dataset(k, data=a, chunks=a.shape, fletcher32=True)
                        else:
                            g[k] = a
                if variant:
                    variant(f)
            return h5_bytes(build_file)

        def replace(name, **kw):
            def v(f):
                d = f[name]
                shape, dtype = d.shape, d.dtype
                del f[name]
                if "layout" in kw:
                    layout = h5py.VirtualLayout(shape=shape, dtype=dtype)
                    layout[...] = h5py.VirtualSource("other.h5", name, shape=shape)
                    f.create_virtual_dataset(name, layout)
                else:
                    f.create_dataset(name, shape=shape, dtype=dtype, **kw)
            return v

        def set0(name, value):
            def v(f):
                a = f[name][()]
                a.flat[0] = value
                f[name][...] = a
            return v

        def elink(f):
            del f["model"]
            f["model"] = h5py.ExternalLink("other.h5", "/model")

        def soft(f):
            f.copy("model/fc.weight", "/hidden")
            del f["model/fc.weight"]
            f["model/fc.weight"] = h5py.SoftLink("/hidden")

        out("init_from", "good", weights())
        out("init_from", "good_checksummed", weights(chunked=True))
        out("init_from", "external_storage", weights(replace("model/conv1.weight", external=[("secret.bin", 0, 432)])))
        out("init_from", "external_link", weights(elink))
        out("init_from", "virtual", weights(replace("model/conv1.weight", layout=True)))
        out("init_from", "soft_link", weights(soft))
        out("init_from", "nan", weights(set0("model/conv1.weight", np.nan)))
        out("init_from", "inf", weights(set0("model/fc.weight", np.inf)))
        out("init_from", "negative_running_var", weights(set0("model/bn1.running_var", -1.0)))
        out("init_from", "unwritten", weights(replace("model/conv1.weight", chunks=(4, 3, 3, 3))))
        # a group B-tree node ("TREE", type 0): its first child, after the 24-byte header
        # and the first key, at the undefined address (as make_bad_shards.py's btree_undef)
        b = bytearray(weights())
        at = b.find(b"TREE\x00")
        while at >= 0:
            b[at + 32:at + 40] = b"\xff" * 8
            at = b.find(b"TREE\x00", at + 1)
        out("init_from", "btree_undef", bytes(b))
    finally:
        os.remove(src)


def cli_seeds():
    seeds = {
        "defaults": [],
        "typical": ["--data_dir", "data", "--job_dir", "runs/x", "--width", "8", "--epochs", "2", "--lr=0.1"],
        "bools": ["--no-augment", "--augment=false", "--use_amp", "yes"],
        "choices": ["--resume", "auto", "--amp_activations", "16", "--preempt_signal", "SIGUSR1"],
        "bad": ["--batch_size", "x", "--lr", "nan", "--bogus", "train", "--no-width"],
        "missing": ["--seed"],
        "help": ["--help"],
    }
    for name, args in seeds.items():
        out("cli", name, b"\0".join(a.encode() for a in args))


def env_seeds():
    seeds = {
        "slurm": "SLURM_PROCID=1\nSLURM_NTASKS=4\nSLURM_STEP_NUM_TASKS=4\nSLURM_LOCALID=1\nSLURM_NNODES=2\n"
                 "SLURM_NODEID=0\nSLURM_STEP_TASKS_PER_NODE=2(x2)\nSLURM_MPI_TYPE=pmix\nSLURM_JOB_ID=1234\n"
                 "SLURM_SUBMIT_DIR=/home/u/proj\n",
        "slurm_list": "SLURM_PROCID=3\nSLURM_NTASKS=6\nSLURM_STEP_NUM_TASKS=6\nSLURM_NODEID=2\n"
                      "SLURM_STEP_TASKS_PER_NODE=2,1(x1),3\nSLURM_NNODES=3\nPMIX_RANK=3\n",
        "slurm_batch": "SLURM_PROCID=0\nSLURM_NTASKS=8\nSLURM_JOB_ID=99\n",
        "ompi": "OMPI_COMM_WORLD_SIZE=4\nOMPI_COMM_WORLD_RANK=2\nOMPI_COMM_WORLD_LOCAL_RANK=0\nOMPI_COMM_WORLD_LOCAL_SIZE=2\n",
        "torchrun": "WORLD_SIZE=8\nRANK=5\nLOCAL_RANK=1\nLOCAL_WORLD_SIZE=4\nGROUP_RANK=1\nNNODES=2\n",
        "torchrun_bad": "RANK=1\n",
        "job_dir_bad": "SLURM_JOB_ID=../../x\nSLURM_SUBMIT_DIR=rel\n",
    }
    for name, text in seeds.items():
        out("env", name, text.encode())


def rendezvous_seeds():
    def rdv(key=b"fuzz.0", world=4, blen=128, magic=b"ddptrain-rdv-1", blob=None):
        h = magic.ljust(16, b"\0") + key.ljust(200, b"\0") + struct.pack("<IIQ", world, 0, blen)
        return h + (blob if blob is not None else bytes(range(128)))
    out("rendezvous", "good", rdv())
    out("rendezvous", "other_key", rdv(key=b"fuzz.1"))
    out("rendezvous", "other_world", rdv(world=8))
    out("rendezvous", "bad_magic", rdv(magic=b"ddptrain-rdv-0"))
    out("rendezvous", "short", rdv()[:100])


def image_seeds():
    import io
    import zlib
    from PIL import Image
    rgb = np.array([[[(x * 37 + y * 11) % 256, (x * 5 + y * 70) % 256, (x * y * 9) % 256]
                     for x in range(6)] for y in range(5)], np.uint8)
    im = Image.fromarray(rgb)

    def save(name, img, fmt, **kw):
        b = io.BytesIO()
        img.save(b, fmt, **kw)
        out("image", name, b.getvalue())
        return b.getvalue()

    jpg = save("jpeg_rgb", im, "JPEG", quality=75)
    save("jpeg_grey", im.convert("L"), "JPEG")
    save("jpeg_progressive", im, "JPEG", progressive=True, subsampling=0)
    save("jpeg_cmyk", im.convert("CMYK"), "JPEG")
    out("image", "jpeg_truncated", jpg[:len(jpg) * 2 // 3])
    png = save("png_rgb", im, "PNG")
    save("png_palette_trns", im.convert("P", palette=Image.ADAPTIVE, colors=8), "PNG", transparency=2)
    save("png_1bit", im.convert("1"), "PNG")
    save("png_rgba", im.convert("RGBA"), "PNG")
    out("image", "png_truncated", png[:len(png) - 20])
    bad_crc = bytearray(png)
    bad_crc[29] ^= 0xff   # IHDR's CRC
    out("image", "png_bad_crc", bytes(bad_crc))

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)

    def png_raw(w, h, depth, ctype, interlace, raw):
        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, interlace))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    out("image", "png16_rgb", png_raw(2, 2, 16, 2, 0, b"".join(b"\0" + bytes(range(y * 12, y * 12 + 12)) for y in range(2))))
    # 2x2 interlaced: Adam7 passes 1 (pixel 0,0), 6 (pixel 1,0) and 7 (row 1).
    out("image", "png_interlaced", png_raw(2, 2, 8, 2, 1, b"\0" + b"\x10\x20\x30" + b"\0" + b"\x40\x50\x60"
                                                    + b"\0" + b"\x70\x80\x90\xa0\xb0\xc0"))
    out("image", "text", b"this is text, not a picture\n")
    # A 2-bit palette of 3 entries holding index 3 (refused), and a 1x40 image (elongated).
    out("image", "png_palette_past", b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 2, 2, 3, 0, 0, 0)) + chunk(b"PLTE", bytes(range(9)))
        + chunk(b"IDAT", zlib.compress(b"\0\x1b" + b"\0\xe4")) + chunk(b"IEND", b""))
    out("image", "png_tall", png_raw(1, 40, 8, 2, 0, b"".join(b"\0" + bytes([y * 6, 255 - y, y]) for y in range(40))))


def main():
    if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help"):
        sys.stdout.write(__doc__)
        return 0
    if len(sys.argv) not in (2, 3):
        sys.stderr.write(__doc__)
        return 2
    # Nothing is removed before BUILDDIR is known to hold the programs the seeds need.
    build = os.path.abspath(sys.argv[1])
    for prog in ("ddptrain", "ddptrain-data"):
        if not os.access(os.path.join(build, prog), os.X_OK):
            sys.stderr.write("make_seeds.py: %s: no %s built there (BUILDDIR is a build directory)\n" % (build, prog))
            return 2
    # Seeds are written over their old files; nothing else in the corpora is removed, since the
    # inputs a fuzzer found (crashes once) are kept there too. config_file/ is written by hand.
    # TARGET: that corpus only (init_from/ is made from checkpoint/good as it stands)
    seeds = [("shard", shard_seeds), ("shard", jpeg_shard_seeds), ("checkpoint", lambda: checkpoint_seeds(build)),
             ("init_from", init_from_seeds), ("cli", cli_seeds), ("env", env_seeds), ("rendezvous", rendezvous_seeds),
             ("image", image_seeds)]
    target = sys.argv[2] if len(sys.argv) == 3 else None
    if target and target not in [t for t, _ in seeds]:
        sys.stderr.write("make_seeds.py: no target %s\n" % target)
        return 2
    for t, make in seeds:
        if target in (None, t):
            make()
    return 0


if __name__ == "__main__":
    sys.exit(main())
