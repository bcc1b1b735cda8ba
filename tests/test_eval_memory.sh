#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# --eval_batch_size does not size the model: an evaluation batch 64 times the training batch
# goes through the model in chunks of the training batch, so the process's peak resident
# memory grows only by the loader's batch arrays, and the test totals are those of an
# evaluation batch equal to the training batch.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(command -v python3) || { echo "skip: no python3 to read the peak resident memory"; exit $SKIP; }
make_synth "$TMP/data" --train 256 --test 1024 --shards 1

# Peak resident memory (MiB) of a training run: $1 = job name, then ddptrain flags.
peak_mib() {
    job=$1; shift
    "$PY" - "$DDPTRAIN" --data_dir "$TMP/data" --job_dir "$TMP/$job" --width 8 --blocks 1 --batch_size 16 \
        --max_steps 2 --threads 1 "$@" <<'PYEOF'
import os, resource, subprocess, sys
with open(os.devnull, "w") as null:
    rc = subprocess.call(sys.argv[1:], stdout=null)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024 if rc == 0 else -1)
PYEOF
}
small=$(peak_mib small --eval_batch_size 16)
large=$(peak_mib large --eval_batch_size 1024)
[ "$small" -gt 0 ] && [ "$large" -gt 0 ] && ok "runs with --eval_batch_size 16 and 1024 exit 0" || { bad "runs failed ($small, $large MiB)"; finish; }
# Activations kept for backward are 0.47 MB per image at width 8, blocks 1: sizing them for the
# evaluation batch would add about 480 MB; a batch of 1024 32x32 images in float (the batch
# array and the loader's prefetch buffer) and the test split itself add about 30 MB.
[ $((large - small)) -lt 100 ] && ok "peak RSS: $small MiB with --eval_batch_size 16, $large MiB with 1024" ||
    bad "peak RSS grows with the evaluation batch: $small MiB with --eval_batch_size 16, $large MiB with 1024"
ev_small=$(grep '"test_acc"' "$TMP/small/metrics.jsonl" | sed 's/.*\("test_acc".*"test_loss": [0-9.]*\).*/\1/')
ev_large=$(grep '"test_acc"' "$TMP/large/metrics.jsonl" | sed 's/.*\("test_acc".*"test_loss": [0-9.]*\).*/\1/')
[ -n "$ev_small" ] && [ "$ev_small" = "$ev_large" ] && ok "same test totals: $ev_large" ||
    bad "test totals differ: '$ev_small' with --eval_batch_size 16, '$ev_large' with 1024"
finish
