#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The fuzz corpora (tests/fuzz/<target>/: the seeds, and every input a fuzzer found that
# crashed or hung once) replayed through each target with the ordinary build: any crash, hang
# or sanitizer report (in a sanitizer build) fails. `make fuzz` is the search itself.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
for t in shard checkpoint cli env rendezvous config_file image netfile init_from; do
    prog="$top_builddir/tests/fuzz/replay_$t"
    n=$(ls "$top_srcdir/tests/fuzz/$t" | wc -l)
    if timeout 300 "$prog" "$top_srcdir/tests/fuzz/$t" >"$TMP/out" 2>"$TMP/err" && grep -q "replayed $n input" "$TMP/out"; then
        ok "fuzz_$t: $(cat "$TMP/out")"
    else
        bad "fuzz_$t: $(tail -n 1 "$TMP/out") $(grep -v '^replay: ' "$TMP/err" | head -n 5) (last input: $(grep '^replay: ' "$TMP/err" | tail -n 1))"
    fi
done
finish
