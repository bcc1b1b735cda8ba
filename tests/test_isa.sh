#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The code paths of narrower CPUs, on whatever CPU runs the suite. oneDNN (and the kernels that
# dispatch on its effective ISA) honour ONEDNN_MAX_CPU_ISA, so a machine with AVX-512 also runs
# what an AVX2-only EPYC or an SSE4.1 node runs. For each of AVX2 and SSE41:
#  - the kernel tests (every layer kind, the small-channel sweep) on 2 threads, the sweep on 1,
#    and the grouped, depthwise and dilated convolutions (tests/test_conv);
#  - the comparison with PyTorch at width 8 and width 64;
#  - short trainings at width 4 and width 64 whose losses must match those of the machine's
#    own path (same seed, same data) to the rounding that different kernels give.
# The rest of the suite runs the machine's widest path.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
make_synth "$TMP/data" --train 256 --test 64 --shards 2
PY=$(find_python "torch, h5py, numpy") || PY=""

# The loss of every step of a short run: $1 = job dir; prints "step loss" lines.
losses() { sed -n 's/.*"step": \([0-9]*\), "loss": \([-0-9.e+]*\).*/\1 \2/p' "$1/metrics.jsonl"; }

train() {   # $1 = label, $2 = width, rest: environment assignments
    label=$1; w=$2; shift 2
    job="$TMP/job-$label-$w"
    env "$@" "$DDPTRAIN" --data_dir "$TMP/data" --job_dir "$job" --width "$w" --blocks 1 --batch_size 16 \
        --threads 1 --max_steps 4 --log_interval 1 --eval_batch_size 32 >"$job.out" 2>&1
}

for w in 4 64; do
    train native "$w" || bad "width $w on the native path: $(tail -n 2 "$TMP/job-native-$w.out")"
done

for isa in AVX2 SSE41; do
    # All kernel tests on 2 threads; the small-channel sweep alone on 1 (the crash needed one).
    for t in 2 1; do
        sweep=""; [ $t -eq 1 ] && sweep=--small-channels
        if ONEDNN_MAX_CPU_ISA=$isa OMP_NUM_THREADS=$t "$top_builddir/tests/test_ops" $sweep >"$TMP/ops.out" 2>&1; then
            ok "$isa, $t thread(s): kernel tests $sweep: $(tail -n 1 "$TMP/ops.out") [$(head -n 1 "$TMP/ops.out")]"
        else
            bad "$isa, $t thread(s): kernel tests $sweep: $(grep -m 3 -E 'FAIL|error' "$TMP/ops.out" | tr '\n' ' ')"
        fi
    done
    # The grouped, depthwise and dilated convolutions (oneDNN's kernels differ by ISA, and so
    # does depthwise.c's code), on 1, 2 and 3 threads within the test.
    if ONEDNN_MAX_CPU_ISA=$isa "$top_builddir/tests/test_conv" >"$TMP/conv.out" 2>&1; then
        ok "$isa: grouped and dilated convolutions: $(tail -n 1 "$TMP/conv.out") [$(head -n 1 "$TMP/conv.out")]"
    else
        bad "$isa: grouped and dilated convolutions: $(grep -m 3 -E 'FAIL|error' "$TMP/conv.out" | tr '\n' ' ')"
    fi

    if [ -n "$PY" ]; then
        for w in 8 64; do
            if ONEDNN_MAX_CPU_ISA=$isa "$top_builddir/tests/helpers/dump_model" "$TMP/d.h5" --width $w --blocks 2 \
                   --batch 4 --image_size 32 --seed 5 >/dev/null 2>&1 &&
               "$PY" "$top_srcdir/tests/helpers/torch_compare.py" "$TMP/d.h5" >"$TMP/cmp.out" 2>&1; then
                ok "$isa: width $w against PyTorch (logits, loss, every gradient, 3 SGD steps)"
            else
                bad "$isa: width $w against PyTorch: $(grep -m 3 FAIL "$TMP/cmp.out" | tr '\n' ' ')"
            fi
        done
    else
        echo "(no python3 with torch: the PyTorch comparison on $isa is not run)"
    fi

    for w in 4 64; do
        if train "$isa" "$w" ONEDNN_MAX_CPU_ISA=$isa; then
            losses "$TMP/job-native-$w" >"$TMP/a"; losses "$TMP/job-$isa-$w" >"$TMP/b"
            # Kernels of different ISAs sum in different orders; over 4 steps of a freshly
            # initialised net the losses stay within 1e-3 relative of each other (a wrong
            # gradient anywhere moves them by far more).
            if [ "$(wc -l <"$TMP/a")" -eq 4 ] && paste "$TMP/a" "$TMP/b" | awk '
                   { d = $2 - $4; if (d < 0) d = -d; if ($1 != $3 || d > 1e-3 * ($2 > 0 ? $2 : -$2)) bad = 1 }
                   END { exit bad }'; then
                ok "$isa: width $w trains 4 steps, losses as on the native path: $(awk '{printf "%s ", $2}' "$TMP/b")"
            else
                bad "$isa: width $w losses differ: native $(awk '{printf "%s ", $2}' "$TMP/a")/ $isa $(awk '{printf "%s ", $2}' "$TMP/b")"
            fi
        else
            bad "$isa: width $w training failed: $(tail -n 2 "$TMP/job-$isa-$w.out")"
        fi
    done
done
finish
