#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Where a job's wall time went (src/base/timeacct.h, <job_dir>/time.jsonl), one rank:
#   (a) a run killed (SIGKILL) after a checkpoint and some steps, then run again to the end:
#       time.jsonl holds 2 runs, the first "interrupted", the second "done"; the second redid
#       the steps the first had reached past the checkpoint it resumed (the killed run's last
#       training step in metrics.jsonl minus that checkpoint's step); the gap between the runs
#       is at least the pause the test made; each run's phases sum to its start-to-end time, and
#       all phases and gaps to the job's, from the first start to the last end;
#   (b) the line "effective training time: ..." that ends the run and the one ddptrain-plot
#       --time prints from the file are the same, ratio included;
#   (c) no step writes to time.jsonl: a run of 150 steps logging every step appends at most a
#       handful of records (its start, training's start, every 30 s, its end);
#   (d) a run stopped by SIGTERM (the preemption checkpoint, exit 3) and run again: "preempted"
#       then "done", nothing redone (the checkpoint is where it stopped), a positive gap.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python json) || { echo "SKIP: no python3"; exit "$SKIP"; }
PLOT="$top_srcdir/scripts/ddptrain-plot"
export OMP_NUM_THREADS=1
make_synth "$TMP/data" --train 2048 --test 128 --shards 1
FLAGS="--data_dir $TMP/data --width 8 --blocks 1 --batch_size 32 --threads 1 --epochs 2 --log_interval 1"
JOB="$TMP/job"
last_step() { sed -n 's/.*"step": \([0-9]*\), "loss".*/\1/p' "$1/metrics.jsonl" 2>/dev/null | tail -n 1; }

# ---- (a) killed after a checkpoint, then run again -----------------------------------------
# shellcheck disable=SC2086
# Killed 5 steps past the checkpoint of step 40, well before the next one (80): 35 steps of about
# 20 ms against a poll every 50 ms, so the second run has steps to redo.
"$DDPTRAIN" $FLAGS --save_every_steps 40 --job_dir "$JOB" >"$TMP/run1.out" 2>&1 &
pid=$!   # killed below in any case
t0=$(date +%s)
until [ "$(last_step "$JOB")" -ge 45 ] 2>/dev/null; do
    [ $(($(date +%s) - t0)) -gt 120 ] && break
    sleep 0.05
done
kill -KILL $pid 2>/dev/null
wait $pid 2>/dev/null
killed_at=$(last_step "$JOB")
[ "${killed_at:-0}" -ge 45 ] || { bad "(a) the first run never reached step 45"; tail -n 5 "$TMP/run1.out"; finish; }
grep -q "^done:" "$TMP/run1.out" && { bad "(a) the first run finished before it was killed"; finish; }
sleep 1   # the gap between the runs is at least this
# shellcheck disable=SC2086
if ! timeout -k 5 300 "$DDPTRAIN" $FLAGS --save_every_steps 40 --job_dir "$JOB" >"$TMP/run2.out" 2>&1; then
    bad "(a) the second run failed"; tail -n 5 "$TMP/run2.out"; finish
fi
resumed=$(sed -n 's/^resume: .*global step \([0-9]*\) .*/\1/p' "$TMP/run2.out")
echo "   killed at step $killed_at; resumed from step ${resumed:-?}"
"$PY" - "$JOB/time.jsonl" "${killed_at}" "${resumed:--1}" >"$TMP/check" 2>&1 <<'EOF'
import json, sys
path, killed_at, resumed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
runs = {}
for line in open(path):
    r = json.loads(line)
    runs[r["run"]] = r          # a run's last line is its latest state
phases = ["startup", "train", "redone", "eval", "checkpoint", "shutdown"]
errs = []
if sorted(runs) != [1, 2]:
    errs.append("runs %s, expected [1, 2]" % sorted(runs))
else:
    r1, r2 = runs[1], runs[2]
    if r1["state"] != "interrupted" or r2["state"] != "done":
        errs.append("states %s, %s; expected interrupted, done" % (r1["state"], r2["state"]))
    if r2["redone_steps"] != killed_at - resumed or r2["first_step"] != resumed:
        errs.append("run 2 redid %d steps from step %d; expected %d - %d = %d" % (
            r2["redone_steps"], r2["first_step"], killed_at, resumed, killed_at - resumed))
    if r1["step"] != killed_at:
        errs.append("run 1 reached step %d, metrics.jsonl says %d" % (r1["step"], killed_at))
    if not r2["gap_sec"] >= 0.9:
        errs.append("gap %.3f s, expected at least the 1 s pause" % r2["gap_sec"])
    if not r2["redone_sec"] > 0 or not r1["train_sec"] > 0 or not r2["train_sec"] > 0:
        errs.append("no time in training or redone steps")
    for r in (r1, r2):
        s = sum(r[p + "_sec"] for p in phases)
        if abs(s - (r["end"] - r["start"])) > 0.01:
            errs.append("run %d: phases sum to %.3f s, start to end is %.3f s" % (r["run"], s, r["end"] - r["start"]))
    total = sum(r[p + "_sec"] for r in (r1, r2) for p in phases) + r1["gap_sec"] + r2["gap_sec"]
    wall = r2["end"] - r1["start"]
    if abs(total - wall) > 0.02:
        errs.append("phases and gaps sum to %.3f s, the job took %.3f s" % (total, wall))
    print("run 1: %s, train %.2f s, step %d; run 2: gap %.2f s, redone %d steps in %.2f s, train %.2f s; "
          "%.2f s of %.2f s wall" % (r1["state"], r1["train_sec"], r1["step"], r2["gap_sec"], r2["redone_steps"],
                                      r2["redone_sec"], r2["train_sec"], r1["train_sec"] + r2["train_sec"], wall))
for e in errs: print("ERROR " + e)
EOF
if [ -n "$resumed" ] && ! grep -q ERROR "$TMP/check"; then
    ok "(a) $(cat "$TMP/check")"
else
    bad "(a) time.jsonl:"; cat "$TMP/check"; cat "$JOB/time.jsonl"
fi

# ---- (b) the run's last line and ddptrain-plot ---------------------------------------------
run_line=$(tail -n 1 "$TMP/run2.out")
plot_line=$(sh "$PLOT" --time "$JOB" | sed 's/^ddptrain-plot: //')
case $run_line in
    "effective training time: "*" over 2 runs; "*) ;;
    *) bad "(b) the run's last line is not the effective training time over 2 runs: $run_line" ;;
esac
if [ "$run_line" = "$plot_line" ]; then
    ok "(b) the run and ddptrain-plot agree: $run_line"
else
    bad "(b) they differ:"; echo "   run:  $run_line"; echo "   plot: $plot_line"
fi

# ---- (c) no per-step writes ----------------------------------------------------------------
# shellcheck disable=SC2086
timeout -k 5 300 "$DDPTRAIN" $FLAGS --epochs 3 --max_steps 150 --save_every 0 --eval_every 0 --job_dir "$TMP/c" \
    >"$TMP/c.out" 2>&1 || { bad "(c) the run failed"; tail -n 5 "$TMP/c.out"; }
lines=$(wc -l <"$TMP/c/time.jsonl")
secs=$("$PY" -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])][-1]; print(int(r["end"] - r["start"]))' "$TMP/c/time.jsonl")
# start, training's start, the final evaluation, every 30 s, the end
if [ "$lines" -le $((5 + secs / 30)) ]; then
    ok "(c) 150 steps logged one by one in $secs s: $lines records in time.jsonl"
else
    bad "(c) $lines records in time.jsonl for a run of 150 steps in $secs s"
fi

# ---- (d) preempted, then run again ---------------------------------------------------------
# shellcheck disable=SC2086
"$DDPTRAIN" $FLAGS --job_dir "$TMP/d" >"$TMP/d1.out" 2>&1 &
pid=$!
t0=$(date +%s)
until [ "$(last_step "$TMP/d")" -ge 10 ] 2>/dev/null; do
    [ $(($(date +%s) - t0)) -gt 120 ] && break
    sleep 0.05
done
kill -TERM $pid 2>/dev/null
wait $pid
rc1=$?
# shellcheck disable=SC2086
timeout -k 5 300 "$DDPTRAIN" $FLAGS --job_dir "$TMP/d" >"$TMP/d2.out" 2>&1
rc2=$?
"$PY" - "$TMP/d/time.jsonl" >"$TMP/dcheck" 2>&1 <<'EOF'
import json, sys
runs = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[r["run"]] = r
r1, r2 = runs.get(1, {}), runs.get(2, {})
ok = (sorted(runs) == [1, 2] and r1.get("state") == "preempted" and r2.get("state") == "done"
      and r2.get("redone_steps") == 0 and r2.get("first_step") == r1.get("step") and r2.get("gap_sec", 0) > 0)
print("%s: run 1 %s at step %s, run 2 %s from step %s, %s steps redone, gap %.3f s" % (
    "ok" if ok else "ERROR", r1.get("state"), r1.get("step"), r2.get("state"), r2.get("first_step"),
    r2.get("redone_steps"), r2.get("gap_sec", 0)))
EOF
if [ $rc1 -eq 3 ] && [ $rc2 -eq 0 ] && grep -q "^ok" "$TMP/dcheck"; then
    ok "(d) preempted (exit 3), then done: $(sed 's/^ok: //' "$TMP/dcheck")"
else
    bad "(d) exits $rc1, $rc2: $(cat "$TMP/dcheck")"; cat "$TMP/d/time.jsonl"
fi
finish
