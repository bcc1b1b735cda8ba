#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# test_hostile_trees.sh - ddptrain-data import on trees a hostile or careless user makes: a FIFO
# named like an image, a dangling symbolic link, a large file that is no image, a very
# elongated image, names holding control characters, a palette index past the palette, and a
# file that becomes unreadable between the two passes (DDPTRAIN_DATA_TEST_FAIL_READ). Each is
# refused with one line naming the file (exit 1, nothing written) or skipped with --skip_bad;
# nothing hangs, memory stays bounded, and no partial dataset is left behind. An --out folder
# inside the tree is left out of it when imported again, never read as a class or as images.
# Skips (77) without python3 with PIL and numpy, or in a build without libjpeg/libpng.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "PIL, numpy") || { echo "SKIP: no python3 with PIL and numpy"; exit "$SKIP"; }
[ -x "$DDPDATA" ] || { echo "SKIP: $DDPDATA is not built"; exit "$SKIP"; }
if "$DDPDATA" import --in "$TMP/none" --out "$TMP/none-out" 2>&1 | grep -q "built without"; then
    echo "SKIP: ddptrain-data was built without libjpeg or libpng"; exit "$SKIP"
fi

# A file's lines for ok/bad, whose echo may read backslashes as escapes: doubled, so that the
# quoted names show as they were printed.
shown() { sed 's/\\/\\\\/g' "$1"; }

# expect_fail DESC PATTERN CMD...: exit 1, one line on stderr containing PATTERN (grep -F), and
# no file (shard or hidden temporary) in $TMP/fail. The command is stopped after 30 s.
expect_fail() {
    d=$1 pat=$2; shift 2
    rm -rf "$TMP/fail"
    timeout 30 "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    n=$(wc -l <"$TMP/err")
    left=$(find "$TMP/fail" -mindepth 1 2>/dev/null | wc -l)
    if [ "$rc" -eq 1 ] && [ "$n" -eq 1 ] && grep -q -F -e "$pat" "$TMP/err" && [ "$left" -eq 0 ]; then
        ok "$d: $(shown "$TMP/err")"
    else
        bad "$d (exit $rc, $n line(s), $left file(s) left; want exit 1 and one line with '$pat'): $(shown "$TMP/err")"
    fi
}

# expect_skip DESC PATTERN NBAD CMD...: exit 0, NBAD files skipped, every stderr line a skip line,
# one of them containing PATTERN (grep -F). The command is stopped after 30 s.
expect_skip() {
    d=$1 pat=$2 nbad=$3; shift 3
    timeout 30 "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    n=$(wc -l <"$TMP/err")
    if [ "$rc" -eq 0 ] && [ "$n" -eq "$nbad" ] && [ "$(grep -c ': skipped ' "$TMP/err")" -eq "$nbad" ] &&
       grep -q -F -e "$pat" "$TMP/err" && grep -q "$nbad bad files\{0,1\} skipped" "$TMP/out"; then
        ok "$d: $(shown "$TMP/err")"
    else
        bad "$d (exit $rc, $n line(s); want exit 0 and $nbad skip line(s) with '$pat'): $(shown "$TMP/err") $(tail -n 1 "$TMP/out")"
    fi
}

# A small tree: train/ and test/ of two classes, 16x16 PNG files.
"$PY" - "$TMP/base" <<'EOF' || { bad "making the tree"; finish; }
import os, sys
import numpy as np
from PIL import Image
root = sys.argv[1]
r = np.random.RandomState(1)
for split, n in (("train", 3), ("test", 2)):
    for c in ("ant", "bee"):
        os.makedirs(os.path.join(root, split, c))
        for i in range(n):
            Image.fromarray(r.randint(0, 256, size=(16, 16, 3)).astype(np.uint8)).save(os.path.join(root, split, c, "%d.png" % i))
EOF
fresh() { rm -rf "$TMP/t" && cp -r "$TMP/base" "$TMP/t"; }

echo "== a FIFO named like an image: refused unopened, never waited on"
fresh
mkfifo "$TMP/t/train/ant/x.jpg"
expect_fail "FIFO x.jpg" "t/train/ant/x.jpg: not a regular file (a FIFO)" "$DDPDATA" import --in "$TMP/t" --out "$TMP/fail"
expect_skip "FIFO x.jpg, --skip_bad" "skipped $TMP/t/train/ant/x.jpg: not a regular file (a FIFO)" 1 \
    "$DDPDATA" import --in "$TMP/t" --out "$TMP/skip1" --skip_bad

echo "== a dangling symbolic link: one line naming it, skipped with --skip_bad"
fresh
ln -s "$TMP/gone.png" "$TMP/t/test/bee/lost.png"
expect_fail "dangling link lost.png" "t/test/bee/lost.png: a symbolic link to a missing file" "$DDPDATA" import --in "$TMP/t" --out "$TMP/fail"
expect_skip "dangling link lost.png, --skip_bad" "skipped $TMP/t/test/bee/lost.png: a symbolic link to a missing file" 1 \
    "$DDPDATA" import --in "$TMP/t" --out "$TMP/skip6" --skip_bad
ln -s loop.png "$TMP/t/test/bee/loop.png"
expect_skip "a link to itself, --skip_bad" "skipped $TMP/t/test/bee/loop.png: cannot read: Too many levels of symbolic links" 2 \
    "$DDPDATA" import --in "$TMP/t" --out "$TMP/skip6b" --skip_bad

echo "== a 1 GB file that is no image: refused from its first bytes, never read whole"
# Sparse: 1 GB named, nothing stored. The import runs with 256 MiB of address space, far less
# than the file (not in a sanitizer build, whose shadow memory needs terabytes of it).
fresh
truncate -s 1G "$TMP/t/train/ant/clip.mp4"
limit="ulimit -v 262144;"
[ "${DDP_SANITIZE:-no}" = yes ] && limit=""
expect_skip "1 GB clip.mp4, --skip_bad, 256 MiB of address space" \
    "skipped $TMP/t/train/ant/clip.mp4: neither a JPEG nor a PNG file (it starts with the bytes 00 00 00 00 00 00 00 00)" 1 \
    sh -c "$limit exec \"\$0\" \"\$@\"" "$DDPDATA" import --in "$TMP/t" --out "$TMP/skip3" --skip_bad --threads 2
rm -f "$TMP/t/train/ant/clip.mp4"

echo "== very elongated images: only the centre crop computed, no 32-bit overflow"
# A 1x1,000,000 PNG resizes to 32 x 32,000,000 at --size 32, of which the centre 32 x 32 is
# kept: with 256 MiB of address space (the resize tables of every resized row took 742 MB).
# Then images that PIL can resize whole, compared with torchvision's Resize + CenterCrop; and
# a 1x600,000 image at --size 4096, whose resized length (2,457,600,000) passes 2^31.
PYH=$(find_python "PIL, h5py, numpy") || PYH=""
mkelong() {   # mkelong FILE W H: a PNG of W x H, the colours changing along both sides
    "$PY" -c "
import sys, numpy as np
from PIL import Image
w, h = int(sys.argv[2]), int(sys.argv[3])
y, x = np.mgrid[0:h, 0:w]
a = np.stack([(y * 37 + x * 11) % 256, (y * 5 + x * 71) % 256, (y // 3 + x // 2) % 256], -1).astype(np.uint8)
Image.fromarray(a).save(sys.argv[1])" "$@"
}
for shape in 1x1000000 1000000x1; do
    rm -rf "$TMP/e" && mkdir -p "$TMP/e/train/a" "$TMP/e/test/a"
    mkelong "$TMP/e/train/a/long.png" ${shape%x*} ${shape#*x} && cp "$TMP/base/test/ant/0.png" "$TMP/e/test/a/"
    t0=$(date +%s.%N)
    if timeout 60 sh -c "$limit exec \"\$0\" \"\$@\"" "$DDPDATA" import --in "$TMP/e" --out "$TMP/e-out" --size 32 --threads 1 >"$TMP/out" 2>"$TMP/err"; then
        ok "a $shape PNG at --size 32 with 256 MiB of address space, in $(elapsed "$t0") s"
    else bad "a $shape PNG at --size 32: $(cat "$TMP/err")"; fi
    rm -rf "$TMP/e-out"
done
if [ -n "$PYH" ]; then
    rm -rf "$TMP/e"
    i=0
    for shape in 3x5000 5000x2 1x900 700x1 2x64 9x10; do
        i=$((i + 1))
        mkdir -p "$TMP/e/train/c$i" "$TMP/e/test/c$i"
        mkelong "$TMP/e/train/c$i/x.png" ${shape%x*} ${shape#*x}
        cp "$TMP/base/test/ant/0.png" "$TMP/e/test/c$i/"
    done
    for s in 8 16 40; do
        "$DDPDATA" import --in "$TMP/e" --out "$TMP/e$s" --size $s >/dev/null 2>"$TMP/err" || bad "elongated at --size $s: $(cat "$TMP/err")"
        if out=$("$PYH" -c "
import sys, h5py, numpy as np
from PIL import Image
tree, out, s = sys.argv[1], sys.argv[2], int(sys.argv[3])
f = h5py.File(out + '/train-00000-of-00001.h5', 'r')
names = [n.decode() if isinstance(n, bytes) else n for n in f.attrs['class_names']]
worst = 0
for img, lab in zip(f['images'][:], f['labels'][:]):
    im = Image.open('%s/train/%s/x.png' % (tree, names[lab])).convert('RGB')
    w, h = im.size
    short, long = (w, h) if w <= h else (h, w)
    nw, nh = (s, int(s * long / short)) if w <= h else (int(s * long / short), s)
    if (nw, nh) != (w, h):
        im = im.resize((nw, nh), Image.BILINEAR)
    top, left = int(round((nh - s) / 2.0)), int(round((nw - s) / 2.0))
    ref = np.asarray(im.crop((left, top, left + s, top + s)))
    worst = max(worst, int(np.abs(ref.astype(int) - img.astype(int)).max()))
print('largest difference %d over %d images' % (worst, len(f['labels'])))
sys.exit(worst != 0)" "$TMP/e" "$TMP/e$s" $s); then ok "elongated images at --size $s, against PIL: $out"
        else bad "elongated images at --size $s against PIL: $out"; fi
    done
    rm -rf "$TMP/e" && mkdir -p "$TMP/e/train/a" "$TMP/e/test/a"
    mkelong "$TMP/e/train/a/long.png" 1 600000 && cp "$TMP/base/test/ant/0.png" "$TMP/e/test/a/"
    # One input column: every output column is the same; the crop spans about one input row,
    # so consecutive output rows differ by at most one input row's step (37, 5, 1).
    if timeout 60 "$DDPDATA" import --in "$TMP/e" --out "$TMP/e4096" --size 4096 --threads 1 >"$TMP/out" 2>"$TMP/err" &&
       out=$("$PYH" -c "
import sys, h5py, numpy as np
x = h5py.File(sys.argv[1] + '/train-00000-of-00001.h5', 'r')['images'][0].astype(int)
same, step = bool((x == x[:, :1]).all()), int(np.abs(np.diff(x, axis=0)).max())
print('columns equal: %s, largest step between rows %d' % (same, step))
sys.exit(not same or step > 37)" "$TMP/e4096"); then
        ok "a 1x600000 PNG at --size 4096 (resized length past 2^31): $out"
    else bad "a 1x600000 PNG at --size 4096: $(cat "$TMP/err") $out"; fi
    rm -rf "$TMP/e4096"
fi

echo "== a file unreadable in the writing pass: no split renamed into place, nothing left behind"
# DDPTRAIN_DATA_TEST_FAIL_READ=N fails the N-th image read of the writing pass (train first):
# 6 train images, so 7 is the test split's first, after the train shard is complete.
fresh
DDPTRAIN_DATA_TEST_FAIL_READ=7 expect_fail "the test split failing after the train split" \
    "cannot read: failure injected by DDPTRAIN_DATA_TEST_FAIL_READ=7" "$DDPDATA" import --in "$TMP/t" --out "$TMP/fail"
"$DDPDATA" import --in "$TMP/t" --out "$TMP/old" --shards 1 >/dev/null 2>&1 || bad "importing the tree"
(cd "$TMP/old" && ls -A && cksum ./*) >"$TMP/old.sum"
# --force over the old dataset, into 2 shards a split: the old shards stay, all of them
for n in 3 9; do
    DDPTRAIN_DATA_TEST_FAIL_READ=$n timeout 30 "$DDPDATA" import --in "$TMP/t" --out "$TMP/old" --force --shards 2 >"$TMP/out" 2>"$TMP/err"
    rc=$?
    (cd "$TMP/old" && ls -A && cksum ./*) >"$TMP/new.sum"
    if [ "$rc" -eq 1 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && cmp -s "$TMP/old.sum" "$TMP/new.sum"; then
        ok "--force, read $n failing: the old dataset untouched, no temporary left ($(cat "$TMP/err"))"
    else bad "--force, read $n failing (exit $rc): the folder changed: $(cat "$TMP/err") $(diff "$TMP/old.sum" "$TMP/new.sum")"; fi
done
if "$DDPDATA" import --in "$TMP/t" --out "$TMP/old" --force --shards 2 >/dev/null 2>&1 &&
   [ "$(ls -A "$TMP/old" | tr '\n' ' ')" = "test-00000-of-00002.h5 test-00001-of-00002.h5 train-00000-of-00002.h5 train-00001-of-00002.h5 " ]; then
    ok "--force without a failure: the new shards, the old ones removed"
else bad "--force without a failure: $(ls -A "$TMP/old")"; fi

echo "== control characters in names: quoted as git quotes a path, never printed raw"
fresh
bad_name=$(printf 'bad\nname\033[31m.jpg')
echo "this is text" >"$TMP/t/train/ant/$bad_name"
expect_fail "a file named with a newline and an escape" 't/train/ant/bad\nname\033[31m.jpg": neither a JPEG nor a PNG file' \
    "$DDPDATA" import --in "$TMP/t" --out "$TMP/fail"
if grep -q "$(printf '\033')" "$TMP/err"; then bad "the escape reached stderr raw"; fi
expect_skip "the same, --skip_bad" 'skipped "'"$TMP"'/t/train/ant/bad\nname\033[31m.jpg": neither a JPEG nor a PNG file' 1 \
    "$DDPDATA" import --in "$TMP/t" --out "$TMP/skip5" --skip_bad
rm "$TMP/t/train/ant/$bad_name"
mv "$TMP/t/train/bee" "$TMP/t/train/$(printf 'b\033]0;x\007ee')"
mv "$TMP/t/test/bee" "$TMP/t/test/$(printf 'b\033]0;x\007ee')"
expect_fail "a class folder named with an escape sequence" 't/train/b\033]0;x\aee": the class folder name holds a control character (0x1b at byte 1)' \
    "$DDPDATA" import --in "$TMP/t" --out "$TMP/fail"
rm -rf "$TMP/t/test/$(printf 'b\033]0;x\007ee')"
mkdir "$TMP/t/test/bee"
# A name that is not UTF-8, and one that is (printed as is)
mv "$TMP/t/train/ant/0.png" "$TMP/t/train/ant/$(printf 'caf\351.png')"
echo "text" >"$TMP/t/train/ant/$(printf 'caf\303\251.txt')"
rm -rf "$TMP/t/train/$(printf 'b\033]0;x\007ee')"
rmdir "$TMP/t/test/bee"
expect_skip "a UTF-8 name printed as is (the one that is not, a PNG, imported)" "skipped $TMP/t/train/ant/$(printf 'caf\303\251.txt'): neither" 1 \
    "$DDPDATA" import --in "$TMP/t" --out "$TMP/skip5b" --skip_bad
echo "text" >"$TMP/t/train/ant/$(printf 'caf\351.txt')"
expect_skip "a name that is not UTF-8, --skip_bad" 'skipped "'"$TMP"'/t/train/ant/caf\351.txt": neither' 2 \
    "$DDPDATA" import --in "$TMP/t" --out "$TMP/skip5c" --skip_bad

echo "== a PNG palette index past the palette: refused (PIL and libpng disagree on its colour)"
fresh
"$PY" - "$TMP/t/train/ant/pal.png" "$TMP/t/train/bee/pal4.png" <<'EOF'
import struct, sys, zlib
import numpy as np
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
def palette_png(path, depth, idx, plte, interlace=0):
    h, w = idx.shape
    per = 8 // depth
    rows = []
    for y in range(h):
        v = [0] * ((w + per - 1) // per)
        for x in range(w):
            v[x // per] |= int(idx[y, x]) << (8 - depth * (1 + x % per))
        rows.append(b"\x00" + bytes(v))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, 3, 0, 0, interlace))
                + chunk(b"PLTE", bytes(plte)) + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))
idx = np.zeros((16, 16), np.uint8)
idx[::2] = 1
idx[5, 5] = 9                      # a 4-entry palette: 9 is past it
palette_png(sys.argv[1], 8, idx, [10, 20, 30, 200, 100, 50, 1, 2, 3, 4, 5, 6])
idx[5, 5] = 3                      # 2-bit indices, 3 past a 3-entry palette
palette_png(sys.argv[2], 2, idx, [10, 20, 30, 200, 100, 50, 1, 2, 3])
EOF
expect_fail "an 8-bit index past a 4-entry palette" "t/train/ant/pal.png: a PNG palette index (9) past the palette's 4 entries" \
    "$DDPDATA" import --in "$TMP/t" --out "$TMP/fail"
rm "$TMP/t/train/ant/pal.png"
expect_fail "a 2-bit index past a 3-entry palette" "t/train/bee/pal4.png: a PNG palette index (3) past the palette's 3 entries" \
    "$DDPDATA" import --in "$TMP/t" --out "$TMP/fail"
expect_skip "the same, --skip_bad" "pal4.png: a PNG palette index (3) past the palette's 3 entries" 1 \
    "$DDPDATA" import --in "$TMP/t" --out "$TMP/skip7" --skip_bad

echo "== --out inside --in: left out of the tree on a later import, never a class or images"
# One tree of class folders (--test_fraction) holding its own output, as --out data/shards
# beside data/<class>/ would; then --out inside a class folder. Imported again with --force
# --skip_bad (once, a 3-class dataset with an empty class 'shards', exit 0): 2 classes, no
# file skipped, and a line saying the folder is left out.
for sub in shards ant/shards; do
    rm -rf "$TMP/one" && mkdir -p "$TMP/one" && cp -r "$TMP/base/train/ant" "$TMP/base/train/bee" "$TMP/one/"
    "$DDPDATA" import --in "$TMP/one" --out "$TMP/one/$sub" --test_fraction 0.34 >/dev/null 2>"$TMP/err" ||
        bad "--out $sub: the first import: $(cat "$TMP/err")"
    timeout 30 "$DDPDATA" import --in "$TMP/one" --out "$TMP/one/$sub" --test_fraction 0.34 --force --skip_bad \
        >"$TMP/out" 2>"$TMP/err"
    rc=$?
    "$DDPDATA" inspect "$TMP/one/$sub" >"$TMP/insp" 2>&1
    if [ $rc -eq 0 ] && [ ! -s "$TMP/err" ] && grep -q "images of 2 classes at 16x16, 0 bad files skipped" "$TMP/out" &&
       grep -q -F "note: $TMP/one/$sub is the --out folder: left out of the image tree" "$TMP/out" &&
       [ "$(grep -c '^ *num_classes  2$' "$TMP/insp")" -eq 2 ]; then
        ok "--out inside --in ($sub), imported again: $(grep '^note' "$TMP/out"); $(tail -n 1 "$TMP/out" | cut -d, -f1)"
    else bad "--out inside --in ($sub), imported again (exit $rc): $(shown "$TMP/err") $(grep -E '^note|^imported' "$TMP/out") $(grep num_classes "$TMP/insp" | head -n 1)"; fi
done

finish
