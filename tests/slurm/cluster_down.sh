#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# cluster_down.sh - stop what cluster_up.sh started: cancel the jobs, then stop only the
# processes listed in the state file. Idempotent: without a state file there is nothing to do.
# Environment: DDP_SLURM_STATE as for cluster_up.sh.
set -u
STATE=${DDP_SLURM_STATE:-/tmp/ddptrain-slurm.state}
[ -f "$STATE" ] || { echo "cluster_down: no state file $STATE: nothing to stop"; exit 0; }
MUNGED_PID="" SLURMCTLD_PID="" SLURMD_PID="" SLURMD_START="" SLURM_CONF=""
# shellcheck disable=SC1090
. "$STATE"
export SLURM_CONF

alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ]; }

# 1. Cancel every job while the controller is up and let them drain (max 40 s).
if alive "$SLURMCTLD_PID" slurmctld; then
  jobs=$(squeue -h -o %i 2>/dev/null || true)
  # shellcheck disable=SC2086
  [ -n "$jobs" ] && scancel $jobs
  for _ in $(seq 1 200); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.2; done
fi

# 2. Stop the daemons by pid, checking the pid still is what we started.
stop_pid() {   # pid name
  local pid=$1 name=$2
  alive "$pid" "$name" || return 0
  kill -TERM "$pid"
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  echo "cluster_down: $name ($pid) still running 10 s after SIGTERM: sending SIGKILL" >&2
  kill -KILL "$pid"
}
stop_pid "$SLURMD_PID" slurmd
stop_pid "$SLURMCTLD_PID" slurmctld   # its child slurmscriptd exits with it
stop_pid "$MUNGED_PID" munged         # empty when munged was already running before us

# 3. slurmstepd processes of our slurmd that outlived it. PMIx 4.2 can deadlock in
#    PMIx_server_finalize when a task dies during PMIx_Init: the step then never exits and
#    ignores SIGTERM. Ours are the ones started after our slurmd, in this network namespace
#    (the multi-node test cluster's run in the namespaces of its nodes).
STEPD_EXE=$(readlink -f "$(command -v slurmstepd || echo /usr/sbin/slurmstepd)")
NETNS=$(readlink /proc/$$/ns/net)
if [ -n "$SLURMD_START" ]; then
  for d in /proc/[0-9]*; do
    [ "$(readlink "$d/exe" 2>/dev/null)" = "$STEPD_EXE" ] || continue
    [ "$(readlink "$d/ns/net" 2>/dev/null)" = "$NETNS" ] || continue
    st=$(sed 's/^.*) //' "$d/stat" 2>/dev/null | awk '{print $20}')
    [ -n "$st" ] && [ "$st" -ge "$SLURMD_START" ] || continue
    echo "cluster_down: killing leftover $(tr '\0' ' ' < "$d/cmdline") (pid ${d#/proc/})" >&2
    kill -KILL "${d#/proc/}" 2>/dev/null || true
  done
fi
rm -f "$STATE"
echo "cluster_down: stopped"
