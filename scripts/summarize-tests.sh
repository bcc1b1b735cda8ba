#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Prints "N passed, N failed, N skipped" from automake's per-test results in build dir $1.
dir=${1:-build}
pass=0; fail=0; skip=0
for trs in $(find "$dir" -name '*.trs' 2>/dev/null); do
    r=$(sed -n 's/^:test-result: //p' "$trs" | head -1)
    case "$r" in
        PASS|XFAIL) pass=$((pass + 1));;
        SKIP) skip=$((skip + 1));;
        *) fail=$((fail + 1));;
    esac
done
echo "$pass passed, $fail failed, $skip skipped"
