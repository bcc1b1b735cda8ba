#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# HDF5 objects that stand for data elsewhere, in a shard (ddptrain and `ddptrain-data inspect`),
# a checkpoint (--resume) and an --init_from file: a dataset whose raw data is in an external
# file (a FIFO, and a readable file of "secret" bytes), an external link (to a FIFO), a
# virtual dataset, a soft link. Then what --init_from reads: a FIFO, a damaged group B-tree,
# NaN, an infinity, a negative running_var, chunks never written; and a checkpoint tensor
# rewritten without its Fletcher-32 checksum. Each must be refused: a non-zero exit, one line
# on stderr naming the file, within 20 s (a FIFO once hung every reader), and the secret bytes
# nowhere in the job directory (they once went on into its checkpoints).
# shellcheck disable=SC2086  # $FLAGS is a list of flags
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "h5py, numpy") || { echo "SKIP: no python3 with h5py and numpy to craft the files"; exit "$SKIP"; }
MK="$top_srcdir/tests/helpers/make_h5_links.py"
make_synth "$TMP/data" --size 16 --train 64 --test 16
# --lr 0: weights read from the secret file would reach the checkpoints unchanged
FLAGS="--width 4 --blocks 1 --image_size 16 --batch_size 8 --threads 1 --no-augment --lr 0"
"$DDPTRAIN" --data_dir "$TMP/data" --job_dir "$TMP/base" $FLAGS --max_steps 2 >"$TMP/base.out" 2>&1 ||
    { bad "the base run failed"; tail -n 5 "$TMP/base.out"; finish; }
CK=$(ls "$TMP/base/checkpoints/"ckpt-*.h5 | tail -n 1)
SHARD="$TMP/data/train-00000-of-00002.h5"
mkfifo "$TMP/fifo"
# A "secret": 8 kB of small floats (harmless as weights or pixels, so a run reading them
# would go on and write them out), and a probe for them: its first 64 bytes anywhere.
"$PY" -c "import numpy as np, sys; (np.arange(1, 2049, dtype=np.float32) * 1e-3).tofile(sys.argv[1])" "$TMP/secret"
leaked() {   # $1 = a directory: prints the files holding the secret's first 64 bytes
    [ -d "$1" ] || return 0
    "$PY" - "$1" "$TMP/secret" <<'EOF'
import os, sys
probe = open(sys.argv[2], "rb").read(64)
for d, _, fs in os.walk(sys.argv[1]):
    for f in fs:
        p = os.path.join(d, f)
        if os.path.isfile(p) and probe in open(p, "rb").read():
            print(p)
EOF
}

# refused CASE FILE WHY JOB CMD...: CMD refuses FILE in one line saying WHY (JOB: the job
# directory to search for the secret, - for none)
refused() {
    case_=$1 file=$2 why=$3 job=$4
    shift 4
    timeout -k 5 20 "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    lines=$(wc -l <"$TMP/err")
    leak=$(leaked "${job#-}")
    # 1 to 123: refused, neither hung (timeout: 124, or 137 once killed) nor crashed (128 + signal)
    if [ $rc -ge 1 ] && [ $rc -le 123 ] && [ "$lines" -eq 1 ] && grep -qF -- "$file" "$TMP/err" &&
        grep -qF -- "$why" "$TMP/err" && [ -z "$leak" ]; then
        ok "$case_: exit $rc: $(cat "$TMP/err")"
    else
        bad "$case_: rc=$rc$( { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && echo ' (hung)'), $lines stderr line(s): $(head -n 3 "$TMP/err" | tr '\n' ' ')$([ -n "$leak" ] && echo "; secret bytes in $leak") (wanted '$why')"
    fi
}
nojob() {   # CASE JOB: the refusal came before the job directory was made
    if [ -e "$2" ]; then bad "$1: the job directory $2 was made"; fi
}

# ---- shards: ddptrain and ddptrain-data inspect ----
n=0
shard_case() {   # NAME WHY KIND OBJ [ARG]
    name=$1 why=$2
    shift 2
    n=$((n + 1))
    rm -rf "$TMP/d$n" && cp -r "$TMP/data" "$TMP/d$n"
    "$PY" "$MK" "$1" "$SHARD" "$TMP/d$n/train-00000-of-00002.h5" "$2" ${3:+"$3"} || { bad "shard $name: crafting failed"; return; }
    f="$TMP/d$n/train-00000-of-00002.h5"
    refused "shard, $name (ddptrain)" "$f" "$why" "$TMP/jobs/s$n" "$DDPTRAIN" --data_dir "$TMP/d$n" --job_dir "$TMP/jobs/s$n" $FLAGS --max_steps 2
    nojob "shard, $name" "$TMP/jobs/s$n"
    refused "shard, $name (inspect)" "$f" "$why" - "$DDPDATA" inspect "$f"
}
shard_case "external storage in a FIFO" "external file" ext images "$TMP/fifo"
shard_case "external storage in a readable file" "external file" ext images "$TMP/secret"
shard_case "external link to a FIFO" "external link" elink images "$TMP/fifo"
shard_case "virtual dataset" "virtual dataset" vds images "$SHARD"
shard_case "soft link" "soft link" soft images

# ---- checkpoints: --resume ----
ckpt_case() {   # NAME WHY KIND OBJ [ARG]
    name=$1 why=$2
    shift 2
    n=$((n + 1))
    "$PY" "$MK" "$1" "$CK" "$TMP/c$n.h5" "$2" ${3:+"$3"} || { bad "checkpoint $name: crafting failed"; return; }
    refused "checkpoint, $name (--resume)" "$TMP/c$n.h5" "$why" "$TMP/jobs/c$n" \
        "$DDPTRAIN" --data_dir "$TMP/data" --job_dir "$TMP/jobs/c$n" $FLAGS --max_steps 4 --resume "$TMP/c$n.h5"
}
ckpt_case "external storage in a FIFO" "external file" ext model/conv1.weight "$TMP/fifo"
ckpt_case "external storage in a readable file" "external file" ext model/conv1.weight "$TMP/secret"
ckpt_case "external link to a FIFO" "external link" elink train_state "$TMP/fifo"
ckpt_case "virtual dataset" "virtual dataset" vds model/conv1.weight "$CK"
ckpt_case "soft link" "soft link" soft optimizer
ckpt_case "a tensor without Fletcher-32" "Fletcher-32" nofletcher model/layer1.0.conv2.weight

# ---- --init_from: a weights file as torch_to_ddptrain.py writes one ----
"$PY" "$MK" weights "$CK" "$TMP/w.h5" - || bad "weights: crafting failed"
if timeout -k 5 20 "$DDPTRAIN" --data_dir "$TMP/data" --job_dir "$TMP/jobs/w" $FLAGS --max_steps 2 --init_from "$TMP/w.h5" \
    >"$TMP/out" 2>&1; then
    ok "--init_from a good weights file (no checksum) trains"
else
    bad "--init_from a good weights file: $(tail -n 3 "$TMP/out")"
fi
init_case() {   # NAME WHY KIND OBJ [ARG]; KIND - for the file $TMP/fifo itself
    name=$1 why=$2
    shift 2
    n=$((n + 1))
    f="$TMP/w$n.h5"
    if [ "$1" = - ]; then f="$TMP/fifo"; else "$PY" "$MK" "$1" "$TMP/w.h5" "$f" "$2" ${3:+"$3"} ||
        { bad "--init_from $name: crafting failed"; return; }; fi
    refused "--init_from, $name" "$f" "$why" "$TMP/jobs/i$n" \
        "$DDPTRAIN" --data_dir "$TMP/data" --job_dir "$TMP/jobs/i$n" $FLAGS --max_steps 2 --init_from "$f"
    nojob "--init_from, $name" "$TMP/jobs/i$n"
}
init_case "external storage in a FIFO" "external file" ext model/conv1.weight "$TMP/fifo"
init_case "external storage in a readable file" "external file" ext model/conv1.weight "$TMP/secret"
init_case "external link to a FIFO" "external link" elink model "$TMP/fifo"
init_case "virtual dataset" "virtual dataset" vds model/conv1.weight "$TMP/w.h5"
init_case "soft link" "soft link" soft model/fc.weight
init_case "a FIFO" "not a regular file" -
init_case "a damaged group B-tree" "undefined address" btree_undef -
init_case "NaN" "holds NaN" set model/conv1.weight nan
init_case "an infinity" "an infinity" set model/fc.weight -inf
init_case "a negative running_var" "negative variance" set model/bn1.running_var -1
init_case "chunks never written" "never written" unwritten model/conv1.weight
finish
