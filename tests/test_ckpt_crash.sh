#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# A crash while a checkpoint is being written never costs more than that checkpoint: ddptrain
# writes one every step (--save_every_steps 1, width 32: 2.5 MB files written by the background
# thread) and is killed with SIGKILL six times: in odd rounds at a random moment (0-300 ms after
# its second logged step), in even rounds 0-5 ms after a temporary checkpoint file appears
# (tests/helpers/ckpt_kill_during_write.py), i.e. inside or just after a write. After each kill
# every ckpt-*.h5 in the directory opens and reads completely (HDF5 checksums verified), and the
# next run in the same job directory (--resume auto) resumes from the checkpoint `latest` names
# without passing over a damaged one. A final run completes and leaves no temporary file.
# The test reports how many kills left a .tmp file behind (proof they landed inside a write).
# Exit 0 pass, 1 fail, 77 skip.
# Run by `sh` (make check uses $(SHELL)): continue under bash.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
# shellcheck source=tests/helpers/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "h5py, numpy") || { echo "SKIP: no python3 with h5py and numpy"; exit "$SKIP"; }
export OMP_NUM_THREADS=1
make_synth "$TMP/data" --train 2048 --test 64 --shards 2
job="$TMP/job"
ck="$job/checkpoints"
FLAGS=(--data_dir "$TMP/data" --width 32 --blocks 1 --threads 1 --batch_size 32 --log_interval 1
       --save_every_steps 1 --keep_checkpoints 3)
ROUNDS=6
KILLER="$top_srcdir/tests/helpers/ckpt_kill_during_write.py"
TOTAL=200

# Opens every checkpoint and reads every dataset (Fletcher-32 is checked on read); prints
# "N ok" or the files that fail.
open_all() {
    "$PY" - "$@" <<'EOF'
import sys
import h5py
bad = []
for p in sys.argv[1:]:
    try:
        with h5py.File(p, "r") as f:
            assert f.attrs["format"] in (b"ddptrain-checkpoint", "ddptrain-checkpoint")
            f.visititems(lambda n, o: o[()] if isinstance(o, h5py.Dataset) else None)
            int(f["train_state/global_step"][()])
    except Exception as e:  # noqa: BLE001 - any failure to read is what we look for
        bad.append(f"{p}: {e}")
print("; ".join(bad) if bad else f"{len(sys.argv) - 1} ok")
sys.exit(1 if bad else 0)
EOF
}
logged() { n=$(grep -c '"loss"' "$job/metrics.jsonl" 2>/dev/null); echo "${n:-0}"; }

caught=0 expect=""
for round in $(seq 1 $ROUNDS); do
    before=$(logged)
    "$DDPTRAIN" "${FLAGS[@]}" --job_dir "$job" --max_steps $TOTAL >"$TMP/run$round.out" 2>&1 &
    pid=$!
    # Wait until this run has trained two steps (so it is past start-up and writing), then a
    # random 0-300 ms more.
    t0=$SECONDS
    while [ "$(logged)" -lt $((before + 2)) ]; do
        kill -0 $pid 2>/dev/null || break
        [ $((SECONDS - t0)) -gt 60 ] && break
        sleep 0.05
    done
    how=""
    if [ $((round % 2)) = 1 ]; then
        sleep "0.$(printf %03d $((RANDOM % 300)))"
        kill -KILL $pid 2>/dev/null
        how="at a random moment"
    else
        how=$("$PY" "$KILLER" --pid $pid --dir "$ck" --max-delay-ms 5 --timeout 30) ||
            bad "round $round: $how"
    fi
    wait $pid 2>/dev/null
    tmps=$(find "$ck" -name '*.tmp*' | wc -l)
    [ "$tmps" -gt 0 ] && caught=$((caught + 1))
    # What resumed in this round: it must be what the previous round's check expected.
    if [ -n "$expect" ]; then
        if grep -q "^resume: $expect: " "$TMP/run$round.out" && ! grep -q "skipping" "$TMP/run$round.out"; then
            ok "round $round resumed from $(basename "$expect") with nothing skipped"
        else
            bad "round $round: expected to resume from $expect: $(grep -E 'resume|skipping' "$TMP/run$round.out")"
        fi
    fi
    mapfile -t files < <(find "$ck" -name 'ckpt-*.h5' | sort)
    if [ ${#files[@]} -eq 0 ]; then bad "round $round: no checkpoint at all after the kill"; continue; fi
    if msg=$(open_all "${files[@]}"); then
        ok "round $round: killed $how; $tmps .tmp file(s) left; every checkpoint opens: $(for f in "${files[@]}"; do basename "$f" .h5; done | tr '\n' ' ')"
    else
        bad "round $round: $msg"
    fi
    latest=$(cat "$ck/latest" 2>/dev/null)
    if [ -n "$latest" ] && [ -f "$ck/$latest" ]; then expect="$ck/$latest"; else expect="${files[-1]}"; fi
done
echo "kills that left a .tmp file (landed inside a write): $caught of $ROUNDS"
if [ $caught -gt 0 ]; then ok "at least one kill landed inside a checkpoint write"
else bad "no kill landed inside a write: the test did not test it"; fi

# The last run: resumes from what the last round left, trains 3 more steps and completes; its
# checkpoint prune removes stale temporary files.
n=$(basename "${expect:-ckpt-0}" .h5); n=$((10#${n#ckpt-} + 3))
timeout -k 5 120 "$DDPTRAIN" "${FLAGS[@]}" --job_dir "$job" --max_steps $n >"$TMP/final.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "^resume: $expect: " "$TMP/final.out" && grep -q "^done: $n steps" "$TMP/final.out"; then
    ok "final run resumed from $(basename "$expect") and completed (step $n)"
else
    bad "final run: exit $rc: $(grep -E 'resume|done|error' "$TMP/final.out")"
fi
left=$(find "$ck" -name '*.tmp*' | wc -l)
if [ "$left" -eq 0 ]; then ok "no temporary files left in $(basename "$ck")/"; else bad "$left temporary files left"; fi
finish
