#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The manual pages built from the option table and the programs' --help, and --version:
#   (a) every option `ddptrain --help` lists (the option table) is in ddptrain(1) with its
#       default, booleans with their --no- form;
#   (b) every command of ddptrain-data and every flag of its --help is in ddptrain-data(1);
#   (c) the pages render without warnings (man, groff) and carry the program's version;
#   (d) ddptrain --version names the version, the backends and each library configure found.
# Exit 0 pass, 1 fail.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
MAN=$top_builddir/man

# Roff to plain words: \- is -, font changes dropped.
plain() { sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\&//g' -e 's/\\e/\\/g' "$1"; }

for p in ddptrain ddptrain-data ddptrain-plot ddptrain-diagnose ddptrain-predict ddptrain-export; do
    [ -s "$MAN/$p.1" ] || { bad "$MAN/$p.1 was not built"; finish; }
done
plain "$MAN/ddptrain.1" >"$TMP/ddptrain.txt"
plain "$MAN/ddptrain-data.1" >"$TMP/data.txt"

# ---- (a) ddptrain(1) against the option table ----------------------------------------------
"$DDPTRAIN" --help >"$TMP/help" || bad "ddptrain --help failed"
n=0; missing=""
while read -r name rest; do
    n=$((n + 1))
    def=$(echo "$rest" | sed -n 's/.*\[\(.*\)\]$/\1/p')
    [ "$def" = '""' ] && def='"" (empty)'
    grep -q -- "^--$name\( \|,\|$\)" "$TMP/ddptrain.txt" || { missing="$missing --$name"; continue; }
    # The default is in the paragraph that follows the option's heading.
    sed -n "/^--$name\( \|,\|$\)/,/^\.TP/p" "$TMP/ddptrain.txt" | grep -qF "Default: $def" ||
        missing="$missing --$name(default $def)"
    case $rest in
        *", --no-$name "*) grep -q -- "^--$name, --no-$name$" "$TMP/ddptrain.txt" || missing="$missing --no-$name" ;;
    esac
done <<EOT
$(sed -n 's/^  --\([a-z0-9_]*\)\(.*\)/\1 \2/p' "$TMP/help" | grep -v '^help \|^version ')
EOT
[ "$n" -ge 30 ] || bad "(a) only $n options read from ddptrain --help"
[ -z "$missing" ] && ok "(a) all $n options of the table are in ddptrain(1), with their defaults" ||
    bad "(a) missing from ddptrain(1):$missing"
for s in "EXIT STATUS" ENVIRONMENT FILES EXAMPLES; do
    grep -q "^\.SH $s" "$MAN/ddptrain.1" || bad "(a) ddptrain(1) has no $s section"
done
for v in SLURM_JOB_ID PMIX_RANK RANK WORLD_SIZE LOCAL_RANK OMP_NUM_THREADS CUDA_VISIBLE_DEVICES ONEDNN_MAX_CPU_ISA; do
    grep -q "$v" "$TMP/ddptrain.txt" || bad "(a) ddptrain(1) does not mention $v"
done

# ---- (b) ddptrain-data(1) against ddptrain-data's help -------------------------------------
cmds=$("$DDPDATA" --help | sed -n '/^commands:/,/^$/s/^  \([a-z0-9]*\) .*/\1/p')
nflags=0; missing=""
for c in $cmds; do
    grep -q "^\.SS $c$" "$MAN/ddptrain-data.1" || missing="$missing $c"
    for f in $("$DDPDATA" "$c" --help | grep -o -- '--[a-z][a-z0-9_-]*' | sort -u); do
        nflags=$((nflags + 1))
        grep -q -- "$f" "$TMP/data.txt" || missing="$missing $c:$f"
    done
done
[ -n "$cmds" ] && [ -z "$missing" ] && ok "(b) ddptrain-data(1) has the commands $(echo $cmds) and their $nflags flags" ||
    bad "(b) missing from ddptrain-data(1):$missing (commands: $cmds)"

# ---- (c) rendering and version -------------------------------------------------------------
version=$("$DDPTRAIN" --version | sed -n '1s/^ddptrain //p')
for p in ddptrain ddptrain-data ddptrain-plot ddptrain-diagnose ddptrain-predict ddptrain-export; do
    grep -q "^\.TH .*\"ddptrain $version\"" "$MAN/$p.1" || bad "(c) $p.1: .TH does not name ddptrain $version"
    if command -v groff >/dev/null 2>&1; then
        # All warnings but 'break': a long installation path, kept whole, may overrun a line.
        w=$(groff -man -ww -Wbreak -z "$MAN/$p.1" 2>&1)
        [ -z "$w" ] || bad "(c) groff warns about $p.1: $w"
    fi
    if command -v man >/dev/null 2>&1; then
        MANWIDTH=100 man -l "$MAN/$p.1" >"$TMP/$p.rendered" 2>"$TMP/$p.err"
        grep -v "cannot adjust line\|can't break line" "$TMP/$p.err" >"$TMP/$p.err2"
        grep -q "^NAME" "$TMP/$p.rendered" && [ ! -s "$TMP/$p.err2" ] || bad "(c) man -l $p.1: $(cat "$TMP/$p.err2")"
    fi
done
[ "$FAILS" -eq 0 ] && ok "(c) the pages render without warnings and name version $version"

# ---- (d) --version -------------------------------------------------------------------------
"$DDPTRAIN" --version >"$TMP/version" 2>&1 || bad "(d) ddptrain --version failed"
cfg=$top_builddir/build_config.h
check_lib() {   # NAME HAVE_MACRO
    if grep -q "^#define $2 1" "$cfg"; then
        grep -q "^$1: .*[0-9]\.[0-9]" "$TMP/version" || bad "(d) --version: no $1 version: $(grep "^$1" "$TMP/version")"
    else
        grep -q "^$1: not built" "$TMP/version" || bad "(d) --version: $1 not configured, but: $(grep "^$1" "$TMP/version")"
    fi
}
grep -q '^HDF5: [0-9]*\.[0-9]*\.[0-9]*$' "$TMP/version" || bad "(d) --version: no HDF5 version"
check_lib MPI HAVE_MPI
check_lib PMIx HAVE_PMIX
check_lib oneDNN HAVE_DNNL
grep -q '^backend cpu: ' "$TMP/version" && grep -q '^backend cuda: ' "$TMP/version" || bad "(d) --version: no backend lines"
if grep -q "^#define HAVE_CUDA_BACKEND 1" "$cfg"; then
    grep -q '^CUDA: [0-9][0-9.]*, cuDNN: [0-9][0-9.]*, NCCL: ' "$TMP/version" || bad "(d) --version: no CUDA/cuDNN versions"
else
    grep -q '^CUDA, cuDNN, NCCL: not built' "$TMP/version" || bad "(d) --version: CUDA not configured, but: $(grep '^CUDA' "$TMP/version")"
fi
grep -q "^#define PACKAGE_VERSION \"$version\"" "$cfg" && [ -n "$version" ] ||
    bad "(d) --version says '$version', configure '$(grep PACKAGE_VERSION "$cfg")'"
[ "$FAILS" -eq 0 ] && { ok "(d) ddptrain --version:"; sed 's/^/     | /' "$TMP/version"; }
finish
