# SPDX-License-Identifier: BSD-3-Clause
# tests/helpers/zoo_compare.sh - what the zoo tests against torchvision share (sourced after
# lib.sh): a python3 with torch, torchvision, h5py and numpy (else the test is skipped), the
# tools, a wrong variant that must fail the comparison, and the weights both ways.
PY=$(find_python "torch, torchvision, h5py, numpy") || {
    echo "SKIP: no python3 with torch, torchvision, h5py and numpy"; exit $SKIP; }
DUMP="$top_builddir/tests/helpers/dump_model"
CMP="$top_srcdir/tests/helpers/torch_compare.py"
DDP="$top_builddir/ddptrain"
T2D="$top_srcdir/scripts/torch_to_ddptrain.py"
D2T="$top_srcdir/scripts/ddptrain_to_torch.py"

# $1 = label, $2 = a dump that passed, rest = torch_compare flags (--set a wrong variant of
# PyTorch's side): the comparison must fail.
must_fail() {
    label=$1; dump=$2; shift 2
    if "$PY" "$CMP" "$dump" --tol 1e-3 --ref64 4 "$@" >"$TMP/w.out" 2>&1; then
        bad "$label passed for torchvision's definition"; tail -n 3 "$TMP/w.out"
    else
        ok "$label detected: $(grep 'FAIL' "$TMP/w.out" | head -1 | cut -c1-110)"
    fi
}

# $1 = a dataset, $2 = its image size, rest = models: torchvision's 1000-class weights into a
# 10-class run by --init_from (the classifier kept at its initialisation), one step, and the
# checkpoint back into torchvision's module, strict.
weights_both_ways() {
    data=$1 size=$2; shift 2
    for m in "$@"; do
        rm -rf "$TMP/job" "$TMP/w.h5"
        if ! "$PY" "$T2D" "$m" "$TMP/w.h5" --seed 5 >"$TMP/t2d.out" 2>&1; then
            bad "torch_to_ddptrain.py $m"; cat "$TMP/t2d.out"; continue
        fi
        if "$DDP" --model "$m" --init_from "$TMP/w.h5" --data_dir "$data" --image_size "$size" --max_steps 1 \
            --batch_size 8 --threads 2 --save_every_steps 1 --job_dir "$TMP/job" >"$TMP/ft.out" 2>&1 &&
            grep -q "kept at their initialisation, another shape: " "$TMP/ft.out" &&
            "$PY" "$D2T" "$(ls "$TMP"/job/checkpoints/ckpt-*.h5 | tail -1)" >"$TMP/d2t.out" 2>&1 &&
            grep -q "torchvision.models.$m classes 10" "$TMP/d2t.out"; then
            ok "$m: torchvision's 1000-class weights into a 10-class run, and its checkpoint back, strict: $(grep -o 'init_from .*' "$TMP/ft.out" | head -1 | sed 's/.*tensors loaded/tensors loaded/' | cut -c1-110)"
        else
            bad "$m: weights both ways"; tail -n 3 "$TMP/ft.out" "$TMP/d2t.out"
        fi
    done
}
