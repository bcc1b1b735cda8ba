#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A short training run end to end: exit 0, the job directory (config.json, per-rank log,
# metrics.jsonl with loss/lr lines and test_acc on eval lines), --max_steps, and learning;
# an evaluation with --tta and --ema_decay says so in its log line and record; --target_accuracy
# stops at the evaluation that reaches it (--eval_every_steps) and reports the time to train, or
# ends below it with exit status 5, both on the last line and in a metrics.jsonl event record.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
make_synth "$TMP/data" --train 1024 --test 256 --shards 2

job="$TMP/job"
"$DDPTRAIN" --data_dir "$TMP/data" --job_dir "$job" --width 8 --blocks 1 --batch_size 32 --epochs 3 \
    --lr 0.05 --log_interval 8 >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc -eq 0 ] && ok "training run exits 0" || { bad "training run rc=$rc: $(cat "$TMP/err")"; finish; }
[ ! -s "$TMP/err" ] && ok "nothing on stderr" || bad "stderr: $(cat "$TMP/err")"
grep -q "parameters" "$TMP/out" && ok "parameter count printed: $(grep parameters "$TMP/out")" || bad "no parameter count"
[ -s "$job/config.json" ] && grep -q '"batch_size": 32' "$job/config.json" && ok "config.json" || bad "config.json"
[ -s "$job/logs/rank-00000.log" ] && grep -q "\[rank 0/1 " "$job/logs/rank-00000.log" && ok "rank log file" || bad "rank log"
m="$job/metrics.jsonl"
nlog=$(grep -c '"loss"' "$m"); neval=$(grep -c '"test_acc"' "$m")
[ "$nlog" -ge 3 ] && [ "$neval" -eq 3 ] && ok "metrics.jsonl: $nlog log lines, $neval eval lines" || bad "metrics.jsonl: $nlog log lines, $neval eval lines"
grep '"test_acc"' "$m" | head -1 | grep -q '"epoch": 1, "step": 32, "lr"' && ok "eval line has epoch, step, lr, test_acc" || bad "eval line: $(grep test_acc "$m" | head -1)"
acc=$(grep '"test_acc"' "$m" | tail -1 | sed 's/.*"test_acc": \([0-9.]*\).*/\1/')
awk -v a="$acc" 'BEGIN{exit !(a >= 0.35)}' && ok "learns: final test_acc $acc (chance 0.1)" || bad "final test_acc $acc < 0.35"

"$DDPTRAIN" --data_dir "$TMP/data" --job_dir "$TMP/job2" --width 4 --blocks 1 --batch_size 32 --max_steps 5 \
    --log_interval 1 >"$TMP/out2" 2>&1 || bad "--max_steps run failed"
last=$(grep '"loss"' "$TMP/job2/metrics.jsonl" | tail -1 | sed 's/.*"step": \([0-9]*\).*/\1/')
[ "$last" = 5 ] && grep -q '"test_acc"' "$TMP/job2/metrics.jsonl" && ok "--max_steps 5 stops at step 5 and evaluates" || bad "--max_steps: last step $last"

"$DDPTRAIN" --data_dir "$TMP/data" --job_dir "$TMP/job3" --width 4 --blocks 1 --batch_size 16 \
    --grad_accum_steps 4 --max_steps 3 --log_interval 1 >"$TMP/out3" 2>&1 || bad "--grad_accum_steps run failed"
grep -q "batch 16 x accum 4" "$TMP/out3" && ok "gradient accumulation run" || bad "grad accum: $(cat "$TMP/out3")"

# --tta: the evaluation line and record say which; an evaluation batch larger than the
# training batch goes through in chunks.
"$DDPTRAIN" --data_dir "$TMP/data" --job_dir "$TMP/job4" --width 4 --blocks 1 --batch_size 16 --eval_batch_size 100 \
    --max_steps 3 --tta flip_shift --ema_decay 0.5 >"$TMP/out4" 2>&1 || bad "--tta run failed: $(tail -3 "$TMP/out4")"
if grep -q "step 3 test_acc .* (EMA) (TTA flip_shift)" "$TMP/out4" &&
   grep '"test_acc"' "$TMP/job4/metrics.jsonl" | grep -q '"ema": true, "tta": "flip_shift"'; then
    ok "--tta flip_shift with --ema_decay: $(grep 'test_acc' "$TMP/out4" | head -1)"
else
    bad "--tta: $(grep test_acc "$TMP/out4" "$TMP/job4/metrics.jsonl")"
fi
# --target_accuracy reached: evaluations every 8 steps (and every epoch, --eval_every 0
# notwithstanding), the run stops at the first one at or above the target.
"$DDPTRAIN" --data_dir "$TMP/data" --job_dir "$TMP/job5" --width 8 --blocks 1 --batch_size 32 --epochs 10 \
    --lr 0.05 --log_interval 8 --eval_every 0 --target_accuracy 0.3 --eval_every_steps 8 >"$TMP/out5" 2>&1
rc=$?
m5="$TMP/job5/metrics.jsonl"
last=$(tail -1 "$TMP/out5")
acc=$(grep '"test_acc"' "$m5" | tail -1 | sed 's/.*"test_acc": \([0-9.]*\).*/\1/')
below=$(grep '"test_acc"' "$m5" | sed '$d' | sed 's/.*"test_acc": \([0-9.]*\).*/\1/' | awk '$1 >= 0.3' | wc -l)
if [ $rc -eq 0 ] && echo "$last" | grep -q "^time to train: [0-9.]* s to test_acc [0-9.]* >= target_accuracy 0.3 at step [0-9]* (epoch [0-9]*); start-up [0-9.]* s apart" &&
   awk -v a="$acc" 'BEGIN{exit !(a >= 0.3)}' && [ "$below" -eq 0 ] &&
   tail -1 "$m5" | grep -q '"event": "target_accuracy", "reached": true, "target": 0.3, .*"time_to_train": [0-9.]*, "startup": [0-9.]*}' &&
   ! grep -q '"step": 320,' "$m5"; then
    ok "--target_accuracy 0.3 reached after $(grep -c '"test_acc"' "$m5") evaluations: $last"
else
    bad "--target_accuracy 0.3: exit $rc, last line: $last; $(grep test_acc "$m5" | tail -2)"
fi
# not reached: the run ends with its epochs, says so and exits 5
"$DDPTRAIN" --data_dir "$TMP/data" --job_dir "$TMP/job6" --width 4 --blocks 1 --batch_size 32 --max_steps 8 \
    --target_accuracy 0.99 >"$TMP/out6" 2>&1
rc=$?
last=$(tail -1 "$TMP/out6")
if [ $rc -eq 5 ] && echo "$last" | grep -q "^target_accuracy 0.99 not reached: best test_acc [0-9.]* in 8 steps .*exit status 5" &&
   tail -1 "$TMP/job6/metrics.jsonl" | grep -q '"event": "target_accuracy", "reached": false, "target": 0.99'; then
    ok "--target_accuracy 0.99 not reached: exit 5, $last"
else
    bad "--target_accuracy 0.99: exit $rc, last line: $last"
fi
finish
