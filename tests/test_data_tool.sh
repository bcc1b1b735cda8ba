#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# test_data_tool.sh - ddptrain-data: synth determinism, inspect, reshard, cifar10 conversion,
# cifar100 conversion, command-line errors and bad files. Exit 0 pass, 1 fail, 77 skip (tool not built).
set -u
top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
TOOL=$top_builddir/ddptrain-data
if [ ! -x "$TOOL" ]; then
    echo "SKIP: $TOOL is not built"
    exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddp_test_data_tool.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM

fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
# expect DESC CMD...: the command must succeed
expect() { d=$1; shift; if "$@" >"$tmp/out" 2>"$tmp/err"; then ok "$d"; else bad "$d"; cat "$tmp/err"; fi; }
# expect_fail DESC CODE PATTERN CMD...: exit CODE with exactly one stderr line containing PATTERN
expect_fail() {
    d=$1 code=$2 pat=$3; shift 3
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -eq "$code" ] && [ "$lines" -eq 1 ] && grep -q -e "$pat" "$tmp/err"; then
        ok "$d: $(cat "$tmp/err")"
    else
        bad "$d (exit $rc, want $code; $lines line(s), want 1 containing '$pat')"
        cat "$tmp/err"
    fi
}
same_files() { for f in "$1"/*.h5; do cmp -s "$f" "$2/$(basename "$f")" || return 1; done; }
differ_files() { ! same_files "$1" "$2"; }
contains() { grep -q -e "$1" "$tmp/out"; }

# A python with h5py/numpy for the deeper checks (optional).
PY=
for p in "${PYTHON:-}" python3 python /usr/bin/python3; do
    [ -n "$p" ] || continue
    if "$p" -c 'import h5py, numpy' >/dev/null 2>&1; then PY=$p; break; fi
done

echo "== synth"
expect "synth A" "$TOOL" synth --out "$tmp/A" --train 300 --test 100 --shards 2 --seed 7
expect "synth B (same seed)" "$TOOL" synth --out "$tmp/B" --train 300 --test 100 --shards 2 --seed 7
expect "synth C (seed 8)" "$TOOL" synth --out "$tmp/C" --train 300 --test 100 --shards 2 --seed 8
if same_files "$tmp/A" "$tmp/B"; then ok "same seed: byte-identical shards"; else bad "same seed: shards differ"; fi
if differ_files "$tmp/A" "$tmp/C"; then ok "different seed: different shards"; else bad "seeds 7 and 8 gave identical shards"; fi
if command -v h5dump >/dev/null 2>&1; then
    dump() { h5dump -d images -d labels "$1" | sed 1d | cksum; }
    a=$(dump "$tmp/A/train-00001-of-00002.h5"); b=$(dump "$tmp/B/train-00001-of-00002.h5")
    c=$(dump "$tmp/C/train-00001-of-00002.h5")
    if [ "$a" = "$b" ] && [ "$a" != "$c" ]; then ok "h5dump of images+labels: equal for one seed, different across seeds"
    else bad "h5dump comparison ($a / $b / $c)"; fi
fi
expect_fail "synth refuses to overwrite" 1 "already holds train shards" \
    "$TOOL" synth --out "$tmp/A" --train 300 --test 100
expect "synth --force with 3 shards" "$TOOL" synth --out "$tmp/B" --train 300 --test 100 --shards 3 --seed 7 --force
n2=$(ls "$tmp/B" | grep -c -e '-of-00002.h5$')
n3=$(ls "$tmp/B" | grep -c -e '-of-00003.h5$')
if [ "$n2" -eq 0 ] && [ "$n3" -eq 6 ]; then ok "--force replaced the old shard set"; else bad "--force left $n2 old and $n3 new shards"; fi
if ls -a "$tmp/B" | grep -q tmp; then bad "temporary files left behind"; else ok "no temporary files left"; fi

echo "== inspect"
expect "inspect a shard" "$TOOL" inspect "$tmp/A/train-00000-of-00002.h5"
if contains "samples *150" && contains "\[150,32,32,3\] uint8" && contains "num_classes *10" && contains "circle" && contains "mean "; then
    ok "inspect summary"; else bad "inspect summary"; cat "$tmp/out"; fi
expect "inspect a directory" "$TOOL" inspect "$tmp/A"
if contains "train split: 2 shards, 300 samples" && contains "test split: 2 shards, 100 samples"; then
    ok "inspect directory totals"; else bad "inspect directory totals"; cat "$tmp/out"; fi

echo "== reshard"
expect "reshard 2 -> 3" "$TOOL" reshard --in "$tmp/A" --out "$tmp/R3" --shards 3
expect "reshard 3 -> 2" "$TOOL" reshard --in "$tmp/R3" --out "$tmp/R2" --shards 2
if same_files "$tmp/A" "$tmp/R2"; then ok "2 -> 3 -> 2 gives byte-identical shards (order and attributes kept)"
else bad "2 -> 3 -> 2 changed the data"; fi
expect "inspect resharded" "$TOOL" inspect "$tmp/R3"
if contains "train split: 3 shards, 300 samples" && contains "circle"; then ok "resharded totals and attributes"
else bad "resharded totals"; cat "$tmp/out"; fi
expect_fail "reshard into its input" 1 "same directory" "$TOOL" reshard --in "$tmp/A" --out "$tmp/A" --shards 3 --force
if [ -n "$PY" ]; then
    if "$PY" - "$tmp/A" "$tmp/R3" <<'EOF'
import sys, glob, h5py, numpy as np
def load(d, split):
    fs = [h5py.File(p, "r") for p in sorted(glob.glob(d + "/" + split + "-*.h5"))]
    x = np.concatenate([f["images"][:] for f in fs]); y = np.concatenate([f["labels"][:] for f in fs])
    at = {k: np.asarray(fs[0].attrs[k]).tolist() for k in ("num_classes", "mean", "std")}
    names = [n.decode() if isinstance(n, bytes) else n for n in fs[0].attrs["class_names"]]
    return x, y, at, names
for split in ("train", "test"):
    a, b = load(sys.argv[1], split), load(sys.argv[2], split)
    assert (a[0] == b[0]).all() and (a[1] == b[1]).all() and a[2] == b[2] and a[3] == b[3], split
EOF
    then ok "h5py: resharded images, labels, attributes equal"; else bad "h5py: resharded data differs"; fi
fi

echo "== cifar10"
# Fake batches: 3 records per file, label (file*3 + r) % 10, constant planes R=10 G=20 B=30
# (so a planar-to-interleaved mistake shows in the mean).
plane() { head -c 1024 /dev/zero | tr '\000' "$1"; }
mkdir -p "$tmp/cifar/cifar-10-batches-bin"
i=0
for f in data_batch_1 data_batch_2 data_batch_3 data_batch_4 data_batch_5 test_batch; do
    : >"$tmp/cifar/cifar-10-batches-bin/$f.bin"
    for r in 0 1 2; do
        l=$(( (i * 3 + r) % 10 ))
        { printf "\\$(printf %03o "$l")"; plane '\012'; plane '\024'; plane '\036'; } >>"$tmp/cifar/cifar-10-batches-bin/$f.bin"
    done
    i=$((i + 1))
done
expect "cifar10 conversion (parent of cifar-10-batches-bin)" "$TOOL" cifar10 --in "$tmp/cifar" --out "$tmp/CF" --shards 2
expect "inspect converted" "$TOOL" inspect "$tmp/CF"
if contains "train split: 2 shards, 15 samples" && contains "test split: 2 shards, 3 samples" && contains "airplane automobile bird" &&
   contains "mean *0.0392 0.0784 0.1176" && contains "0:1 1:1 2:1 3:1 4:1 5:0"; then
    ok "cifar10: counts, class names, HWC pixels (mean), labels"
else bad "cifar10 output"; cat "$tmp/out"; fi
if [ -n "$PY" ]; then
    if "$PY" -c "
import h5py, sys
f = h5py.File(sys.argv[1], 'r'); x = f['images'][:]
assert x.shape == (1, 32, 32, 3) and (x[..., 0] == 10).all() and (x[..., 1] == 20).all() and (x[..., 2] == 30).all()
assert list(f['labels'][:]) == [5]
" "$tmp/CF/test-00000-of-00002.h5"; then ok "h5py: cifar10 pixels are NHWC"; else bad "h5py: cifar10 pixels"; fi
fi
mv "$tmp/cifar/cifar-10-batches-bin/data_batch_3.bin" "$tmp/cifar/db3"
expect_fail "cifar10 missing batch" 1 "data_batch_3.bin: cannot open" "$TOOL" cifar10 --in "$tmp/cifar/cifar-10-batches-bin" --out "$tmp/CF2"
mv "$tmp/cifar/db3" "$tmp/cifar/cifar-10-batches-bin/data_batch_3.bin"
printf 'x' >>"$tmp/cifar/cifar-10-batches-bin/test_batch.bin"
expect_fail "cifar10 wrongly sized batch" 1 "test_batch.bin: size 9220 is not a positive multiple of 3073" \
    "$TOOL" cifar10 --in "$tmp/cifar/cifar-10-batches-bin" --out "$tmp/CF2"
if [ -e "$tmp/CF2" ] && ls "$tmp/CF2" | grep -q h5; then bad "cifar10 wrote shards before failing"; else ok "no shards written on error"; fi

echo "== cifar100"
# Fake release: train.bin 4 records, test.bin 2; record r of a file has coarse label r+1 and
# fine label 10*r+3 (test: 50+r), constant planes R=10 G=20 B=30.
c100=$tmp/c100/cifar-100-binary
mkdir -p "$c100"
rec100() { printf "\\$(printf %03o "$1")\\$(printf %03o "$2")"; plane '\012'; plane '\024'; plane '\036'; }
: >"$c100/train.bin"; for r in 0 1 2 3; do rec100 $((r + 1)) $((10 * r + 3)) >>"$c100/train.bin"; done
: >"$c100/test.bin"; for r in 0 1; do rec100 $((r + 1)) $((50 + r)) >>"$c100/test.bin"; done
seq -f 'fine%02g' 0 99 >"$c100/fine_label_names.txt"
seq -f 'coarse%02g' 0 19 >"$c100/coarse_label_names.txt"
expect "cifar100 conversion (parent of cifar-100-binary)" "$TOOL" cifar100 --in "$tmp/c100" --out "$tmp/C1"
expect "inspect cifar100" "$TOOL" inspect "$tmp/C1"
if contains "train split: 1 shard, 4 samples" && contains "num_classes *100" && contains "fine00 fine01" &&
   contains " 3:1 4:0" && contains " 33:1 " && contains "mean *0.0392 0.0784 0.1176"; then
    ok "cifar100: counts, 100 fine classes and their names, labels, HWC pixels"
else bad "cifar100 output"; cat "$tmp/out"; fi
expect "cifar100 --coarse" "$TOOL" cifar100 --in "$c100" --out "$tmp/C2" --coarse
expect "inspect cifar100 --coarse" "$TOOL" inspect "$tmp/C2"
if contains "train split: 1 shard, 4 samples" && contains "num_classes *20" && contains "coarse00 coarse01" &&
   contains "0:0 1:1 2:1 3:1 4:1 5:0"; then ok "cifar100 --coarse: 20 classes, coarse labels"
else bad "cifar100 --coarse output"; cat "$tmp/out"; fi
if [ -n "$PY" ]; then
    if "$PY" -c "
import h5py, sys
f = h5py.File(sys.argv[1], 'r'); x = f['images'][:]
assert x.shape == (2, 32, 32, 3) and (x[..., 0] == 10).all() and (x[..., 1] == 20).all() and (x[..., 2] == 30).all()
assert list(f['labels'][:]) == [50, 51]
" "$tmp/C1/test-00000-of-00001.h5"; then ok "h5py: cifar100 fine labels and NHWC pixels"; else bad "h5py: cifar100 test split"; fi
fi
printf '\001\144' >"$tmp/badrec"; head -c 3072 /dev/zero >>"$tmp/badrec"
cp "$c100/test.bin" "$tmp/test.bin.ok"; cat "$tmp/badrec" >>"$c100/test.bin"
expect_fail "cifar100 fine label 100" 1 "test.bin: record 2 has fine label 100" "$TOOL" cifar100 --in "$c100" --out "$tmp/C3"
cp "$tmp/test.bin.ok" "$c100/test.bin"; printf 'x' >>"$c100/test.bin"
expect_fail "cifar100 wrongly sized file" 1 "test.bin: size 6149 is not a positive multiple of 3074" "$TOOL" cifar100 --in "$c100" --out "$tmp/C3"
cp "$tmp/test.bin.ok" "$c100/test.bin"
sed -i '$d' "$c100/coarse_label_names.txt"
expect_fail "cifar100 19 coarse names" 1 "coarse_label_names.txt: 19 class names, but CIFAR-100 has 20" "$TOOL" cifar100 --in "$c100" --out "$tmp/C3" --coarse
rm "$c100/fine_label_names.txt"
expect_fail "cifar100 without fine_label_names.txt" 1 "fine_label_names.txt: cannot open" "$TOOL" cifar100 --in "$c100" --out "$tmp/C3"
if [ -e "$tmp/C3" ] && ls "$tmp/C3" | grep -q h5; then bad "cifar100 wrote shards before failing"; else ok "cifar100: no shards written on error"; fi

echo "== command line"
for c in synth cifar10 cifar100 import inspect reshard; do
    if "$TOOL" "$c" --help 2>&1 | grep -q "usage: ddptrain-data $c"; then ok "$c --help"; else bad "$c --help"; fi
done
if "$TOOL" --version 2>&1 | grep -q "^ddptrain-data [0-9]"; then ok "--version: $("$TOOL" --version)"; else bad "--version: $("$TOOL" --version 2>&1)"; fi
expect_fail "unknown flag" 2 "unknown flag '--bogus'" "$TOOL" synth --out "$tmp/X" --bogus
expect_fail "non-numeric value" 2 "flag --train: 'abc' is not a non-negative integer" "$TOOL" synth --out "$tmp/X" --train abc
expect_fail "negative value" 2 "flag --seed" "$TOOL" synth --out "$tmp/X" --seed -1
expect_fail "missing value" 2 "flag --shards needs a value" "$TOOL" synth --out "$tmp/X" --shards
expect_fail "value out of range" 2 "flag --shards: 0 is out of range" "$TOOL" reshard --in "$tmp/A" --out "$tmp/X" --shards 0
expect_fail "missing --out" 2 "--out DIR is required" "$TOOL" synth
expect_fail "inspect without files" 2 "no FILE or DIR" "$TOOL" inspect
expect_fail "a one-dash flag" 2 "inspect: unknown flag '-x'" "$TOOL" inspect -x
if "$TOOL" inspect -- "$tmp/A" >/dev/null 2>&1; then ok "inspect -- DIR: '--' ends the flags"; else bad "inspect -- DIR failed"; fi
expect_fail "unknown command" 2 "unknown command 'frobnicate'" "$TOOL" frobnicate
if [ -e "$tmp/X" ]; then bad "a bad command line created output"; else ok "bad command lines wrote nothing"; fi

echo "== bad files"
printf 'this is not an HDF5 file at all, just text\n' >"$tmp/garbage.h5"
expect_fail "inspect a corrupt file" 1 "$tmp/garbage.h5: not an HDF5 file" "$TOOL" inspect "$tmp/garbage.h5"
head -c 4000 "$tmp/A/train-00000-of-00002.h5" >"$tmp/cut.h5"
# (the pre-walk of the file finds what the cut left out before HDF5 opens it: here the global
# heap of the class names)
expect_fail "inspect a truncated file" 1 "beyond the end of the file (damaged" "$TOOL" inspect "$tmp/cut.h5"
expect_fail "inspect a missing file" 1 "$tmp/nope.h5: cannot open" "$TOOL" inspect "$tmp/nope.h5"
rm "$tmp/R3/train-00001-of-00003.h5"
expect_fail "inspect an incomplete set" 1 "train-00001-of-00003.h5: missing" "$TOOL" inspect "$tmp/R3"
if [ -n "$PY" ] && [ -f "$top_srcdir/tests/helpers/make_bad_shards.py" ]; then
    for kind in truncated corrupt wrong_shape wrong_rank wrong_dtype bad_label missing_labels count_mismatch; do
        path=$("$PY" "$top_srcdir/tests/helpers/make_bad_shards.py" "$kind" "$tmp/bad_$kind") || { bad "make_bad_shards.py $kind"; continue; }
        expect_fail "inspect $kind" 1 "^ddptrain-data: error: $path: " "$TOOL" inspect "$tmp/bad_$kind"
    done
else
    echo "(no python with h5py: make_bad_shards.py checks skipped)"
fi

if [ "$fails" -ne 0 ]; then
    echo "test_data_tool: $fails check(s) FAILED"
    exit 1
fi
echo "test_data_tool: all checks passed"
exit 0
