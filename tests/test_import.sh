#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# test_import.sh - ddptrain-data import: trees of JPEG and PNG files (colour, grey, palette,
# alpha, 16-bit, misleading names; tests/helpers/make_image_tree.py) against PIL's decode and
# torchvision's Resize + CenterCrop, read back with h5py; the same bytes for any --threads;
# --test_fraction; each bad input with its one line, exit 1 and no output; --skip_bad.
# Skips (77) without python3 with PIL, h5py and numpy, or in a build without libjpeg/libpng.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "PIL, h5py, numpy") || { echo "SKIP: no python3 with PIL, h5py and numpy"; exit "$SKIP"; }
[ -x "$DDPDATA" ] || { echo "SKIP: $DDPDATA is not built"; exit "$SKIP"; }
if "$DDPDATA" import --in "$TMP/none" --out "$TMP/none-out" 2>&1 | grep -q "built without"; then
    echo "SKIP: ddptrain-data was built without libjpeg or libpng"; exit "$SKIP"
fi
tree() { "$PY" "$top_srcdir/tests/helpers/make_image_tree.py" "$@"; }

# expect_fail DESC PATTERN CMD...: exit 1, one line on stderr containing PATTERN, and no file
# (shard or hidden temporary) in $TMP/fail.
expect_fail() {
    d=$1 pat=$2; shift 2
    rm -rf "$TMP/fail"
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    n=$(wc -l <"$TMP/err")
    left=$(find "$TMP/fail" -mindepth 1 2>/dev/null | wc -l)
    if [ "$rc" -eq 1 ] && [ "$n" -eq 1 ] && grep -q -e "$pat" "$TMP/err" && [ "$left" -eq 0 ]; then
        ok "$d: $(cat "$TMP/err")"
    else
        bad "$d (exit $rc, $n line(s), $left file(s) left; want exit 1 and one line with '$pat'): $(cat "$TMP/err")"
    fi
}

if ! { tree square "$TMP/sq" && tree mixed "$TMP/mx" && tree flat "$TMP/fl"; }; then bad "make_image_tree.py"; finish; fi

echo "== same-size images: the size found, every image equal to PIL's"
if "$DDPDATA" import --in "$TMP/sq" --out "$TMP/sq1" --threads 1 >"$TMP/out" 2>"$TMP/err"; then
    ok "import (1 thread): $(tail -n 1 "$TMP/out")"
else bad "import of the square tree: $(cat "$TMP/err")"; fi
if out=$(tree check "$TMP/sq" "$TMP/sq1" 32); then ok "32x32: $out"; else bad "32x32 against PIL: $out"; fi
"$DDPDATA" import --in "$TMP/sq" --out "$TMP/sq3" --threads 3 --shards 2 >/dev/null 2>&1
"$DDPDATA" import --in "$TMP/sq" --out "$TMP/sq8" --threads 8 --shards 2 >/dev/null 2>&1
"$DDPDATA" import --in "$TMP/sq" --out "$TMP/sq1b" --threads 1 --shards 2 >/dev/null 2>&1
same=1
for f in "$TMP"/sq1b/*.h5; do
    cmp -s "$f" "$TMP/sq3/$(basename "$f")" && cmp -s "$f" "$TMP/sq8/$(basename "$f")" || same=0
done
if [ "$same" = 1 ] && [ "$(find "$TMP/sq1b" -name '*.h5' | wc -l)" -eq 4 ]; then ok "1, 3 and 8 threads: byte-identical shards"
else bad "the shards depend on --threads"; fi
# val/ in place of test/ (ImageNet's name): the same shards, byte for byte
cp -r "$TMP/sq" "$TMP/sqval" && mv "$TMP/sqval/test" "$TMP/sqval/val"
"$DDPDATA" import --in "$TMP/sqval" --out "$TMP/sqval-out" --threads 1 --shards 2 >/dev/null 2>&1
same=1
for f in "$TMP"/sq1b/*.h5; do cmp -s "$f" "$TMP/sqval-out/$(basename "$f")" || same=0; done
if [ "$same" = 1 ]; then ok "train/ and val/: the shards of train/ and test/, byte for byte"
else bad "train/ and val/ gave other shards than train/ and test/"; fi
if "$DDPDATA" inspect "$TMP/sq3" >"$TMP/out" 2>&1 && grep -q "class_names  Dog bird_2 cat" "$TMP/out"; then
    ok "inspect accepts the dataset; classes in byte order"
else bad "inspect: $(cat "$TMP/out")"; fi

echo "== mixed sizes: Resize(S) + CenterCrop(S)"
expect_fail "mixed sizes without --size" "is 30x50, not square: pass --size S" "$DDPDATA" import --in "$TMP/mx" --out "$TMP/fail"
for s in 24 40; do
    if "$DDPDATA" import --in "$TMP/mx" --out "$TMP/mx$s" --size $s >"$TMP/out" 2>"$TMP/err" &&
       out=$(tree check "$TMP/mx" "$TMP/mx$s" $s); then ok "--size $s: $out"
    else bad "--size $s: $(cat "$TMP/err") $out"; fi
done

cp -r "$TMP/sq" "$TMP/sq24"
"$PY" -c "from PIL import Image; Image.new('RGB', (24, 24), (1, 2, 3)).save('$TMP/sq24/test/cat/small.png')"
expect_fail "square images of two sizes without --size" "sq24/train/Dog/a.jpg is 32x32 but .*sq24/test/cat/small.png is 24x24: pass --size S" \
    "$DDPDATA" import --in "$TMP/sq24" --out "$TMP/fail"

echo "== --test_fraction"
if "$DDPDATA" import --in "$TMP/fl" --out "$TMP/fl1" --test_fraction 0.25 >"$TMP/out" 2>"$TMP/err" &&
   grep -q "imported 27 train and 9 test images of 3 classes" "$TMP/out" &&
   out=$(tree check "$TMP/fl" "$TMP/fl1" 32 0.25); then ok "--test_fraction 0.25: 27 + 9, $out"
else bad "--test_fraction: $(cat "$TMP/out" "$TMP/err") $out"; fi
# Folders inside class folders (ImageFolder walks them): the files in sorted(os.walk())'s order,
# where cat/a-b comes before cat/a/z (a depth-first walk would take the other order and put
# other files in the test split); hidden folders skipped.
cp -r "$TMP/fl" "$TMP/fln"
mkdir -p "$TMP/fln/cat/a/z" "$TMP/fln/cat/a-b" "$TMP/fln/cat/.cache"
mv "$TMP/fln/cat/d.png" "$TMP/fln/cat/e" "$TMP/fln/cat/a/"
mv "$TMP/fln/cat/f.png" "$TMP/fln/cat/a/z/"
mv "$TMP/fln/cat/g.gif" "$TMP/fln/cat/h.png" "$TMP/fln/cat/a-b/"
cp "$TMP/fln/cat/a.jpg" "$TMP/fln/cat/.cache/"
if "$DDPDATA" import --in "$TMP/fln" --out "$TMP/fln1" --test_fraction 0.25 >"$TMP/out" 2>"$TMP/err" &&
   grep -q "imported 27 train and 9 test images of 3 classes" "$TMP/out" &&
   out=$(tree check "$TMP/fln" "$TMP/fln1" 32 0.25); then ok "folders in class folders, --test_fraction 0.25: ImageFolder's order, $out"
else bad "folders in class folders: $(cat "$TMP/out" "$TMP/err") $out"; fi
expect_fail "--test_fraction on a train/ test/ tree" "holds a train/ folder" \
    "$DDPDATA" import --in "$TMP/sq" --out "$TMP/fail" --test_fraction 0.5

echo "== bad input: one line, exit 1, nothing written"
cp -r "$TMP/sq" "$TMP/b1"
head -c 700 "$TMP/sq/train/cat/a.jpg" >"$TMP/b1/train/cat/a.jpg"
expect_fail "truncated JPEG" "b1/train/cat/a.jpg: a truncated JPEG file" "$DDPDATA" import --in "$TMP/b1" --out "$TMP/fail"
cp "$TMP/sq/train/cat/a.jpg" "$TMP/b1/train/cat/a.jpg"
head -c 300 "$TMP/sq/train/cat/d.png" >"$TMP/b1/train/cat/d.png"
expect_fail "truncated PNG" "b1/train/cat/d.png: a truncated PNG file" "$DDPDATA" import --in "$TMP/b1" --out "$TMP/fail"
cp "$TMP/sq/train/cat/d.png" "$TMP/b1/train/cat/d.png"
: >"$TMP/b1/test/Dog/zero.jpg"
expect_fail "zero-byte file" "b1/test/Dog/zero.jpg: an empty file" "$DDPDATA" import --in "$TMP/b1" --out "$TMP/fail"
rm "$TMP/b1/test/Dog/zero.jpg"
echo "this is text, not a picture" >"$TMP/b1/train/Dog/text.jpg"
expect_fail "text file named .jpg" "b1/train/Dog/text.jpg: neither a JPEG nor a PNG file (it starts with the bytes 74 68 69 73 20 69 73 20)" "$DDPDATA" import --in "$TMP/b1" --out "$TMP/fail"
rm "$TMP/b1/train/Dog/text.jpg"
"$PY" -c "from PIL import Image; Image.new('CMYK', (32, 32), (10, 20, 30, 40)).save('$TMP/b1/train/Dog/cmyk.jpg')"
expect_fail "CMYK JPEG" "cmyk.jpg: a CMYK JPEG: not supported" "$DDPDATA" import --in "$TMP/b1" --out "$TMP/fail"
rm "$TMP/b1/train/Dog/cmyk.jpg"
chmod 000 "$TMP/b1/train/cat/a.jpg"
if [ "$(id -u)" -ne 0 ]; then
    expect_fail "unreadable file" "a.jpg: cannot read: Permission denied" "$DDPDATA" import --in "$TMP/b1" --out "$TMP/fail"
fi
chmod 644 "$TMP/b1/train/cat/a.jpg"
mkdir "$TMP/b1/train/cat/sub"
ln -s .. "$TMP/b1/train/cat/sub/up"
expect_fail "a symbolic link loop in a class folder" "cat/sub/up: a symbolic link loop" "$DDPDATA" import --in "$TMP/b1" --out "$TMP/fail"
rm -r "$TMP/b1/train/cat/sub"
mkdir "$TMP/b1/train/empty" "$TMP/b1/test/empty"
expect_fail "empty class folder" "b1/train/empty: an empty class folder" "$DDPDATA" import --in "$TMP/b1" --out "$TMP/fail"
rmdir "$TMP/b1/train/empty"
expect_fail "a class in test/ only" "class folders differ from train/'s (class 'empty' is in test/ only)" "$DDPDATA" import --in "$TMP/b1" --out "$TMP/fail"
rmdir "$TMP/b1/test/empty"
expect_fail "a tree without train/" "fl: no train/ folder" "$DDPDATA" import --in "$TMP/fl" --out "$TMP/fail"
expect_fail "a missing tree" "nope: cannot open the image tree" "$DDPDATA" import --in "$TMP/nope" --out "$TMP/fail"
if "$DDPDATA" import --in "$TMP/b1" --out "$TMP/b1out" >"$TMP/out" 2>"$TMP/err"; then ok "the repaired tree imports"
else bad "the repaired tree: $(cat "$TMP/err")"; fi

echo "== --skip_bad"
head -c 700 "$TMP/sq/train/cat/a.jpg" >"$TMP/b1/train/cat/a.jpg"
: >"$TMP/b1/test/Dog/zero.jpg"
if "$DDPDATA" import --in "$TMP/b1" --out "$TMP/skip" --skip_bad >"$TMP/out" 2>"$TMP/err" &&
   grep -q "imported 35 train and 12 test images of 3 classes at 32x32, 2 bad files skipped" "$TMP/out" &&
   [ "$(wc -l <"$TMP/err")" -eq 2 ] && grep -q "skipped .*zero.jpg: an empty file" "$TMP/err"; then
    ok "--skip_bad: $(tail -n 1 "$TMP/out")"
else bad "--skip_bad: $(cat "$TMP/out" "$TMP/err")"; fi

echo "== command line"
if "$DDPDATA" import --help | grep -q "usage: ddptrain-data import"; then ok "import --help"; else bad "import --help"; fi
"$DDPDATA" import --in "$TMP/sq" >/dev/null 2>"$TMP/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "out DIR is required" "$TMP/err"; then ok "missing --out: exit 2"; else bad "missing --out: $(cat "$TMP/err")"; fi
"$DDPDATA" import --in "$TMP/fl" --out "$TMP/x" --test_fraction 1.5 >/dev/null 2>"$TMP/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "test_fraction: '1.5' is not a number between 0 and 1" "$TMP/err"; then ok "--test_fraction 1.5: exit 2"
else bad "--test_fraction 1.5: $(cat "$TMP/err")"; fi
finish
