#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_down.sh - undo what multinode_up.sh did: cancel the jobs, stop exactly the daemons
# the state file lists, kill what still runs in the nodes' namespaces, delete the namespaces,
# the veth links and the bridge, and remove our lines from /etc/hosts. Idempotent: without a
# state file there is nothing to do. Environment: DDP_MN_STATE as for multinode_up.sh.
set -u
STATE=${DDP_MN_STATE:-/tmp/ddptrain-mn.state}
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/slurm/multinode_lib.sh
. "$HERE/multinode_lib.sh"
[ -f "$STATE" ] || { echo "multinode_down: no state file $STATE: nothing to stop"; exit 0; }
NODES=0 MUNGED_PID="" SLURMCTLD_PID="" SLURM_CONF="" BRIDGE="" HOSTS_EDITED=""
# shellcheck disable=SC1090
. "$STATE"
export SLURM_CONF

# 1. Cancel every job while the controller is up and let them drain (max 20 s: a node that
#    does not answer keeps its job COMPLETING, and step 3 ends its processes anyway).
if mn_alive "$SLURMCTLD_PID" slurmctld; then
  jobs=$(squeue -h -o %i 2>/dev/null || true)
  # shellcheck disable=SC2086
  [ -n "$jobs" ] && scancel $jobs
  for _ in $(seq 1 100); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.2; done
fi

stop_pid() {   # pid name
  local pid=$1 name=$2
  mn_alive "$pid" "$name" || return 0
  kill -TERM "$pid"
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  echo "multinode_down: $name ($pid) still running 10 s after SIGTERM: sending SIGKILL" >&2
  kill -KILL "$pid"
}

# 2. The daemons, by pid, checking each still is what we started.
for i in $(seq 1 "$NODES"); do v=SLURMD_PID_$i; stop_pid "${!v:-}" slurmd; done
stop_pid "$SLURMCTLD_PID" slurmctld
stop_pid "$MUNGED_PID" munged   # empty when munged was already running before us

# 3. Whatever still runs inside a node (slurmstepds, ranks, a restarted slurmd): only the
#    nodes' namespaces hold them, and those are ours.
for i in $(seq 1 "$NODES"); do
  v=NETNS_$i ns=${!v:-}
  [ -n "$ns" ] || continue
  for pid in $(ip netns pids "$ns" 2>/dev/null); do
    echo "multinode_down: killing leftover $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null) (pid $pid) in $ns" >&2
    kill -KILL "$pid" 2>/dev/null || true
  done
done

# 4. Namespaces (their end of each veth goes with them), bridge, /etc/hosts.
for i in $(seq 1 "$NODES"); do
  v=NETNS_$i ns=${!v:-}
  [ -n "$ns" ] || continue
  ip link del "v-vn$i" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || echo "multinode_down: cannot delete namespace $ns" >&2
done
[ -z "$BRIDGE" ] || ip link del "$BRIDGE" 2>/dev/null || true
if [ -n "$HOSTS_EDITED" ] && grep -q "$MN_HOSTS_MARK" /etc/hosts; then
  kept=$(grep -v "$MN_HOSTS_MARK" /etc/hosts)
  echo "$kept" > /etc/hosts   # in place: /etc/hosts may be a bind mount
fi
rm -f "$STATE"
echo "multinode_down: stopped"
