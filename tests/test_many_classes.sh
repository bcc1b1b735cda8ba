#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# test_many_classes.sh - another resolution and class count end to end: a folder of 100 classes
# of 80x72 JPEG and PNG images (tests/helpers/make_image_tree.py classes) imported at 64x64
# (ddptrain-data import --size 64), then trained on 2 ranks with the share in memory and
# streamed from the shards in small chunks. Each run must say how it holds the data, build a
# 100-way classifier, and learn: test accuracy far above chance (1%). Skips (77) without
# mpirun, python3 with PIL, h5py and numpy, or an importer built without libjpeg/libpng.
# shellcheck source=tests/helpers/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/helpers/lib.sh"
mpi_leak_checks_off   # ranks started by mpirun (see tests/helpers/lib.sh)
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found"; exit "$SKIP"; }
PY=$(find_python "PIL, h5py, numpy") || { echo "SKIP: no python3 with PIL, h5py and numpy"; exit "$SKIP"; }
if "$DDPDATA" import --in "$TMP/none" --out "$TMP/none-out" 2>&1 | grep -q "built without"; then
    echo "SKIP: ddptrain-data was built without libjpeg or libpng"; exit "$SKIP"
fi

K=100
if ! "$PY" "$top_srcdir/tests/helpers/make_image_tree.py" classes "$TMP/img" $K 20 5; then bad "make_image_tree.py classes"; finish; fi
if "$DDPDATA" import --in "$TMP/img" --out "$TMP/data" --size 64 --shards 2 >"$TMP/import.out" 2>&1 &&
   grep -q "imported 2000 train and 500 test images of $K classes at 64x64" "$TMP/import.out"; then
    ok "import: $(tail -n 1 "$TMP/import.out")"
else
    bad "import of $K classes at 64x64: $(tail -n 2 "$TMP/import.out")"; finish
fi

# train NAME PATTERN FLAGS...: 2 ranks, 4 epochs; the run's data line must match PATTERN
train() {
    name=$1 pat=$2; shift 2
    d="$TMP/$name"
    if ! OMP_NUM_THREADS=1 timeout -k 5 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$DDPTRAIN" \
            --data_dir "$TMP/data" --job_dir "$d" --num_classes $K --image_size 64 --width 8 --blocks 1 \
            --batch_size 32 --epochs 4 --lr 0.1 --lr_schedule onecycle --threads 1 "$@" >"$d.out" 2>&1; then
        bad "$name: training failed: $(tail -n 3 "$d.out")"; return
    fi
    grep -q "^data: train $pat" "$d.out" || { bad "$name: data line: $(grep '^data: train' "$d.out")"; return; }
    acc=$(sed -n 's/^done: .*final test_acc \([0-9.]*\).*/\1/p' "$d.out")
    if [ -z "$acc" ]; then bad "$name: no final accuracy: $(tail -n 2 "$d.out")"; return; fi
    # about 0.9 after 4 epochs here; 0.3 leaves room for other ISAs' rounding; chance is 0.01
    if ! awk -v a="$acc" 'BEGIN { exit !(a >= 0.3) }'; then bad "$name: test accuracy $acc after 4 epochs (chance 0.01)"; return; fi
    if ! out=$("$PY" - "$d/checkpoints/$(cat "$d/checkpoints/latest")" $K 2>&1 <<'EOF'
import sys

import h5py

with h5py.File(sys.argv[1], "r") as f:
    w = f["model/fc.weight"].shape
if w[0] != int(sys.argv[2]):
    sys.exit(f"fc.weight has shape {w}, expected {sys.argv[2]} rows")
print(f"fc.weight {w[0]}x{w[1]}")
EOF
    ); then bad "$name: checkpoint: $out"; return; fi
    ok "$name: $(grep '^model:' "$d.out" | head -n 1), $out; $(grep -o 'train [a-z ]*: the train share is [0-9.]* MiB' "$d.out" | head -n 1); test accuracy $acc after 4 epochs"
}
train in-memory "in memory" --data_in_memory yes
train streamed "streamed" --data_in_memory no --data_chunk_images 64 --data_window_chunks 3
finish
