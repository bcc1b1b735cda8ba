#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The documents hold together: README.md is a landing page of at most 200 lines that links
# every page of docs/; every relative link of README.md and docs/*.md names a file that exists,
# and a #section a heading of that file (GitHub's anchors); every page and picture of docs/ is
# installed and shipped (dist_docpages_DATA in Makefile.am); docs/testing.md names every test
# (a program run by a script of its name counts as that script). Then made to fail on a README
# link to a missing page and on a link to a missing section.
. "$top_srcdir/tests/helpers/lib.sh"
PY=$(find_python json) || { echo "SKIP: no python3"; exit $SKIP; }

check_docs() {   # check_docs ROOT: one line per problem, exit 1 if any
    "$PY" - "$1" <<'EOF'
import os, re, sys
root = sys.argv[1]
bad = []
def anchors(path):
    out = set()
    for line in open(path, encoding="utf-8"):
        m = re.match(r"#+ (.*)", line)
        if m:
            s = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(s)
    return out
pages = sorted(f for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
readme = os.path.join(root, "README.md")
n = sum(1 for _ in open(readme, encoding="utf-8"))
if n > 200:
    bad.append("README.md has %d lines, more than 200" % n)
text = open(readme, encoding="utf-8").read()
for p in pages:
    if "(docs/%s" % p not in text:
        bad.append("README.md does not link docs/%s" % p)
for doc in ["README.md"] + ["docs/" + p for p in pages]:
    path = os.path.join(root, doc)
    body = re.sub(r"```.*?```", "", open(path, encoding="utf-8").read(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", body):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not os.path.exists(dest):
            bad.append("%s links %s, which does not exist" % (doc, target))
        elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
            bad.append("%s links %s: no such section in %s" % (doc, target, os.path.relpath(dest, root)))
mk = open(os.path.join(root, "Makefile.am"), encoding="utf-8").read()
m = re.search(r"dist_docpages_DATA\s*=((?:.*\\\n)*.*)", mk)
listed = set(m.group(1).replace("\\\n", " ").split()) if m else set()
for f in sorted(os.listdir(os.path.join(root, "docs"))):
    if f.endswith((".md", ".png")) and "docs/" + f not in listed:
        bad.append("docs/%s is not in dist_docpages_DATA (Makefile.am): not installed or shipped" % f)
testing = open(os.path.join(root, "docs", "testing.md"), encoding="utf-8").read()
for f in sorted(os.listdir(os.path.join(root, "tests"))):
    if f.startswith("test_") and f.endswith((".c", ".sh")):
        name = f[:-2] if f.endswith(".c") else f
        if "`%s`" % name not in testing and "`%s.sh`" % name not in testing:
            bad.append("docs/testing.md does not name tests/%s" % f)
print("\n".join(bad))
sys.exit(1 if bad else 0)
EOF
}

if out=$(check_docs "$top_srcdir"); then
    ok "README.md ($(wc -l <"$top_srcdir/README.md") lines) links every page of docs/, every link and section exists, every page is installed"
else
    bad "the documents:"; echo "$out"
fi

# The check can fail: a copy whose README links a page that is not there, and a page that
# links a section that is not there.
mkdir -p "$TMP/copy"
mkdir -p "$TMP/copy/tests"
cp -r "$top_srcdir/README.md" "$top_srcdir/Makefile.am" "$top_srcdir/COPYING" "$top_srcdir/ChangeLog" \
    "$top_srcdir/docs" "$top_srcdir/data" "$TMP/copy/"
cp -r "$top_srcdir/tests/gpu" "$top_srcdir"/tests/test_* "$TMP/copy/tests/"
echo "[gone](docs/no-such-page.md)" >>"$TMP/copy/README.md"
echo "[gone](running.md#no-such-section)" >>"$TMP/copy/docs/data.md"
out=$(check_docs "$TMP/copy")
case $out in
    *"README.md links docs/no-such-page.md, which does not exist"*"docs/data.md links running.md#no-such-section: no such section"*)
        ok "a link to a missing page and one to a missing section fail" ;;
    *) bad "broken links were accepted: $out" ;;
esac
finish
