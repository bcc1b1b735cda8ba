#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Memcheck on the AVX2 path, where oneDNN's JIT code once wrote past its buffers: AddressSanitizer
# cannot see inside JIT-generated kernels, valgrind can. Valgrind itself has no AVX-512, so on any
# machine the run takes oneDNN's AVX2 (or narrower) kernels; ONEDNN_MAX_CPU_ISA=AVX2 says so.
#  - the small-channel sweep of the kernel tests on one thread (the case that corrupted memory);
#  - a short width-4 training, one thread, checkpoint and evaluation included;
#  - `ddptrain-data inspect` on every broken shard tests/helpers/make_bad_shards.py makes (HDF5
#    reads into our buffers there: a size taken from a crafted header once overflowed one);
#  - the shard and checkpoint inputs the fuzzers found (tests/fuzz/*/found_*), replayed: HDF5
#    1.10 read past its own heap buffers on several, which only a memory checker sees.
# Any memcheck error fails the test (leaks are not counted here: the sanitizer build checks them).
. "${top_srcdir:-.}/tests/helpers/lib.sh"
command -v valgrind >/dev/null 2>&1 || { echo "SKIP: valgrind is not installed (apt-get install valgrind)"; exit $SKIP; }
[ "${DDP_SANITIZE:-no}" = yes ] && { echo "SKIP: sanitizer build (valgrind and ASan do not mix)"; exit $SKIP; }

VG="valgrind --error-exitcode=99 --errors-for-leak-kinds=none --num-callers=30
    --suppressions=$top_srcdir/tests/helpers/valgrind.supp"
export ONEDNN_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=1

$VG --log-file="$TMP/vg-ops.%p" "$top_builddir/tests/test_ops" --small-channels >"$TMP/ops.out" 2>&1
rc=$?
if [ $rc -eq 0 ]; then
    ok "kernel sweep under memcheck: $(tail -n 1 "$TMP/ops.out"), no memcheck error"
else
    bad "kernel sweep under memcheck rc=$rc: $(grep -h -m 1 -A 6 -E 'Invalid|uninitialised|Conditional' "$TMP"/vg-ops.* | head -n 8)"
fi

make_synth "$TMP/data" --train 128 --test 64 --shards 2
$VG --log-file="$TMP/vg-train.%p" "$DDPTRAIN" --data_dir "$TMP/data" --job_dir "$TMP/job" --width 4 --blocks 1 \
    --threads 1 --batch_size 16 --max_steps 3 --eval_batch_size 32 >"$TMP/train.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ -s "$TMP/job/checkpoints/latest" ]; then
    ok "width-4 training under memcheck: 3 steps, evaluation and checkpoint, no memcheck error"
else
    bad "width-4 training under memcheck rc=$rc: $(tail -n 2 "$TMP/train.out") $(grep -h -m 1 -A 6 -E 'Invalid|uninitialised|Conditional' "$TMP"/vg-train.* | head -n 8)"
fi
PY=$(find_python "h5py, numpy") || PY=""
if [ -n "$PY" ]; then
    kinds=$("$PY" -c "import sys; sys.path.insert(0, '$top_srcdir/tests/helpers'); import make_bad_shards as m; print(' '.join(m.KINDS))")
    n=0 nbad=0 msgs=""
    for kind in $kinds; do
        [ "$kind" = no_train ] && continue   # a directory without train shards, not a broken file
        f=$("$PY" "$top_srcdir/tests/helpers/make_bad_shards.py" "$kind" "$TMP/bad_$kind") || { bad "make_bad_shards $kind"; continue; }
        $VG --log-file="$TMP/vg-inspect-$kind.%p" "$DDPDATA" inspect "$f" >"$TMP/inspect.out" 2>"$TMP/inspect.err"
        rc=$?
        n=$((n + 1))
        # exit 1 with one line: the tool refused the file and memcheck found nothing (99 if it had)
        if [ $rc -ne 1 ] || [ "$(wc -l <"$TMP/inspect.err")" -ne 1 ]; then
            nbad=$((nbad + 1))
            msgs="$msgs [$kind: rc=$rc $(head -c 300 "$TMP/inspect.err") $(grep -h -m 1 -A 6 -E 'Invalid|uninitialised|Conditional' "$TMP"/vg-inspect-"$kind".* | head -n 8)]"
        fi
    done
    if [ $nbad -eq 0 ] && [ $n -gt 10 ]; then
        ok "ddptrain-data inspect on $n broken shards under memcheck: each refused with one line, no memcheck error"
    else
        bad "inspect under memcheck: $nbad of $n:$msgs"
    fi
else
    echo "skip: no python3 with h5py to make broken shards"
fi
found=""
for t in shard checkpoint; do
    for f in "$top_srcdir/tests/fuzz/$t/"found_*; do [ -f "$f" ] && found="$found $t:$f"; done
done
n=0 nbad=0 msgs=""
for tf in $found; do
    t=${tf%%:*} f=${tf#*:}
    $VG --log-file="$TMP/vg-found.%p" "$top_builddir/tests/fuzz/replay_$t" "$f" >/dev/null 2>"$TMP/found.err"
    rc=$?
    n=$((n + 1))
    if [ $rc -ne 0 ]; then
        nbad=$((nbad + 1))
        msgs="$msgs [$t $(basename "$f"): rc=$rc $(grep -h -m 1 -A 6 -E 'Invalid|uninitialised|Conditional' "$TMP"/vg-found.* | head -n 8)]"
    fi
    rm -f "$TMP"/vg-found.*
done
if [ $n -gt 0 ] && [ $nbad -eq 0 ]; then
    ok "the $n shard and checkpoint inputs the fuzzers found, replayed under memcheck: no memcheck error"
else
    bad "fuzz findings under memcheck: $nbad of $n:$msgs"
fi
finish
