#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# test_eval_counts.sh - every test image counted exactly once, whatever the ranks and the batch
# (PyTorch's DistributedSampler pads the last batch with repeated images: pytorch/vision #4559).
# A test split of 61 images (a prime) in 3 shards (fewer than the ranks: contiguous slices that
# cross the shards) and the same images in 8 shards (more: whole shards round robin); a network
# trained for a few steps on 1 rank, then its checkpoint evaluated again on 7 ranks with an
# evaluation batch of 7 and a training batch of 5 (chunks of 5 and 2): confusion.json's matrix
# must equal the 1-rank run's exactly, its total must be 61, and per class its images must be the
# labels counted in the shards with h5py. Then: 5 classes (no top-5 anywhere; class names with
# a quote, a backslash and accents come back through json.load), 1,030 classes (per-class
# figures only, the matrix null and said so), a symbolic link planted at confusion.json
# (refused at start-up, nothing written), and ddptrain-plot --confusion's pictures of them
# (PNG; a missing or foreign file refused in one line). Skips (77) without mpirun or python3 with
# h5py and numpy.
# shellcheck source=tests/helpers/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/helpers/lib.sh"
mpi_leak_checks_off   # ranks started by mpirun (see tests/helpers/lib.sh)
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found"; exit "$SKIP"; }
PY=$(find_python "h5py, numpy") || { echo "SKIP: no python3 with h5py and numpy"; exit "$SKIP"; }
COMMON="--image_size 16 --width 4 --blocks 1 --batch_size 5 --threads 1 --lr 0.1"

make_synth "$TMP/d3" --size 16 --train 400 --test 61 --shards 3
# The same data with the test split in 8 shards (the training shards as they are, so that the
# checkpoint resumes on it)
"$PY" - "$TMP/d3" "$TMP/d8" <<'EOF' || { bad "resharding the test split"; finish; }
import glob, os, shutil, sys
import h5py, numpy as np
src, dst = sys.argv[1:]
os.makedirs(dst)
for p in glob.glob(os.path.join(src, "train-*.h5")):
    shutil.copy(p, dst)
x, y, attrs = [], [], None
for p in sorted(glob.glob(os.path.join(src, "test-*.h5"))):
    with h5py.File(p, "r") as f:
        x.append(f["images"][()]); y.append(f["labels"][()]); attrs = dict(f.attrs)
x, y = np.concatenate(x), np.concatenate(y)
for i, part in enumerate(np.array_split(np.arange(len(y)), 8)):
    with h5py.File(os.path.join(dst, "test-%05d-of-00008.h5" % i), "w") as f:
        f["images"] = x[part]; f["labels"] = y[part]
        for k, v in attrs.items():
            f.attrs[k] = v
EOF

# one rank: 40 steps, evaluated with the default batch (256: all 61 images in chunks of 5)
if ! OMP_NUM_THREADS=1 timeout -k 5 120 "$DDPTRAIN" --data_dir "$TMP/d3" --job_dir "$TMP/one" $COMMON --epochs 1 \
        --max_steps 40 >"$TMP/one.out" 2>&1; then
    bad "1-rank training: $(tail -n 3 "$TMP/one.out")"; finish
fi
CKPT="$TMP/one/checkpoints/$(cat "$TMP/one/checkpoints/latest")"
grep -q '^epoch 1 step 40 test_acc [0-9.]* test_loss [0-9.]* test_acc5 [0-9.]* (' "$TMP/one.out" &&
    ok "1 rank: $(grep '^epoch 1 step 40 test_acc' "$TMP/one.out")" || bad "1 rank: no test_acc5 on the evaluation line"

# same_counts LABEL JOB DATA: JOB's confusion.json against the 1-rank run's and DATA's labels
same_counts() {
    if out=$("$PY" - "$TMP/one/confusion.json" "$2/confusion.json" "$3" <<'EOF' 2>&1
import glob, json, os, sys
import h5py, numpy as np
a, b = (json.load(open(p)) for p in sys.argv[1:3])
labels = np.concatenate([h5py.File(p, "r")["labels"][()] for p in sorted(glob.glob(os.path.join(sys.argv[3], "test-*.h5")))])
counts = np.bincount(labels, minlength=b["num_classes"]).tolist()
m = np.asarray(b["matrix"])
why = []
if int(m.sum()) != len(labels) or b["images"] != len(labels):
    why.append(f"{int(m.sum())} images in the matrix, {b['images']} counted, {len(labels)} in the test split")
if [c["images"] for c in b["classes"]] != counts or m.sum(axis=1).tolist() != counts:
    why.append(f"per class {[c['images'] for c in b['classes']]}, the shards' labels {counts}")
if b["matrix"] != a["matrix"] or (a["correct"], a["correct5"]) != (b["correct"], b["correct5"]):
    why.append(f"matrix or top-1/top-5 differ from the 1-rank run's: {b['correct']}/{b['correct5']} against {a['correct']}/{a['correct5']}")
if len(set(np.argmax(m, axis=1))) < 2:
    why.append("the network predicts one class only: the comparison would be weak")
if why:
    sys.exit("; ".join(why))
print(f"{b['images']} images, per class {counts} as the shards' labels, top-1 {b['correct']} top-5 {b['correct5']}, "
      f"the matrix equal to 1 rank's")
EOF
    ); then ok "$1: $out"; else bad "$1: $out"; fi
}

# evaluate NAME NP DATA FLAGS...: the checkpoint evaluated on NP ranks (a resume at its last step)
evaluate() {
    name=$1 np=$2 data=$3
    shift 3
    # shellcheck disable=SC2086  # $COMMON is a word list
    if OMP_NUM_THREADS=1 timeout -k 5 120 mpirun --allow-run-as-root --oversubscribe -np "$np" "$DDPTRAIN" \
            --data_dir "$data" --job_dir "$TMP/$name" $COMMON --epochs 1 --max_steps 40 --resume "$CKPT" "$@" \
            >"$TMP/$name.out" 2>&1 && grep -q "the checkpoint is at the run's last step; evaluating it" "$TMP/$name.out"; then
        same_counts "$name: $np ranks, $data_note" "$TMP/$name" "$data"
    else
        bad "$name: $(tail -n 3 "$TMP/$name.out")"
    fi
}
data_note="61 images in 3 shards, --eval_batch_size 7"
evaluate seven_slices 7 "$TMP/d3" --eval_batch_size 7
data_note="61 images in 8 shards, --eval_batch_size 7"
evaluate seven_round_robin 7 "$TMP/d8" --eval_batch_size 7
data_note="61 images in 8 shards, --eval_batch_size 3"
evaluate three_round_robin 3 "$TMP/d8" --eval_batch_size 3
grep -q "data: .*test 9 of 61" "$TMP/seven_slices/logs/rank-00006.log" &&
    grep -q "data: .*test 15 of 61" "$TMP/seven_round_robin/logs/rank-00000.log" &&
    ok "rank 6 of 7 holds 9 of the 61 test images in slices; rank 0 shards 0 and 7 round robin (15 images)" ||
    bad "the ranks' shares: $(grep -h 'data: .*test' "$TMP/seven_slices/logs/rank-00006.log" "$TMP/seven_round_robin/logs/rank-00000.log")"

# ---- 5 and 1,030 classes: a dataset rewritten with h5py -------------------------------------
# relabel SRC DST K [NAMES...]: SRC's shards with labels mod K (K <= 10) or spread over K classes
relabel() {
    "$PY" - "$@" <<'EOF'
import glob, os, sys
import h5py, numpy as np
src, dst, k, names = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
os.makedirs(dst)
for p in sorted(glob.glob(os.path.join(src, "*.h5"))):
    with h5py.File(p, "r") as f, h5py.File(os.path.join(dst, os.path.basename(p)), "w") as g:
        y = f["labels"][()].astype(np.int64)
        g["images"] = f["images"][()]
        g["labels"] = (y % k if k <= 10 else (y * 103 + np.arange(len(y))) % k).astype(np.int32)
        for a, v in f.attrs.items():
            if a != "class_names":
                g.attrs[a] = v
        g.attrs["num_classes"] = k
        if names:
            g.attrs["class_names"] = [n.encode() for n in names]
EOF
}
relabel "$TMP/d3" "$TMP/k5" 5 'circle' 'sq"uare' 'tri\angle' 'croix à côté' 'ring' || { bad "making 5 classes"; finish; }
relabel "$TMP/d3" "$TMP/k1030" 1030 || { bad "making 1030 classes"; finish; }
for k in 5 1030; do
    if ! OMP_NUM_THREADS=1 timeout -k 5 120 "$DDPTRAIN" --data_dir "$TMP/k$k" --job_dir "$TMP/j$k" $COMMON --num_classes $k \
            --epochs 1 --max_steps 2 >"$TMP/j$k.out" 2>&1; then
        bad "$k classes: $(tail -n 3 "$TMP/j$k.out")"; continue
    fi
    if out=$("$PY" - "$TMP/j$k" "$TMP/k$k" $k <<'EOF' 2>&1
import glob, json, os, sys
import h5py, numpy as np
job, data, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = json.load(open(os.path.join(job, "confusion.json")))
ev = [json.loads(l) for l in open(os.path.join(job, "metrics.jsonl")) if '"test_acc"' in l][-1]
labels = np.concatenate([h5py.File(p, "r")["labels"][()] for p in sorted(glob.glob(os.path.join(data, "test-*.h5")))])
f = h5py.File(sorted(glob.glob(os.path.join(data, "test-*.h5")))[0], "r")
names = [n.decode() if isinstance(n, bytes) else n for n in f.attrs["class_names"]] if "class_names" in f.attrs else [None] * k
why = []
if [c["images"] for c in d["classes"]] != np.bincount(labels, minlength=k).tolist() or d["images"] != len(labels):
    why.append("per-class images are not the shards' label counts")
if [c["name"] for c in d["classes"]] != names:
    why.append(f"names {[c['name'] for c in d['classes']][:6]}, the shards' {names[:6]}")
if sum(c["correct"] for c in d["classes"]) != d["correct"] or abs(ev["test_acc"] - d["correct"] / d["images"]) > 1e-6:
    why.append("per-class correct do not add up to test_acc")
if k <= 5 and (d["correct5"] is not None or d["test_acc5"] is not None or "test_acc5" in ev):
    why.append("top-5 reported with 5 classes")
if k > 5 and abs(ev["test_acc5"] - d["test_acc5"]) > 1e-6:
    why.append("test_acc5 differs between metrics.jsonl and confusion.json")
if k > d["matrix_max_classes"] and (d["matrix"] is not None or "1024 classes" not in d.get("matrix_note", "")):
    why.append(f"matrix {type(d['matrix']).__name__}, note {d.get('matrix_note')!r} above the limit")
if k <= d["matrix_max_classes"] and np.asarray(d["matrix"]).shape != (k, k):
    why.append("no k x k matrix")
if why:
    sys.exit("; ".join(why))
print(f"{d['images']} images, {k} per-class records" + (f", names {names[1]!r} {names[2]!r} {names[3]!r}" if names[0] else "")
      + (", matrix: " + d["matrix_note"] if d["matrix"] is None else ", a matrix") + (", no top-5" if k <= 5 else ""))
EOF
    ); then ok "$k classes: $out"; else bad "$k classes: $out"; fi
done
grep -q "test_acc5" "$TMP/j5.out" && bad "5 classes: test_acc5 on the log line" || ok "5 classes: no test_acc5 on the log line"

# ---- a link planted where confusion.json is written ------------------------------------------
mkdir -p "$TMP/planted"
ln -s "$TMP/elsewhere.json" "$TMP/planted/confusion.json"
if OMP_NUM_THREADS=1 "$DDPTRAIN" --data_dir "$TMP/d3" --job_dir "$TMP/planted" $COMMON --epochs 1 --max_steps 1 \
        >"$TMP/planted.out" 2>&1; then
    bad "a symbolic link at confusion.json: the run went ahead"
elif [ "$(grep -c . "$TMP/planted.out")" -eq 1 ] && grep -q "confusion.json is a symbolic link" "$TMP/planted.out" &&
     [ ! -e "$TMP/elsewhere.json" ] && [ ! -e "$TMP/planted/logs" ]; then
    ok "a symbolic link at confusion.json: $(cat "$TMP/planted.out")"
else
    bad "a symbolic link at confusion.json: $(cat "$TMP/planted.out"); $(ls "$TMP/planted" "$TMP")"
fi

# ---- ddptrain-plot --confusion --------------------------------------------------------------
PLOT="$top_srcdir/scripts/ddptrain-plot"
is_png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }
sh "$PLOT" --help | grep -q -- "--confusion JOB_DIR" && ok "ddptrain-plot --help names --confusion" ||
    bad "ddptrain-plot --help does not name --confusion"
if command -v gnuplot >/dev/null 2>&1; then
    for j in one j5 j1030; do
        if msg=$(sh "$PLOT" --confusion "$TMP/$j" 2>&1) && is_png "$TMP/$j/confusion.png"; then
            ok "ddptrain-plot --confusion: $(wc -c <"$TMP/$j/confusion.png") bytes of PNG: $msg"
        else
            bad "ddptrain-plot --confusion $j: $msg"
        fi
    done
else
    echo "skip: no gnuplot: ddptrain-plot --confusion's pictures"
fi
# one line and status 1: no confusion.json; a file that is not ddptrain's
rm "$TMP/j5/confusion.json"
msg=$(sh "$PLOT" --confusion "$TMP/j5" "$TMP/x.png" 2>&1)
rc=$?
[ $rc -eq 1 ] && [ "$(echo "$msg" | grep -c .)" -eq 1 ] && echo "$msg" | grep -q "confusion.json: not found" &&
    ok "ddptrain-plot --confusion without the file: $msg" || bad "ddptrain-plot --confusion without the file: exit $rc: $msg"
echo '{"matrix": [[1]]}' >"$TMP/j5/confusion.json"
msg=$(GNUPLOT=true sh "$PLOT" --confusion "$TMP/j5" "$TMP/x.png" 2>&1)
rc=$?
[ $rc -eq 1 ] && [ "$(echo "$msg" | grep -c .)" -eq 1 ] && echo "$msg" | grep -q "not a confusion.json of ddptrain" &&
    [ ! -e "$TMP/x.png" ] && ok "ddptrain-plot --confusion on another JSON file: $msg" ||
    bad "ddptrain-plot --confusion on another JSON file: exit $rc: $msg"
finish
