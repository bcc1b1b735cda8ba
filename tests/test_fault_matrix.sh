#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The fault matrix: a job with one faulty rank ends, every surviving rank within
# --comm_timeout + 15 s of the fault, and the verdict names the faulty rank and its host: in
# the timeout line where a rank timed out, and in ddptrain-diagnose of the job directory.
# On one node, mpirun, 3 ranks, --comm_timeout 5:
#   (i)   rank 1 stopped (SIGSTOP) for good;
#   (ii)  rank 1 killed (SIGKILL);
#   (iii) rank 1 posts one collective too many (the test hook DDPTRAIN_TEST_EXTRA_COLLECTIVE);
#   (iv)  rank 1 dies of a fatal signal (SIGSEGV): its record says so from the handler.
# On the virtual multi-node cluster, when it is up (tests/slurm/multinode_up.sh; these cases
# are skipped otherwise), srun, 2 nodes x 2 ranks:
#   (v)   a network partition: vn2's link goes down (multinode_node.sh cut);
#   (vi)  rank 3, on vn2, stopped for good.
# And ddptrain-diagnose on hand-made records: ranks that disagree on the sequence, a healthy
# set, a missing job directory, one without records, a corrupt record (exit codes, one line).
# Exit 0 pass, 1 fail.
# shellcheck disable=SC2015  # A && ok || bad: ok never fails
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
# shellcheck source=tests/helpers/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/helpers/lib.sh"
mpi_leak_checks_off
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found"; exit "$SKIP"; }
TO=5
LIMIT=$((TO + 15))
DIAG="$top_builddir/ddptrain-diagnose"
BIN=$(cd "$(dirname "$DDPTRAIN")" && pwd)/$(basename "$DDPTRAIN")
SRC=$(cd "$top_srcdir" && pwd)
HOST=$(hostname)
export OMP_NUM_THREADS=1
make_synth "$TMP/data" --train 1536 --test 64 --shards 3
FLAGS=(--data_dir "$TMP/data" --width 8 --blocks 1 --batch_size 16 --epochs 100 --log_interval 1 --threads 1
       --comm_timeout "$TO")
MATRIX="$TMP/matrix"
: >"$MATRIX"


# verdict CASE JOBDIR PATTERN: ddptrain-diagnose exits 1 and its first line matches PATTERN.
verdict() {
    "$DIAG" "$2" >"$TMP/$1.diag" 2>&1
    local rc=$? v
    v=$(head -n 1 "$TMP/$1.diag")
    [ $rc = 1 ] && echo "$v" | grep -qE "$3" && ok "($1) ddptrain-diagnose: $v" ||
        { bad "($1) ddptrain-diagnose exit $rc, not naming /$3/:"; sed 's/^/     | /' "$TMP/$1.diag"; }
    echo "$1|$4|$v" >>"$MATRIX"
}

# ---- one node: (i) to (iv) --------------------------------------------------------------------
# signal_rank1 CASE SIGNAL: 3 ranks; SIGNAL to rank 1 after its second logged step; sets dt
# (seconds from the signal until mpirun, i.e. every rank, ended).
signal_rank1() {
    local job="$TMP/$1"
    signal_rank1_after "$1" "$job" 2 "$2" timeout -k 5 120 mpirun --allow-run-as-root --oversubscribe -np 3 "$BIN" \
        "${FLAGS[@]}" --job_dir "$job" || return 1
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && within "$dt" $LIMIT &&
        ok "($1) SIG$2 to rank 1: every rank ended $dt s later (limit $LIMIT s), mpirun exit $rc" ||
        { bad "($1) SIG$2 to rank 1: mpirun exit $rc after $dt s (limit $LIMIT s)"; tail -n 5 "$TMP/$1.out"; }
    sleep 0.5
    [ -z "$(pgrep -f -- "--job_dir $job")" ] || { bad "($1) processes left: $(pgrep -f -- "--job_dir $job" | tr '\n' ' ')"
        pgrep -f -- "--job_dir $job" | xargs -r kill -KILL; }
    return 0
}

if signal_rank1 i STOP; then
    # Ranks 0 and 2 time out; each names rank 1 in its line.
    line=$(grep -m 1 "did not complete within $TO s" "$TMP/i.out")
    echo "$line" | grep -qE "within $TO s; rank 1 on host $HOST (sent no flight record|never posted|was stopped or frozen)" &&
        ok "(i) the timeout line names rank 1: ${line#*ddptrain: error: }" || bad "(i) timeout line: '$line'"
    verdict i "$TMP/i" "^rank 1 on host $HOST (sent no flight record|never posted|was stopped or frozen)" "$dt"
fi
if signal_rank1 ii KILL; then
    verdict ii "$TMP/ii" "^rank 1 on host $HOST sent no flight record" "$dt"
fi

# (iii) rank 1 posts an 8-byte allreduce at the start of step 3, where the others post the
# first bucket: MPI ends the job on rank 1 (the message it receives does not fit), or the
# ranks time out and the records disagree; either way rank 1 is named.
t0=$(date +%s.%N)
timeout -k 5 120 mpirun --allow-run-as-root --oversubscribe -np 3 -x DDPTRAIN_TEST_EXTRA_COLLECTIVE=1:3 "$BIN" \
    "${FLAGS[@]}" --job_dir "$TMP/iii" >"$TMP/iii.out" 2>&1
rc=$?
dt=$(elapsed "$t0")
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q '"step": 2,' "$TMP/iii/metrics.jsonl" &&
    ! grep -q '"step": 4,' "$TMP/iii/metrics.jsonl" &&
    ok "(iii) one collective too many on rank 1 in step 3: the job ended at step 3 (whole run $dt s), exit $rc" ||
    { bad "(iii) exit $rc after $dt s; steps: $(grep -c '"loss"' "$TMP/iii/metrics.jsonl" 2>/dev/null)"; tail -n 5 "$TMP/iii.out"; }
verdict iii "$TMP/iii" "^rank 1 on host $HOST (posted allreduce of 8 bytes|ended the job on an error of its own).*test hook" \
    "$dt (whole run)"

if signal_rank1 iv SEGV; then
    verdict iv "$TMP/iv" "^rank 1 on host $HOST died of signal 11 \(SIGSEGV\)" "$dt"
fi

# ---- the multi-node cluster: (v), (vi) --------------------------------------------------------
# shellcheck source=tests/slurm/lib.sh disable=SC1091
. "$SRC/tests/slurm/lib.sh"
NODE="$SRC/tests/slurm/multinode_node.sh"
mn_is_up() {
    [ -f "$MN_STATE" ] && command -v srun >/dev/null 2>&1 && command -v ip >/dev/null 2>&1 || return 1
    # shellcheck disable=SC1090
    SLURM_CONF=$(. "$MN_STATE"; echo "$SLURM_CONF")
    export SLURM_CONF
    [ "$(sinfo -h -o %t 2>/dev/null | sort -u | tr -d '\n')" = idle ]
}
# ranks_in I: pids of the ddptrain processes in node I's namespace.
ranks_in() {
    for p in $(ip netns pids "ddpmn-vn$1" 2>/dev/null); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = ddptrain ] && echo "$p"
    done
}
# A node this test cut is put back, and a job it started ended, for whoever uses the cluster
# next, even when the test is interrupted.
CUT=0 MN_BG=""
# shellcheck disable=SC2317  # called by the EXIT trap
mn_cleanup() {
    [ -n "$MN_BG" ] && kill "$MN_BG" 2>/dev/null
    [ "$CUT" = 1 ] && bash "$NODE" connect 2 2>/dev/null
    rm -rf "$TMP"
}
trap mn_cleanup EXIT
# mn_case CASE FAULT: 4 ranks on vn1, vn2; FAULT after the second logged step; dt = seconds
# until every rank that is not at fault ended.
mn_case() {
    local job="$TMP/$1" bg t0 p3="" survivors
    timeout -k 5 150 srun -t 5 -N 2 --ntasks-per-node=2 -c 1 --mpi=pmix "$BIN" "${FLAGS[@]}" --job_dir "$job" \
        >"$TMP/$1.out" 2>&1 &
    bg=$!
    MN_BG=$bg
    for _ in $(seq 1 450); do
        grep -q '"step": 2,' "$job/metrics.jsonl" 2>/dev/null && break
        kill -0 $bg 2>/dev/null || break
        sleep 0.2
    done
    grep -q '"step": 2,' "$job/metrics.jsonl" 2>/dev/null || { bad "($1) no step logged: $(tail -n 3 "$TMP/$1.out")"
        kill $bg 2>/dev/null; wait $bg; return 1; }
    if [ "$2" = cut ]; then
        survivors=1
        t0=$(date +%s.%N)
        CUT=1
        bash "$NODE" cut 2
    else
        for p in $(ranks_in 2); do
            tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "SLURM_PROCID=3" && p3=$p
        done
        [ -n "$p3" ] || { bad "($1) rank 3 not found on vn2"; kill $bg; wait $bg; return 1; }
        survivors="1 2"
        t0=$(date +%s.%N)
        kill -STOP "$p3"
    fi
    # every rank but the faulty ones gone
    dt=""
    for _ in $(seq 1 $(((LIMIT + 10) * 5))); do
        left=""
        for n in $survivors; do
            for p in $(ranks_in "$n"); do [ "$p" = "$p3" ] || left="$left $p"; done
        done
        [ -z "$left" ] && { dt=$(elapsed "$t0"); break; }
        sleep 0.2
    done
    [ -n "$dt" ] && within "$dt" $LIMIT && ok "($1) every rank not at fault ended within $dt s (limit $LIMIT s)" ||
        bad "($1) ranks still running $(elapsed "$t0") s after the fault:$left"
    [ "$2" = cut ] && bash "$NODE" connect 2 && CUT=0
    [ -n "$p3" ] && kill -KILL "$p3" 2>/dev/null
    wait $bg
    MN_BG=""
    for _ in $(seq 1 120); do [ "$(sinfo -h -o %t | sort -u | tr -d '\n')" = idle ] && break; sleep 0.5; done
    return 0
}

if ! mn_is_up; then
    echo "SKIP: (v) network partition, (vi) stopped remote rank: the multi-node test cluster is not up"
    echo "v|skipped|" >>"$MATRIX"; echo "vi|skipped|" >>"$MATRIX"
else
    if mn_case v cut; then
        line=$(grep -o "rank [01]: collective [a-z]* ([^)]*) did not complete within $TO s; .*" "$TMP/v.out" | head -n 1)
        echo "$line" | grep -q "host vn2" && ok "(v) the line of a rank on vn1 names vn2: $line" ||
            bad "(v) no timeout line of a rank on vn1 naming vn2: $(grep -i error "$TMP/v.out" | head -n 3)"
        verdict v "$TMP/v" "^host vn2 \(ranks 2, 3\) does not answer on the network from host vn1" "$dt"
    fi
    if mn_case vi stop; then
        line=$(grep -o "rank [012]: collective [a-z]* ([^)]*) did not complete within $TO s; .*" "$TMP/vi.out" | head -n 1)
        echo "$line" | grep -qE "within $TO s; rank 3 on host vn2 (sent no flight record|never posted|was stopped or frozen)" &&
            ok "(vi) the timeout line names rank 3 on vn2: $line" || bad "(vi) timeout line: '$line'"
        verdict vi "$TMP/vi" "^rank 3 on host vn2 (sent no flight record|never posted|was stopped or frozen)" "$dt"
    fi
fi

# ---- ddptrain-diagnose on hand-made records -----------------------------------------------------
# record DIR RANK HOST REASON COLLECTIVE-LINES...: a rank's flight record of a 3-rank job.
record() {
    local dir=$1 q=$2 host=$3 reason=$4; shift 4
    mkdir -p "$dir/flight"
    { echo "ddptrain flight record 1"; echo "rank $q of 3"; echo "host $host"; echo "pid 100$q"
      echo "clock 1764540000.500000"; echo "reason $reason"; echo "last_step 7"
      echo "peer 0 n0"; echo "peer 1 n1"; echo "peer 2 n2"
      echo "# seq kind state step bucket n_buckets bytes posted completed context"
      for c in "$@"; do echo "c $c"; done; echo "end"; } >"$dir/flight/rank-0000$q.txt"
}
ok_c="completed 7 0 2 4096 1764540000.100000 1764540000.200000 step 7, bucket 0 of 2"
d="$TMP/seq"
record "$d" 0 n0 timeout "40 iallreduce $ok_c" "41 iallreduce timeout 7 1 2 8192 1764540000.300000 0 step 7, bucket 1 of 2"
record "$d" 1 n1 timeout "40 iallreduce $ok_c" "41 allreduce timeout 7 -1 0 8 1764540000.300000 0 extra"
record "$d" 2 n2 timeout "40 iallreduce $ok_c" "41 iallreduce timeout 7 1 2 8192 1764540000.300000 0 step 7, bucket 1 of 2"
"$DIAG" "$d" >"$TMP/seq.diag" 2>&1; rc=$?
[ $rc = 1 ] && head -n 1 "$TMP/seq.diag" | grep -q "^rank 1 on host n1 posted allreduce of 8 bytes .* as collective #41, where ranks 0, 2 posted iallreduce of 8192 bytes (bucket 1 of 2 in step 7)" &&
    ok "(records) sequences that disagree: $(head -n 1 "$TMP/seq.diag")" || { bad "(records) disagreement: exit $rc"; cat "$TMP/seq.diag"; }
# a partition: every rank posted #41 and none completed it; ranks 0 and 1 found host n2 silent
# (and rank 2 them): the lowest rank's side is taken for the job's
d="$TMP/cut"
stuck="41 iallreduce timeout 7 1 2 8192 1764540000.300000 0 step 7, bucket 1 of 2"
record "$d" 0 n0 timeout "40 iallreduce $ok_c" "$stuck"
record "$d" 1 n1 timeout "40 iallreduce $ok_c" "$stuck"
record "$d" 2 n2 timeout "40 iallreduce $ok_c" "$stuck"
sed -i 's/^end$/silent n2\nend/' "$d/flight/rank-00000.txt" "$d/flight/rank-00001.txt"
sed -i 's/^end$/silent n0\nsilent n1\nend/' "$d/flight/rank-00002.txt"
"$DIAG" "$d" >"$TMP/cut.diag" 2>&1; rc=$?
[ $rc = 1 ] && head -n 1 "$TMP/cut.diag" | grep -q "^host n2 (rank 2) does not answer on the network from host n0: every rank posted bucket 1 of 2 in step 7 (collective #41) and none completed it" &&
    ok "(records) a partition: $(head -n 1 "$TMP/cut.diag")" || { bad "(records) partition: exit $rc"; cat "$TMP/cut.diag"; }
# the same where rank 1 received all it needed for #41 before the cut and waits in #42: not
# "none completed it"
d="$TMP/cut1"
record "$d" 0 n0 timeout "40 iallreduce $ok_c" "$stuck"
record "$d" 1 n1 timeout "40 iallreduce $ok_c" "41 iallreduce completed 7 1 2 8192 1764540000.300000 1764540000.400000 step 7, bucket 1 of 2" \
    "42 allreduce timeout 7 -1 0 16 1764540000.500000 0 loss for the log"
record "$d" 2 n2 timeout "40 iallreduce $ok_c" "$stuck"
sed -i 's/^end$/silent n2\nend/' "$d/flight/rank-00000.txt" "$d/flight/rank-00001.txt"
sed -i 's/^end$/silent n0\nsilent n1\nend/' "$d/flight/rank-00002.txt"
"$DIAG" "$d" >"$TMP/cut1.diag" 2>&1; rc=$?
[ $rc = 1 ] && head -n 1 "$TMP/cut1.diag" | grep -q "^host n2 (rank 2) does not answer on the network from host n0: every rank posted bucket 1 of 2 in step 7 (collective #41) and ranks 0, 2 did not complete it" &&
    ok "(records) a partition, one rank a collective ahead: $(head -n 1 "$TMP/cut1.diag")" ||
    { bad "(records) partition with rank 1 ahead: exit $rc"; cat "$TMP/cut1.diag"; }
# the same where the cut-off node cannot reach the file system either: no record from rank 2
d="$TMP/cut"
rm "$d/flight/rank-00002.txt"
"$DIAG" "$d" >"$TMP/cut2.diag" 2>&1; rc=$?
[ $rc = 1 ] && head -n 1 "$TMP/cut2.diag" | grep -q "^rank 2 on host n2 sent no flight record; its host does not answer on the network from host n0; ranks 0, 1 waited in bucket 1 of 2 in step 7 (collective #41)" &&
    ok "(records) a partition, no record from the far side: $(head -n 1 "$TMP/cut2.diag")" ||
    { bad "(records) partition without the far side's record: exit $rc"; cat "$TMP/cut2.diag"; }
d="$TMP/healthy"
for q in 0 1 2; do record "$d" $q n$q "signal 15" "40 iallreduce $ok_c"; done
"$DIAG" "$d" >"$TMP/healthy.diag" 2>&1; rc=$?
[ $rc = 0 ] && grep -q "^no fault recorded" "$TMP/healthy.diag" && ok "(records) a cancelled job: exit 0, $(head -n 1 "$TMP/healthy.diag")" ||
    { bad "(records) healthy records: exit $rc"; cat "$TMP/healthy.diag"; }
"$DIAG" "$TMP/nonexistent" >"$TMP/e1" 2>&1; rc=$?
[ $rc = 2 ] && [ "$(wc -l <"$TMP/e1")" = 1 ] && grep -q "nonexistent: No such file or directory" "$TMP/e1" &&
    ok "(records) a missing job directory: exit 2, $(cat "$TMP/e1")" || bad "(records) missing dir: exit $rc: $(cat "$TMP/e1")"
mkdir -p "$TMP/empty/flight"
"$DIAG" "$TMP/empty" >"$TMP/e2" 2>&1; rc=$?
[ $rc = 2 ] && [ "$(wc -l <"$TMP/e2")" = 1 ] && grep -q "no flight records" "$TMP/e2" &&
    ok "(records) no records: exit 2, $(cat "$TMP/e2")" || bad "(records) no records: exit $rc: $(cat "$TMP/e2")"
d="$TMP/corrupt"
record "$d" 0 n0 timeout "40 iallreduce $ok_c"
record "$d" 1 n1 timeout "40 iallreduce $ok_c"
head -n 8 "$d/flight/rank-00001.txt" >"$d/flight/rank-00001.tmp" && mv "$d/flight/rank-00001.tmp" "$d/flight/rank-00001.txt"
"$DIAG" "$d" >"$TMP/e3" 2>&1; rc=$?
[ $rc = 2 ] && [ "$(wc -l <"$TMP/e3")" = 1 ] && grep -q "flight/rank-00001.txt: corrupt flight record: cut short" "$TMP/e3" &&
    ok "(records) a record cut short: exit 2, $(cat "$TMP/e3")" || bad "(records) corrupt: exit $rc: $(cat "$TMP/e3")"

# ---- the matrix ---------------------------------------------------------------------------------
echo "   fault matrix (--comm_timeout $TO; seconds until every rank not at fault ended | verdict):"
while IFS='|' read -r c t v; do
    [ "$t" = skipped ] && printf '     | (%s) skipped (no multi-node cluster up)\n' "$c" || printf '     | (%s) %s s | %s\n' "$c" "$t" "$v"
done <"$MATRIX"
finish
