#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# test_class_names.sh - where a shard keeps its class names (data/README.md): ImageNet-21k's
# 21,841 classes (synset-like names n01440764 ...; one 8x8 PNG each, a few with a second for
# the test split) imported, then inspected, resharded and trained for a step: the names outgrow
# an attribute (a 64 KiB header message; import once failed with "cannot create the datasets
# (disk full?)"), so they are a dataset `class_names` of fixed-length strings, read back in
# order; the checkpoint keeps them as /dataset/class_names, and ddptrain-predict calls the
# classes by them. Shards written by h5py: a dataset of fixed-length strings is read as well;
# both an attribute and a dataset, a control character, a count other than num_classes, two
# dimensions, or variable-length strings (h5py's list of str: HDF5 1.10 reads their heap
# unchecked, and a fuzzed one hung it) are each refused with one line naming the file.
# Skips (77) without python3 with PIL, h5py and numpy, or in a build without libpng.
# shellcheck source=tests/helpers/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "PIL, h5py, numpy") || { echo "SKIP: no python3 with PIL, h5py and numpy"; exit "$SKIP"; }
[ -x "$DDPDATA" ] || { echo "SKIP: $DDPDATA is not built"; exit "$SKIP"; }
if "$DDPDATA" import --in "$TMP/none" --out "$TMP/none-out" 2>&1 | grep -q "built without"; then
    echo "SKIP: ddptrain-data was built without libjpeg or libpng"; exit "$SKIP"
fi

K=21841
t0=$(date +%s.%N)
# One tree of class folders, split by --test_fraction 0.5: a class's second file is its test
# image, so the first 4 classes (2 files) make the test split and the training split has
# every class. The same few PNG bytes are written again and again: the names are the point.
"$PY" - "$TMP/tree" $K <<'EOF' || { bad "making the tree"; finish; }
import io, os, sys
import numpy as np
from PIL import Image
root, k = sys.argv[1], int(sys.argv[2])
r = np.random.RandomState(1)
blobs = []
for i in range(8):
    b = io.BytesIO()
    Image.fromarray(r.randint(0, 256, size=(8, 8, 3)).astype(np.uint8)).save(b, "PNG")
    blobs.append(b.getvalue())
for c in range(k):
    d = os.path.join(root, "n%08d" % (1440764 + 37 * c))
    os.makedirs(d)
    for i in range(2 if c < 4 else 1):
        with open(os.path.join(d, "%d.png" % i), "wb") as f:
            f.write(blobs[(c + i) % 8])
EOF
if "$DDPDATA" import --in "$TMP/tree" --out "$TMP/data" --test_fraction 0.5 >"$TMP/out" 2>"$TMP/err" &&
   grep -q "imported $K train and 4 test images of $K classes at 8x8" "$TMP/out"; then
    ok "import of $K classes: $(tail -n 1 "$TMP/out" | cut -d, -f1) (tree made and imported in $(elapsed "$t0") s)"
else
    bad "import of $K classes: $(cat "$TMP/err") $(tail -n 1 "$TMP/out")"; finish
fi

# names DIR: every shard of DIR holds the $K names in order, as a dataset and not an attribute
names() {
    "$PY" - "$1" $K <<'EOF'
import glob, sys
import h5py
files, k = sorted(glob.glob(sys.argv[1] + "/*.h5")), int(sys.argv[2])
want = ["n%08d" % (1440764 + 37 * c) for c in range(k)]
for p in files:
    with h5py.File(p, "r") as f:
        if "class_names" in f.attrs:
            sys.exit("%s: an attribute 'class_names' beside the dataset" % p)
        d = f["class_names"]
        got = [n.decode() for n in d[:]]
        if d.shape != (k,) or got != want:
            sys.exit("%s: dataset 'class_names' %s %s, not the %d names in order" % (p, d.dtype, d.shape, k))
print("%d shards, dataset 'class_names' %s [%d], in order" % (len(files), d.dtype, k))
EOF
}
if out=$(names "$TMP/data"); then ok "the names: $out"; else bad "the names: $out"; fi

if "$DDPDATA" inspect "$TMP/data" >"$TMP/out" 2>"$TMP/err" && [ "$(grep -c "^  num_classes  $K$" "$TMP/out")" -eq 2 ] &&
   grep -q "^  class_names  n01440764 n01440801 n01440838 " "$TMP/out"; then
    ok "inspect: num_classes $K, class_names $(grep -m1 '^  class_names' "$TMP/out" | cut -c 16-45)..."
else bad "inspect: $(cat "$TMP/err") $(grep -m1 num_classes "$TMP/out")"; fi

if "$DDPDATA" reshard --in "$TMP/data" --out "$TMP/re" --shards 2 >/dev/null 2>"$TMP/err" &&
   "$DDPDATA" inspect "$TMP/re" >/dev/null 2>>"$TMP/err" && out=$(names "$TMP/re"); then
    ok "reshard into 2 shards a split, inspect accepts them: $out"
else bad "reshard: $(cat "$TMP/err") $out"; fi

if "$DDPTRAIN" --data_dir "$TMP/data" --job_dir "$TMP/job" --image_size 8 --num_classes $K --width 4 --blocks 1 \
       --threads 1 --batch_size 32 --max_steps 1 >"$TMP/out" 2>&1 && grep -q "^done: 1 steps" "$TMP/out" &&
   rows=$("$PY" -c "
import sys, h5py
with h5py.File(sys.argv[1], 'r') as f:
    print(f['model/fc.weight'].shape[0])" "$TMP/job/checkpoints/$(cat "$TMP/job/checkpoints/latest")") && [ "$rows" = $K ]; then
    ok "a training step of a $K-way classifier: $(grep '^model:' "$TMP/out"), checkpoint fc.weight of $rows rows"
else bad "training on $K classes: $(tail -n 3 "$TMP/out")"; fi

# The checkpoint keeps the names (/dataset/class_names, fixed-length strings) and
# ddptrain-predict calls the classes by them.
ckpt="$TMP/job/checkpoints/$(cat "$TMP/job/checkpoints/latest" 2>/dev/null)"
if "$top_builddir/ddptrain-predict" "$ckpt" "$TMP/data" --topk 2 --out "$TMP/pred.csv" >"$TMP/out" 2>&1 &&
   out=$("$PY" - "$ckpt" "$TMP/pred.csv" $K <<'EOF'
import csv, sys
import h5py
ckpt, k = sys.argv[1], int(sys.argv[3])
rows = list(csv.DictReader(open(sys.argv[2], newline="")))
want = ["n%08d" % (1440764 + 37 * c) for c in range(k)]
with h5py.File(ckpt, "r") as f:
    d = f["dataset/class_names"]
    got = [n.decode() for n in d[:]]
if got != want:
    sys.exit("/dataset/class_names %s %s: not the %d names in order" % (d.dtype, d.shape, k))
if sorted(r["label"] for r in rows) != want[:4] or any(r["top1"] not in want or r["top2"] not in want for r in rows):
    sys.exit("the rows do not name the classes: %s" % rows)
print("/dataset/class_names %s [%d] in order; ddptrain-predict's rows name them (%s: %s, %s)"
      % (d.dtype, k, rows[0]["label"], rows[0]["top1"], rows[0]["top2"]))
EOF
); then
    ok "the checkpoint's names: $out"
else bad "the checkpoint's names: $(cat "$TMP/out") $out"; fi

echo "== class names as h5py writes them, and broken"
# hand KIND FILE: a 3-class shard of 4 samples with its class names stored as KIND says
hand() {
    "$PY" - "$@" <<'EOF'
import sys
import h5py, numpy as np
kind, path = sys.argv[1], sys.argv[2]
names = ["ant", "bee", "cat"]
with h5py.File(path, "w") as f:
    f["images"] = np.zeros((4, 8, 8, 3), np.uint8)
    f["labels"] = np.array([0, 1, 2, 0], np.int32)
    f.attrs["num_classes"] = np.int32(3)
    if kind == "fixed":
        f["class_names"] = np.array(names, dtype="S")
    elif kind == "vlen":                        # h5py's list of str: variable-length UTF-8
        f["class_names"] = names
    elif kind == "both":
        f["class_names"] = names
        f.attrs["class_names"] = names
    elif kind == "escape":
        f["class_names"] = np.array([b"ant", b"b\x1b[2Jee", b"cat"])
    elif kind == "short":
        f["class_names"] = np.array([b"ant", b"bee"])
    elif kind == "2d":
        f["class_names"] = np.array([[b"ant", b"bee", b"cat"]])
EOF
}
if hand fixed "$TMP/fixed.h5" && "$DDPDATA" inspect "$TMP/fixed.h5" >"$TMP/out" 2>"$TMP/err" &&
   grep -q "^  class_names  ant bee cat$" "$TMP/out"; then
    ok "a fixed-length string dataset from h5py: $(grep '^  class_names' "$TMP/out" | sed 's/^ *//')"
else bad "a fixed-length string dataset from h5py: $(cat "$TMP/err")"; fi
for kw in "both:both an attribute and a dataset 'class_names'" \
          "escape:dataset 'class_names': name 1 holds a control character (0x1b at byte 1)" \
          "short:dataset 'class_names' has 2 names but num_classes is 3" \
          "2d:dataset 'class_names' must be one-dimensional" \
          "vlen:dataset 'class_names' holds variable-length strings"; do
    kind=${kw%%:*} want=${kw#*:}
    hand "$kind" "$TMP/$kind.h5" || { bad "writing $kind"; continue; }
    "$DDPDATA" inspect "$TMP/$kind.h5" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ $rc -eq 1 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q -F -- "$TMP/$kind.h5: $want" "$TMP/err"; then
        ok "$kind: exit 1: $(cat "$TMP/err")"
    else bad "$kind: exit $rc, want 1 and one line '$want': $(cat "$TMP/err")"; fi
done
finish
