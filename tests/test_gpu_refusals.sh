#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# What a GPU rank refuses is decided in one place (src/device/gpu_refusals.h): the Backend's NULL
# operations, and a table of options. Read through tests/helpers/gpu_refusals_list with the fake
# device module loaded (tests/helpers/fake_device.h), and checked against:
#  1. backend.h: the table of operations names every function member of struct Backend, in order;
#  2. src/cuda/backend_cuda.c: the fake module leaves NULL exactly the members the CUDA backend's
#     table does not set, and both take no grouped convolution (so the fake refuses what the
#     CUDA module refuses); no option is refused for want of an operation the backend has;
#  3. docs/gpu.md's "Not yet on the GPU" list: exactly the table's options and the NULL members;
#  4. ddptrain --device cuda with each entry's example flags: exit 2, one line naming the flag,
#     no job directory; and the same flags on the CPU are not refused at start-up (--preflight).
# shellcheck disable=SC2086  # $RUN and $example are word lists
# shellcheck source=tests/helpers/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/helpers/lib.sh"
B=${top_builddir:-.}
grep -q "define HAVE_CUDA_BACKEND 1" "$B/build_config.h" || { echo "SKIP: built without the CUDA backend"; exit "$SKIP"; }
FAKE=$B/tests/helpers/fake_device
if ! DDPTRAIN_PLUGIN_DIR=$FAKE "$B/tests/helpers/gpu_refusals_list" >"$TMP/list" 2>"$TMP/list.err"; then
    bad "gpu_refusals_list: $(cat "$TMP/list.err")"
    finish
fi
words() { sort | tr '\n' ' '; }

# 1. Every member of struct Backend that is a function pointer.
awk '/^typedef struct Backend \{/{on=1} on && /^\} Backend;/{on=0} on' "$top_srcdir/src/ops/backend.h" |
    sed -n 's/.*(\*\([a-z0-9_]*\))(.*/\1/p' >"$TMP/header"
sed -n 's/^member //p' "$TMP/list" >"$TMP/members"
cmp -s "$TMP/header" "$TMP/members" && ok "the table of operations is backend.h's $(wc -l <"$TMP/members") members, in order" ||
    { bad "the table of operations differs from backend.h:"; diff "$TMP/header" "$TMP/members" | head; }

# 2. The CUDA backend's NULL members: those its table does not set to a function.
SRC="$top_srcdir/src/cuda/backend_cuda.c"
cuda_null=$(while read -r m; do
    grep -Eq "^[[:space:]]*\.$m[[:space:]]*=[[:space:]]*[A-Za-z_]" "$SRC" &&
        ! grep -Eq "^[[:space:]]*\.$m[[:space:]]*=[[:space:]]*NULL" "$SRC" || echo "$m"
done <"$TMP/header" | words)
fake_null=$(sed -n 's/^null //p' "$TMP/list" | words)
[ -n "$cuda_null" ] && [ "$cuda_null" = "$fake_null" ] &&
    ok "the fake module lacks exactly the CUDA backend's NULL operations: $(echo "$fake_null" | wc -w)" ||
    bad "NULL operations: CUDA [$cuda_null] fake [$fake_null]"
grep -Eq '^[[:space:]]*\.conv_grouped[[:space:]]*=[[:space:]]*0' "$SRC" && grep -qx "conv_grouped 0" "$TMP/list" &&
    ok "neither takes grouped convolutions" || bad "conv_grouped: $(grep conv_grouped "$TMP/list")"
sed -n 's/^refusal //p' "$TMP/list" | awk -F'\t' '$2 != "-"' | while IFS="$(printf '\t')" read -r flag op example; do
    case " $fake_null " in *" $op "*) ;; *) echo "$flag $op" ;; esac
done >"$TMP/stale"
[ ! -s "$TMP/stale" ] && ok "every option refused for an operation names a NULL one" || bad "stale: $(cat "$TMP/stale")"

# 3. docs/gpu.md's list, from "- Not yet on the GPU" to the next item of the outer list.
awk '/^- Not yet on the GPU/{on=1; print; next} on && /^- /{on=0} on' "$top_srcdir/docs/gpu.md" >"$TMP/doc"
doc_flags=$(sed -n 's/^  - //p' "$TMP/doc" | grep -o '`--[a-z_0-9]*`' | tr -d '`-' | words)
table_flags=$(sed -n 's/^refusal \([a-z_0-9]*\)\t.*/\1/p' "$TMP/list" | words)
[ "$doc_flags" = "$table_flags" ] && ok "docs/gpu.md lists the table's options: $doc_flags" ||
    bad "options: docs [$doc_flags] table [$table_flags]"
doc_ops=$(sed -n '/Operations the CUDA backend lacks/,$p' "$TMP/doc" | grep -o '`[a-z_0-9]*`' | tr -d '`' |
          grep -vx 'conv_grouped' | words)
[ "$doc_ops" = "$fake_null" ] && ok "docs/gpu.md lists the NULL operations" ||
    bad "operations: docs [$doc_ops] backend [$fake_null]"

# 4. Each entry refuses, in one line, before the job directory.
make_synth "$TMP/data" --train 256 --test 32
RUN="--data_dir $TMP/data --width 4 --blocks 1 --batch_size 16 --max_steps 1"
n=0
sed -n 's/^refusal //p' "$TMP/list" | while IFS="$(printf '\t')" read -r flag op example; do
    name=r-$flag
    DDPTRAIN_PLUGIN_DIR=$FAKE "$DDPTRAIN" $RUN --device cuda --job_dir "$TMP/$name" $example >"$TMP/$name.out" 2>"$TMP/$name.err"
    rc=$?
    if [ "$rc" -eq 2 ] && [ "$(wc -l <"$TMP/$name.err")" -eq 1 ] && grep -q -- "--$flag: " "$TMP/$name.err" &&
       [ ! -e "$TMP/$name" ]; then
        echo "ok: $example: $(cat "$TMP/$name.err")"
    else
        echo "FAIL: $example: exit $rc: $(head -3 "$TMP/$name.err")"
    fi
    if "$DDPTRAIN" $RUN --device cpu --preflight --job_dir "$TMP/$name.cpu" $example >"$TMP/$name.cpu.out" 2>&1; then
        echo "ok: $example: taken on the CPU"
    else
        echo "FAIL: $example on the CPU: $(tail -2 "$TMP/$name.cpu.out")"
    fi
done >"$TMP/runs"
cat "$TMP/runs"
FAILS=$((FAILS + $(grep -c '^FAIL' "$TMP/runs")))
finish
