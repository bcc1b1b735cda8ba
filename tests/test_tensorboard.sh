#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# --tensorboard (src/base/tfevents.h, src/base/metrics_tags.h), checked by a reader of the
# format written from its description (tests/helpers/tfevents_read.py: its own CRC-32C, the
# protobuf decoded by hand) and compared with metrics.jsonl (tests/helpers/tfevents_compare.py):
#   (a) one rank with evaluations (every epoch, every 5 steps, with --tta flip): one file
#       tensorboard/events.out.tfevents.<time>.<host>.<pid>, every metrics record one event with
#       every number as a float32 scalar, tags by the documented rule, the shares of the window;
#   (b) resumed in the same job directory: a second file, named to sort after the first (also
#       after a file named a minute ahead), the first left as it was, its steps continuing
#       after the checkpoint's;
#   (c) two ranks (mpirun): one file (rank 0's), and every rank's times and shares at each
#       training record, agreeing with the record (mean data time, rank 0's communication wait);
#   (d) one byte changed in a record's data or in its length: the reader names the CRC that
#       fails (so the CRC checks can fail), and the CRC-32C of "123456789" is 0xE3069283;
#   (e) without --tensorboard no tensorboard/ is made; a tensorboard/ that is a symbolic link is
#       refused at start-up in one line naming it, writing nothing there or in the job directory.
# shellcheck disable=SC2086  # $FLAGS is a word list
# shellcheck source=tests/helpers/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/helpers/lib.sh"
mpi_leak_checks_off   # ranks started by mpirun (see tests/helpers/lib.sh)
PY=$(find_python "json, struct") || { echo "SKIP: no python3"; exit "$SKIP"; }
READ="$top_srcdir/tests/helpers/tfevents_read.py"
COMPARE="$top_srcdir/tests/helpers/tfevents_compare.py"
export OMP_NUM_THREADS=1
# 256 training images, batch 32: 8 steps per epoch on one rank
make_synth "$TMP/data" --size 16 --train 256 --test 64 --shards 2
FLAGS="--data_dir $TMP/data --image_size 16 --width 4 --blocks 1 --threads 1 --batch_size 32 --log_interval 2 --eval_every 1"

# the event files of JOB_DIR, one a line, in name order
events() { for f in "$1"/tensorboard/events.out.tfevents.*; do [ -e "$f" ] && basename "$f"; done | sort; }

# ---- (a) one rank ---------------------------------------------------------------------------
J="$TMP/a"
if timeout -k 5 60 "$DDPTRAIN" $FLAGS --job_dir "$J" --epochs 2 --eval_every_steps 5 --tta flip --tensorboard \
    >"$TMP/a.out" 2>&1; then ok "(a) trained with --tensorboard"; else bad "(a) training failed"; tail -n 5 "$TMP/a.out"; finish; fi
F1=$(events "$J")
HOST=$(uname -n | tr -c 'A-Za-z0-9._\n-' '_')
if [ "$(echo "$F1" | wc -l)" = 1 ] && echo "$F1" | grep -Eq "^events\.out\.tfevents\.[0-9]{10}\.$HOST\.[0-9]+$"; then
    ok "(a) one file, named events.out.tfevents.<time>.<host>.<pid>: $F1"
else
    bad "(a) event files: $F1"
fi
grep -q "TensorBoard: .*tensorboard/$F1" "$TMP/a.out" && ok "(a) the log names the file" || bad "(a) the log does not name the file"
if "$PY" "$COMPARE" "$J/metrics.jsonl" 1 "$J/tensorboard/$F1" >"$TMP/a.cmp" 2>&1; then
    ok "(a) events against metrics.jsonl:"; sed 's/^/    /' "$TMP/a.cmp"
else
    bad "(a) events against metrics.jsonl:"; cat "$TMP/a.cmp"
fi

# ---- (b) resumed ----------------------------------------------------------------------------
cp "$J/tensorboard/$F1" "$TMP/first.copy"
LINES=$(wc -l <"$J/metrics.jsonl")
LAST=$(sed -n 's/.*"step": \([0-9]*\).*/\1/p' "$J/metrics.jsonl" | tail -n 1)
# a file named a minute ahead (another host's clock): the new one must still sort after it
AHEAD=$(( $(date +%s) + 60 ))
: >"$J/tensorboard/events.out.tfevents.$AHEAD.elsewhere.1"
if timeout -k 5 60 "$DDPTRAIN" $FLAGS --job_dir "$J" --epochs 3 --tta flip --tensorboard >"$TMP/b.out" 2>&1; then
    ok "(b) resumed with --tensorboard"
else
    bad "(b) resuming failed"; tail -n 5 "$TMP/b.out"
fi
rm -f "$J/tensorboard/events.out.tfevents.$AHEAD.elsewhere.1"
F2=$(events "$J" | grep -vx "$F1")
if [ "$(events "$J" | wc -l)" = 2 ] && [ "$(events "$J" | tail -n 1)" = "$F2" ] &&
    echo "$F2" | grep -q "^events\.out\.tfevents\.$((AHEAD + 1))\."; then
    ok "(b) a second file, named after the first and after a file a minute ahead: $F2"
else
    bad "(b) event files after the resume: $(events "$J" | tr '\n' ' ')"
fi
cmp -s "$TMP/first.copy" "$J/tensorboard/$F1" && ok "(b) the first file is as it was" || bad "(b) the first file changed"
if "$PY" "$COMPARE" "$J/metrics.jsonl" $((LINES + 1)) "$J/tensorboard/$F2" >"$TMP/b.cmp" 2>&1; then
    ok "(b) the resumed run's events against its metrics.jsonl records"
else
    bad "(b) the resumed run's events:"; cat "$TMP/b.cmp"
fi
FIRST2=$("$PY" "$READ" "$J/tensorboard/$F2" | awk '$1 == "train/loss" { print $2; exit }')
[ "$LAST" = 16 ] && [ "$FIRST2" = 18 ] && ok "(b) steps go on: the first run ended at step $LAST, the resumed one's first loss is at step $FIRST2" ||
    bad "(b) the first run ended at step $LAST, the resumed one's first loss is at step $FIRST2 (want 16, 18)"

# ---- (c) two ranks --------------------------------------------------------------------------
if command -v mpirun >/dev/null 2>&1; then
    J="$TMP/c"
    if timeout -k 5 90 mpirun --allow-run-as-root --oversubscribe -np 2 "$DDPTRAIN" $FLAGS --job_dir "$J" --epochs 2 \
        --log_interval 1 --tensorboard >"$TMP/c.out" 2>&1; then
        ok "(c) trained on 2 ranks"
    else
        bad "(c) training on 2 ranks failed"; tail -n 5 "$TMP/c.out"
    fi
    FC=$(events "$J")
    [ "$(echo "$FC" | wc -l)" = 1 ] && ok "(c) one event file (rank 0's)" || bad "(c) event files: $FC"
    if "$PY" "$COMPARE" "$J/metrics.jsonl" 1 "$J/tensorboard/$(echo "$FC" | head -n 1)" --ranks 2 >"$TMP/c.cmp" 2>&1; then
        ok "(c) events against metrics.jsonl:"; sed 's/^/    /' "$TMP/c.cmp"
    else
        bad "(c) events against metrics.jsonl:"; cat "$TMP/c.cmp"
    fi
else
    echo "(c) skipped: mpirun not found"
fi

# ---- (d) the CRCs can fail ------------------------------------------------------------------
CRC=$("$PY" "$READ" --crc 123456789)
[ "$CRC" = e3069283 ] && ok "(d) the reader's CRC-32C of \"123456789\" is 0x$CRC" || bad "(d) the reader's CRC-32C of \"123456789\": 0x$CRC"
# flip FILE OFFSET: a copy of FILE with the byte at OFFSET (negative: from the end) inverted, in $TMP/flipped
flip() {
    "$PY" -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); i = int(sys.argv[2]); b[i] ^= 0xff
open(sys.argv[3], "wb").write(b)' "$1" "$2" "$TMP/flipped"
}
"$PY" "$READ" "$TMP/first.copy" >/dev/null 2>&1 && ok "(d) the file as written reads" || bad "(d) the file as written does not read"
flip "$TMP/first.copy" -10   # inside the last record's data
if ! "$PY" "$READ" "$TMP/flipped" >/dev/null 2>"$TMP/d.err" && grep -q "data's CRC does not match" "$TMP/d.err"; then
    ok "(d) a byte changed in a record's data: $(cat "$TMP/d.err")"
else
    bad "(d) a byte changed in a record's data went unnoticed: $(cat "$TMP/d.err")"
fi
# the second record's length: after the first record's 8 + 4 + length + 4 bytes
LEN0=$("$PY" -c 'import struct, sys; print(struct.unpack("<Q", open(sys.argv[1], "rb").read(8))[0])' "$TMP/first.copy")
flip "$TMP/first.copy" $((LEN0 + 16))
if ! "$PY" "$READ" "$TMP/flipped" >/dev/null 2>"$TMP/d.err" && grep -q "length's CRC does not match" "$TMP/d.err"; then
    ok "(d) a byte changed in a record's length: $(cat "$TMP/d.err")"
else
    bad "(d) a byte changed in a record's length went unnoticed: $(cat "$TMP/d.err")"
fi

# ---- (e) off, and a link -------------------------------------------------------------------
J="$TMP/e"
timeout -k 5 60 "$DDPTRAIN" $FLAGS --job_dir "$J" --epochs 1 --max_steps 2 >"$TMP/e.out" 2>&1 || bad "(e) training without --tensorboard failed"
[ -f "$J/metrics.jsonl" ] && [ ! -e "$J/tensorboard" ] && ok "(e) without --tensorboard: no tensorboard/" ||
    bad "(e) without --tensorboard: $(ls "$J")"
J="$TMP/e2"
mkdir -p "$J" "$TMP/elsewhere"
ln -s "$TMP/elsewhere" "$J/tensorboard"
timeout -k 5 60 "$DDPTRAIN" $FLAGS --job_dir "$J" --epochs 1 --max_steps 2 --tensorboard >"$TMP/e2.out" 2>"$TMP/e2.err"
rc=$?
if [ $rc -ne 0 ] && [ "$(wc -l <"$TMP/e2.err")" = 1 ] && grep -q "tensorboard is a symbolic link" "$TMP/e2.err" &&
    [ -z "$(ls -A "$TMP/elsewhere")" ] && [ "$(ls -A "$J")" = tensorboard ]; then
    ok "(e) a linked tensorboard/ is refused (exit $rc), nothing written: $(cat "$TMP/e2.err")"
else
    bad "(e) a linked tensorboard/: exit $rc, stderr: $(cat "$TMP/e2.err"); there: $(ls -A "$TMP/elsewhere"); job dir: $(ls -A "$J")"
fi
finish
