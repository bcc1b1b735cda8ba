#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The table of node kinds of docs/networks.md is the one the code holds (src/model/node_kind.h:
# every kind's name, file fields with their defaults, tensors and what it computes, printed by
# tests/helpers/node_kinds_doc), row for row; and the network-file reader's messages list the
# kinds and fields of that table. Then made to fail on a page that lacks a kind's row and on one
# whose row gives another default.
. "$top_srcdir/tests/helpers/lib.sh"
PAGE=$top_srcdir/docs/networks.md
GEN=$top_builddir/tests/helpers/node_kinds_doc

# page_table PAGE: the table that starts with the header the generator prints.
page_table() { sed -n '/^| kind | fields (default) | tensors | computes |$/,/^$/p' "$1" | sed '/^$/d'; }

check_page() {   # check_page PAGE: prints the differences; exit 1 if any
    "$GEN" >"$TMP/code.md"
    page_table "$1" >"$TMP/page.md"
    [ -s "$TMP/page.md" ] || { echo "$1: no table of node kinds"; return 1; }
    diff "$TMP/code.md" "$TMP/page.md" >"$TMP/diff" && return 0
    cat "$TMP/diff"; return 1
}

if out=$(check_page "$PAGE"); then
    ok "docs/networks.md's table of node kinds is the code's ($(($(wc -l <"$TMP/code.md") - 2)) kinds)"
else
    bad "docs/networks.md's table of node kinds differs from src/model/node_kind.h's (< code, > page):"; echo "$out"
fi

# The reader's messages list the table's kinds and fields.
kinds=$("$GEN" | sed -n '3,$s/^| `\([a-z0-9_]*\)` |.*/\1/p' | paste -sd, - | sed 's/,/, /g')
printf '{"nodes": [{"name": "a", "kind": "nope"}]}\n' >"$TMP/k.json"
out=$("$DDPTRAIN" --model "$TMP/k.json" --print_model 2>&1)
case $out in
    *"unknown kind \"nope\" ($kinds)"*) ok "an unknown kind is refused with the table's kinds: $out" ;;
    *) bad "an unknown kind's message does not list the table's kinds ($kinds): $out" ;;
esac
printf '{"nodes": [{"name": "a", "kind": "relu", "no_such_field": true}]}\n' >"$TMP/f.json"
out=$("$DDPTRAIN" --model "$TMP/f.json" --print_model 2>&1)
for f in $("$GEN" | sed -n '3,$p' | cut -d'|' -f3 | grep -o '`[a-z_0-9]*`' | tr -d '`' | sort -u); do
    case $out in *"$f"*) ;; *) bad "the unknown field's message does not list \"$f\": $out" ;; esac
done
case $out in *'unknown field "no_such_field"'*) ok "an unknown field is refused with every field of the table: $out" ;;
    *) bad "an unknown field was not refused: $out" ;; esac

# The check can fail: a page without the blur's row...
grep -v '^| `blur` |' "$PAGE" >"$TMP/no-blur.md"
if out=$(check_page "$TMP/no-blur.md"); then bad "a page without the blur row passed"
else ok "a page without the blur row fails: $(echo "$out" | head -n 2 | tr '\n' ' ')"; fi
# ...and a page that gives a convolution's stride another default.
sed 's/^\(| `conv` | .*`stride`\) (1)/\1 (2)/' "$PAGE" >"$TMP/stride.md"
if cmp -s "$PAGE" "$TMP/stride.md"; then bad "could not alter the conv row's stride default"
elif out=$(check_page "$TMP/stride.md"); then bad "a page with another stride default passed"
else ok "a page with another stride default fails"; fi
finish
