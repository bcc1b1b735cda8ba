#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A short training run end to end: exit 0, the job directory (config.json, per-rank log,
# metrics.jsonl with loss/lr lines and test_acc on eval lines), --max_steps, and learning;
# an evaluation with --tta and --ema_decay says so in its log line and record.
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
grep -q "step 3 test_acc .* (EMA) (TTA flip_shift)" "$TMP/out4" && grep '"test_acc"' "$TMP/job4/metrics.jsonl" | grep -q '"ema": true, "tta": "flip_shift"' &&
    ok "--tta flip_shift with --ema_decay: $(grep 'test_acc' "$TMP/out4" | head -1)" || bad "--tta: $(grep test_acc "$TMP/out4" "$TMP/job4/metrics.jsonl")"
finish
