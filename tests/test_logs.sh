#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# What a run prints and records: on a terminal (a pseudo-terminal from script(1)) the progress
# is one bar redrawn with '\r' and other lines still print whole; in a pipe the plain progress
# line comes every --log_interval steps and no '\r'; every line of every rank's log file has a
# timestamp and [rank r/W host]; warnings go to stderr and not stdout; metrics.jsonl has the
# documented keys; scripts/ddptrain-plot draws a PNG of it and fails clearly without input.
# shellcheck disable=SC2086,SC2015  # word lists in $FLAGS; ok never fails
# shellcheck source=tests/helpers/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/helpers/lib.sh"
mpi_leak_checks_off   # ranks started by mpirun/srun (see tests/helpers/lib.sh)
export OMP_NUM_THREADS=1
make_synth "$TMP/data" --train 256 --test 64 --shards 2
FLAGS="--data_dir $TMP/data --width 4 --blocks 1 --threads 1 --batch_size 32"
CR=$(printf '\r')

# ---- terminal: the bar --------------------------------------------------------------------
if command -v script >/dev/null 2>&1; then
    # 12 steps over 2 epochs (8 per epoch), an evaluation and a checkpoint line at step 8
    # between progress updates.
    COLUMNS=100 timeout -k 5 60 script -qec "'$DDPTRAIN' $FLAGS --job_dir '$TMP/tty' --max_steps 12 --log_interval 1" \
        /dev/null >"$TMP/tty.out" 2>&1
    rc=$?
    t="$TMP/tty.out"
    if [ $rc -ne 0 ]; then
        bad "run on a terminal: exit $rc: $(tail -3 "$t")"
    else
        nbar=$(tr '\r' '\n' <"$t" | grep -c '^epoch [12]/2 \[[#-]*\] .*% [0-9]*/12 loss [0-9.]* [0-9]* img/s ETA [0-9:-]*')
        if [ "$nbar" -ge 12 ] && grep -q "${CR}epoch 1/2 \[" "$t"; then
            ok "terminal: $nbar bar draws with CR (e.g. '$(tr '\r' '\n' <"$t" | grep '^epoch 2/2 ' | tail -1 | sed 's/ *$//')')"
        else
            bad "terminal: $nbar bar draws; output: $(tr '\r' '|' <"$t" | tail -c 400)"
        fi
        if grep -q 'step [0-9]*/12 loss .* images/s' "$t"; then bad "terminal: plain progress lines printed as well"
        else ok "terminal: no plain progress lines"; fi
        # Lines printed while the bar is up are whole lines (after the erased bar).
        if tr '\r' '\n' <"$t" | grep -q '^epoch 1 step 8 test_acc [0-9.]* test_loss' &&
           tr '\r' '\n' <"$t" | grep -q '^checkpoint: .*ckpt-000000008.h5'; then
            ok "terminal: evaluation and checkpoint lines printed whole while the bar is up"
        else
            bad "terminal: evaluation/checkpoint lines missing or broken"
        fi
        if tr '\r' '\n' <"$t" | grep -q '^epoch 2/2 \[#*\] 100% 12/12 ' && grep -q '^done: 12 steps' "$t"; then
            ok "terminal: the bar ends at 100% on its own line; 'done:' follows on a new line"
        else
            bad "terminal: bar end: $(tr '\r' '|' <"$t" | tail -c 300)"
        fi
        n=$(grep -c 'INFO epoch [12] step [0-9]*/12 loss' "$TMP/tty/logs/rank-00000.log")
        [ "$n" -eq 12 ] && ok "terminal: the log file still has the 12 plain progress lines" ||
            bad "terminal: $n progress lines in the log file"
    fi
else
    echo "skip: no script(1): terminal checks"
fi

# ---- pipe: plain lines every log_interval ---------------------------------------------------
timeout -k 5 60 "$DDPTRAIN" $FLAGS --job_dir "$TMP/pipe" --max_steps 12 --log_interval 4 2>"$TMP/pipe.err" | cat >"$TMP/pipe.out"
if grep -q "$CR" "$TMP/pipe.out"; then bad "pipe: CR in the output"; else ok "pipe: no CR"; fi
steps=$(sed -n 's/^epoch [0-9]* step \([0-9]*\)\/12 loss [0-9.]* lr [0-9.]* [0-9.]* images\/s .*/\1/p' "$TMP/pipe.out" | tr '\n' ' ')
[ "$steps" = "4 8 12 " ] && ok "pipe: plain progress lines at steps $steps(--log_interval 4)" ||
    bad "pipe: progress lines at steps '$steps', expected 4 8 12"
[ ! -s "$TMP/pipe.err" ] && ok "pipe: nothing on stderr" || bad "pipe: stderr: $(cat "$TMP/pipe.err")"

# ---- warnings: stderr, not stdout; still in the log file --------------------------------------
cp -r "$TMP/pipe" "$TMP/warn"
f="$TMP/warn/checkpoints/$(cat "$TMP/warn/checkpoints/latest")"
truncate -s 1000 "$f"
timeout -k 5 60 "$DDPTRAIN" $FLAGS --job_dir "$TMP/warn" --max_steps 14 --log_interval 4 >"$TMP/warn.out" 2>"$TMP/warn.err"
host=$(hostname | sed 's/\..*//')
if grep -q "^ddptrain: WARNING: \[rank 0/1 $host\] resume: skipping .*$(basename "$f")" "$TMP/warn.err" &&
   ! grep -q "WARNING\|skipping" "$TMP/warn.out" &&
   grep -q "\] WARNING resume: skipping" "$TMP/warn/logs/rank-00000.log"; then
    ok "warning on stderr only (and in the log file): $(head -c 110 "$TMP/warn.err")..."
else
    bad "warning: stderr '$(cat "$TMP/warn.err")', stdout has $(grep -c WARNING "$TMP/warn.out") WARNING lines"
fi

# ---- per-rank log files ---------------------------------------------------------------------
LINE_RE="^[0-9]\{4\}-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9]\.[0-9]\{3\} \[rank"
check_log() {   # file rank world
    n=$(grep -c . "$1")
    nok=$(grep -c "$LINE_RE $2/$3 $host\] \(INFO\|WARNING\) " "$1")
    if [ "$n" -gt 5 ] && [ "$n" -eq "$nok" ]; then
        ok "$(basename "$1") of $3: all $n lines have a timestamp and [rank $2/$3 $host]"
    else
        bad "$1: $nok of $n lines well-formed: $(grep -v "$LINE_RE $2/$3 $host\] " "$1" | head -2)"
    fi
}
check_log "$TMP/pipe/logs/rank-00000.log" 0 1
MPIRUN="mpirun --allow-run-as-root --oversubscribe"
if command -v mpirun >/dev/null 2>&1 &&
   timeout -k 5 60 $MPIRUN -np 2 "$DDPTRAIN" $FLAGS --job_dir "$TMP/two" --max_steps 6 --log_interval 2 >"$TMP/two.out" 2>&1; then
    check_log "$TMP/two/logs/rank-00000.log" 0 2
    check_log "$TMP/two/logs/rank-00001.log" 1 2
    grep -q 'rank 1/2' "$TMP/two.out" && bad "rank 1's INFO lines reached stdout" || ok "only rank 0 prints INFO lines"
elif grep -q "without MPI" "$TMP/two.out" 2>/dev/null || ! command -v mpirun >/dev/null 2>&1; then
    echo "skip: no MPI: 2-rank log checks"
else
    bad "mpirun -np 2 run failed: $(tail -3 "$TMP/two.out")"
fi

# ---- metrics.jsonl --------------------------------------------------------------------------
if PY=$(find_python json); then
    if out=$("$PY" - "$TMP/pipe/metrics.jsonl" <<'EOF'
import json, sys
train = ("epoch", "step", "loss", "lr", "images_per_sec", "data_sec", "compute_sec", "comm_wait_sec")
ev = ("epoch", "step", "lr", "test_acc", "test_loss")
nt = ne = 0
for i, line in enumerate(open(sys.argv[1]), 1):
    d = json.loads(line)
    keys = ev if "test_acc" in d else train
    missing = [k for k in keys if not isinstance(d.get(k), (int, float))]
    if missing:
        sys.exit(f"line {i}: missing or not a number: {', '.join(missing)}")
    if "test_acc" in d:
        ne += 1
        if not 0.0 <= d["test_acc"] <= 1.0:
            sys.exit(f"line {i}: test_acc {d['test_acc']} is not a fraction")
    else:
        nt += 1
        if d["loss"] <= 0 or d["images_per_sec"] <= 0 or min(d["data_sec"], d["comm_wait_sec"]) < 0:
            sys.exit(f"line {i}: implausible values {d}")
if (nt, ne) != (3, 2):
    sys.exit(f"{nt} training and {ne} evaluation lines, expected 3 and 2")
print(f"{nt} training lines with {', '.join(train)}; {ne} evaluation lines with test_acc")
EOF
    ); then ok "metrics.jsonl: $out"; else bad "metrics.jsonl: $out"; fi
else
    echo "skip: no python3: metrics.jsonl checks"
fi

# ---- ddptrain-plot ------------------------------------------------------------------------
PLOT="$top_srcdir/scripts/ddptrain-plot"
if command -v gnuplot >/dev/null 2>&1; then
    if msg=$(sh "$PLOT" "$TMP/pipe" "$TMP/plot.png" 2>&1) &&
       [ "$(head -c 8 "$TMP/plot.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; then
        ok "ddptrain-plot: PNG written ($(wc -c <"$TMP/plot.png") bytes): $msg"
    else
        bad "ddptrain-plot: $msg"
    fi
    # A resumed run repeats steps in metrics.jsonl: still plots; default output in the job dir.
    sh "$PLOT" "$TMP/warn" >/dev/null 2>&1 && [ -s "$TMP/warn/metrics.png" ] &&
        ok "ddptrain-plot: JOB_DIR/metrics.png by default, resumed run" || bad "ddptrain-plot on a resumed run"
else
    echo "skip: no gnuplot: ddptrain-plot PNG check"
fi
mkdir -p "$TMP/empty"
if msg=$(sh "$PLOT" "$TMP/empty" "$TMP/x.png" 2>&1); then bad "ddptrain-plot without metrics.jsonl exits 0"
elif echo "$msg" | grep -q "metrics.jsonl: not found"; then ok "ddptrain-plot without metrics.jsonl: $msg"
else bad "ddptrain-plot without metrics.jsonl: $msg"; fi
if msg=$(GNUPLOT=gnuplot-not-installed sh "$PLOT" "$TMP/pipe" "$TMP/x.png" 2>&1); then bad "ddptrain-plot without gnuplot exits 0"
elif echo "$msg" | grep -q "gnuplot-not-installed not found: install gnuplot"; then ok "ddptrain-plot without gnuplot: $msg"
else bad "ddptrain-plot without gnuplot: $msg"; fi
finish
