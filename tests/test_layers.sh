#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The layers of src/ hold: every include of a source file of src/ (.c, .h, .cu) names a header of
# its own folder (bare) or of a folder on a lower floor (with the folder: "model/model.h"), as the
# table under "## Layers" of docs/internals.md sets the floors; every folder of src/ is on a
# floor; the only .c files directly in src/ are programs' main()s. Then made to fail on a copy of
# the tree where a model file includes a header of run/, and on one with a .c file directly in
# src/ that is no program.
. "$top_srcdir/tests/helpers/lib.sh"
PY=$(find_python re) || { echo "SKIP: no python3"; exit $SKIP; }
DOC=$top_srcdir/docs/internals.md

check_layers() {   # check_layers DOC SRC: one line per problem; exit 1 if any
    "$PY" - "$1" "$2" <<'PYEOF'
import os, re, sys
doc, src = sys.argv[1], sys.argv[2]
floor = {}
section = False
for line in open(doc, encoding="utf-8"):
    if line.startswith("## "):
        section = line.strip() == "## Layers"
        continue
    m = re.match(r"\| (\d+) \| ([^|]*)\|", line) if section else None
    if m:
        for name in re.findall(r"`([^`]*)/`", m.group(2)):
            floor[name] = int(m.group(1))
bad = []
if not floor:
    print("%s: no table of floors under '## Layers'" % doc)
    sys.exit(1)
top = floor.get("src")
if top is None:
    bad.append("%s: no floor for `src/` (the programs' main()s)" % doc)
for d in sorted(os.listdir(src)):
    if os.path.isdir(os.path.join(src, d)) and d not in floor:
        bad.append("src/%s/ is on no floor of %s" % (d, doc))
inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
for dirpath, dirs, files in os.walk(src):
    rel = os.path.relpath(dirpath, src)
    here = "src" if rel == "." else rel.split(os.sep)[0]
    for f in sorted(files):
        if not f.endswith((".c", ".h", ".cu")):
            continue
        path = os.path.join(dirpath, f)
        text = open(path, encoding="utf-8", errors="replace").read()
        name = "src/" + os.path.relpath(path, src)
        if here == "src" and (not f.endswith(".c") or not re.search(r"^int main\(", text, re.M)):
            bad.append("%s: only programs' main()s stand directly in src/" % name)
        for h in inc.findall(text):
            if h == "build_config.h":
                continue
            if "/" not in h:
                if not os.path.exists(os.path.join(dirpath, h)):
                    bad.append("%s includes \"%s\", which is not in its folder (name the folder)" % (name, h))
                continue
            d = h.split("/")[0]
            if d == here:
                bad.append("%s includes \"%s\" by its folder: within a folder, include bare" % (name, h))
            elif d not in floor or not os.path.exists(os.path.join(src, h)):
                bad.append("%s includes \"%s\", which is no header of a folder of src/" % (name, h))
            elif here in floor and floor[d] >= floor[here]:
                bad.append("%s (floor %d) includes \"%s\" (%s/, floor %d): an include may only go down" %
                           (name, floor[here], h, d, floor[d]))
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
PYEOF
}

if out=$(check_layers "$DOC" "$top_srcdir/src"); then
    ok "every include of src/ goes down a floor or stays in its folder ($(grep -c '^| [0-9]' "$DOC") floors)"
else
    bad "an include runs up or sideways:"; echo "$out"
fi

# The check can fail: a model file that includes the run layer...
cp -r "$top_srcdir/src" "$TMP/src"
printf '#include "run/learner.h"\n' >>"$TMP/src/model/optim.c"
out=$(check_layers "$DOC" "$TMP/src")
case $out in
    *'src/model/optim.c (floor '*') includes "run/learner.h" (run/, floor '*'): an include may only go down'*)
        [ "$(echo "$out" | wc -l)" -eq 1 ] || bad "more than the planted include reported: $out"
        ok "a model file that includes run/learner.h fails: $out" ;;
    *) bad "a model file that includes run/learner.h passed: $out" ;;
esac
# ...and a .c file directly in src/ that is no program.
cp "$top_srcdir/src/model/optim.c" "$TMP/src/optim.c"
out=$(check_layers "$DOC" "$TMP/src")
case $out in
    *"src/optim.c: only programs' main()s stand directly in src/"*) ok "a module directly in src/ fails" ;;
    *) bad "a module directly in src/ passed: $out" ;;
esac
finish
