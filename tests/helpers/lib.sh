# SPDX-License-Identifier: BSD-3-Clause
# tests/helpers/lib.sh - shared helpers for the shell tests (sourced).
# Automake runs each test with top_builddir/top_srcdir exported; default to the source layout.
top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
DDPTRAIN="$top_builddir/ddptrain"
DDPDATA="$top_builddir/ddptrain-data"
SKIP=77

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ddptest.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

FAILS=0
ok()   { echo "ok: $*"; }
bad()  { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
finish() { if [ "$FAILS" -eq 0 ]; then echo "all checks passed"; exit 0; else echo "$FAILS check(s) failed"; exit 1; fi; }

# A python3 that can import the given modules (PyTorch, h5py, ...). Debian installs
# python3-torch for the system interpreter, which may not be the first python3 in PATH.
find_python() {
    for py in "${PYTHON:-}" python3 /usr/bin/python3; do
        [ -n "$py" ] || continue
        command -v "$py" >/dev/null 2>&1 || continue
        if "$py" -c "import $1" >/dev/null 2>&1; then echo "$py"; return 0; fi
    done
    return 1
}

# A small synthetic dataset shared by tests: $1 = out dir, then extra synth flags.
make_synth() {
    out=$1; shift
    "$DDPDATA" synth --out "$out" "$@" >/dev/null || { echo "FAIL: ddptrain-data synth $*"; exit 1; }
}

# Processes started by mpirun or srun: Open MPI's plugins are unloaded at exit, so their
# process-lifetime allocations show up in LeakSanitizer as leaks of an unknown module that no
# suppression can name. Sanitizer builds check leaks in the single-process tests and turn the
# check off for launched ranks (the other sanitizer checks stay on).
mpi_leak_checks_off() {
    if [ "${DDP_SANITIZE:-no}" = yes ]; then ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0; export ASAN_OPTIONS; fi
}

# rank_pid JOB_DIR RANK: the pid of the ddptrain process of RANK (an mpirun launch) whose command
# line names --job_dir JOB_DIR; empty when there is none (yet).
rank_pid() {
    for p in $(pgrep -f -- "--job_dir $1"); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = ddptrain ] || continue
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$p"; return; }
    done
}

# train_job JOB_DIR NRANKS FLAGS...: ddptrain with $FLAGS and FLAGS (one process, or NRANKS under
# mpirun), its output in JOB_DIR.out; returns ddptrain's status (60 s at most)
# shellcheck disable=SC2086  # $FLAGS is a word list
train_job() {
    dir=$1 np=$2; shift 2
    if [ "$np" = 1 ]; then
        timeout -k 5 60 "$DDPTRAIN" $FLAGS --job_dir "$dir" "$@" >"$dir.out" 2>&1
    else
        timeout -k 5 60 mpirun --allow-run-as-root --oversubscribe -np "$np" "$DDPTRAIN" $FLAGS --job_dir "$dir" "$@" \
            >"$dir.out" 2>&1
    fi
}
# check LABEL ARGS...: "$PY" "$CMP" ARGS (a checker against an independent reference) must agree;
# refused LABEL ARGS...: it must find disagreements (a wrong variant it has to catch), and say so
# with the word "disagreement"
check() {
    label=$1; shift
    if "$PY" "$CMP" "$@" >"$TMP/c.out" 2>&1; then ok "$label: $(tail -1 "$TMP/c.out" | cut -c1-200)"
    else bad "$label"; head -20 "$TMP/c.out"; fi
}
refused() {
    label=$1; shift
    if "$PY" "$CMP" "$@" >"$TMP/c.out" 2>&1; then bad "$label: the check passed"; head -20 "$TMP/c.out"
    elif grep -q "disagreement" "$TMP/c.out"; then ok "$label: $(tail -1 "$TMP/c.out" | cut -c1-200)"
    else bad "$label: the check failed otherwise"; head -20 "$TMP/c.out"; fi
}
# ckpt JOB_DIR STEP: the path of the job's checkpoint of that step
ckpt() { printf '%s/checkpoints/ckpt-%09d.h5' "$1" "$2"; }
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }   # seconds since $1
within() { awk -v d="$1" -v m="$2" 'BEGIN{exit !(d <= m)}'; }                    # $1 <= $2

# rank1_when JOB_DIR BG CMD...: waits up to 60 s, while BG (an mpirun of ddptrain --job_dir
# JOB_DIR) runs, for CMD to succeed; then sets pid1 to rank 1's pid. pid1 is empty when CMD never
# succeeded, BG ended first, or rank 1's process was not found.
rank1_when() {
    _rj=$1 _rbg=$2
    shift 2
    pid1=""
    for _ in $(seq 1 300); do
        if "$@"; then pid1=$(rank_pid "$_rj" 1); break; fi
        kill -0 "$_rbg" 2>/dev/null || break
        sleep 0.2
    done
}

# signal_rank1_after CASE JOB_DIR STEP SIGNAL LAUNCH...: start LAUNCH (an mpirun of ddptrain
# --job_dir JOB_DIR) in the background with its output in $TMP/CASE.out, send SIGNAL to rank 1
# once its log shows "step STEP/", and wait for LAUNCH. Sets pid1, rc (LAUNCH's exit status) and
# dt (seconds from the signal to LAUNCH's end); returns 1, after a FAIL line, when rank 1 never
# got that far (60 s).
signal_rank1_after() {
    _case=$1 _job=$2 _step=$3 _sig=$4
    shift 4
    "$@" >"$TMP/$_case.out" 2>&1 &
    _bg=$!
    rank1_when "$_job" $_bg grep -qs "step $_step/" "$_job/logs/rank-00001.log"
    if [ -z "$pid1" ]; then
        bad "($_case) rank 1 never logged step $_step or its process was not found"; tail -n 10 "$TMP/$_case.out"
        kill $_bg 2>/dev/null; wait $_bg
        return 1
    fi
    _t0=$(date +%s.%N)
    kill "-$_sig" "$pid1"
    wait $_bg
    rc=$?
    dt=$(elapsed "$_t0")
}
