#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ddptrain under the launchers a cluster user has, on the local Slurm cluster
# (tests/slurm/cluster_up.sh; started and stopped again here when none is up):
#   (a) sbatch slurm/train-cpu.sbatch with 2 tasks: COMPLETED, the default job directory
#       runs/<jobid> of the submit directory with both rank logs and metrics.jsonl, and only
#       rank 0 writes to the job's output file;
#   (b) srun --mpi=pmix -n 2 ddptrain: exit 0, PMIx bootstrap, 2 ranks;
#   (c) mpirun -np 2 ddptrain with no SLURM_* variables in the environment;
#   (d) srun --mpi=none -n 2 ddptrain: refused with "did you mean srun --mpi=pmix?".
# Exit 0 pass, 1 fail, 77 skip (no Slurm). DDP_SLURM_KEEP=1 leaves a cluster we started up.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
mpi_leak_checks_off   # ranks started by mpirun/srun (see tests/helpers/lib.sh)
. "$top_srcdir/tests/slurm/lib.sh"
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() { slurm_down_if_started; rm -rf "$TMP"; }
trap cleanup EXIT

up_rc=0
slurm_up >"$TMP/up" 2>&1 || up_rc=$?
if [ $up_rc -eq 77 ]; then echo "SKIP: no local Slurm cluster: $(tail -n 1 "$TMP/up")"; exit "$SKIP"; fi
[ $up_rc -eq 0 ] || { bad "cluster_up.sh failed: $(cat "$TMP/up")"; finish; }
ok "local Slurm cluster up (started by this test: $STARTED)"

# srun starts the ranks in their own cwd: absolute paths
BIN=$(cd "$(dirname "$DDPTRAIN")" && pwd)/$(basename "$DDPTRAIN")
SBATCH_SCRIPT=$(cd "$top_srcdir/slurm" && pwd)/train-cpu.sbatch
make_synth "$TMP/data" --train 512 --test 64 --shards 2
ARGS="--data_dir $TMP/data --width 4 --blocks 1 --batch_size 32 --max_steps 6 --log_interval 2"

# ---- (a) sbatch -----------------------------------------------------------------------------
mkdir -p "$TMP/submit"
# shellcheck disable=SC2086
jid=$(cd "$TMP/submit" && timeout 30 sbatch --parsable -n 2 -c 1 -t 5 --output=slurm-%j.out \
      --export=ALL,DDPTRAIN="$BIN" "$SBATCH_SCRIPT" $ARGS)
if [ -z "$jid" ]; then
    bad "(a) sbatch did not submit"
else
    t0=$(date +%s)
    st=$(sbatch_wait "$jid" 90)
    echo "   (a) job $jid: $st after $(($(date +%s) - t0)) s"
    job="$TMP/submit/runs/$jid"
    out="$TMP/submit/slurm-$jid.out"
    [ "$st" = COMPLETED ] && ok "(a) sbatch train-cpu.sbatch -n 2: job $jid COMPLETED" ||
        { bad "(a) job $jid ended $st"; tail -n 20 "$out"; }
    for r in 0 1; do
        log="$job/logs/rank-0000$r.log"
        grep -q "\[rank $r/2 .*bootstrap: pmix, rank $r/2" "$log" && grep -q "\[rank $r/2 .*done: 6 steps" "$log" &&
            ok "(a) $log: rank $r of 2, pmix, done" || bad "(a) rank $r log $log"
    done
    n=$(grep -c '"loss"' "$job/metrics.jsonl")
    [ "$n" -eq 3 ] && grep -q '"test_acc"' "$job/metrics.jsonl" && ok "(a) metrics.jsonl: $n log lines and the evaluation" ||
        bad "(a) metrics.jsonl: $n log lines"
    grep -q "job dir .*runs/$jid\$" "$out" && ok "(a) default job dir under Slurm: <submit dir>/runs/$jid" ||
        bad "(a) job dir line: $(grep 'job dir' "$out")"
    # rank 0 prints its INFO lines to stdout (once each); the other ranks print nothing there
    steps_out=$(grep -c '^epoch [0-9]* step [0-9]*/6 ' "$out")
    if grep -q 'rank 1/2' "$out" || [ "$steps_out" -ne 3 ] || [ "$(grep -c '^done: ' "$out")" -ne 1 ] ||
       [ "$(grep -c '^bootstrap: ' "$out")" -ne 1 ]; then
        bad "(a) the output file has lines from other ranks than 0:"; sed 's/^/     | /' "$out"
    else
        ok "(a) only rank 0 writes to slurm-$jid.out ($(wc -l <"$out") lines, 'rank 1/2' nowhere)"
    fi
fi

# ---- (b) srun --mpi=pmix --------------------------------------------------------------------
# shellcheck disable=SC2086
OMP_NUM_THREADS=1 timeout -k 5 90 srun --mpi=pmix -n 2 -t 2 "$BIN" --job_dir "$TMP/srun" $ARGS >"$TMP/b.out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q '^bootstrap: pmix, rank 0/2' "$TMP/b.out" && grep -q '^done: 6 steps' "$TMP/b.out" &&
    grep -q "bootstrap: pmix, rank 1/2" "$TMP/srun/logs/rank-00001.log" &&
    ok "(b) srun --mpi=pmix -n 2: exit 0, pmix bootstrap, 2 ranks" ||
    { bad "(b) srun --mpi=pmix -n 2: exit $rc"; tail -n 15 "$TMP/b.out"; }

# ---- (c) mpirun without Slurm ---------------------------------------------------------------
if command -v mpirun >/dev/null 2>&1; then
    (
        for v in $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
        # shellcheck disable=SC2086
        OMP_NUM_THREADS=1 timeout -k 5 90 mpirun --allow-run-as-root --oversubscribe -np 2 \
            "$BIN" --job_dir "$TMP/mpirun" $ARGS >"$TMP/c.out" 2>&1
    )
    rc=$?
    [ $rc -eq 0 ] && grep -q '^bootstrap: [a-z-]*, rank 0/2' "$TMP/c.out" && grep -q '^done: 6 steps' "$TMP/c.out" &&
        grep -q "rank 1/2" "$TMP/mpirun/logs/rank-00001.log" &&
        ok "(c) mpirun -np 2 without SLURM_* variables: exit 0, $(grep '^bootstrap:' "$TMP/c.out")" ||
        { bad "(c) mpirun -np 2: exit $rc"; tail -n 15 "$TMP/c.out"; }
else
    echo "SKIP: (c) mpirun not found"
fi

# ---- (d) srun --mpi=none --------------------------------------------------------------------
t0=$(date +%s)
# shellcheck disable=SC2086
OMP_NUM_THREADS=1 timeout -k 5 60 srun --mpi=none -n 2 -t 2 "$BIN" --job_dir "$TMP/none" $ARGS >"$TMP/d.out" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q 'did you mean srun --mpi=pmix?' "$TMP/d.out" &&
    ok "(d) srun --mpi=none -n 2: exit $rc after $(($(date +%s) - t0)) s: $(grep -m 1 'did you mean' "$TMP/d.out")" ||
    { bad "(d) srun --mpi=none -n 2: exit $rc"; tail -n 15 "$TMP/d.out"; }
finish
