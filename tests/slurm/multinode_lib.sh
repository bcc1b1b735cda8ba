# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
# shellcheck disable=SC2034  # the names are used by the scripts that source this file
# multinode_lib.sh - names and node operations shared by multinode_up.sh, multinode_down.sh and
# multinode_node.sh (sourced by bash).
MN_BRIDGE=ddpmnbr0
MN_NET=10.77.0
MN_HOSTS_MARK="# ddptrain-multinode"

mn_ns() { echo "ddpmn-vn$1"; }            # network namespace of node i
mn_ip() { echo "$MN_NET.$((10 + $1))"; }  # its address

# mn_set_rate I RATE: limit node i's link both ways (tbf on the bridge side for what the node
# receives, on e0 inside the namespace for what it sends); RATE "none" removes the limit.
mn_set_rate() {
  local i=$1 rate=$2 ns
  ns=$(mn_ns "$i")
  if [ "$rate" = none ]; then
    tc qdisc del dev "v-vn$i" root 2>/dev/null || true
    nsenter --net="/run/netns/$ns" tc qdisc del dev e0 root 2>/dev/null || true
    return 0
  fi
  tc qdisc replace dev "v-vn$i" root tbf rate "$rate" burst 64kb latency 1s
  nsenter --net="/run/netns/$ns" tc qdisc replace dev e0 root tbf rate "$rate" burst 64kb latency 1s
}

# mn_start_slurmd I CONF DIR: start node i's slurmd in its namespace and print the state-file
# lines for it (its pid and its start time in clock ticks since boot: every process of the
# node starts later, which is how multinode_down.sh finds leftovers).
# nsenter, not `ip netns exec`: the latter remounts /sys without the cgroup file system and
# slurmd exits "No filesystem mounted on /sys/fs/cgroup".
mn_start_slurmd() {
  local i=$1 conf=$2 dir=$3 pid="" start
  rm -f "$dir/slurmd-vn$i.pid"
  nsenter --net="/run/netns/$(mn_ns "$i")" unshare --uts \
    sh -c "hostname vn$i && exec $(command -v slurmd || echo /usr/sbin/slurmd) -f '$conf' -N vn$i"
  for _ in $(seq 1 50); do [ -s "$dir/slurmd-vn$i.pid" ] && break; sleep 0.1; done
  pid=$(cat "$dir/slurmd-vn$i.pid" 2>/dev/null || true)
  [ -n "$pid" ] || return 1
  start=$(sed 's/^.*) //' "/proc/$pid/stat" | awk '{print $20}')
  echo "SLURMD_PID_$i=$pid"
  echo "SLURMD_START_$i=$start"
}

# mn_ns_pids I: every process in node i's network namespace (its slurmd, slurmstepds, ranks).
mn_ns_pids() { ip netns pids "$(mn_ns "$1")" 2>/dev/null || true; }

mn_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ]; }

# mn_running STATE: the cluster of the state file runs and its nodes answer (busy or not).
mn_running() {
  [ -f "$1" ] || return 1
  (
    # shellcheck disable=SC1090
    . "$1"
    mn_alive "${SLURMCTLD_PID:-}" slurmctld || exit 1
    for i in $(seq 1 "$NODES"); do v=SLURMD_PID_$i; mn_alive "${!v:-}" slurmd || exit 1; done
    st=$(SLURM_CONF=$SLURM_CONF sinfo -h -o %t 2>/dev/null | sort -u)
    [ -n "$st" ] || exit 1
    for s in $st; do case $s in idle|mix|alloc|comp) ;; *) exit 1;; esac; done
    exit 0
  )
}
