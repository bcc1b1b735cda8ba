#!/bin/sh
# Checkpoint and resume: a run stopped half way (--max_steps) and resumed in the same job
# directory (--resume auto) ends with the same parameters and momentum, bit for bit, as a run
# that was never stopped; on 1 rank (stop mid-epoch, end mid-epoch; stop at an epoch boundary,
# end at one) and on 2 ranks (mpirun). A 2-rank checkpoint resumes on 1 and on 3 ranks;
# --resume PATH works; a checkpoint of another width is refused with one line naming it; a
# truncated newest checkpoint is passed over for the previous one (and the log says so); h5ls
# opens every checkpoint written.
# shellcheck disable=SC2086  # $FLAGS and $MPIRUN are word lists
# shellcheck source=tests/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/lib.sh"
mpi_leak_checks_off   # ranks started by mpirun/srun (see tests/lib.sh)
PY=$(find_python "h5py, numpy") || { echo "SKIP: no python3 with h5py and numpy"; exit "$SKIP"; }
CMP="$top_srcdir/tests/ckpt_compare.py"
export OMP_NUM_THREADS=1
# 256 training images, batch 32: 8 steps per epoch on 1 rank, 4 per rank on 2, 2 on 3.
make_synth "$TMP/data" --train 256 --test 64 --shards 2
FLAGS="--data_dir $TMP/data --width 4 --blocks 1 --threads 1 --batch_size 32 --log_interval 1"
MPIRUN="mpirun --allow-run-as-root --oversubscribe"

# train JOB_DIR NRANKS EXTRA_FLAGS... (output in JOB_DIR.out; returns ddptrain's status)
train() {
    dir=$1 np=$2; shift 2
    if [ "$np" = 1 ]; then
        timeout -k 5 60 "$DDPTRAIN" $FLAGS --job_dir "$dir" "$@" >"$dir.out" 2>&1
    else
        timeout -k 5 60 $MPIRUN -np "$np" "$DDPTRAIN" $FLAGS --job_dir "$dir" "$@" >"$dir.out" 2>&1
    fi
}
ckpt() { printf '%s/checkpoints/ckpt-%09d.h5' "$1" "$2"; }

# bitexact LABEL NRANKS HALF FULL [compare flags]: FULL steps straight vs HALF + resume.
bitexact() {
    label=$1 np=$2 half=$3 full=$4; shift 4
    s="$TMP/straight-$np-$full" r="$TMP/resumed-$np-$half-$full"
    if ! train "$s" "$np" --max_steps "$full"; then bad "$label: straight run failed: $(tail -3 "$s.out")"; return; fi
    if ! train "$r" "$np" --max_steps "$half"; then bad "$label: first half failed: $(tail -3 "$r.out")"; return; fi
    [ -s "$(ckpt "$r" "$half")" ] || { bad "$label: no checkpoint at step $half"; return; }
    mv "$r.out" "$r.first.out"
    if ! train "$r" "$np" --max_steps "$full"; then bad "$label: resumed run failed: $(tail -3 "$r.out")"; return; fi
    if ! grep -q "resume: .*ckpt-$(printf %09d "$half").h5: .*global step $half" "$r.out"; then
        bad "$label: second run did not say it resumed from step $half"; return
    fi
    if out=$("$PY" "$CMP" "$@" "$(ckpt "$s" "$full")" "$(ckpt "$r" "$full")" 2>&1); then
        ok "$label: $out"
    else
        bad "$label: $out"
    fi
}

bitexact "1 rank, 12 steps = 6 + resume 6 (stop and end mid-epoch)" 1 6 12
bitexact "1 rank, 16 steps = 8 + resume 8 (stop and end on epoch boundaries)" 1 8 16

HAVE_MPI=0
if command -v mpirun >/dev/null 2>&1; then
    if timeout -k 5 60 $MPIRUN -np 2 "$DDPTRAIN" $FLAGS --job_dir "$TMP/probe" --max_steps 1 >"$TMP/probe.out" 2>&1; then
        HAVE_MPI=1
    elif grep -q "without MPI" "$TMP/probe.out"; then
        echo "skip: ddptrain built without MPI: multi-rank cases"
    else
        bad "mpirun -np 2 ddptrain --max_steps 1 failed: $(tail -3 "$TMP/probe.out")"
    fi
else
    echo "skip: no mpirun: multi-rank cases"
fi
if [ $HAVE_MPI = 1 ]; then
    # Parameters and momentum must be identical; the running statistics of batch norm are
    # averaged over the ranks at each evaluation and checkpoint, which the stopped run does at
    # step 6 and the straight one does not: a rounding-level difference is allowed there only.
    bitexact "2 ranks, 12 steps = 6 + resume 6 (stop mid-epoch, end on a boundary)" 2 6 12 --buffer-rtol 1e-5
    src=$(ckpt "$TMP/resumed-2-6-12" 6)
    for np in 1 3; do
        d="$TMP/from2on$np"
        if train "$d" "$np" --resume "$src" --max_steps 12 && grep -q "resume: $src: .*written by 2 ranks" "$d.out" &&
           grep '"test_acc"' "$d/metrics.jsonl" | tail -1 | grep -q '"step": 12,'; then
            ok "2-rank checkpoint resumed with --resume PATH on $np rank(s): trains to step 12, final eval line"
        else
            bad "2-rank checkpoint on $np rank(s): $(tail -3 "$d.out")"
        fi
    done
fi

# --resume PATH on 1 rank from a 1-rank checkpoint gives the same result as --resume auto.
src=$(ckpt "$TMP/resumed-1-6-12" 6)
d="$TMP/bypath"
if train "$d" 1 --resume "$src" --max_steps 12 &&
   out=$("$PY" "$CMP" "$(ckpt "$d" 12)" "$(ckpt "$TMP/straight-1-12" 12)" 2>&1); then
    ok "--resume PATH into a new job dir: same final state as the straight run: $out"
else
    bad "--resume PATH: $(tail -3 "$d.out") ${out:-}"
fi

# A checkpoint of another width: refused, one line on stderr naming the file, no training.
d="$TMP/width"
timeout -k 5 60 "$DDPTRAIN" $FLAGS --width 8 --job_dir "$d" --resume "$src" --max_steps 12 >"$d.out" 2>"$d.err"
rc=$?
if [ $rc -ne 0 ] && [ "$(wc -l <"$d.err")" -eq 1 ] && grep -q "$src" "$d.err" && grep -q "width" "$d.err" &&
   ! grep -q '"loss"' "$d/metrics.jsonl" 2>/dev/null; then
    ok "width 8 run refuses a width 4 checkpoint (exit $rc): $(cat "$d.err")"
else
    bad "width mismatch: exit $rc, stderr: $(cat "$d.err")"
fi

# --resume auto passes over a truncated newest checkpoint, says so, and resumes from the one
# before; the result equals a straight run of the same length.
d="$TMP/corrupt"
cp -r "$TMP/resumed-1-6-12" "$d"
newest=$(ckpt "$d" 12)
size=$(wc -c <"$newest")
truncate -s $((size / 2)) "$newest"
if train "$d" 1 --max_steps 16 && grep -q "resume: .*ckpt-000000008.h5: .*global step 8" "$d.out"; then
    ok "truncated newest checkpoint ($size -> $((size / 2)) bytes): resumed from step 8"
else
    bad "truncated newest checkpoint: $(grep -i resume "$d.out" | head -3)"
fi
if grep -q "WARNING resume: skipping .*ckpt-000000012.h5.*falling back" "$d/logs/rank-00000.log"; then
    ok "the rank log says it fell back: $(grep -o 'skipping .*ckpt-000000012.h5: [^:]*: [^:]*' "$d/logs/rank-00000.log" | head -1)"
else
    bad "no fall-back line in the rank log"
fi
if out=$("$PY" "$CMP" "$(ckpt "$d" 16)" "$(ckpt "$TMP/straight-1-16" 16)" 2>&1); then
    ok "after the fall-back, step 16 equals the straight 16-step run: $out"
else
    bad "after the fall-back: $out"
fi

# Every checkpoint written above opens with the HDF5 tools.
if command -v h5ls >/dev/null 2>&1; then
    n=0 nbad=0
    for f in "$TMP"/*/checkpoints/ckpt-*.h5; do
        [ -e "$f" ] || continue
        n=$((n + 1))
        h5ls -r "$f" >/dev/null 2>&1 || { nbad=$((nbad + 1)); echo "h5ls -r fails on $f"; }
    done
    if [ $n -gt 5 ] && [ $nbad -eq 0 ]; then ok "h5ls -r opens all $n checkpoints"; else bad "h5ls: $nbad of $n checkpoints fail"; fi
else
    echo "skip: no h5ls"
fi
finish
