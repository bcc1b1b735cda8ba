#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# test_hostile_trees.sh - ddptrain-data import on trees a hostile or careless user makes: a FIFO
# named like an image, a dangling symbolic link, a large file that is no image, a very
# elongated image, names holding control characters, a palette index past the palette, and a
# file that becomes unreadable between the two passes (DDPTRAIN_DATA_TEST_FAIL_READ). Each is
# refused with one line naming the file (exit 1, nothing written) or skipped with --skip_bad;
# nothing hangs, memory stays bounded, and no partial dataset is left behind.
# Skips (77) without python3 with PIL and numpy, or in a build without libjpeg/libpng.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "PIL, numpy") || { echo "SKIP: no python3 with PIL and numpy"; exit "$SKIP"; }
[ -x "$DDPDATA" ] || { echo "SKIP: $DDPDATA is not built"; exit "$SKIP"; }
if "$DDPDATA" import --in "$TMP/none" --out "$TMP/none-out" 2>&1 | grep -q "built without"; then
    echo "SKIP: ddptrain-data was built without libjpeg or libpng"; exit "$SKIP"
fi

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
        ok "$d: $(cat "$TMP/err")"
    else
        bad "$d (exit $rc, $n line(s), $left file(s) left; want exit 1 and one line with '$pat'): $(cat "$TMP/err")"
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
        ok "$d: $(cat "$TMP/err")"
    else
        bad "$d (exit $rc, $n line(s); want exit 0 and $nbad skip line(s) with '$pat'): $(cat "$TMP/err") $(tail -n 1 "$TMP/out")"
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

finish
