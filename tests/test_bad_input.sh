#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Bad input: one clear line naming the file or flag, a non-zero exit, nothing half-written
# (in particular no job directory).
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "h5py, numpy") || PY=""
make_synth "$TMP/good" --train 128 --test 64 --shards 2

n=0
expect_fail() {   # $1 = text expected in the message, rest = ddptrain args (job dir added)
    want=$1; shift
    n=$((n + 1))
    job="$TMP/jobs/job$n"
    "$DDPTRAIN" --job_dir "$job" --width 4 --epochs 1 "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    lines=$(wc -l <"$TMP/err")
    if [ $rc -ne 0 ] && [ "$lines" -eq 1 ] && grep -q -- "$want" "$TMP/err" && [ ! -e "$job" ]; then
        ok "exit $rc: $(cat "$TMP/err")"
    else
        bad "$* -> rc=$rc, $lines stderr line(s): $(head -3 "$TMP/err"), job dir exists: $([ -e "$job" ] && echo yes || echo no) (wanted '$want')"
    fi
}

expect_fail "$TMP/nope" --data_dir "$TMP/nope"
mkdir -p "$TMP/empty"
expect_fail "$TMP/empty" --data_dir "$TMP/empty"
expect_fail "unknown option --bogus" --data_dir "$TMP/good" --bogus
expect_fail "--batch_size: 'x' is not an integer" --data_dir "$TMP/good" --batch_size x
expect_fail "num_classes" --data_dir "$TMP/good" --num_classes 5

# unwritable job directory: a path through a regular file cannot be created, even by root
: >"$TMP/file"
"$DDPTRAIN" --data_dir "$TMP/good" --job_dir "$TMP/file/job" --width 4 --epochs 1 >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ $rc -ne 0 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q -- "--job_dir $TMP/file/job" "$TMP/err"; then
    ok "unwritable job_dir: $(cat "$TMP/err")"
else
    bad "unwritable job_dir: rc=$rc $(cat "$TMP/err")"
fi
if [ "$(id -u)" -ne 0 ]; then
    mkdir -p "$TMP/ro" && chmod 0500 "$TMP/ro"
    expect_fail "--job_dir $TMP/ro/job" --data_dir "$TMP/good" --job_dir "$TMP/ro/job"
fi

# The Slurm default job directory <SLURM_SUBMIT_DIR>/runs/<SLURM_JOB_ID>: a job id of "../.."
# once put the job directory (checkpoints, and what a resume reads) outside runs/.
mkdir -p "$TMP/submit"
abs_ddptrain=$(cd "$top_builddir" && pwd)/ddptrain abs_good=$(cd "$TMP/good" && pwd)
for kv in "SLURM_JOB_ID=../../escape" "SLURM_SUBMIT_DIR=relative/dir"; do
    (cd "$TMP/submit" && env SLURM_SUBMIT_DIR="$TMP/submit" SLURM_JOB_ID=77 "$kv" \
        "$abs_ddptrain" --data_dir "$abs_good" --width 4 --epochs 1 --max_steps 1 >"$TMP/out" 2>"$TMP/err")
    rc=$?
    var=${kv%%=*}
    left=$(cd "$TMP" && find . -name escape -o -name relative -o -name runs | head -3)
    if [ $rc -ne 0 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "$var=" "$TMP/err" && [ -z "$left" ]; then
        ok "$kv: exit $rc: $(cat "$TMP/err")"
    else
        bad "$kv: rc=$rc, left: $left, stderr: $(head -3 "$TMP/err")"
    fi
done

# Launcher variables that once divided by zero (found by tests/fuzz/fuzz_env.c): one line
# naming the variable instead of SIGFPE.
for kv in "OMPI_COMM_WORLD_SIZE=0" "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_SIZE=0" "SLURM_PROCID=0 SLURM_NNODES=0"; do
    # shellcheck disable=SC2086  # $kv is a list of assignments
    env $kv "$DDPTRAIN" --data_dir "$TMP/good" --job_dir "$TMP/jobs/env" --width 4 --epochs 1 >"$TMP/out" 2>"$TMP/err"
    rc=$?
    var=$(echo "$kv" | sed 's/.* //; s/=.*//')
    if [ $rc -eq 1 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "${var%_SIZE}" "$TMP/err" && [ ! -e "$TMP/jobs/env" ]; then
        ok "$kv: exit $rc: $(cat "$TMP/err")"
    else
        bad "$kv: rc=$rc, stderr: $(head -3 "$TMP/err")"
    fi
done

if [ -z "$PY" ]; then
    echo "SKIP: no python3 with h5py to build corrupt shards"
    [ "$FAILS" -eq 0 ] && exit $SKIP
    finish
fi
for kind in truncated corrupt wrong_shape wrong_dtype bad_label missing_labels count_mismatch no_train \
        huge_count huge_count61 unwritten inf_mean nan_std escape_names attr_overrun btree_undef; do
    d="$TMP/bad_$kind"
    "$PY" "$top_srcdir/tests/helpers/make_bad_shards.py" "$kind" "$d" >/dev/null || { bad "make_bad_shards $kind"; continue; }
    # the message must name a file inside the dataset directory (or the directory itself)
    expect_fail "$d" --data_dir "$d" --batch_size 8
done

# ddptrain-data inspect on a shard whose header claims 2^62+1 samples: once the label buffer
# (n * 4 bytes) wrapped to 4 bytes and the read wrote past it.
for kw in "huge_count:at most" "huge_count61:at most" "unwritten:chunks never written" "inf_mean:'mean' must be" "escape_names:control character" \
        "attr_overrun:attribute 'mean': a dataspace of 8192 bytes overruns its message" \
        "btree_undef:group '/': a symbol table node at an undefined address"; do
    kind=${kw%%:*} want=${kw#*:}
    f=$("$PY" "$top_srcdir/tests/helpers/make_bad_shards.py" "$kind" "$TMP/inspect_$kind") || { bad "make_bad_shards $kind"; continue; }
    "$DDPDATA" inspect "$f" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ $rc -ne 0 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q -- "$f: .*$want" "$TMP/err" && ! grep -q 'internal error' "$TMP/err" \
        && [ ! -s "$TMP/out" ] && ! grep -q "$(printf '\033')" "$TMP/out" "$TMP/err"; then
        ok "inspect $kind: exit $rc: $(cat "$TMP/err")"
    else
        bad "inspect $kind: rc=$rc, stdout: $(head -c 200 "$TMP/out" | tr -d '\033'), stderr: $(head -3 "$TMP/err" | tr -d '\033')"
    fi
done
finish
