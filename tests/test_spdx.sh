#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Every source file carries the license's SPDX line (COPYING holds the text) within its first 2
# lines: under src/, tests/ (the fuzz corpora, tests/fuzz/*/, are data), bench/, scripts/, man/,
# m4/, slurm/ and .ci/, every file named *.c, *.h, *.cu, *.map, *.sh, *.py, *.supp, *.m4,
# *.sbatch, *.am or *.1.in, or starting with #!; and configure.ac and Makefile.am. Each file
# without it is named. The check is then made to fail on a small tree that lacks it twice.
# Exit 0 pass, 1 fail.
# shellcheck source=tests/helpers/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/helpers/lib.sh"
TAG='SPDX-License-Identifier: BSD-3-Clause'

# spdx_check ROOT: one line per source file under ROOT without the SPDX line in its first 2
# lines, then "checked N"; exit 0 when every file has it.
spdx_check() {
    (
    cd "$1" || exit 1
    { for f in configure.ac Makefile.am; do [ -f "$f" ] && echo "$f"; done
      for d in src tests bench scripts man m4 slurm .ci; do
          [ -d "$d" ] && find "$d" -type f ! -path 'tests/fuzz/*/*'
      done; } | sort >"$TMP/list"
    n=0 rc=0
    while read -r f; do
        case $f in
            *.c|*.h|*.cu|*.map|*.sh|*.py|*.supp|*.m4|*.sbatch|*.am|*.ac|*.1.in) ;;
            *) [ "$(head -c 2 "$f")" = '#!' ] || continue ;;
        esac
        n=$((n + 1))
        head -n 2 "$f" | grep -qF "$TAG" || { echo "$f: no '$TAG' in its first 2 lines"; rc=1; }
    done <"$TMP/list"
    echo "checked $n"
    exit $rc
    )
}

out=$(spdx_check "$top_srcdir")
rc=$?
n=$(echo "$out" | sed -n 's/^checked //p')
if [ $rc -eq 0 ] && [ "${n:-0}" -ge 100 ]; then
    ok "all $n source files carry the SPDX line"
elif [ $rc -eq 0 ]; then
    bad "only ${n:-0} source files found under $top_srcdir"
else
    echo "$out" | grep -v '^checked ' | while read -r line; do echo "FAIL: $line"; done
    bad "$(echo "$out" | grep -vc '^checked ') of $n source files lack the SPDX line"
fi

# The check itself: a tree with one C file and one script without the line (the script has
# it on line 3, after the shebang and another comment), one of each with it, and a fuzz corpus
# file that is not a source.
neg=$TMP/neg
mkdir -p "$neg/src" "$neg/scripts" "$neg/tests/fuzz/cli"
printf '/* a.c - no license line */\nint a;\n' >"$neg/src/a.c"
printf '/* %s */\n/* b.c */\nint b;\n' "$TAG" >"$neg/src/b.c"
printf '#!/bin/sh\n# late - the line comes too late\n# %s\n' "$TAG" >"$neg/scripts/late"
printf '#!/bin/sh\n# %s\n' "$TAG" >"$neg/scripts/good"
printf 'x\n' >"$neg/tests/fuzz/cli/seed.sh"
out=$(spdx_check "$neg")
rc=$?
names=$(echo "$out" | sed -n 's/: no .*//p' | tr '\n' ' ' | sed 's/ $//')
[ $rc -ne 0 ] && [ "$names" = "scripts/late src/a.c" ] && echo "$out" | grep -qx 'checked 4' &&
    ok "a file without the line fails the check, by name: $names" ||
    bad "the check on a tree lacking the line: rc=$rc, $out"
finish
