#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The source map of docs/internals.md stays true to src/: every source file of src/ (.c, .h,
# .cu, .map, in any folder) is named in the map's table, and every name in it is a file. A
# name without an extension stands for its .c, .h, .cu and .map. Then the check is made to
# fail twice: on a map without the reducer's row, and on a map that names a file that is not.
. "$top_srcdir/tests/helpers/lib.sh"
MAP=$top_srcdir/docs/internals.md
SRC=$top_srcdir/src

# check_map MAP SRC: prints one line per problem; exit 0 when there is none.
check_map() {
    # The names: the backticked words of the first column of the table under "## Source map".
    sed -n '/^## Source map/,/^## /p' "$1" | grep '^| `' | cut -d'|' -f2 |
        grep -o '`[^`]*`' | tr -d '`' | sort -u >"$TMP/names"
    [ -s "$TMP/names" ] || { echo "$1: no source map table under '## Source map'"; return 1; }
    (cd "$2" && find . -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.map' \) |
        sed 's|^\./||' | sort) >"$TMP/files"
    rc=0
    while read -r n; do
        case $n in
            *.c|*.h|*.cu|*.map) [ -f "$2/$n" ] || { echo "$1 names src/$n, which does not exist"; rc=1; } ;;
            *) found=0
               for e in c h cu map; do [ -f "$2/$n.$e" ] && found=1; done
               [ $found = 1 ] || { echo "$1 names $n, but there is no src/$n.c, .h, .cu or .map"; rc=1; } ;;
        esac
    done <"$TMP/names"
    while read -r f; do
        grep -qxF "$f" "$TMP/names" || grep -qxF "${f%.*}" "$TMP/names" ||
            { echo "src/$f is not in the source map of $1"; rc=1; }
    done <"$TMP/files"
    return $rc
}

if out=$(check_map "$MAP" "$SRC"); then
    ok "every file of src/ is in the source map, and every name in it is a file ($(wc -l <"$TMP/names") names, $(wc -l <"$TMP/files") files)"
else
    bad "the source map and src/ differ:"; echo "$out"
fi

# The check can fail: a module left out of the map...
grep -v '^| `dist/reducer` |' "$MAP" >"$TMP/without-reducer.md"
out=$(check_map "$TMP/without-reducer.md" "$SRC")
case $out in
    *"src/dist/reducer.c is not in the source map"*"src/dist/reducer.h is not in the source map"*)
        [ -z "$(echo "$out" | grep -v 'src/dist/reducer\.[ch] is not in')" ] || bad "more than the reducer missing: $out"
        ok "a map without the reducer's row fails: $(echo "$out" | head -n 1)" ;;
    *) bad "a map without the reducer's row was accepted: $out" ;;
esac
# ...and a name in the map that is no file.
sed 's/^| `base\/util` |/| `base\/util`, `no_such_module` |/' "$MAP" >"$TMP/extra.md"
out=$(check_map "$TMP/extra.md" "$SRC")
case $out in
    *"names no_such_module, but there is no src/no_such_module.c"*)
        [ "$(echo "$out" | wc -l)" -eq 1 ] || bad "more than the missing name reported: $out"
        ok "a map naming a missing file fails: $out" ;;
    *) bad "a map naming a missing file was accepted: $out" ;;
esac
finish
