#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Preemption under Slurm, end to end: a 2-task job submitted with slurm/train-cpu.sbatch gets
# SIGUSR2 (scancel --signal=USR2: delivered to the job's tasks, not to the batch shell) in the
# middle of an epoch; ddptrain checkpoints at the next step boundary and exits 3; the script
# requeues the job; the second run resumes from that checkpoint, every rank from its own
# batch-norm running statistics, and completes (COMPLETED, Restarts=1). Its final checkpoint
# equals, bit for bit, that of the same training run without interruption (mpirun -np 2, or
# srun when there is no mpirun): every dataset but /config (parameters, batch-norm buffers,
# momentum, train state with the per-rank running statistics) and every attribute
# (tests/helpers/ckpt_compare.py --all).
#
# Uses the local test cluster (tests/slurm/lib.sh): started when none is up and stopped again
# at the end unless DDP_SLURM_KEEP=1. Exit 0 pass, 1 fail, 77 skip.
# shellcheck disable=SC2015  # A && ok || bad: ok never fails
# Run by `sh` (make check uses $(SHELL)): continue under bash.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
# shellcheck source=tests/helpers/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/helpers/lib.sh"
mpi_leak_checks_off   # ranks started by mpirun/srun (see tests/helpers/lib.sh)
set -u
PY=$(find_python "h5py, numpy") || { echo "SKIP: no python3 with h5py and numpy"; exit "$SKIP"; }
command -v sbatch >/dev/null 2>&1 || { echo "SKIP: no sbatch (slurm-wlm)"; exit "$SKIP"; }
DDPTRAIN_ABS=$(cd "$(dirname "$DDPTRAIN")" && pwd)/$(basename "$DDPTRAIN")
SBATCH_SCRIPT="$top_srcdir/slurm/train-cpu.sbatch"
CMP="$top_srcdir/tests/helpers/ckpt_compare.py"
# shellcheck source=tests/slurm/lib.sh disable=SC1091
. "$top_srcdir/tests/slurm/lib.sh"

J=""
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
    [ -n "$J" ] && scancel "$J" 2>/dev/null
    slurm_down_if_started
    rm -rf "$TMP"
}
trap cleanup EXIT
up_rc=0
slurm_up >"$TMP/up" 2>&1 || up_rc=$?   # not in $(...): it sets STARTED and SLURM_CONF
if [ $up_rc = 77 ]; then echo "SKIP: local Slurm cluster unavailable: $(tail -n 1 "$TMP/up")"; exit "$SKIP"; fi
[ $up_rc = 0 ] || { echo "FAIL: cannot bring up the local Slurm cluster: $(cat "$TMP/up")"; exit 1; }

# 2 ranks x 48 steps per epoch, 2 epochs: roughly 0.1 s per step on a small machine. The
# signal is sent once a few steps are logged, well before the end of the first epoch.
make_synth "$TMP/data" --train 3072 --test 256 --shards 2
FLAGS=(--data_dir "$TMP/data" --width 16 --blocks 1 --threads 1 --batch_size 32 --epochs 2 --log_interval 1)
export OMP_NUM_THREADS=1
job="$TMP/job"
ref="$TMP/ref"
state() { squeue -h -j "$J" -o %T 2>/dev/null; }
jobfield() { scontrol show job "$J" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$1=//p" | head -1; }
laststep() { sed -n 's/.*"step": \([0-9]*\), "loss".*/\1/p' "$job/metrics.jsonl" 2>/dev/null | tail -1; }

J=$(sbatch --parsable -n 2 -c 1 -t 10 -D "$TMP" -o "$TMP/slurm-%j.out" \
        --export=ALL,DDPTRAIN="$DDPTRAIN_ABS" "$SBATCH_SCRIPT" "${FLAGS[@]}" --job_dir "$job")
[ -n "$J" ] || { bad "sbatch failed"; finish; }
ok "submitted job $J (slurm/train-cpu.sbatch, 2 tasks)"
out="$TMP/slurm-$J.out"

# Wait for a few logged steps (max 60 s), then signal the tasks.
t0=$(date +%s)
until [ "$(laststep)" -ge 3 ] 2>/dev/null; do
    if [ $(($(date +%s) - t0)) -gt 60 ] || [ -z "$(state)" ]; then
        bad "job $J did not log 3 steps (state '$(state)'): $(tail -5 "$out" 2>/dev/null)"; finish
    fi
    sleep 0.2
done
at=$(laststep)
scancel --signal=USR2 "$J" && ok "SIGUSR2 sent to the tasks of job $J after step $at"

# The job requeues itself: wait for PENDING, then let it start at once (not 121 s later).
t0=$(date +%s) st=""
while :; do
    st=$(state)
    [ "$st" = PENDING ] && break
    if [ $(($(date +%s) - t0)) -gt 60 ] || [ -z "$st" ]; then
        bad "job $J not requeued (state '$st'): $(tail -5 "$out")"
        # What the ranks said before they stopped, so that a failure here can be diagnosed.
        for f in "$job"/logs/rank-*.log; do [ -f "$f" ] && { echo "---- $f"; tail -n 8 "$f"; }; done
        echo "---- $out"; cat "$out"
        finish
    fi
    sleep 0.2
done
# Not in the same second as the requeue: slurmctld revokes the first run's credential with a
# one-second resolution, and a restart within that second is killed ("Job credential revoked").
sleep 2
scontrol update JobId="$J" StartTime=now
ok "job requeued (PENDING, Restarts=$(jobfield Restarts)); StartTime=now"

# Wait for the end (max 90 s).
t0=$(date +%s)
while [ -n "$(state)" ]; do
    [ $(($(date +%s) - t0)) -gt 90 ] && { bad "job $J still $(state) after 90 s: $(tail -5 "$out")"; finish; }
    sleep 0.5
done
final=$(jobfield JobState) restarts=$(jobfield Restarts) exitc=$(jobfield ExitCode)
[ "$final" = COMPLETED ] && [ "$restarts" = 1 ] && [ "$exitc" = 0:0 ] &&
    ok "job $J: JobState=$final Restarts=$restarts ExitCode=$exitc" ||
    bad "job $J: JobState=$final Restarts=$restarts ExitCode=$exitc: $(tail -5 "$out")"

# What the two runs said.
pre=$(grep -m1 "preemption: signal received" "$out")
pstep=$(echo "$pre" | sed -n 's/.*checkpointing at epoch \([0-9]*\) step \([0-9]*\) .*/\2/p')
pepoch=$(echo "$pre" | sed -n 's/.*checkpointing at epoch \([0-9]*\) step.*/\1/p')
if [ -n "$pstep" ] && echo "$pre" | grep -q "User defined signal 2"; then
    ok "first run: '${pre%%;*}' at epoch $pepoch, global step $pstep"
else
    bad "no preemption line in the job output: $(tail -5 "$out")"; finish
fi
# 48 steps per epoch: a step that is not a multiple of 48 is in the middle of an epoch.
[ $((pstep % 48)) -ne 0 ] && ok "preempted mid-epoch (step $((pstep % 48)) of 48 in epoch $pepoch)" ||
    bad "preempted at an epoch boundary (step $pstep)"
grep -q "requeueing job $J" "$out" && ok "the sbatch script saw exit status 3 and requeued" ||
    bad "no requeue line in $out"
resume=$(grep -m1 "^resume: " "$out")
echo "$resume" | grep -q "ckpt-$(printf %09d "$pstep").h5: .*global step $pstep (written by 2 ranks)" &&
    ok "second run: $resume" || bad "second run did not resume from step $pstep: '$resume'"
grep -q "^resume: batch norm: every rank continues from its own running statistics" "$out" &&
    ok "second run: every rank continues from its own running statistics" ||
    bad "second run: no 'every rank continues from its own running statistics' line: $(grep '^resume' "$out")"
grep -q "restart 1" "$out" && ok "second run is restart 1 (SLURM_RESTART_COUNT)" || bad "no 'restart 1' in $out"
grep -q "^done: 96 steps" "$out" && ok "second run completed: $(grep '^done:' "$out")" || bad "no 'done: 96 steps' line"

# The same training without interruption.
if command -v mpirun >/dev/null 2>&1; then
    timeout -k 5 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$DDPTRAIN" "${FLAGS[@]}" --job_dir "$ref" >"$ref.out" 2>&1
else
    timeout -k 5 120 srun -t 5 -n 2 --mpi=pmix "$DDPTRAIN" "${FLAGS[@]}" --job_dir "$ref" >"$ref.out" 2>&1
fi || { bad "uninterrupted run failed: $(tail -3 "$ref.out")"; finish; }
# The preempted run averaged the running statistics over the ranks once more than the other
# (for its checkpoint at step $pstep), into a copy: no rank's own changed, so everything is
# bit for bit, running statistics included.
a="$job/checkpoints/ckpt-000000096.h5" b="$ref/checkpoints/ckpt-000000096.h5"
if cmp=$("$PY" "$CMP" --all "$a" "$b" 2>&1); then
    ok "preempted + requeued run = uninterrupted run at step 96: $cmp"
else
    bad "final state differs from the uninterrupted run: $cmp"
fi
finish
