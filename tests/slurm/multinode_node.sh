#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_node.sh - faults and repairs of one node of the multinode_up.sh cluster:
#   multinode_node.sh cut I        its link goes down (a network partition)
#   multinode_node.sh connect I    its link comes back
#   multinode_node.sh crash I      every process of the node is killed (slurmd, steps, ranks)
#   multinode_node.sh restart I    the crashed node reboots: local state cleared, a new slurmd
#                                  (its pid recorded in the state file)
#   multinode_node.sh rate I RATE  limit its link both ways (tc tbf, e.g. 90mbit; none: no limit)
# Environment: DDP_MN_STATE as for multinode_up.sh.
set -euo pipefail
STATE=${DDP_MN_STATE:-/tmp/ddptrain-mn.state}
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/slurm/multinode_lib.sh
. "$HERE/multinode_lib.sh"
usage() { echo "usage: $0 cut|connect|crash|restart I | rate I RATE" >&2; exit 2; }
[ $# -ge 2 ] || usage
op=$1 i=$2
[ -f "$STATE" ] || { echo "multinode_node: no state file $STATE: is the cluster up?" >&2; exit 1; }
NODES=0 SLURM_CONF="" DIR=""
# shellcheck disable=SC1090
. "$STATE"
case $i in [1-9]) [ "$i" -le "$NODES" ] ;; *) false ;; esac ||
  { echo "multinode_node: node '$i': the cluster has nodes 1 to $NODES" >&2; exit 2; }
case $op in
  cut) ip link set "v-vn$i" down ;;
  connect) ip link set "v-vn$i" up ;;
  crash)
    # SIGKILL to every process of the node at once, as a power cut would.
    pids=$(mn_ns_pids "$i")
    # shellcheck disable=SC2086
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true ;;
  restart)
    # A crashed node comes back as after a reboot: its local state is gone. A stale PMIx
    # socket of the step (stepd.slurm.pmix.<job>.<step>) would make the requeued job's step
    # fail "Cannot bind() UNIX socket ... Address already in use".
    [ -z "$(mn_ns_pids "$i")" ] || { echo "multinode_node: vn$i still runs processes: crash it first" >&2; exit 1; }
    rm -rf "${DIR:?}/spool-vn$i" "${DIR:?}/tmp-vn$i"
    mkdir -p "$DIR/spool-vn$i" "$DIR/tmp-vn$i"
    lines=$(mn_start_slurmd "$i" "$SLURM_CONF" "$DIR") || { echo "multinode_node: slurmd of vn$i did not start" >&2; exit 1; }
    # The new pid replaces the old one, so that multinode_down.sh stops this one.
    grep -v "^SLURMD_\(PID\|START\)_$i=" "$STATE" > "$STATE.new"
    echo "$lines" >> "$STATE.new"
    mv "$STATE.new" "$STATE" ;;
  rate) [ $# -eq 3 ] || usage; mn_set_rate "$i" "$3" ;;
  *) usage ;;
esac
