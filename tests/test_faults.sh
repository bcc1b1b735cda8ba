#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Failures end the whole job, promptly, with a message that says what happened (2 ranks, mpirun):
#   (a) --comm_timeout 5 and rank 1 killed with SIGKILL mid-training: the job ends within
#       5 + 10 s of the kill, with a non-zero exit status; (a2) the same with rank 1 stopped
#       (SIGSTOP), which only ddptrain's own timeout can detect: rank 0 says which collective
#       did not complete and that rank 1 is to blame;
#   (b) rank 1's shard is corrupt (its header is fine, its images cannot be read, so only rank 1
#       fails): rank 1 names the file, rank 0 says rank 1 failed at start-up, every rank exits;
#   (c) the job directory cannot be created: rank 0 names it, rank 1 says rank 0 failed.
# After each case no process of the job is left.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
mpi_leak_checks_off   # ranks started by mpirun/srun (see tests/helpers/lib.sh)
PY=$(find_python h5py) || { echo "SKIP: no python3 with h5py"; exit "$SKIP"; }
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found"; exit "$SKIP"; }
TO=5
MPIRUN="mpirun --allow-run-as-root --oversubscribe -np 2"
export OMP_NUM_THREADS=1
make_synth "$TMP/data" --train 512 --test 64 --shards 2

# leftovers DIR: processes whose command line names DIR (this case's job dir), if any
leftovers() { pgrep -f -- "$1" | tr '\n' ' '; }

# ---- (a) rank 1 killed, (a2) rank 1 stopped, mid-training ----------------------------------
# signal_rank1 CASE SIGNAL: start a long run, send SIGNAL to rank 1 after its first logged step;
# sets rc (mpirun's exit status) and dt (seconds from the signal to the end of the job).
signal_rank1() {
    job="$TMP/$1" dt="" rc=""
    # shellcheck disable=SC2086
    signal_rank1_after "$1" "$job" 1 "$2" timeout -k 5 120 $MPIRUN "$DDPTRAIN" --data_dir "$TMP/data" --job_dir "$job" \
        --width 8 --blocks 1 --batch_size 16 --epochs 100 --log_interval 1 --threads 1 --comm_timeout $TO || return 1
    echo "   ($1) SIG$2 to rank 1 (pid $pid1) after $(grep -c '"loss"' "$job/metrics.jsonl") logged steps; mpirun exit $rc $dt s later"
    echo "   ($1) first message: $(grep -m 1 -E 'error|did not complete|signal' "$TMP/$1.out")"
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && within "$dt" $((TO + 10)) &&
        ok "($1) SIG$2 of rank 1: the job ended in $dt s (limit $((TO + 10)) s) with exit $rc" ||
        { bad "($1) SIG$2 of rank 1: exit $rc after $dt s (limit $((TO + 10)) s)"; tail -n 10 "$TMP/$1.out"; }
    sleep 1
    left=$(leftovers "$job")
    [ -z "$left" ] && ok "($1) no process of the job left" ||
        { bad "($1) processes left: $left"; for p in $left; do kill -KILL "$p" 2>/dev/null; done; }
}

signal_rank1 a KILL
# A stopped rank is noticed by nobody but ddptrain: rank 0's collective times out.
if signal_rank1 a2 STOP; then
    grep -q "rank 0: collective .* did not complete within $TO s; rank 1 on host $(hostname) " "$TMP/a2.out" &&
        ok "(a2) rank 0 reports the timeout: $(grep -m 1 'did not complete' "$TMP/a2.out")" ||
        bad "(a2) no 'did not complete within $TO s; rank 1 on host ...' error from rank 0"
fi

# ---- (b) rank 1's shard is corrupt ------------------------------------------------------------
cp -r "$TMP/data" "$TMP/bad"
"$PY" "$top_srcdir/tests/helpers/dp_tools.py" corrupt "$TMP/bad/train-00001-of-00002.h5" || { bad "(b) corrupting the shard"; finish; }
job="$TMP/corrupt"
t0=$(date +%s.%N)
# shellcheck disable=SC2086
timeout -k 5 60 $MPIRUN "$DDPTRAIN" --data_dir "$TMP/bad" --job_dir "$job" --width 4 --blocks 1 \
    --threads 1 --comm_timeout $TO >"$TMP/b.out" 2>&1
rc=$?
dt=$(elapsed "$t0")
[ $rc -ne 0 ] && [ $rc -ne 124 ] && within "$dt" $((TO + 10)) &&
    ok "(b) corrupt shard of rank 1: exit $rc after $dt s" || bad "(b) corrupt shard: exit $rc after $dt s"
grep -q "rank 1: .*train-00001-of-00002.h5: cannot read" "$TMP/b.out" &&
    ok "(b) rank 1: $(grep -m 1 'rank 1: ' "$TMP/b.out")" || bad "(b) no error of rank 1 naming the file"
grep -q "rank 1 failed at start-up" "$TMP/b.out" &&
    ok "(b) rank 0: $(grep -m 1 'rank 1 failed at start-up' "$TMP/b.out")" || bad "(b) rank 0 does not say rank 1 failed"
grep -q "rank 0: .*train-" "$TMP/b.out" && bad "(b) rank 0 also failed on the data: only rank 1 reads shard 1"
# rank 0 creates the job directory only after every rank passed start-up
[ ! -e "$job" ] && ok "(b) nothing written: no job dir" || bad "(b) job dir exists: $(ls -A "$job")"
[ -z "$(leftovers "$job")" ] || bad "(b) processes left: $(leftovers "$job")"
sed 's/^/     | /' "$TMP/b.out" | grep -v '^     | [-]*$' | head -n 4

# ---- (c) the job directory cannot be created ------------------------------------------------
: >"$TMP/file"
job="$TMP/file/job"      # through a regular file: fails even for root
t0=$(date +%s.%N)
# shellcheck disable=SC2086
timeout -k 5 60 $MPIRUN "$DDPTRAIN" --data_dir "$TMP/data" --job_dir "$job" --width 4 --blocks 1 \
    --threads 1 --comm_timeout $TO >"$TMP/c.out" 2>&1
rc=$?
dt=$(elapsed "$t0")
[ $rc -ne 0 ] && [ $rc -ne 124 ] && within "$dt" $((TO + 10)) &&
    ok "(c) unwritable job dir: exit $rc after $dt s" || bad "(c) unwritable job dir: exit $rc after $dt s"
grep -q "rank 0: --job_dir $job: cannot create directory: Not a directory" "$TMP/c.out" &&
    ok "(c) rank 0: $(grep -m 1 'job_dir' "$TMP/c.out")" || bad "(c) no clear error naming the job dir"
grep -q "rank 0 failed at start-up" "$TMP/c.out" &&
    ok "(c) rank 1: $(grep -m 1 'rank 0 failed at start-up' "$TMP/c.out")" || bad "(c) rank 1 does not say rank 0 failed"
[ -z "$(leftovers "$job")" ] || bad "(c) processes left: $(leftovers "$job")"
finish
