#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# cluster_up.sh - start a single-node Slurm cluster on this machine (munge, slurmctld, slurmd)
# for the tests: `srun -n 4` and `sbatch` then work on a laptop or a CI runner.
#
# Needs root and the packages slurm-wlm and munge (Debian/Ubuntu). Exit codes: 0 up (or already
# up), 77 prerequisites missing (tests skip), 1 failure.
#
# Everything it writes (slurm.conf, spool, logs, pid files) lives in $DDP_SLURM_DIR, never in
# /etc/slurm, so a machine's own Slurm configuration is left alone. Clients find the cluster
# through SLURM_CONF, which the state file records:
#     . "$DDP_SLURM_STATE"; export SLURM_CONF; srun -n 2 hostname
# Environment:
#   DDP_SLURM_STATE  state file: pids of what this script started (default /tmp/ddptrain-slurm.state)
#   DDP_SLURM_DIR    working directory (default /tmp/ddptrain-slurm)
#   DDP_SLURM_CPUS   CPUs the node declares (default 8, at least the real count): more than the
#                    machine has so that 4- and 8-rank jobs fit on a 2-core runner.
# Stop it with cluster_down.sh (same environment).
set -euo pipefail

STATE=${DDP_SLURM_STATE:-/tmp/ddptrain-slurm.state}
DIR=${DDP_SLURM_DIR:-/tmp/ddptrain-slurm}
CPUS=${DDP_SLURM_CPUS:-8}
CONF=$DIR/slurm.conf
NODE=$(hostname -s)

skip() { echo "cluster_up: $* (skipping)" >&2; exit 77; }
fail() { echo "cluster_up: error: $*" >&2; exit 1; }

# ---- prerequisites --------------------------------------------------------------------------
for p in slurmctld slurmd srun sbatch sinfo scontrol munged munge unmunge; do
  command -v "$p" >/dev/null 2>&1 || [ -x "/usr/sbin/$p" ] ||
    skip "'$p' not found: install slurm-wlm and munge"
done
[ "$(id -u)" = 0 ] || skip "starting munged/slurmd needs root"
SLURMCTLD=$(command -v slurmctld || echo /usr/sbin/slurmctld)
SLURMD=$(command -v slurmd || echo /usr/sbin/slurmd)
MUNGED=$(command -v munged || echo /usr/sbin/munged)

node_state() { SLURM_CONF=$CONF sinfo -h -n "$NODE" -o %t 2>/dev/null || true; }
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ]; }

# ---- already up? ----------------------------------------------------------------------------
if [ -f "$STATE" ]; then
  # shellcheck disable=SC1090
  . "$STATE"
  # A node running jobs (mix, alloc, comp) is up too: another test is using it.
  if alive "${SLURMCTLD_PID:-}" slurmctld && alive "${SLURMD_PID:-}" slurmd; then
    case "$(node_state)" in
      idle|mix|alloc|comp) echo "cluster_up: already up (state $STATE, SLURM_CONF=$CONF)"; exit 0;;
    esac
  fi
  echo "cluster_up: stale state file $STATE: tearing down what it lists first" >&2
  DDP_SLURM_STATE=$STATE "$(dirname "$0")/cluster_down.sh" >&2 || true
fi

# A Slurm not started by us would fight over ports 6817/6818: refuse rather than kill it.
# The multi-node test cluster (multinode_up.sh) uses other ports and files: its daemons, which
# its state file lists, are no conflict.
MN_STATE=${DDP_MN_STATE:-/tmp/ddptrain-mn.state}
MN_PIDS=""
[ ! -f "$MN_STATE" ] || MN_PIDS=$(sed -n 's/^\(SLURMCTLD_PID\|SLURMD_PID_[0-9]*\)=//p' "$MN_STATE" | tr '\n' ' ')
others=$( (pgrep -x slurmctld; pgrep -x slurmd) | while read -r p; do
  case " $MN_PIDS " in *" $p "*) ;; *) echo "$p" ;; esac; done | tr '\n' ' ' || true)
[ -z "$others" ] || fail "slurmctld/slurmd already running (pids $others) but not listed in $STATE; stop them first"

T0=$(date +%s.%N)

# ---- munge ----------------------------------------------------------------------------------
if [ ! -s /etc/munge/munge.key ]; then   # the Debian package normally creates it
  runuser -u munge -- mungekey --create --keyfile=/etc/munge/munge.key
fi
# Without systemd nobody creates munged's socket directory.
install -d -o munge -g munge -m 0755 /run/munge
[ -d /var/lib/munge ] || install -d -o munge -g munge -m 0711 /var/lib/munge
[ -d /var/log/munge ] || install -d -o munge -g munge -m 0700 /var/log/munge
if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  MUNGED_PID=""                 # a working munged that is not ours: use it, never stop it
else
  runuser -u munge -- "$MUNGED"
  for _ in $(seq 1 50); do [ -S /run/munge/munge.socket.2 ] && [ -s /run/munge/munged.pid ] && break; sleep 0.1; done
  munge -n | unmunge >/dev/null || fail "munged started but munge -n | unmunge fails"
  MUNGED_PID=$(cat /run/munge/munged.pid)
fi

# ---- slurm.conf -----------------------------------------------------------------------------
REALMEM=$("$SLURMD" -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
[ "$CPUS" -ge "$(nproc)" ] || CPUS=$(nproc)
mkdir -p "$DIR"
rm -rf "$DIR/spool-ctld" "$DIR/spool-d"   # no job or node state from an earlier run
mkdir -p "$DIR/spool-ctld" "$DIR/spool-d" "$DIR/log"
cat > "$CONF" <<CONF
# Single-node test cluster, written by cluster_up.sh.
ClusterName=ddptest
SlurmctldHost=localhost
AuthType=auth/munge
CryptoType=crypto/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$DIR/spool-ctld
SlurmdSpoolDir=$DIR/spool-d
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# slurm-wlm ships no mailer; this silences "Configured MailProg is invalid".
MailProg=/bin/true
# No cgroups: works in containers and VMs without systemd.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# Every srun gets a PMIx server, so MPI ranks connect without --mpi (tests still pass it).
MpiDefault=pmix
ReturnToService=2
JobRequeue=1
# A request that can never fit fails at once instead of pending forever.
EnforcePartLimits=ALL
# Trust CPUs= below although the machine has fewer cores (oversubscription for tests).
SlurmdParameters=config_overrides
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$REALMEM State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF

# ---- daemons (they daemonize and write their pid files) -------------------------------------
rm -f "$DIR/slurmctld.pid" "$DIR/slurmd.pid"
"$SLURMCTLD" -c -f "$CONF"
"$SLURMD" -c -f "$CONF"
for _ in $(seq 1 50); do [ -s "$DIR/slurmctld.pid" ] && [ -s "$DIR/slurmd.pid" ] && break; sleep 0.1; done
SLURMCTLD_PID=$(cat "$DIR/slurmctld.pid" 2>/dev/null || true)
SLURMD_PID=$(cat "$DIR/slurmd.pid" 2>/dev/null || true)
# slurmd's start time (clock ticks since boot): every slurmstepd it spawns starts later, which
# is how cluster_down.sh recognises leftover steps of this cluster and no other.
SLURMD_START=$([ -n "$SLURMD_PID" ] && sed 's/^.*) //' "/proc/$SLURMD_PID/stat" | awk '{print $20}' || true)
printf 'MUNGED_PID=%s\nSLURMCTLD_PID=%s\nSLURMD_PID=%s\nSLURMD_START=%s\nSLURM_CONF=%s\n' \
  "$MUNGED_PID" "$SLURMCTLD_PID" "$SLURMD_PID" "$SLURMD_START" "$CONF" > "$STATE"
[ -n "$SLURMCTLD_PID" ] && [ -n "$SLURMD_PID" ] ||
  { tail -n 20 "$DIR"/log/*.log >&2 || true; fail "slurmctld or slurmd did not start (logs above)"; }

# ---- wait until the node is idle (max 60 s) -------------------------------------------------
st=""
for _ in $(seq 1 300); do
  st=$(node_state)
  [ "$st" = idle ] && break
  sleep 0.2
done
if [ "$st" != idle ]; then
  SLURM_CONF=$CONF scontrol show node "$NODE" >&2 || true
  tail -n 30 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 || true
  fail "node $NODE did not become idle (state '$st'); stop with cluster_down.sh"
fi
echo "cluster_up: node $NODE idle after $(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}') s; SLURM_CONF=$CONF; state $STATE"
