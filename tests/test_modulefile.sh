#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The Lmod modulefile, as a cluster user meets it: make install into a fresh prefix with
# modulefiledir set (what --with-modulefile does), then in a clean shell
#   module use DIR; module load ddptrain
# puts this prefix's ddptrain first on PATH (ddptrain --version runs it), its manual pages on
# MANPATH (man -w ddptrain finds this prefix's page) and DDPTRAIN_HOME at the prefix; module
# unload takes all three away again. Exit 0 pass, 1 fail, 77 skip (Lmod not installed).
. "${top_srcdir:-.}/tests/helpers/lib.sh"
lmod_init=""
for f in ${LMOD_PKG:+"$LMOD_PKG/init/bash"} /usr/share/lmod/lmod/init/bash /usr/lmod/lmod/init/bash \
         /opt/apps/lmod/lmod/init/bash; do
    [ -f "$f" ] && { lmod_init=$f; break; }
done
[ -n "$lmod_init" ] || { echo "SKIP: Lmod not found (Debian: apt-get install lmod)"; exit "$SKIP"; }
command -v bash >/dev/null 2>&1 || { echo "SKIP: no bash for Lmod's module function"; exit "$SKIP"; }

unset MAKEFLAGS MFLAGS MAKELEVEL
P=$TMP/prefix
M=$TMP/modulefiles
version=$("$DDPTRAIN" --version | sed -n '1s/^ddptrain //p')
make -C "$top_builddir" --no-print-directory install prefix="$P" modulefiledir="$M" >"$TMP/install.out" 2>&1 ||
    { bad "make install prefix=$P modulefiledir=$M failed:"; tail -n 20 "$TMP/install.out"; finish; }
[ -f "$M/ddptrain/$version.lua" ] && ok "modulefile $M/ddptrain/$version.lua installed" ||
    { bad "no modulefile ddptrain/$version.lua in $M: $(find "$M" 2>/dev/null)"; finish; }

# A clean environment: nothing of ddptrain on PATH or MANPATH, Lmod's caches in $TMP.
mkdir -p "$TMP/home"
env -i HOME="$TMP/home" PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 TERM=dumb \
    bash -c '
. "$1" || exit 1
module use "$2" || exit 1
echo "avail: $(module -t avail ddptrain 2>&1 | grep ddptrain | tr "\n" " ")"
module load ddptrain || exit 1
echo "loaded: $(module -t list 2>&1 | grep ddptrain)"
echo "which: $(command -v ddptrain)"
echo "version: $(ddptrain --version | head -n 1)"
echo "man: $(man -w ddptrain)"
echo "home: $DDPTRAIN_HOME"
module unload ddptrain || exit 1
echo "after unload: $(command -v ddptrain || echo none) home=${DDPTRAIN_HOME:-unset} manpath=$(echo "$MANPATH" | grep -c "$3")"
' lmod-test "$lmod_init" "$M" "$P" >"$TMP/lmod.out" 2>&1
rc=$?
sed 's/^/     | /' "$TMP/lmod.out"
[ $rc -eq 0 ] || bad "the module commands failed (exit $rc)"
grep -qx "avail: ddptrain/$version *" "$TMP/lmod.out" && ok "module avail: ddptrain/$version" || bad "module avail"
grep -qx "which: $P/bin/ddptrain" "$TMP/lmod.out" && ok "module load ddptrain: ddptrain is $P/bin/ddptrain" || bad "PATH after module load"
grep -qx "version: ddptrain $version" "$TMP/lmod.out" && ok "ddptrain --version: ddptrain $version" || bad "ddptrain --version after module load"
grep -qx "man: $P/share/man/man1/ddptrain.1" "$TMP/lmod.out" && ok "man -w ddptrain: $P/share/man/man1/ddptrain.1" || bad "man -w ddptrain after module load"
grep -qx "home: $P" "$TMP/lmod.out" && ok "DDPTRAIN_HOME=$P" || bad "DDPTRAIN_HOME after module load"
grep -qx "after unload: none home=unset manpath=0" "$TMP/lmod.out" && ok "module unload: PATH, MANPATH and DDPTRAIN_HOME restored" ||
    bad "module unload left something"

make -C "$top_builddir" --no-print-directory uninstall prefix="$P" modulefiledir="$M" >/dev/null 2>&1 || bad "make uninstall"
[ -z "$(find "$M" "$P" -type f 2>/dev/null)" ] || bad "files left after make uninstall: $(find "$M" "$P" -type f)"
finish
