#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# ddptrain across nodes, on the multi-node test cluster (tests/slurm/multinode_up.sh: every node
# a network namespace, Open MPI talking TCP between them as between real hosts):
#   (a) sbatch -N 2 of slurm/train-cpu-multinode.sbatch, 2 tasks per node: COMPLETED, two
#       hosts, local ranks 0 and 1 on each, threads from SLURM_CPUS_PER_TASK, one metrics.jsonl
#       and every rank's log in the one job directory;
#   (b) 2 ranks on 2 nodes and 2 ranks on 1 node, same flags: final checkpoints bit for bit;
#       4 ranks as 2 x 2 and as 1 x 4 likewise;
#   (c) preemption across nodes: SIGUSR2 mid-epoch, exit 3, requeue, resume: bit for bit the
#       uninterrupted 2-node run of (b);
#   (d) a node lost by a network partition and (e) by a crash (every process of the node
#       killed), 2 ranks per node: both surviving ranks exit within --comm_timeout + 10 s, with
#       the line naming the step and the node that stopped answering (its ranks sent no flight
#       record; it does not answer on the network); every checkpoint left is complete;
#   (f) recovery: with --requeue and a --comm_timeout longer than Slurm's SlurmdTimeout, Slurm
#       requeues the job when the node stops answering; once the node is back the job resumes
#       from its last checkpoint and completes;
#   (g) a torchrun-style launch across two nodes (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR):
#       refused on the CPU with one clear line.
# Uses the multi-node cluster when one is up (scripts/quickstart.sh test starts it), else starts
# and stops its own. Exit 0 pass, 1 fail, 77 skip (no root, no namespaces, no Slurm).
# shellcheck disable=SC2015  # A && ok || bad: ok never fails
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
# shellcheck source=tests/helpers/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/helpers/lib.sh"
mpi_leak_checks_off
set -u
PY=$(find_python "h5py, numpy") || { echo "SKIP: no python3 with h5py and numpy"; exit "$SKIP"; }
command -v sbatch >/dev/null 2>&1 || { echo "SKIP: no sbatch (slurm-wlm)"; exit "$SKIP"; }
BIN=$(cd "$(dirname "$DDPTRAIN")" && pwd)/$(basename "$DDPTRAIN")
SRC=$(cd "$top_srcdir" && pwd)
SBATCH_SCRIPT="$SRC/slurm/train-cpu-multinode.sbatch"
CMP="$SRC/tests/helpers/ckpt_compare.py"
NODE="$SRC/tests/slurm/multinode_node.sh"
# shellcheck source=tests/slurm/lib.sh disable=SC1091
. "$SRC/tests/slurm/lib.sh"

J=""
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
    [ -n "$J" ] && scancel "$J" 2>/dev/null
    # A node this test cut or crashed is put back for whoever uses the cluster next.
    if [ -f "$MN_STATE" ]; then
        bash "$NODE" connect 2 2>/dev/null
        [ -n "$(ip netns pids ddpmn-vn2 2>/dev/null)" ] || bash "$NODE" restart 2 2>/dev/null
    fi
    mn_down_if_started
    rm -rf "$TMP"
}
trap cleanup EXIT
up_rc=0
mn_up >"$TMP/up" 2>&1 || up_rc=$?
if [ $up_rc = 77 ]; then echo "SKIP: multi-node test cluster unavailable: $(tail -n 1 "$TMP/up")"; exit "$SKIP"; fi
[ $up_rc = 0 ] || { echo "FAIL: cannot bring up the multi-node test cluster: $(cat "$TMP/up")"; exit 1; }
ok "$(tail -n 1 "$TMP/up") (started by this test: $MN_STARTED)"
export OMP_NUM_THREADS=1
# DDP_MN_PARTS=f runs part (f) only, and so on (default: all; (c) needs (b)).
PARTS=${DDP_MN_PARTS:-abcdefg}
part() { case $PARTS in *"$1"*) return 0 ;; esac; return 1; }

state() { squeue -h -j "$J" -o %T 2>/dev/null; }
jobfield() { scontrol show job "$J" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$1=//p" | head -1; }
laststep() { sed -n 's/.*"step": \([0-9]*\), "loss".*/\1/p' "$1/metrics.jsonl" 2>/dev/null | tail -1; }
# wait_step JOBDIR N MAXSEC: until the job logged step N (1 when it never did).
wait_step() {
    local t0; t0=$(date +%s)
    until [ "$(laststep "$1")" -ge "$2" ] 2>/dev/null; do
        [ $(($(date +%s) - t0)) -gt "$3" ] || [ -z "$(state)" ] && return 1
        sleep 0.2
    done
}
# wait_gone MAXSEC: until the job left the queue.
wait_gone() {
    local t0; t0=$(date +%s)
    while [ -n "$(state)" ]; do [ $(($(date +%s) - t0)) -gt "$1" ] && return 1; sleep 0.3; done
}
# wait_idle MAXSEC: until every node is idle again (after a fault, ReturnToService=2).
wait_idle() {
    local t0; t0=$(date +%s)
    until [ "$(sinfo -h -o %t | sort -u | tr -d '\n')" = idle ]; do
        [ $(($(date +%s) - t0)) -gt "$1" ] && return 1; sleep 0.5
    done
}
# why JOBDIR: what a failed job left: the error lines of its output, each rank log's last line and
# ddptrain-diagnose's verdict from the flight records (when the job wrote any).
why() {
    echo "---- the last 30 lines of $1.out"; tail -n 30 "$1.out" 2>/dev/null
    for f in "$1"/rank-*.log; do [ -f "$f" ] && echo "${f##*/}: $(tail -n 1 "$f")"; done
    [ -d "$1/flight" ] && "$top_builddir/ddptrain-diagnose" "$1" 2>&1 | head -n 5
    return 0
}
submit() {   # JOBDIR sbatch-options... -- ddptrain-flags...
    local dir=$1; shift
    local opts=()
    while [ "$1" != -- ]; do opts+=("$1"); shift; done; shift
    J=$(cd "$TMP" && sbatch --parsable "${opts[@]}" -t 10 -o "$dir.out" \
        --export=ALL,DDPTRAIN="$BIN" "$SBATCH_SCRIPT" "$@" --job_dir "$dir")
}
# Every file under checkpoints/ is a finished checkpoint that HDF5 opens (no temp file, no
# truncated file), and latest names one of them.
ckpts_whole() {
    "$PY" - "$1/checkpoints" <<'PYEOF'
import os, sys, h5py
d = sys.argv[1]
names = sorted(os.listdir(d))
bad = [n for n in names if not (n == "latest" or (n.startswith("ckpt-") and n.endswith(".h5")))]
if bad: sys.exit("stray files: %s" % bad)
for n in names:
    if n != "latest":
        with h5py.File(os.path.join(d, n), "r") as f: f["model"]
latest = open(os.path.join(d, "latest")).read().strip() if "latest" in names else ""
if latest and os.path.basename(latest) not in names: sys.exit("latest names a missing file: " + latest)
print("%d checkpoints, all readable, latest %s" % (len(names) - ("latest" in names), os.path.basename(latest)))
PYEOF
}

# 2 ranks x 48 steps per epoch, 2 epochs; (c) preempts the same training
# mid-epoch; (d) to (g) train longer.
make_synth "$TMP/data2" --train 3072 --test 256 --shards 2
FLAGS=(--data_dir "$TMP/data2" --width 16 --blocks 1 --threads 1 --batch_size 32 --epochs 2 --log_interval 1)
final="checkpoints/ckpt-000000096.h5"
make_synth "$TMP/data" --train 3072 --test 256 --shards 4   # 4 ranks: (a), (b)

# ---- (a) 4 ranks on 2 nodes -----------------------------------------------------------------
if part a; then
ja="$TMP/job-a"
submit "$ja" -N 2 --ntasks-per-node=2 -c 2 -- --data_dir "$TMP/data" --width 8 --blocks 1 --batch_size 32 --max_steps 8 --log_interval 4
[ -n "$J" ] || { bad "(a) sbatch failed"; finish; }
wait_gone 120 || bad "(a) job $J still $(state) after 120 s"
st=$(jobfield JobState)
[ "$st" = COMPLETED ] && ok "(a) job $J (sbatch -N 2 --ntasks-per-node=2 -c 2): COMPLETED" ||
    bad "(a) job $J: $st: $(tail -n 5 "$ja.out")"
boots=$(cat "$ja"/logs/rank-*.log 2>/dev/null | sed -n 's/.*INFO bootstrap: pmix, rank \([0-9]*\)\/4, local \([0-9]\)\/2, 2 nodes, host \(vn[0-9]\)$/\3:\2/p' | sort | tr '\n' ' ')
[ "$boots" = "vn1:0 vn1:1 vn2:0 vn2:1 " ] && ok "(a) rank logs: hosts and local ranks $boots" ||
    bad "(a) hosts:local ranks in the rank logs are '$boots', not vn1:0 vn1:1 vn2:0 vn2:1"
nthr=$(grep -l "device: cpu (2 threads per rank)" "$ja"/logs/rank-*.log 2>/dev/null | wc -l)
[ "$nthr" = 4 ] && ok "(a) every rank runs 2 threads (SLURM_CPUS_PER_TASK)" || bad "(a) $nthr of 4 rank logs say 2 threads per rank"
nlogs=$(find "$ja/logs" -name 'rank-*.log' | wc -l) nmet=$(find "$ja" -name metrics.jsonl | wc -l)
[ "$nlogs" = 4 ] && [ "$nmet" = 1 ] && ok "(a) one job directory: 4 rank logs, one metrics.jsonl" ||
    bad "(a) $nlogs rank logs and $nmet metrics.jsonl in $ja"

fi

# ---- (b) 2 ranks on 2 nodes = 2 ranks on 1 node ---------------------------------------------
if part b || part c; then
for pl in "2 1" "1 2"; do
    # shellcheck disable=SC2086  # two words: nodes, ranks per node
    set -- $pl
    timeout -k 5 180 srun -t 5 -N "$1" -n 2 --mpi=pmix "$BIN" "${FLAGS[@]}" --job_dir "$TMP/ref-$1x$2" \
        >"$TMP/ref-$1x$2.out" 2>&1 || bad "(b) srun -N $1 -n 2 failed: $(tail -n 3 "$TMP/ref-$1x$2.out")"
done
grep -q "2 nodes, host vn1" "$TMP/ref-2x1.out" && grep -q "1 nodes\?, host vn1" "$TMP/ref-1x2.out" &&
    ok "(b) placements: 1 rank on each of 2 nodes, 2 ranks on 1 node" || bad "(b) placements not as asked: $(grep -h bootstrap "$TMP"/ref-*.out)"
if cmp=$("$PY" "$CMP" --all "$TMP/ref-2x1/$final" "$TMP/ref-1x2/$final" 2>&1); then
    ok "(b) 2 nodes x 1 rank = 1 node x 2 ranks at step 96: $cmp"
else
    bad "(b) 2 nodes x 1 rank differs from 1 node x 2 ranks: $cmp"
fi

# 4 ranks: Open MPI picks the all-reduce algorithm (and with it the order of the sum) from the
# number of ranks and the message size, not from where the ranks run, so 2 nodes x 2 ranks
# reproduce 1 node x 4 ranks bit for bit too.
F4=(--data_dir "$TMP/data" --width 16 --blocks 1 --threads 1 --batch_size 32 --max_steps 20 --epochs 1)
timeout -k 5 180 srun -t 5 -N 2 --ntasks-per-node=2 --mpi=pmix "$BIN" "${F4[@]}" --job_dir "$TMP/r4-2x2" >"$TMP/r4-2x2.out" 2>&1 &&
timeout -k 5 180 srun -t 5 -N 1 -n 4 --mpi=pmix "$BIN" "${F4[@]}" --job_dir "$TMP/r4-1x4" >"$TMP/r4-1x4.out" 2>&1 ||
    bad "(b) a 4-rank run failed: $(tail -n 3 "$TMP"/r4-*.out)"
f20="checkpoints/ckpt-000000020.h5"
if cmp=$("$PY" "$CMP" --all "$TMP/r4-2x2/$f20" "$TMP/r4-1x4/$f20" 2>&1); then
    ok "(b) 2 nodes x 2 ranks = 1 node x 4 ranks at step 20: $cmp"
else
    bad "(b) 2 nodes x 2 ranks differs from 1 node x 4 ranks: $cmp"
fi
fi

# ---- (c) preemption across nodes ------------------------------------------------------------
if part c; then
jc="$TMP/job-c"
submit "$jc" -N 2 --ntasks-per-node=1 -c 1 -- "${FLAGS[@]}"
wait_step "$jc" 3 90 || { bad "(c) job $J logged no 3 steps (state '$(state)'): $(tail -n 5 "$jc.out")"; finish; }
scancel --signal=USR2 "$J" && ok "(c) SIGUSR2 to the tasks of job $J after step $(laststep "$jc")"
t0=$(date +%s)
until [ "$(state)" = PENDING ]; do
    [ $(($(date +%s) - t0)) -gt 60 ] || [ -z "$(state)" ] && { bad "(c) job $J not requeued (state '$(state)'): $(tail -n 5 "$jc.out")"; why "$jc"; finish; }
    sleep 0.2
done
# The first run's step daemons can outlive the requeue by seconds (PMIx's finalisation took 3 s
# on an AVX2 EPYC), and a second run launched before they are gone cannot bind its PMIx socket,
# whose path the same job and step ids give again: its step launch fails ("Address already in
# use" in slurmd's log). So wait for them.
t0=$(date +%s)
while pgrep -f "slurmstepd: \[$J\." >/dev/null; do
    [ $(($(date +%s) - t0)) -gt 30 ] && { bad "(c) job $J: the first run's slurmstepd still there after 30 s"; break; }
    sleep 0.2
done
sleep 2   # slurmctld revokes the first run's credential with a one-second resolution
scontrol update JobId="$J" StartTime=now
wait_gone 120 || bad "(c) job $J still $(state) after 120 s"
[ "$(jobfield JobState)" = COMPLETED ] && [ "$(jobfield Restarts)" = 1 ] &&
    ok "(c) job $J: COMPLETED after 1 restart" || bad "(c) job $J: $(jobfield JobState), Restarts=$(jobfield Restarts): $(tail -n 5 "$jc.out")"
pre=$(grep -m1 "preemption: signal received" "$jc.out")
pstep=$(echo "$pre" | sed -n 's/.*checkpointing at epoch [0-9]* step \([0-9]*\) .*/\1/p')
[ -n "$pstep" ] && [ $((pstep % 48)) -ne 0 ] && ok "(c) checkpointed mid-epoch at step $pstep, exit 3, requeued" ||
    bad "(c) no mid-epoch preemption line: '$pre'"
grep -q "^resume: .*global step $pstep (written by 2 ranks)" "$jc.out" && ok "(c) $(grep -m1 '^resume: ' "$jc.out")" ||
    bad "(c) second run did not resume from step $pstep: $(grep '^resume' "$jc.out")"
if cmp=$("$PY" "$CMP" --all "$jc/$final" "$TMP/ref-2x1/$final" 2>&1); then
    ok "(c) preempted + requeued = uninterrupted 2-node run at step 96: $cmp"
else
    bad "(c) preempted run differs from the uninterrupted 2-node run: $cmp"
fi

fi

# ---- (d), (e) a node lost: partition, crash -------------------------------------------------
if part d || part e; then
TMO=5
for fault in cut crash; do
    tag=$([ $fault = cut ] && echo "(d) partition" || echo "(e) crash")
    jd="$TMP/job-$fault"
    # 2 ranks per node: both ranks of vn1 survive, and each must end.
    submit "$jd" -N 2 --ntasks-per-node=2 -c 1 -- "${FLAGS[@]}" --epochs 8 --comm_timeout $TMO --save_every_steps 4
    wait_step "$jd" 6 90 || { bad "$tag: job $J logged no 6 steps: $(tail -n 5 "$jd.out")"; finish; }
    t0=$(date +%s.%N)
    bash "$NODE" $fault 2
    # The surviving ranks are the two on vn1.
    gone=""
    for _ in $(seq 1 $(((TMO + 20) * 5))); do
        ip netns pids ddpmn-vn1 | xargs -r -I{} cat /proc/{}/comm 2>/dev/null | grep -qx ddptrain || { gone=1; break; }
        sleep 0.2
    done
    dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
    [ -n "$gone" ] && awk -v d="$dt" -v m=$((TMO + 10)) 'BEGIN{exit !(d <= m)}' &&
        ok "$tag of vn2: both ranks on vn1 exited within $dt s (--comm_timeout $TMO)" ||
        bad "$tag of vn2: a rank on vn1 still ran (or exited late) $dt s later"
    # Both ranks may give up at once, and srun may interleave their lines: match the message,
    # not whole lines.
    pat="ddptrain: error: rank [01]: collective [a-z]* (step [0-9]*, [^)]*) did not complete within $TMO s"
    line=$(grep -o "$pat" "$jd.out" | head -n 1)
    [ -n "$line" ] && ok "$tag: '$line; ...'" || bad "$tag: no line naming the step: $(grep -i error "$jd.out" | head -n 5)"
    # ... and naming what stopped answering (the flight records, src/dist/verdict.h): vn2's ranks
    # sent no record after the crash; after the cut vn2 does not answer on the network.
    if [ $fault = cut ]; then who="host vn2 (ranks 2, 3) does not answer on the network from host vn1"
    else who="rank [23] on host vn2 sent no flight record"; fi
    said=$(grep -o "did not complete within $TMO s; .*" "$jd.out" | grep -o "$who" | head -n 1)
    [ -n "$said" ] && ok "$tag: the line names the silent node: '... $said ...'" ||
        bad "$tag: no timeout line names vn2 ('$who'): $(grep -o "did not complete within $TMO s; .*" "$jd.out" | head -n 2)"
    # One message per rank that gave up, at most: the first one's abort ends the other.
    nl=$(grep -o "did not complete within" "$jd.out" | wc -l)
    [ "$nl" -ge 1 ] && [ "$nl" -le 2 ] && ok "$tag: $nl such line(s)" || bad "$tag: $nl timeout lines"
    if w=$(ckpts_whole "$jd" 2>&1); then ok "$tag: $w"; else bad "$tag: checkpoints: $w"; fi
    # Put the node back and let the job end (it stays COMPLETING on an unreachable node).
    if [ $fault = cut ]; then bash "$NODE" connect 2; else bash "$NODE" restart 2; fi
    wait_gone 60 || bad "$tag: job $J still $(state) 60 s after the node came back"
    st=$(jobfield JobState)
    [ "$st" = FAILED ] && ok "$tag: job $J FAILED (ExitCode $(jobfield ExitCode))" || bad "$tag: job $J ended $st"
    wait_idle 60 && ok "$tag: vn2 back, every node idle" || { bad "$tag: nodes not idle again: $(sinfo -h -N)"; finish; }
done

fi

# ---- (f) recovery: Slurm requeues the job of a lost node, it resumes once the node is back --
if part f; then
jf="$TMP/job-f"
submit "$jf" -N 2 --ntasks-per-node=1 -c 1 -- "${FLAGS[@]}" --epochs 3 --comm_timeout 120 --save_every_steps 4
wait_step "$jf" 6 90 || { bad "(f) job $J logged no 6 steps: $(tail -n 5 "$jf.out")"; finish; }
bash "$NODE" crash 2
t0=$(date +%s)
until [ "$(jobfield Restarts)" = 1 ]; do
    [ $(($(date +%s) - t0)) -gt 60 ] && { bad "(f) job $J not requeued 60 s after vn2 crashed ($(state), $(sinfo -h -N))"; finish; }
    sleep 0.5
done
ok "(f) vn2 stopped answering: Slurm requeued job $J after $(($(date +%s) - t0)) s (node $(sinfo -h -n vn2 -o %t))"
bash "$NODE" restart 2
wait_idle 60 || true
sleep 2
scontrol update JobId="$J" StartTime=now 2>/dev/null
wait_gone 150 || bad "(f) job $J still $(state) after 150 s"
[ "$(jobfield JobState)" = COMPLETED ] && ok "(f) job $J COMPLETED after $(jobfield Restarts) restart" ||
    bad "(f) job $J: $(jobfield JobState): $(tail -n 5 "$jf.out")"
res=$(grep -m1 "^resume: " "$jf.out")
echo "$res" | grep -q "global step [1-9][0-9]* (written by 2 ranks)" && ok "(f) $res" || bad "(f) no resume line: $(grep -c . "$jf.out") lines"
grep -q "^done: 144 steps" "$jf.out" && ok "(f) $(grep '^done:' "$jf.out")" || bad "(f) no 'done: 144 steps' line"

fi

# ---- (g) torchrun-style launch across two nodes ---------------------------------------------
if part g; then
for i in 1 2; do
    nsenter --net=/run/netns/ddpmn-vn$i env -u SLURM_CONF RANK=$((i - 1)) WORLD_SIZE=2 LOCAL_RANK=0 \
        LOCAL_WORLD_SIZE=1 MASTER_ADDR=10.77.0.11 MASTER_PORT=29500 \
        timeout -k 5 60 "$BIN" "${FLAGS[@]}" --max_steps 2 --job_dir "$TMP/job-g" >"$TMP/g$i.out" 2>&1 &
done
rcs=""
for p in $(jobs -p); do wait "$p"; rcs="$rcs $?"; done
line=$(grep -h -m1 "MPI can only connect ranks started by" "$TMP/g1.out")
[ "$rcs" != " 0 0" ] && [ -n "$line" ] && grep -q "MPI can only connect" "$TMP/g2.out" &&
    ok "(g) torchrun-style launch refused (exit$rcs): '$line'" ||
    bad "(g) torchrun-style launch: exit$rcs: $(tail -n 2 "$TMP/g1.out")"
fi
finish
