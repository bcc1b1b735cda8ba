#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# make install into a fresh prefix, as a cluster package is installed, then make installcheck
# and make uninstall:
#   (a) the tree: the programs and ddptrain-to-torch, three manual pages, the job scripts
#       under share/ddptrain/slurm with this prefix's ddptrain filled in (and nothing else of
#       them changed), the documents under share/doc/ddptrain, the converter's Python files,
#       and the modulefile when one is asked for;
#   (b) make installcheck (tests/helpers/installcheck.sh: the installed programs train from a
#       directory outside the trees; the installed train-cpu.sbatch with 2 tasks when the local
#       Slurm cluster is up);
#   (c) make uninstall leaves no file behind.
# Exit 0 pass, 1 fail.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
# This runs inside `make check`: the make below is a new one, not a part of that make's jobs.
unset MAKEFLAGS MFLAGS MAKELEVEL
P=$TMP/prefix
M=$P/share/modulefiles
mk() { make -C "$top_builddir" --no-print-directory "$@" prefix="$P" modulefiledir="$M"; }
version=$("$DDPTRAIN" --version | sed -n '1s/^ddptrain //p')

# ---- (a) make install ----------------------------------------------------------------------
if ! mk install >"$TMP/install.out" 2>&1; then
    bad "(a) make install prefix=$P failed:"; tail -n 20 "$TMP/install.out"; finish
fi
(cd "$P" && find . -type f | sort) >"$TMP/tree"
echo "   installed under the prefix:"; sed 's/^/     | /' "$TMP/tree"
missing=""
for f in bin/ddptrain bin/ddptrain-data bin/ddptrain-plot bin/ddptrain-to-torch bin/ddptrain-diagnose \
         bin/ddptrain-predict bin/ddptrain-export \
         share/man/man1/ddptrain.1 share/man/man1/ddptrain-data.1 share/man/man1/ddptrain-plot.1 \
         share/man/man1/ddptrain-diagnose.1 share/man/man1/ddptrain-predict.1 share/man/man1/ddptrain-export.1 share/doc/ddptrain/docs/predict.md \
         share/ddptrain/slurm/train-cpu.sbatch share/ddptrain/slurm/train-cpu-multinode.sbatch \
         share/ddptrain/slurm/train-gpu.sbatch share/ddptrain/slurm/srun-interactive.sh \
         share/doc/ddptrain/README.md share/doc/ddptrain/ChangeLog share/doc/ddptrain/data-format.md \
         share/doc/ddptrain/checkpoint-layout.txt share/doc/ddptrain/COPYING \
         share/ddptrain/python/ddptrain_to_torch.py share/ddptrain/python/miniresnet_torch.py \
         share/ddptrain/python/blurpool_torch.py \
         share/ddptrain/recipes/seed.json share/ddptrain/recipes/cifar10-fast.json \
         "share/modulefiles/ddptrain/$version.lua"; do
    grep -qx "\./$f" "$TMP/tree" || missing="$missing $f"
done
[ -z "$missing" ] && ok "(a) make install: $(wc -l <"$TMP/tree") files, all expected ones" || bad "(a) not installed:$missing"
for f in "$top_srcdir"/slurm/*.sbatch "$top_srcdir"/slurm/*.sh; do
    i=$P/share/ddptrain/slurm/$(basename "$f")
    # Exactly one line differs from the source: the binary's path, now this prefix's.
    d=$(diff "$f" "$i" | grep '^[<>]')
    expect="< DDPTRAIN=\${DDPTRAIN:-ddptrain}"
    if [ "$(echo "$d" | sed -n 1p | cut -c1-${#expect})" = "$expect" ] && [ "$(echo "$d" | wc -l)" -eq 2 ] &&
       echo "$d" | sed -n 2p | grep -q "^> DDPTRAIN=\${DDPTRAIN:-$P/bin/ddptrain}" && [ -x "$i" ] && bash -n "$i"; then
        ok "(a) $(basename "$i"): DDPTRAIN=\${DDPTRAIN:-$P/bin/ddptrain}, the rest as in slurm/"
    else
        bad "(a) $i against $f:"; echo "$d"
    fi
done
# The installed job script finds the installed ddptrain with nothing set: run by bash outside
# Slurm, with a stand-in srun that drops its options and runs the command once, and PATH
# without the prefix.
mkdir -p "$TMP/fake"
printf '#!/bin/sh\nwhile [ $# -gt 0 ]; do case $1 in -*) shift ;; *) break ;; esac; done\nexec "$@"\n' >"$TMP/fake/srun"
chmod 755 "$TMP/fake/srun"
out=$(cd "$TMP" && env -u DDPTRAIN PATH="$TMP/fake:/usr/bin:/bin" bash "$P/share/ddptrain/slurm/train-cpu.sbatch" --version 2>&1)
echo "$out" | grep -qx "ddptrain $version" && ok "(a) the installed train-cpu.sbatch runs $P/bin/ddptrain with DDPTRAIN unset and the prefix not on PATH" ||
    bad "(a) the installed train-cpu.sbatch without DDPTRAIN: $out"
grep -q "The checkpoint files of ddptrain $version" "$P/share/doc/ddptrain/checkpoint-layout.txt" &&
    grep -q '/model/<name>' "$P/share/doc/ddptrain/checkpoint-layout.txt" && ! grep -q '^ \*' "$P/share/doc/ddptrain/checkpoint-layout.txt" &&
    ok "(a) checkpoint-layout.txt: the layout comment of src/ckpt/checkpoint.h" || bad "(a) checkpoint-layout.txt"
cmp -s "$top_srcdir/data/README.md" "$P/share/doc/ddptrain/data-format.md" && ok "(a) data-format.md is data/README.md" ||
    bad "(a) data-format.md differs from data/README.md"

# ---- (b) make installcheck -----------------------------------------------------------------
if mk installcheck >"$TMP/installcheck.out" 2>&1; then
    ok "(b) make installcheck:"; grep -E '^(ok|skip|FAIL)' "$TMP/installcheck.out" | sed 's/^/     | /'
else
    bad "(b) make installcheck failed:"; tail -n 30 "$TMP/installcheck.out"
fi

# ---- (c) make uninstall --------------------------------------------------------------------
if mk uninstall >"$TMP/uninstall.out" 2>&1; then
    left=$(find "$P" -type f | sed "s|^$P/||")
    [ -z "$left" ] && ok "(c) make uninstall: no file left under the prefix" || bad "(c) left after make uninstall: $left"
else
    bad "(c) make uninstall failed:"; tail -n 20 "$TMP/uninstall.out"
fi
finish
