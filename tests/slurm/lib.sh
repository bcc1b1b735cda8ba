# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=sh
# tests/slurm/lib.sh - the local Slurm cluster for a shell test (sourced; POSIX sh).
#
#   . "$top_srcdir/tests/slurm/lib.sh"
#   slurm_up || exit $?          # 0 up (SLURM_CONF exported), 77 unavailable (skip), 1 error
#   ...                          # sbatch / srun
#   slurm_down_if_started        # call from the test's EXIT trap
#
# slurm_up brings the cluster up with cluster_up.sh unless it already runs, and sets STARTED=1
# when this test started it; slurm_down_if_started then stops it again, unless
# DDP_SLURM_KEEP=1. Environment: DDP_SLURM_STATE (see cluster_up.sh).
STATE=${DDP_SLURM_STATE:-/tmp/ddptrain-slurm.state}
STARTED=0

# Tests share the one cluster under make -j: each holds a shared lock on $STATE.lock (file
# descriptor 7) from slurm_up to its exit, and the test that started the cluster stops it only
# once it holds that lock alone. Without it a test could stop the cluster under another one's
# running job, whose next scontrol then waited for a controller that was gone.
slurm_lock() {   # slurm_lock -s|-x: take the lock shared or exclusive (at most 10 minutes)
    command -v flock >/dev/null 2>&1 || return 0
    [ "${_slurm_lock_open:-0}" = 1 ] || { exec 7>>"$STATE.lock"; _slurm_lock_open=1; }
    flock "$1" -w 600 7
}

# A cluster of the state file whose daemons run and whose node answers is up, busy or not
# (cluster_up.sh alone would count a node running another test's job as stale).
slurm_running() {
    [ -f "$STATE" ] || return 1
    # shellcheck disable=SC1090
    (
        . "$STATE"
        kill -0 "$SLURMCTLD_PID" 2>/dev/null && kill -0 "$SLURMD_PID" 2>/dev/null || exit 1
        case $(SLURM_CONF=$SLURM_CONF sinfo -h -o %t 2>/dev/null) in
            idle|mix|alloc|comp) exit 0 ;;
        esac
        exit 1
    )
}

slurm_up() {
    command -v sbatch >/dev/null 2>&1 || { echo "slurm_up: sbatch not found"; return 77; }
    slurm_lock -s
    # one test at a time finds the cluster down and starts it ($STATE.start, held meanwhile)
    if command -v flock >/dev/null 2>&1; then exec 6>>"$STATE.start"; flock -x -w 600 6; fi
    if slurm_running; then
        exec 6>&-
        # shellcheck disable=SC1090
        SLURM_CONF=$(. "$STATE"; echo "$SLURM_CONF")
        export SLURM_CONF
        return 0
    fi
    _had_state=0
    [ -f "$STATE" ] && _had_state=1
    _up_out=$(bash "${top_srcdir:-.}/tests/slurm/cluster_up.sh" 6>&- 7>&- 2>&1)   # (daemons hold no lock)
    _up_rc=$?
    exec 6>&-
    if [ $_up_rc -ne 0 ]; then
        echo "$_up_out"
        [ "${_slurm_lock_open:-0}" = 1 ] && flock -u 7   # nothing to share
        return $_up_rc
    fi
    # A state file that was there but stale is restarted too: then the test owns the cluster.
    if [ $_had_state = 0 ] || ! echo "$_up_out" | grep -q "already up"; then STARTED=1; fi
    # shellcheck disable=SC1090
    SLURM_CONF=$(. "$STATE"; echo "$SLURM_CONF")
    export SLURM_CONF
    return 0
}

slurm_down_if_started() {
    if [ "$STARTED" = 1 ] && [ "${DDP_SLURM_KEEP:-0}" != 1 ]; then
        slurm_lock -x   # every other test using the cluster has ended
        bash "${top_srcdir:-.}/tests/slurm/cluster_down.sh" >/dev/null 2>&1
        STARTED=0
    fi
}

# sbatch_wait JOBID [MAXSEC]: wait until the job leaves the queue (default 120 s; then it is
# cancelled) and print its final state (COMPLETED, FAILED, CANCELLED, TIMEOUT, ...).
sbatch_wait() {
    _id=$1 _max=${2:-120} _t0=$(date +%s) _st=""
    while :; do
        # (each query at most 15 s: scontrol retries for long when the controller is gone)
        _st=$(timeout 15 scontrol show job "$_id" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
        case $_st in
            PENDING|RUNNING|CONFIGURING|COMPLETING|REQUEUED|RESIZING|SUSPENDED|"") ;;
            *) echo "$_st"; return 0 ;;
        esac
        if [ $(($(date +%s) - _t0)) -ge "$_max" ]; then
            timeout 15 scancel "$_id" 2>/dev/null
            echo "TIMEOUT_WAITING($_st)"
            return 1
        fi
        sleep 0.2
    done
}

# ---- the multi-node cluster (multinode_up.sh) -----------------------------------------------
#   mn_up || exit $?       0 up (SLURM_CONF exported: the multi-node cluster's), 77 skip, 1 error
#   mn_down_if_started     from the EXIT trap; DDP_SLURM_KEEP=1 leaves it up as for slurm_up
# Environment: DDP_MN_STATE, DDP_MN_NODES, DDP_MN_RATE (see multinode_up.sh).
MN_STATE=${DDP_MN_STATE:-/tmp/ddptrain-mn.state}
MN_STARTED=0
mn_up() {
    command -v sbatch >/dev/null 2>&1 || { echo "mn_up: sbatch not found"; return 77; }
    _mn_out=$(bash "${top_srcdir:-.}/tests/slurm/multinode_up.sh" 2>&1)
    _mn_rc=$?
    if [ $_mn_rc -ne 0 ]; then echo "$_mn_out"; return $_mn_rc; fi
    echo "$_mn_out" | grep -q "already up" || MN_STARTED=1
    # shellcheck disable=SC1090
    SLURM_CONF=$(. "$MN_STATE"; echo "$SLURM_CONF")
    export SLURM_CONF
    echo "$_mn_out"
    return 0
}
mn_down_if_started() {
    if [ "$MN_STARTED" = 1 ] && [ "${DDP_SLURM_KEEP:-0}" != 1 ]; then
        bash "${top_srcdir:-.}/tests/slurm/multinode_down.sh" >/dev/null 2>&1
        MN_STARTED=0
    fi
}
