#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The job directory belongs to one run, and nothing in it leads elsewhere (docs/job-directory.md):
#  (a) a second run given the job directory of a run still going is refused in one line naming
#      the directory and the holder (pid, host), exits non-zero and writes nothing there: the
#      first run's config.json, logs, metrics.jsonl and checkpoints stay its own; on 2 ranks
#      (mpirun) the same, every rank ending without a hang
#  (b) a stale lock is taken over, the run's log saying whose: a run killed with SIGKILL, a lock
#      naming a pid gone on this host, the lock of an earlier restart of the same Slurm job on
#      another host; another job's lock on another host is refused and the directory untouched;
#      2 ranks ended by an error after start-up (MPI_Abort) leave no lock
#  (c) a symbolic link under a name ddptrain writes (checkpoints, checkpoints/latest, logs,
#      logs/rank-00000.log, metrics.jsonl), or a FIFO as metrics.jsonl, is refused in one line
#      (1 rank, and 2 for checkpoints), without a hang, and nothing is written through it
#  (d) a --data_dir holding a newline and an escape: the start-up refusals (missing, empty, no
#      shards, a file instead of a directory; 1 and 2 ranks) and an uncreatable --job_dir so
#      named are one line each with no escape byte; a run from such a --data_dir into such a
#      --job_dir logs both quoted.
# Exit 0 pass, 1 fail.
# shellcheck disable=SC2015,SC2016,SC2086  # A && ok || bad: ok never fails; link_case's snippets expand when run; $MPIRUN is a word list
# Run by `sh` (make check uses $(SHELL)): continue under bash.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
# shellcheck source=tests/helpers/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/helpers/lib.sh"
export OMP_NUM_THREADS=1
mpi_leak_checks_off   # ranks started by mpirun (see tests/helpers/lib.sh)
make_synth "$TMP/d" --size 32 --train 256 --test 64
FLAGS=(--data_dir "$TMP/d" --width 4 --threads 1)
MPIRUN="mpirun --allow-run-as-root --oversubscribe"
HAVE_MPI=0
command -v mpirun >/dev/null 2>&1 && "$DDPTRAIN" --version | grep -q '^MPI: ' && HAVE_MPI=1
HOST=$(hostname)
ESC=$(printf '\033')
NL='
'

nlines() { wc -l <"$1" | tr -d ' '; }
# snapshot DIR: every path below DIR with its type, size and mtime (nanoseconds), sorted
snapshot() { find "$1" -printf '%P %y %s %T@\n' | sort; }
# wait_for FILE PATTERN [SECONDS]: until FILE holds PATTERN (grep -E); 1 on timeout
wait_for() {
    for _ in $(seq 1 $((${3:-60} * 10))); do grep -Eqs -- "$2" "$1" && return 0; sleep 0.1; done
    return 1
}
# one_error NAME FILE PATTERN: FILE (a run's stderr) is one line matching PATTERN
one_error() {
    if [ "$(nlines "$2")" = 1 ] && grep -Eq -- "$3" "$2"; then ok "$1: one line: $(cat "$2")"
    else bad "$1: want one line matching /$3/, got $(nlines "$2"): $(head -c 600 "$2")"; fi
}

# ---- (a) two runs, one job directory -----------------------------------------------------------
J=$TMP/ja
"$DDPTRAIN" "${FLAGS[@]}" --job_dir "$J" --epochs 10000 --lr 0.05 >"$TMP/a1.out" 2>&1 &
A=$!
if ! wait_for "$J/logs/rank-00000.log" "training: "; then
    bad "(a) the first run never started training: $(tail -3 "$TMP/a1.out")"
else
    timeout -k 5 60 "$DDPTRAIN" "${FLAGS[@]}" --job_dir "$J" --epochs 1 --max_steps 2 --lr 0.0123 \
        >"$TMP/b1.out" 2>"$TMP/b1.err"
    rc=$?
    kill -0 $A 2>/dev/null || bad "(a) the first run ended before the second was refused (too fast a machine?)"
    [ $rc != 0 ] && [ $rc != 124 ] && ok "(a) second run refused (exit $rc)" || bad "(a) second run: exit $rc, want a refusal"
    one_error "(a) second run" "$TMP/b1.err" "--job_dir $J: in use by pid $A on host $HOST \\(since [0-9-]+ [0-9:]+\\)"
    kill -TERM $A   # a preemption: a checkpoint, exit 3
    wait $A
    rca=$?
    [ $rca = 3 ] && ok "(a) first run preempted and ended (exit 3)" || bad "(a) first run: exit $rca: $(tail -3 "$TMP/a1.out")"
    grep -q '"lr": 0.05' "$J/config.json" && ! grep -q 0.0123 "$J/config.json" &&
        ok "(a) config.json is the first run's" || bad "(a) config.json: $(grep '"lr"' "$J/config.json")"
    n=$(grep -c "job dir" "$J/logs/rank-00000.log")
    [ "$n" = 1 ] && ok "(a) one run logged in rank-00000.log" || bad "(a) $n runs logged in rank-00000.log"
    ! grep -q '"step": 2,' "$J/metrics.jsonl" || [ "$(grep -c '"step": 2,' "$J/metrics.jsonl")" = 1 ] &&
        ok "(a) metrics.jsonl holds one run's steps" || bad "(a) metrics.jsonl holds a step twice"
    latest=$(cat "$J/checkpoints/latest" 2>/dev/null)
    grep -q "^preemption: signal received" "$TMP/a1.out" && [ -n "$latest" ] && [ -f "$J/checkpoints/$latest" ] &&
        ok "(a) the first run's checkpoint $latest is there" || bad "(a) no checkpoint of the first run: latest '$latest'"
    [ ! -e "$J/.lock" ] && ok "(a) lock removed at exit" || bad "(a) $J/.lock left after the run: $(cat "$J/.lock")"
fi

if [ $HAVE_MPI = 1 ]; then
    J=$TMP/ja2
    $MPIRUN -np 2 "$DDPTRAIN" "${FLAGS[@]}" --job_dir "$J" --epochs 10000 >"$TMP/a2.out" 2>&1 &
    A=$!
    if ! wait_for "$J/logs/rank-00001.log" "training: "; then
        bad "(a) 2 ranks: the first run never started training: $(tail -3 "$TMP/a2.out")"
    else
        t0=$(date +%s.%N)
        timeout -k 5 60 $MPIRUN -np 2 "$DDPTRAIN" "${FLAGS[@]}" --job_dir "$J" --epochs 1 --max_steps 2 >"$TMP/b2.out" 2>&1
        rc=$?
        dt=$(elapsed "$t0")
        [ $rc != 0 ] && [ $rc != 124 ] && [ $rc != 137 ] && ok "(a) 2 ranks: second run refused in $dt s (exit $rc)" ||
            bad "(a) 2 ranks: second run: exit $rc after $dt s"
        grep '^ddptrain: error:' "$TMP/b2.out" >"$TMP/b2.err"
        if [ -s "$TMP/b2.err" ] && ! grep -vq "in use by pid [0-9]* on host $HOST" "$TMP/b2.err"; then
            ok "(a) 2 ranks: every error line names the holder: $(head -n 1 "$TMP/b2.err")"
        else bad "(a) 2 ranks: $(head -c 800 "$TMP/b2.out")"; fi
        kill -TERM $A
        wait $A
        n=$(cat "$J"/logs/rank-*.log | grep -c "job dir")
        [ "$n" = 2 ] && ok "(a) 2 ranks: one run in the logs" || bad "(a) 2 ranks: $n start lines in the logs"
    fi
else
    echo "(a) 2 ranks: skipped (no mpirun, or ddptrain without MPI)"
fi

# ---- (b) stale locks ---------------------------------------------------------------------------
J=$TMP/jb
"$DDPTRAIN" "${FLAGS[@]}" --job_dir "$J" --epochs 10000 >"$TMP/k.out" 2>&1 &
A=$!
if wait_for "$J/logs/rank-00000.log" "training: "; then
    kill -KILL $A
    wait $A 2>/dev/null
    "$DDPTRAIN" "${FLAGS[@]}" --job_dir "$J" --epochs 1 --max_steps 2 >"$TMP/k2.out" 2>&1
    rc=$?
    [ $rc = 0 ] && grep -q "took over the lock of pid $A on host $HOST" "$TMP/k2.out" &&
        ok "(b) after a run killed with SIGKILL: $(grep 'took over' "$TMP/k2.out")" ||
        bad "(b) after SIGKILL: exit $rc: $(grep -E 'lock|error' "$TMP/k2.out" | head -3)"
    [ ! -e "$J/.lock" ] && ok "(b) lock removed at exit" || bad "(b) $J/.lock left after the run"
else
    bad "(b) the run to kill never started training: $(tail -3 "$TMP/k.out")"
fi

# an error after start-up on 2 ranks ends the job through MPI_Abort, which runs no atexit handler
if [ $HAVE_MPI = 1 ]; then
    J=$TMP/jb-err
    timeout -k 5 60 $MPIRUN -np 2 "$DDPTRAIN" "${FLAGS[@]}" --job_dir "$J" --epochs 1 --resume "$TMP/none.h5" >"$TMP/e.out" 2>&1
    rc=$?
    [ $rc != 0 ] && [ $rc != 124 ] && [ -d "$J/logs" ] && [ ! -e "$J/.lock" ] &&
        ok "(b) 2 ranks ended by an error after start-up (exit $rc): no lock left" ||
        bad "(b) 2 ranks ended by an error after start-up: exit $rc, lock: $(cat "$J/.lock" 2>&1)"
fi

# plant LOCK_TEXT into a fresh job directory
plant() { rm -rf "$1"; mkdir -p "$1"; printf '%s' "$2" >"$1/.lock"; }

sh -c 'exit 0' &
gone=$!
wait $gone
# $1 = label, $2 = the job dir (its lock planted), $3 = what the log must say; the rest: env
# assignments for the run. The run must take the lock over and train.
taken_over() {
    label=$1 J=$2 want=$3
    shift 3
    env "$@" "$DDPTRAIN" "${FLAGS[@]}" --job_dir "$J" --epochs 1 --max_steps 2 >"$TMP/t.out" 2>&1
    rc=$?
    [ $rc = 0 ] && grep -q "$want" "$TMP/t.out" &&
        ok "(b) $label: $(grep 'took over' "$TMP/t.out")" ||
        bad "(b) $label: exit $rc: $(grep -E 'lock|error' "$TMP/t.out" | head -3)"
}

J=$TMP/jb2
plant "$J" "pid $gone${NL}host $HOST${NL}job ${NL}restart 0${NL}started 1796000000${NL}"
taken_over "a pid gone on this host" "$J" "took over the lock of pid $gone on host $HOST"

J=$TMP/jb3
plant "$J" "pid 777${NL}host other-node${NL}job 4242${NL}restart 0${NL}started 1796000000${NL}"
taken_over "the same Slurm job requeued" "$J" "took over the lock of pid 777 on host other-node (job 4242" \
    SLURM_JOB_ID=4242 SLURM_RESTART_COUNT=1

J=$TMP/jb4
plant "$J" "pid 777${NL}host other-node${NL}job 4242${NL}restart 0${NL}started 1796000000${NL}"
before=$(snapshot "$J")
SLURM_JOB_ID=4243 "$DDPTRAIN" "${FLAGS[@]}" --job_dir "$J" --epochs 1 --max_steps 2 >"$TMP/o.out" 2>"$TMP/o.err"
rc=$?
[ $rc != 0 ] && ok "(b) another job's lock on another host: refused (exit $rc)" || bad "(b) another job's lock: exit 0"
one_error "(b) another job's lock" "$TMP/o.err" "--job_dir $J: in use by pid 777 on host other-node \\(job 4242, since .*remove $J/.lock"
[ "$(snapshot "$J")" = "$before" ] && ok "(b) another job's lock: nothing written" ||
    bad "(b) another job's lock: the directory changed: $(diff <(echo "$before") <(snapshot "$J") | head -5)"

# ---- (c) links and special files in the job directory ---------------------------------------------
# link_case NAME RANKS SETUP: SETUP (a shell snippet, $J and $O set) prepares job directory $J
# and the outside $O; the run must be refused in one line, write nothing into $J and change
# nothing in $O.
link_case() {
    name=$1 np=$2 setup=$3
    J=$TMP/jc-$name O=$TMP/out-$name
    rm -rf "$J" "$O"
    mkdir -p "$J" "$O"
    eval "$setup"
    before_j=$(snapshot "$J") before_o=$(snapshot "$O")
    if [ "$np" = 1 ]; then
        timeout -k 5 60 "$DDPTRAIN" "${FLAGS[@]}" --job_dir "$J" --epochs 1 --max_steps 2 >"$TMP/c.out" 2>"$TMP/c.err"
        rc=$?
    else
        timeout -k 5 60 $MPIRUN -np "$np" "$DDPTRAIN" "${FLAGS[@]}" --job_dir "$J" --epochs 1 --max_steps 2 >"$TMP/c.out" 2>&1
        rc=$?
        grep '^ddptrain: error:' "$TMP/c.out" | head -n 1 >"$TMP/c.err"
    fi
    [ $rc != 0 ] && [ $rc != 124 ] && [ $rc != 137 ] && ok "(c) $name, $np rank(s): refused (exit $rc)" ||
        bad "(c) $name, $np rank(s): exit $rc"
    one_error "(c) $name, $np rank(s)" "$TMP/c.err" "--job_dir $J: .*(is a symbolic link|is not a regular file)"
    [ "$(snapshot "$J")" = "$before_j" ] && ok "(c) $name: nothing written in the job directory" ||
        bad "(c) $name: the job directory changed: $(diff <(echo "$before_j") <(snapshot "$J") | head -5)"
    [ "$(snapshot "$O")" = "$before_o" ] && ok "(c) $name: nothing written through it" ||
        bad "(c) $name: written through: $(diff <(echo "$before_o") <(snapshot "$O") | head -5)"
}
link_case checkpoints 1 'ln -s "$O" "$J/checkpoints"'
[ $HAVE_MPI = 1 ] && link_case checkpoints2 2 'ln -s "$O" "$J/checkpoints"'
link_case latest 1 'mkdir "$J/checkpoints"; echo victim >"$O/f"; ln -s "$O/f" "$J/checkpoints/latest"'
link_case logs 1 'ln -s "$O" "$J/logs"'
link_case rank-log 1 'mkdir "$J/logs"; echo victim >"$O/f"; ln -s "$O/f" "$J/logs/rank-00000.log"'
link_case metrics 1 'echo victim >"$O/f"; ln -s "$O/f" "$J/metrics.jsonl"'
link_case metrics-fifo 1 'mkfifo "$J/metrics.jsonl"'

# ---- (d) control characters in a --data_dir and a --job_dir -------------------------------------
D="$TMP/x${NL}y${ESC}[31m"
# no_escape NAME FILE: FILE holds no escape byte and no line begins with the name's second part
no_escape() {
    if ! grep -q "$ESC" "$2" && ! grep -q '^y' "$2"; then ok "$1: no raw newline or escape"
    else bad "$1: printed raw: $(head -c 400 "$2" | od -c | head -n 4)"; fi
}
for state in missing empty no-shards file; do
    rm -rf "$D"
    case $state in
        empty) mkdir "$D" ;;
        no-shards) mkdir "$D"; : >"$D/other.h5" ;;
        file) : >"$D" ;;
    esac
    "$DDPTRAIN" --data_dir "$D" --job_dir "$TMP/jd" --width 4 --epochs 1 >"$TMP/dd.out" 2>"$TMP/dd.err"
    rc=$?
    [ $rc != 0 ] && [ ! -e "$TMP/jd" ] && ok "(d) --data_dir $state: refused, no job directory" ||
        bad "(d) --data_dir $state: exit $rc"
    one_error "(d) --data_dir $state" "$TMP/dd.err" '^ddptrain: error: "[^"]*/x\\ny\\033\[31m": '
    no_escape "(d) --data_dir $state" "$TMP/dd.err"
    if [ $HAVE_MPI = 1 ] && [ $state = missing ]; then
        # rank 1 alone fails: rank 0 repeats its reason for the job (world.c's start-up check)
        timeout -k 5 60 $MPIRUN -np 1 "$DDPTRAIN" --data_dir "$TMP/d" --job_dir "$TMP/jd" --width 4 --epochs 1 : \
            -np 1 "$DDPTRAIN" --data_dir "$D" --job_dir "$TMP/jd" --width 4 --epochs 1 >"$TMP/dd2.out" 2>&1
        rc=$?
        [ $rc != 0 ] && [ $rc != 124 ] && [ ! -e "$TMP/jd" ] &&
            grep -q '^ddptrain: error: rank 1 failed at start-up on host [^ ]*: "[^"]*/x\\ny\\033\[31m": ' "$TMP/dd2.out" &&
            ok "(d) --data_dir $state on rank 1 of 2: refused, rank 0 repeats the reason (exit $rc)" ||
            bad "(d) --data_dir $state on rank 1 of 2: exit $rc: $(head -c 400 "$TMP/dd2.out")"
        no_escape "(d) --data_dir $state on rank 1 of 2" "$TMP/dd2.out"
    fi
done
rm -rf "$D"
: >"$TMP/file"
"$DDPTRAIN" "${FLAGS[@]}" --job_dir "$TMP/file/x${NL}y${ESC}[31m" --epochs 1 >"$TMP/jj.out" 2>"$TMP/jj.err"
one_error "(d) --job_dir that cannot be created" "$TMP/jj.err" '^ddptrain: error: --job_dir "[^"]*/x\\ny\\033\[31m": '
no_escape "(d) --job_dir that cannot be created" "$TMP/jj.err"
ln -s "$TMP/d" "$D"
"$DDPTRAIN" --data_dir "$D" --job_dir "$TMP/j${NL}y${ESC}[31m" --width 4 --epochs 1 --max_steps 2 >"$TMP/ok.out" 2>&1
rc=$?
[ $rc = 0 ] && grep -q '^data: "[^"]*/x\\ny\\033\[31m": train' "$TMP/ok.out" &&
    grep -q 'job dir "[^"]*/j\\ny\\033\[31m"$' "$TMP/ok.out" && ok "(d) a run from and into such names: both quoted in the log" ||
    bad "(d) a run from and into such names: exit $rc: $(grep -E 'job dir|^data' "$TMP/ok.out" | head -c 400)"
no_escape "(d) a run from and into such names" "$TMP/ok.out"
finish
