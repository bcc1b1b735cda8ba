#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# test_import_jpeg.sh - ddptrain-data import --encoding jpeg (issue 31): a tree of JPEG and PNG
# files of many sizes and modes (grey, palette, 16-bit; tests/helpers/make_image_tree.py) into
# JPEG shards that inspect validates and h5py reads; every stored image decoded by PIL has the
# size recorded and is PIL's own JPEG of PIL's Resize(S) with the aspect kept (a longer side
# past 2S cut to its centre); the same bytes for any --threads; reshard keeps every byte; each
# bad flag with its one line and exit 2; each broken JPEG shard (tests/helpers/
# make_bad_shards.py's jpeg_* kinds) refused by inspect with one line naming the file and,
# where it is one sample's fault, the sample; and a sample replaced by a valid JPEG of another
# size refused by training too, where a crop of 8 decodes it at 1/4 of its size.
# Skips (77) without python3 with PIL, h5py and numpy, or in a build without libjpeg/libpng.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "PIL, h5py, numpy") || { echo "SKIP: no python3 with PIL, h5py and numpy"; exit "$SKIP"; }
[ -x "$DDPDATA" ] || { echo "SKIP: $DDPDATA is not built"; exit "$SKIP"; }
if "$DDPDATA" import --in "$TMP/none" --out "$TMP/none-out" 2>&1 | grep -q "built without"; then
    echo "SKIP: ddptrain-data was built without libjpeg or libpng"; exit "$SKIP"
fi
tree() { "$PY" "$top_srcdir/tests/helpers/make_image_tree.py" "$@"; }

if ! tree mixed "$TMP/mx"; then bad "make_image_tree.py"; finish; fi

echo "== import --encoding jpeg: sizes from 16x20 to 120x17 at S = 24"
if "$DDPDATA" import --in "$TMP/mx" --out "$TMP/j1" --size 24 --encoding jpeg --threads 1 --shards 2 >"$TMP/out" 2>"$TMP/err"; then
    ok "import (1 thread): $(tail -n 1 "$TMP/out")"
else bad "import --encoding jpeg: $(cat "$TMP/err")"; fi
if "$DDPDATA" inspect "$TMP/j1" >"$TMP/out" 2>&1 && grep -q "encoding     jpeg, [0-9]* bytes" "$TMP/out" \
    && grep -q "shorter side 24, heights 24 to [0-9]*, widths 24 to 48" "$TMP/out"; then
    ok "inspect decodes every image: $(grep -m1 'encoding ' "$TMP/out" | sed 's/^ *//')"
else bad "inspect: $(cat "$TMP/out")"; fi
if out=$(tree check_jpeg "$TMP/mx" "$TMP/j1" 24 90); then ok "h5py and PIL: $out"; else bad "against PIL: $out"; fi
"$DDPDATA" import --in "$TMP/mx" --out "$TMP/j2" --size 24 --encoding jpeg --threads 2 --shards 2 >/dev/null 2>&1
"$DDPDATA" import --in "$TMP/mx" --out "$TMP/j5" --size 24 --encoding jpeg --threads 5 --shards 2 >/dev/null 2>&1
same=1
for f in "$TMP"/j1/*.h5; do
    cmp -s "$f" "$TMP/j2/$(basename "$f")" && cmp -s "$f" "$TMP/j5/$(basename "$f")" || same=0
done
if [ "$same" = 1 ] && [ "$(find "$TMP/j1" -name '*.h5' | wc -l)" -eq 4 ]; then ok "1, 2 and 5 threads: byte-identical shards"
else bad "the JPEG shards depend on --threads"; fi

echo "== --quality"
"$DDPDATA" import --in "$TMP/mx" --out "$TMP/q50" --size 24 --encoding jpeg --quality 50 --threads 2 >/dev/null 2>&1
if out=$(tree check_jpeg "$TMP/mx" "$TMP/q50" 24 50); then ok "quality 50: $out"
else bad "quality 50 against PIL: $out"; fi
"$DDPDATA" import --in "$TMP/mx" --out "$TMP/sq" --size 16 --encoding jpeg --threads 2 >/dev/null 2>&1
if out=$(tree check_jpeg "$TMP/mx" "$TMP/sq" 16 90); then ok "S = 16 (every image shrunk or kept): $out"
else bad "S = 16 against PIL: $out"; fi

echo "== reshard keeps every byte"
if "$DDPDATA" reshard --in "$TMP/j1" --out "$TMP/r3" --shards 3 >"$TMP/out" 2>"$TMP/err" && "$DDPDATA" inspect "$TMP/r3" >/dev/null 2>&1; then
    ok "reshard to 3 shards, inspect accepts them"
else bad "reshard: $(cat "$TMP/err")"; fi
if "$PY" - "$TMP/j1" "$TMP/r3" <<'PYEOF'
import glob, os, sys
import h5py, numpy as np
def load(d, split):
    data, sizes, labels, lens = [], [], [], []
    for p in sorted(glob.glob(os.path.join(d, split + "-*.h5"))):
        with h5py.File(p, "r") as f:
            off = f["offsets"][:]
            data.append(f["jpeg"][:]); sizes.append(f["sizes"][:]); labels.append(f["labels"][:])
            lens.append(np.diff(off.astype(np.int64)))
            attrs = {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in f.attrs.items()}
    return [np.concatenate(x) for x in (data, sizes, labels, lens)], attrs
for split in ("train", "test"):
    (a, aa), (b, ba) = load(sys.argv[1], split), load(sys.argv[2], split)
    if any(not np.array_equal(x, y) for x, y in zip(a, b)) or aa != ba:
        sys.exit("%s: bytes, sizes, labels, lengths or attributes differ" % split)
PYEOF
then ok "the resharded bytes, offsets, sizes, labels and attributes are the input's"
else bad "reshard changed the data"; fi

echo "== bad flags: one line naming the flag, exit 2"
for case in "--quality 0:flag --quality: 0 is out of range" "--quality 101:flag --quality: 101 is out of range" \
        "--encoding foo:flag --encoding: 'foo' is neither raw nor jpeg" "--encoding jpeg:--encoding jpeg needs --size S" \
        "--quality 80 --size 24:flag --quality applies to --encoding jpeg only"; do
    args=${case%%:*} want=${case#*:}
    # shellcheck disable=SC2086
    "$DDPDATA" import --in "$TMP/mx" --out "$TMP/fail" $args >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q -e "$want" "$TMP/err" && [ ! -e "$TMP/fail" ]; then
        ok "$args: exit 2: $(cat "$TMP/err")"
    else bad "$args: exit $rc, want 2 and one line with '$want': $(cat "$TMP/err")"; fi
done

echo "== broken JPEG shards: inspect names the file (and the sample)"
for kw in "jpeg_offsets_order:sample 3: dataset 'offsets' says it ends at byte" \
        "jpeg_offsets_end:sample 15: dataset 'offsets' ends at byte [0-9]* but 'jpeg' holds" \
        "jpeg_size_zero:sample 6: dataset 'sizes' says 0x32" \
        "jpeg_garbled:sample 5: a corrupt JPEG" \
        "jpeg_no_image_size:attribute 'image_size' is missing" \
        "jpeg_mixed:encoding raw but .*train-00000-of-00002.h5 has encoding jpeg" \
        "jpeg_resized:sample 0: the JPEG is 32x44 (height x width) but dataset 'sizes' says 32x32"; do
    kind=${kw%%:*} want=${kw#*:}
    f=$("$PY" "$top_srcdir/tests/helpers/make_bad_shards.py" "$kind" "$TMP/bad_$kind") || { bad "make_bad_shards $kind"; continue; }
    target=$f
    [ "$kind" = jpeg_mixed ] && target=$TMP/bad_$kind   # a split's shards disagree: the directory
    "$DDPDATA" inspect "$target" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ $rc -eq 1 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q -- "$f: $want" "$TMP/err"; then
        ok "$kind: exit 1: $(cat "$TMP/err")"
    else bad "$kind: exit $rc, want 1 and one line '$f: $want': $(cat "$TMP/err")"; fi
done

echo "== a sample replaced by a valid JPEG of another size: refused by training at a reduced DCT scale"
# A crop of 8 from images of shorter side 32 decodes at 1/4, where 32x44 becomes 8x11 and fits
# any box: the JPEG's header must be checked against 'sizes', not the decoded size. Both
# views: RandomResizedCrop (--rrc_scale 1,1: the whole image, so always 1/4) and the
# evaluation's Resize + CenterCrop (--no-augment).
f=$TMP/bad_jpeg_resized/train-00000-of-00002.h5
want="$f: sample 0: the JPEG is 32x44 (height x width) but dataset 'sizes' says 32x32"
for view in "--rrc_scale 1,1" "--no-augment"; do
    # shellcheck disable=SC2086
    "$DDPTRAIN" --data_dir "$TMP/bad_jpeg_resized" --job_dir "$TMP/job_resized" --width 4 --blocks 1 --threads 1 \
        --batch_size 8 --epochs 1 --train_crop_size 8 $view >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ $rc -eq 1 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q -F -- "$want" "$TMP/err"; then
        ok "crop 8, $view: exit 1: $(cat "$TMP/err")"
    else bad "crop 8, $view: exit $rc, want 1 and one line '$want': $(cat "$TMP/err")"; fi
    rm -rf "$TMP/job_resized"
done
finish
