#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_up.sh - start a Slurm cluster of N "nodes" on this machine: every node is a network
# + UTS namespace with its own host name (vn1, vn2, ...), IP address (10.77.0.11, ...) and
# slurmd, on a Linux bridge; slurmctld and munged run in the root namespace; the file system
# stays shared, as a cluster's /home or /scratch is. Between nodes Open MPI has no shared
# memory and talks TCP over the veth links, as between real hosts, and the links can be rate
# limited (tc tbf) so that communication costs real time.
#
# Needs root, iproute2 (ip, tc), nsenter/unshare and the packages slurm-wlm and munge. Exit
# codes: 0 up (or already up), 77 prerequisites missing (tests skip), 1 failure.
#
# It never fights the single-node cluster (cluster_up.sh): its own directory, SLURM_CONF, state
# file and ports (6827/6828, against 6817/6818), so both may run at once. Clients:
#     . "$DDP_MN_STATE"; export SLURM_CONF; srun -N 2 hostname
# Environment:
#   DDP_MN_STATE   state file: what this script started and changed (default /tmp/ddptrain-mn.state)
#   DDP_MN_DIR     working directory (default /tmp/ddptrain-mn)
#   DDP_MN_NODES   number of nodes (default 2, at most 9)
#   DDP_MN_CPUS    CPUs each node declares (default 4: more than the machine has, so that a
#                  2-task-per-node job fits on a 2-core runner)
#   DDP_MN_RATE    link rate of every node, both ways, as tc writes it (e.g. 90mbit; default
#                  none: unlimited). multinode_node.sh changes it later.
# Stop it with multinode_down.sh (same environment); multinode_node.sh cuts, kills and
# restores single nodes.
set -euo pipefail

STATE=${DDP_MN_STATE:-/tmp/ddptrain-mn.state}
DIR=${DDP_MN_DIR:-/tmp/ddptrain-mn}
NODES=${DDP_MN_NODES:-2}
CPUS=${DDP_MN_CPUS:-4}
RATE=${DDP_MN_RATE:-}
CONF=$DIR/slurm.conf
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/slurm/multinode_lib.sh
. "$HERE/multinode_lib.sh"

skip() { echo "multinode_up: $* (skipping)" >&2; exit 77; }
fail() { echo "multinode_up: error: $*" >&2; exit 1; }

case $NODES in [1-9]) ;; *) fail "DDP_MN_NODES=$NODES: expected a node count from 1 to 9";; esac

# ---- prerequisites --------------------------------------------------------------------------
for p in slurmctld slurmd srun sbatch sinfo scontrol munged munge unmunge ip tc nsenter unshare; do
  command -v "$p" >/dev/null 2>&1 || [ -x "/usr/sbin/$p" ] ||
    skip "'$p' not found: install slurm-wlm, munge, iproute2 and util-linux"
done
[ "$(id -u)" = 0 ] || skip "network namespaces and slurmd need root"
SLURMCTLD=$(command -v slurmctld || echo /usr/sbin/slurmctld)
SLURMD=$(command -v slurmd || echo /usr/sbin/slurmd)
MUNGED=$(command -v munged || echo /usr/sbin/munged)

# ---- already up? ----------------------------------------------------------------------------
if [ -f "$STATE" ]; then
  if mn_running "$STATE"; then echo "multinode_up: already up (state $STATE)"; exit 0; fi
  echo "multinode_up: stale state file $STATE: tearing down what it lists first" >&2
  DDP_MN_STATE=$STATE bash "$HERE/multinode_down.sh" >&2 || true
fi
if ip link show "$MN_BRIDGE" >/dev/null 2>&1; then
  fail "bridge $MN_BRIDGE exists but no state file lists it; remove it (ip link del $MN_BRIDGE) first"
fi
# Namespaces are the test's own: one that exists was left by a crashed run, not in use.
ip netns add ddpmn-probe 2>/dev/null || skip "cannot create a network namespace (ip netns add)"
ip netns del ddpmn-probe

T0=$(date +%s.%N)
mkdir -p "$DIR"
rm -rf "$DIR/spool-ctld" "$DIR"/spool-vn* "$DIR"/tmp-vn* "$DIR/log"
mkdir -p "$DIR/spool-ctld" "$DIR/log"

# Everything below is recorded in the state file as soon as it exists, so that
# multinode_down.sh undoes a half-finished start too.
{ echo "NODES=$NODES"; echo "SLURM_CONF=$CONF"; echo "DIR=$DIR"; } > "$STATE"
trap 'echo "multinode_up: start failed: tearing down" >&2; DDP_MN_STATE=$STATE bash "$HERE/multinode_down.sh" >&2' ERR

# ---- munge (shared with the single-node cluster: whoever started it stops it) ---------------
if [ ! -s /etc/munge/munge.key ]; then runuser -u munge -- mungekey --create --keyfile=/etc/munge/munge.key; fi
install -d -o munge -g munge -m 0755 /run/munge
[ -d /var/lib/munge ] || install -d -o munge -g munge -m 0711 /var/lib/munge
[ -d /var/log/munge ] || install -d -o munge -g munge -m 0700 /var/log/munge
if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  echo "MUNGED_PID=" >> "$STATE"
else
  runuser -u munge -- "$MUNGED"
  for _ in $(seq 1 50); do [ -S /run/munge/munge.socket.2 ] && [ -s /run/munge/munged.pid ] && break; sleep 0.1; done
  echo "MUNGED_PID=$(cat /run/munge/munged.pid)" >> "$STATE"
  munge -n | unmunge >/dev/null || fail "munged started but munge -n | unmunge fails"
fi

# ---- bridge, namespaces, links, /etc/hosts --------------------------------------------------
ip link add "$MN_BRIDGE" type bridge
echo "BRIDGE=$MN_BRIDGE" >> "$STATE"
ip addr add "$MN_NET.1/24" dev "$MN_BRIDGE"
ip link set "$MN_BRIDGE" up
for i in $(seq 1 "$NODES"); do
  n=vn$i ns=$(mn_ns "$i")
  ip netns add "$ns"
  echo "NETNS_$i=$ns" >> "$STATE"
  ip link add "v-$n" type veth peer name e0 netns "$ns"
  ip link set "v-$n" master "$MN_BRIDGE" up
  ip -n "$ns" addr add "$(mn_ip "$i")/24" dev e0
  ip -n "$ns" link set e0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" route add default via "$MN_NET.1"
  [ -z "$RATE" ] || mn_set_rate "$i" "$RATE"
done
# Node names resolve everywhere (one /etc/hosts for all nodes: the mount namespace is shared).
# Our lines carry a marker, and only those are removed again.
hosts=$(grep -v "$MN_HOSTS_MARK" /etc/hosts || true)
{ echo "$hosts"; for i in $(seq 1 "$NODES"); do echo "$(mn_ip "$i") vn$i $MN_HOSTS_MARK"; done; } > "$DIR/hosts.new"
cat "$DIR/hosts.new" > /etc/hosts   # in place: /etc/hosts may be a bind mount
echo "HOSTS_EDITED=1" >> "$STATE"

# ---- slurm.conf -----------------------------------------------------------------------------
REALMEM=$("$SLURMD" -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
MEM=$((REALMEM / NODES))
cat > "$CONF" <<CONF
# Multi-node test cluster (network namespaces on one machine), written by multinode_up.sh.
ClusterName=ddpmn
# The controller's name must be this host's, or slurmctld exits "not a valid controller".
SlurmctldHost=$(hostname -s)($MN_NET.1)
AuthType=auth/munge
CryptoType=crypto/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6827
SlurmdPort=6828
StateSaveLocation=$DIR/spool-ctld
SlurmdSpoolDir=$DIR/spool-%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
# Per node: the PMIx plugin makes spmix_appdir_<uid>_<step> under TmpFS, and two nodes sharing
# one /tmp fail "Cannot create directory ... File exists".
TmpFS=$DIR/tmp-%n
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
# A node that stops answering is DOWN after SlurmdTimeout; its jobs submitted with --requeue
# are requeued, and the node returns by itself when its slurmd registers again.
SlurmdTimeout=10
ReturnToService=2
JobRequeue=1
# A job's processes on a node that ended it are killed after this, not 30 s.
KillWait=5
EnforcePartLimits=ALL
SlurmdParameters=config_overrides
NodeName=vn[1-$NODES] NodeAddr=$MN_NET.[11-$((10 + NODES))] CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=mn Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
[ "$NODES" -gt 1 ] || sed -i "s/^NodeName=.*/NodeName=vn1 NodeAddr=$MN_NET.11 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN/" "$CONF"

# ---- daemons --------------------------------------------------------------------------------
rm -f "$DIR"/*.pid
"$SLURMCTLD" -c -f "$CONF"
for _ in $(seq 1 50); do [ -s "$DIR/slurmctld.pid" ] && break; sleep 0.1; done
echo "SLURMCTLD_PID=$(cat "$DIR/slurmctld.pid" 2>/dev/null)" >> "$STATE"
for i in $(seq 1 "$NODES"); do
  mkdir -p "$DIR/spool-vn$i" "$DIR/tmp-vn$i"
  mn_start_slurmd "$i" "$CONF" "$DIR" >> "$STATE" ||
    { tail -n 20 "$DIR"/log/*.log >&2 || true; fail "slurmd of vn$i did not start (logs above)"; }
done

# ---- wait until every node is idle (max 60 s) -----------------------------------------------
st=""
for _ in $(seq 1 300); do
  st=$(SLURM_CONF=$CONF sinfo -h -o %t 2>/dev/null | sort -u | tr '\n' ' ')
  [ "$st" = "idle " ] && break
  sleep 0.2
done
if [ "$st" != "idle " ]; then
  SLURM_CONF=$CONF sinfo -N >&2 || true
  tail -n 20 "$DIR"/log/*.log >&2 || true
  trap - ERR
  fail "the nodes did not become idle (states '$st'); stop with multinode_down.sh"
fi
trap - ERR
echo "multinode_up: $NODES nodes (vn1..vn$NODES) idle after $(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}') s; link rate ${RATE:-unlimited}; SLURM_CONF=$CONF; state $STATE"
