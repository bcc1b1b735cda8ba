#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Checks before training, 2 ranks under mpirun (src/dist/roster.h, src/dist/agree.h, src/train.c):
#   (a) rank 0's log has the table of ranks: rank, host, local rank, device;
#   (b) rank 1 started with another --batch_size: refused with one line naming rank 1, its host
#       and the flag, a non-zero exit, no rank left behind;
#   (c) rank 1 given another --data_dir with other shards: refused, naming the shard list;
#   (d) rank 1 in a mount namespace of its own, where the job directory's parent is an empty
#       tmpfs (a node that does not share the job directory): refused, naming rank 1, its host
#       and the file it cannot read back (a SKIP line where mount namespaces are not allowed);
# --preflight (src/dist/linktest.h):
#   (e) 2 ranks on this host: a row per rank with its send and receive rates, nobody named, exit
#       0 without training, the time printed, all of it under 60 s;
# and on the multi-node test cluster (tests/slurm/multinode_up.sh) with 3 nodes, one rank each,
# every link limited to DDP_PREFLIGHT_RATE (200mbit) both ways, as a network card would (the
# unlimited links of this virtual cluster go as fast as the CPUs copy, and vary 2x with what
# else runs on them):
#   (f) equal links: nobody named, exit 0;
#   (g) vn2's link at a fifth of that: rank 1 on host vn2 named, no other rank or link, exit 4,
#       under 60 s;
#   (h) vn2's link cut during the link test: within 15 s (the link test's timeout) + 10 s a
#       rank's timeout line names the transfer with rank 1 on host vn2, and the job fails.
# (f) to (h) are reported as SKIP lines where the cluster cannot start (not root, no Slurm) or
# runs with another number of nodes.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
mpi_leak_checks_off   # ranks started by mpirun/srun (see tests/helpers/lib.sh)
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found"; exit "$SKIP"; }
MPIRUN="mpirun --allow-run-as-root --oversubscribe -np 2"
export OMP_NUM_THREADS=1
HOST=$(uname -n)
make_synth "$TMP/data" --train 256 --test 64 --shards 2
make_synth "$TMP/other" --train 256 --test 64 --shards 4
FLAGS="--data_dir $TMP/data --width 4 --blocks 1 --batch_size 16 --max_steps 2 --threads 1 --comm_timeout 20"

# A wrapper that gives rank 1 extra flags (the last value of a flag wins).
cat >"$TMP/rank1.sh" <<'EOS'
#!/bin/sh
if [ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ]; then exec "$@" $RANK1_FLAGS; fi
exec "$@"
EOS
chmod +x "$TMP/rank1.sh"

# ---- (a) the table -------------------------------------------------------------------------
# shellcheck disable=SC2086
if timeout -k 5 120 $MPIRUN "$DDPTRAIN" $FLAGS --job_dir "$TMP/a" >"$TMP/a.out" 2>&1; then
    log="$TMP/a/logs/rank-00000.log"
    if grep -q "ranks: rank 0  host $HOST  local 0/2  cpu: 1 thread on [0-9]* core" "$log" &&
        grep -q "ranks: rank 1  host $HOST  local 1/2  cpu: 1 thread on [0-9]* core" "$log"; then
        ok "(a) the table: $(grep -m 1 'ranks: rank 1' "$log" | sed 's/.*INFO //')"
    else
        bad "(a) no table of ranks in rank 0's log"; grep ranks: "$log"
    fi
else
    bad "(a) a normal 2-rank run failed"; tail -n 10 "$TMP/a.out"
fi

# refused CASE PATTERN: run with RANK1_FLAGS set; the job must end non-zero within 60 s with one
# line matching PATTERN, and no training step.
refused() {
    t0=$(date +%s)
    # shellcheck disable=SC2086
    timeout -k 5 60 $MPIRUN "$TMP/rank1.sh" "$DDPTRAIN" $FLAGS --job_dir "$TMP/$1" >"$TMP/$1.out" 2>&1
    rc=$?
    dt=$(($(date +%s) - t0))
    line=$(grep -m 1 "ddptrain: error: " "$TMP/$1.out")
    echo "   ($1) exit $rc after $dt s: $line"
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && echo "$line" | grep -q "$2" && [ "$(grep -c "ddptrain: error: " "$TMP/$1.out")" -eq 1 ] &&
        ! grep -q "step 1/" "$TMP/$1.out"; then
        ok "($1) refused before training with one line naming rank 1 on host $HOST"
    else
        bad "($1) expected one error line matching '$2' and a non-zero exit"; tail -n 8 "$TMP/$1.out"
    fi
}

RANK1_FLAGS="--batch_size 32" refused b \
    "rank 1 on host $HOST disagrees on --batch_size: rank 0 on host $HOST has 16"
RANK1_FLAGS="--data_dir $TMP/other" refused c \
    "rank 1 on host $HOST disagrees on the train shard list of --data_dir with rank 0"

# ---- (d) a job directory rank 1 does not see -----------------------------------------------
mkdir -p "$TMP/shared" "$TMP/probe"
if unshare -m sh -c "mount -t tmpfs none '$TMP/probe'" 2>/dev/null; then
    cat >"$TMP/rank1-ns.sh" <<'EOS'
#!/bin/sh
if [ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ]; then
    exec unshare -m sh -c 'mount -t tmpfs none "$0" && exec "$@"' "$SHARED" "$@"
fi
exec "$@"
EOS
    chmod +x "$TMP/rank1-ns.sh"
    t0=$(date +%s)
    # shellcheck disable=SC2086
    SHARED="$TMP/shared" timeout -k 5 60 $MPIRUN -x SHARED "$TMP/rank1-ns.sh" "$DDPTRAIN" $FLAGS \
        --job_dir "$TMP/shared/job" >"$TMP/d.out" 2>&1
    rc=$?
    dt=$(($(date +%s) - t0))
    line=$(grep -m 1 "ddptrain: error: " "$TMP/d.out")
    echo "   (d) exit $rc after $dt s: $line"
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(grep -c "ddptrain: error: " "$TMP/d.out")" -eq 1 ] &&
        echo "$line" | grep -q "rank 1 on host $HOST cannot read back $TMP/shared/job/.jobdir-check, which rank 0 on host $HOST wrote: No such file or directory; --job_dir must be on a file system every node shares" &&
        ! grep -q "step 1/" "$TMP/d.out"; then
        ok "(d) a job directory rank 1 does not share: refused before training, naming rank 1 on host $HOST"
    else
        bad "(d) expected one line naming rank 1 and the job directory check file"; tail -n 8 "$TMP/d.out"
    fi
else
    echo "SKIP: (d) no mount namespaces here (unshare -m and mount need root)"
fi

# ---- (e) --preflight on one host -------------------------------------------------------------
t0=$(date +%s)
# shellcheck disable=SC2086
timeout -k 5 120 $MPIRUN "$DDPTRAIN" $FLAGS --preflight --job_dir "$TMP/e" >"$TMP/e.out" 2>&1
rc=$?
dt=$(($(date +%s) - t0))
grep "preflight: " "$TMP/e.out" | sed 's/^/   (e) /'
rows=$(grep -c "preflight: rank [01]  host $HOST  receive [0-9.]* MB/s from rank [01] ($HOST)  send [0-9.]* MB/s" "$TMP/e.out")
if [ $rc -eq 0 ] && [ "$rows" -eq 2 ] && ! grep -q "below half the median" "$TMP/e.out" &&
    grep -q "preflight: all checks passed; link test [0-9.]* s, [0-9.]* s since start" "$TMP/e.out" &&
    ! grep -q "step 1/" "$TMP/e.out" && [ $dt -lt 60 ]; then
    ok "(e) --preflight on one host: 2 rows, nobody named, exit 0 without training, $dt s"
else
    bad "(e) --preflight on one host: exit $rc after $dt s, $rows rows"; tail -n 8 "$TMP/e.out"
fi

# ---- (f) to (h) on the multi-node cluster ----------------------------------------------------
# shellcheck source=tests/slurm/lib.sh disable=SC1091
. "$top_srcdir/tests/slurm/lib.sh"
NODE="$top_srcdir/tests/slurm/multinode_node.sh"
RATE=${DDP_PREFLIGHT_RATE:-200mbit}
SLOW=${DDP_PREFLIGHT_SLOW_RATE:-40mbit}   # vn2's in (g)
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
    # the rates this test set are taken off for whoever uses the cluster next
    if [ -f "$MN_STATE" ]; then for i in 1 2 3; do bash "$NODE" rate "$i" none 2>/dev/null; done; fi
    mn_down_if_started
    rm -rf "$TMP"
}
trap cleanup EXIT
DDP_MN_NODES=3; export DDP_MN_NODES
up_rc=0
mn_up >"$TMP/up" 2>&1 || up_rc=$?
# shellcheck disable=SC1090,SC2153  # NODES: the state file's
nodes=$([ -f "$MN_STATE" ] && . "$MN_STATE" && echo "$NODES")
if [ $up_rc -ne 0 ]; then
    echo "SKIP: (f) to (h): the multi-node test cluster is unavailable: $(tail -n 1 "$TMP/up")"
    [ $up_rc = 77 ] || bad "(f) the multi-node test cluster did not start"
elif [ "$nodes" != 3 ]; then
    echo "SKIP: (f) to (h): the multi-node test cluster is up with $nodes nodes, not 3 (another user's)"
else
    BIN=$(cd "$(dirname "$DDPTRAIN")" && pwd)/$(basename "$DDPTRAIN")
    # preflight_mn NAME: --preflight on 3 nodes, one rank each; sets rc, dt
    preflight_mn() {
        t0=$(date +%s)
        # shellcheck disable=SC2086
        (cd "$TMP" && timeout -k 5 120 srun -t 5 -N 3 --ntasks-per-node=1 --mpi=pmix "$BIN" $FLAGS --preflight \
            --job_dir "$TMP/$1") >"$TMP/$1.out" 2>&1
        rc=$?
        dt=$(($(date +%s) - t0))
        grep "preflight: " "$TMP/$1.out" | sed "s/^/   ($1) /"
    }
    for i in 1 2 3; do bash "$NODE" rate "$i" "$RATE"; done
    preflight_mn f
    if [ $rc -eq 0 ] && [ "$(grep -c "preflight: rank [0-2]  host vn[1-3]  receive" "$TMP/f.out")" -eq 3 ] &&
        ! grep -q "below half the median" "$TMP/f.out"; then
        ok "(f) 3 nodes, links at $RATE: nobody named, exit 0, $dt s"
    else
        bad "(f) 3 nodes, equal links: exit $rc after $dt s"; tail -n 8 "$TMP/f.out"
    fi
    bash "$NODE" rate 2 "$SLOW"
    preflight_mn g
    named=$(grep -c "below half the median" "$TMP/g.out")
    line=$(grep -m 1 "preflight: rank 1 on host vn2: link [0-9.]* MB/s, below half the median of [0-9.]* MB/s" "$TMP/g.out" |
        sed 's/.*\(preflight: \)/\1/')
    if [ $rc -eq 4 ] && [ -n "$line" ] && [ "$named" -eq 1 ] && [ $dt -lt 60 ]; then
        ok "(g) vn2 at $SLOW, the others at $RATE: \"$line\", nobody else named, exit 4, $dt s"
    else
        bad "(g) vn2 at $SLOW: exit $rc after $dt s, $named line(s) naming a rank or link, expected rank 1 on vn2 alone"
        tail -n 8 "$TMP/g.out"
    fi

    # (h): vn2 at 1mbit, so that the link test lasts seconds; cut once the table is logged
    bash "$NODE" rate 2 1mbit
    t0=$(date +%s)
    # shellcheck disable=SC2086
    (cd "$TMP" && timeout -k 5 120 srun -t 5 -J ddp-preflight-h -N 3 --ntasks-per-node=1 --mpi=pmix "$BIN" $FLAGS \
        --preflight --job_dir "$TMP/h") >"$TMP/h.out" 2>&1 &
    spid=$!
    # rank 0 logs the table of ranks right before the link test
    until grep -q "ranks: rank 2" "$TMP/h/logs/rank-00000.log" 2>/dev/null; do
        [ $(($(date +%s) - t0)) -gt 60 ] && break
        sleep 0.1
    done
    bash "$NODE" cut 2
    tcut=$(date +%s)
    until grep -q "did not complete within" "$TMP/h.out"; do
        [ $(($(date +%s) - tcut)) -gt 60 ] && break
        sleep 0.2
    done
    dt=$(($(date +%s) - tcut))
    bash "$NODE" connect 2
    # srun would wait for the cut node's step to report; the verdict is in
    scancel -n ddp-preflight-h 2>/dev/null
    wait $spid
    rc=$?
    bash "$NODE" rate 2 none
    line=$(grep -m 1 "did not complete within 15 s" "$TMP/h.out" | sed 's/.*\(ddptrain: error: \)/\1/')
    echo "   (h) exit $rc; $dt s after the cut: $line"
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $dt -le 25 ] && echo "$line" | grep -q "rank 1 on host vn2"; then
        ok "(h) vn2 cut during the link test: the timeout line names rank 1 on vn2 $dt s after the cut, exit $rc"
    else
        bad "(h) vn2 cut during the link test: exit $rc, $dt s after the cut, no timeout line naming rank 1 on vn2"
        tail -n 8 "$TMP/h.out"
    fi
fi
finish
