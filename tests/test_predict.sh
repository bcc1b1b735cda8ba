#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ddptrain-predict (src/predict.c, src/predict/) against torchvision and against the run's own
# evaluation. A folder of JPEG and PNG files of sizes from 21x30 to 97x64 (grey, palette, RGBA
# among them, some two folders deep, one hidden) is imported as raw shards and as JPEG shards;
# MiniResNet trains on them three ways: A raw, RandomResizedCrop 32, evaluated on Resize(44) +
# CenterCrop(40), with an EMA; B JPEG, crops of 48, evaluated at 56 from 64 (FixRes: above the
# training size); C raw at the stored 48 with --tta flip. tests/helpers/predict_torch.py checks:
#   (a) on the test FOLDER, for A, B and C: the rows in the walk's order (written again in
#       Python), the network's inputs (--dump_inputs) equal to torchvision's Resize + CenterCrop
#       + ToTensor + Normalize (the checkpoint's /dataset mean and std) of PIL's decoding, bit for
#       bit; the logits (--dump_logits) within 1e-4 of the checkpoint loaded into PyTorch
#       (ddptrain_to_torch.py; its EMA for A, and /model with --no_ema), the same top-k, the
#       probabilities within 1e-5; JSON Lines saying what the CSV says; the checkpoint's /dataset
#       equal to the test shard's attributes (h5py);
#   (b) on the test SHARDS (the dataset directory): the CSV's top-1 equals the run's final
#       test_acc, and the dumped logits give its test_loss within 2e-6 (the same logits);
#   (c) 3 ranks (mpirun) write the same bytes as 1, CSV and JSON Lines, with a bad image skipped;
#   (d) bad input, each one line naming the file, a non-zero exit, no output file, no hang: a
#       checkpoint of another network than --model, a missing input, a truncated JPEG and a text
#       file (fatal; --skip_bad: a line each and no row), on 3 ranks too; a FIFO and a link to a
#       missing file (--skip_bad: named as import names them); a class list of another
#       number of classes (--data_dir), a shard of other classes or other class names, a
#       truncated checkpoint; a bad command line exits 2;
#   (e) --tta flip: torch's 0.5 f(x) + 0.5 f(flip(x)); without it the comparison must fail.
# Skips (77) without python3 with torch, torchvision, h5py, PIL and numpy.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "torch, torchvision, h5py, PIL, numpy") || {
    echo "SKIP: no python3 with torch, torchvision, h5py, PIL and numpy"; exit $SKIP; }
PREDICT="$top_builddir/ddptrain-predict"
HELP="$top_srcdir/tests/helpers/predict_torch.py"
LIMIT=120   # seconds any one command may take: a hang fails the test

"$PY" "$HELP" make "$TMP/tree" || { bad "making the image folder failed"; finish; }
"$DDPDATA" import --in "$TMP/tree" --out "$TMP/raw" --size 48 >"$TMP/imp.out" 2>&1 &&
    "$DDPDATA" import --in "$TMP/tree" --out "$TMP/jpeg" --size 64 --encoding jpeg >>"$TMP/imp.out" 2>&1 ||
    { bad "ddptrain-data import failed: $(tail -2 "$TMP/imp.out")"; finish; }

COMMON="--model miniresnet --width 4 --blocks 1 --num_classes 4 --batch_size 16 --eval_batch_size 10 --threads 2 --lr 0.2"
# train NAME DATA flags...: the run's job directory is $TMP/NAME, its last checkpoint $TMP/NAME.h5
train() {
    name=$1 data=$2; shift 2
    if timeout -k 5 $LIMIT "$DDPTRAIN" --data_dir "$data" --job_dir "$TMP/$name" $COMMON "$@" >"$TMP/$name.out" 2>&1; then
        cp "$(ls "$TMP/$name"/checkpoints/ckpt-*.h5 | tail -1)" "$TMP/$name.h5"
    else
        bad "run $name: ddptrain failed: $(tail -2 "$TMP/$name.out")"
    fi
}
train A "$TMP/raw" --image_size 48 --train_crop_size 32 --val_resize_size 44 --val_crop_size 40 --epochs 4 --ema_decay 0.8
train B "$TMP/jpeg" --image_size 64 --train_crop_size 48 --val_resize_size 64 --val_crop_size 56 --epochs 3
train C "$TMP/raw" --image_size 48 --epochs 3 --tta flip
[ "$FAILS" -eq 0 ] || finish

# py LABEL ARGS...: the helper must agree
py() {
    label=$1; shift
    if "$PY" "$HELP" "$@" >"$TMP/py.out" 2>&1; then ok "$label: $(tail -1 "$TMP/py.out")"
    else bad "$label:"; sed 's/^/     | /' "$TMP/py.out"; fi
}
# predict LABEL ARGS...: ddptrain-predict must succeed
predict() {
    label=$1; shift
    timeout -k 5 $LIMIT "$PREDICT" "$@" >"$TMP/pr.out" 2>"$TMP/pr.err" || bad "$label: ddptrain-predict $*: $(cat "$TMP/pr.err")"
}

# ---- (a), (b): torchvision on the folder, the run's evaluation on the shards -------------------
# case RUN DATA RESIZE CROP [flags]: both checks for one run
case_run() {
    run=$1 data=$2 resize=$3 crop=$4; shift 4
    predict "(a) $run" "$TMP/$run.h5" "$TMP/tree/test" --topk 3 --out "$TMP/$run.csv" --dump_inputs "$TMP/$run.x" \
        --dump_logits "$TMP/$run.z" "$@"
    predict "(a) $run" "$TMP/$run.h5" "$TMP/tree/test" --topk 3 --format jsonl --out "$TMP/$run.jsonl" "$@"
    py "(a) run $run, the folder against torchvision" compare "$TMP/$run.h5" "$TMP/tree/test" "$TMP/$run.csv" \
        "$TMP/$run.x" "$TMP/$run.z" "$resize" "$crop" --jsonl "$TMP/$run.jsonl" "$@"
    predict "(b) $run" "$TMP/$run.h5" "$data" --out "$TMP/$run.shards.csv" --dump_logits "$TMP/$run.shards.z"
    acc=$(grep '"test_acc"' "$TMP/$run/metrics.jsonl" | tail -1 | sed 's/.*"test_acc": \([0-9.]*\).*/\1/')
    top1=$("$PY" "$HELP" top1 "$TMP/$run.shards.csv" | cut -d' ' -f1)
    if [ -n "$acc" ] && [ "$top1" = "$acc" ] && grep -q "with labels: top-1 $acc " "$TMP/pr.out"; then
        ok "(b) run $run: top-1 on the test shards $top1 = the run's test_acc $acc ($(cat "$TMP/pr.out"))"
    else
        bad "(b) run $run: top-1 on the test shards '$top1', the run's test_acc '$acc' ($(cat "$TMP/pr.out"))"
    fi
    py "(b) run $run, the logits of the test shards" shards "$data" "$TMP/$run.shards.z" "$TMP/$run"
}
case_run A "$TMP/raw" 44 40
case_run B "$TMP/jpeg" 64 56
case_run C "$TMP/raw" 48 48 --tta flip
py "(a) run A's /dataset" dataset "$TMP/A.h5" "$TMP/raw/test-00000-of-00001.h5"
predict "(a) A --no_ema" "$TMP/A.h5" "$TMP/tree/test" --topk 2 --no_ema --out "$TMP/A.n.csv" --dump_inputs "$TMP/A.n.x" \
    --dump_logits "$TMP/A.n.z"
py "(a) run A, the trained weights (--no_ema)" compare "$TMP/A.h5" "$TMP/tree/test" "$TMP/A.n.csv" "$TMP/A.n.x" \
    "$TMP/A.n.z" 44 40 --no_ema

# ---- (e): test-time augmentation -------------------------------------------------------------
predict "(e)" "$TMP/A.h5" "$TMP/tree/test" --tta flip --topk 4 --out "$TMP/Af.csv" --dump_inputs "$TMP/Af.x" \
    --dump_logits "$TMP/Af.z"
py "(e) --tta flip" compare "$TMP/A.h5" "$TMP/tree/test" "$TMP/Af.csv" "$TMP/Af.x" "$TMP/Af.z" 44 40 --tta flip
if "$PY" "$HELP" compare "$TMP/A.h5" "$TMP/tree/test" "$TMP/Af.csv" "$TMP/Af.x" "$TMP/Af.z" 44 40 >"$TMP/py.out" 2>&1; then
    bad "(e) the flipped views' logits passed for plain ones"
else
    ok "(e) the comparison fails without the flip: $(head -1 "$TMP/py.out")"
fi

# ---- (d): bad input --------------------------------------------------------------------------
mkdir -p "$TMP/bad"
cp -r "$TMP/tree/test/red" "$TMP/bad/red"
good=$(find "$TMP/bad/red" -type f ! -name '.*' | wc -l)

# refused LABEL CODE PATTERN ARGS...: exit CODE, one line on stderr matching PATTERN, no output
refused() {
    label=$1 code=$2 pattern=$3; shift 3
    rm -f "$TMP/o.csv"
    timeout -k 5 $LIMIT "$PREDICT" "$@" --out "$TMP/o.csv" >"$TMP/r.out" 2>"$TMP/r.err"
    rc=$?
    if [ $rc = "$code" ] && [ "$(wc -l <"$TMP/r.err")" = 1 ] && grep -q -- "$pattern" "$TMP/r.err" &&
       [ ! -s "$TMP/r.out" ] && ! ls "$TMP"/o.csv* >/dev/null 2>&1; then
        ok "(d) $label: exit $rc: $(cat "$TMP/r.err")"
    else
        bad "(d) $label: exit $rc, wanted $code and one line matching '$pattern', no output:"
        sed 's/^/     | /' "$TMP/r.err" "$TMP/r.out"; ls "$TMP"/o.csv* 2>/dev/null
    fi
}
refused "a checkpoint of another network" 1 "A.h5: checkpoint is of architecture 'MiniResNet'" \
    "$TMP/A.h5" "$TMP/tree/test" --model resnet18
refused "a missing input" 1 "no-such-folder: cannot open the input" "$TMP/A.h5" "$TMP/no-such-folder"
echo "not an image" >"$TMP/bad/red/notes.txt"
refused "a text file among the images" 1 "notes.txt: neither a JPEG nor a PNG" "$TMP/A.h5" "$TMP/bad"
mv "$TMP/bad/red/notes.txt" "$TMP/notes.txt"
head -c 300 "$TMP/tree/test/blue/img00.jpg" >"$TMP/bad/red/img02b.jpg"
refused "a truncated JPEG" 1 "img02b.jpg: a truncated JPEG" "$TMP/A.h5" "$TMP/bad"
mv "$TMP/notes.txt" "$TMP/bad/red/notes.txt"
make_synth "$TMP/synth" --size 48 --train 32 --test 32 --shards 1
refused "a class list of 10 classes (--data_dir)" 1 "synth/test-00000-of-00001.h5: 10 classes, but the network has 4" \
    "$TMP/A.h5" "$TMP/tree/test" --data_dir "$TMP/synth"
refused "a shard of 10 classes" 1 "synth/train-00000-of-00001.h5: 10 classes" "$TMP/A.h5" "$TMP/synth/train-00000-of-00001.h5"
mkdir -p "$TMP/renamed/train" "$TMP/renamed/test"
for c in blue green red yellow; do
    cp -r "$TMP/tree/train/$c" "$TMP/renamed/train/x$c"; cp -r "$TMP/tree/test/$c" "$TMP/renamed/test/x$c"
done
"$DDPDATA" import --in "$TMP/renamed" --out "$TMP/renamed.sh" --size 48 >/dev/null 2>&1
refused "shards of other class names" 1 "the class names differ from the network's (class 0 is 'xblue' here, 'blue'" \
    "$TMP/A.h5" "$TMP/renamed.sh"
head -c 4000 "$TMP/A.h5" >"$TMP/trunc.h5"
refused "a truncated checkpoint" 1 "trunc.h5: " "$TMP/trunc.h5" "$TMP/tree/test"
refused "--topk 0" 2 "flag --topk: 0 is out of range" "$TMP/A.h5" "$TMP/tree/test" --topk 0
refused "no INPUT" 2 "no INPUT given" "$TMP/A.h5"

# --skip_bad: a line each, no row, the count in the summary
timeout -k 5 $LIMIT "$PREDICT" "$TMP/A.h5" "$TMP/bad" --skip_bad --out "$TMP/skip.csv" >"$TMP/skip.out" 2>"$TMP/skip.err"
rc=$?
rows=$(($(wc -l <"$TMP/skip.csv" 2>/dev/null || echo 1) - 1))
if [ $rc = 0 ] && [ "$rows" = "$good" ] && [ "$(wc -l <"$TMP/skip.err")" = 2 ] &&
   grep -q "notes.txt: neither a JPEG nor a PNG.*; skipped" "$TMP/skip.err" && grep -q "img02b.jpg: a truncated" "$TMP/skip.err" &&
   grep -q "2 skipped" "$TMP/skip.out" && ! grep -q "notes.txt\|img02b" "$TMP/skip.csv"; then
    ok "(d) --skip_bad: $rows rows, $(tr '\n' ' ' <"$TMP/skip.err")$(cat "$TMP/skip.out")"
else
    bad "(d) --skip_bad: exit $rc, $rows rows (wanted $good):"; cat "$TMP/skip.err" "$TMP/skip.out"
fi

# A FIFO and a link to a missing file among the images: each named as import names it (the one
# opening of image files, data/image.c), never opened for reading (a FIFO would wait forever)
mkdir -p "$TMP/odd/red"
cp "$TMP/tree/test/blue/img00.jpg" "$TMP/odd/red/a.jpg"
ln -s "$TMP/odd/red/gone.png" "$TMP/odd/red/b.png"
if mkfifo "$TMP/odd/red/c.jpg" 2>/dev/null; then
    timeout -k 5 $LIMIT "$PREDICT" "$TMP/A.h5" "$TMP/odd" --skip_bad --out "$TMP/odd.csv" >"$TMP/odd.out" 2>"$TMP/odd.err"
    rc=$?
    if [ $rc = 0 ] && [ "$(wc -l <"$TMP/odd.csv")" = 2 ] && [ "$(wc -l <"$TMP/odd.err")" = 2 ] &&
       grep -q "b.png: a symbolic link to a missing file; skipped" "$TMP/odd.err" &&
       grep -q "c.jpg: not a regular file (a FIFO); skipped" "$TMP/odd.err"; then
        ok "(d) a FIFO and a dangling link, --skip_bad: $(tr '\n' ' ' <"$TMP/odd.err")"
    else
        bad "(d) a FIFO and a dangling link, --skip_bad: exit $rc:"; cat "$TMP/odd.err" "$TMP/odd.out"
    fi
fi

# ---- (c): 3 ranks -----------------------------------------------------------------------------
if command -v mpirun >/dev/null 2>&1; then
    mpi_leak_checks_off
    ranks() {   # ranks NP ARGS...
        np=$1; shift
        OMP_NUM_THREADS=1 timeout -k 5 $LIMIT mpirun --allow-run-as-root --oversubscribe -np "$np" "$PREDICT" "$@"
    }
    for fmt in csv jsonl; do
        ranks 3 "$TMP/A.h5" "$TMP/tree/test" "$TMP/raw" "$TMP/bad" --skip_bad --threads 1 --format $fmt \
            --out "$TMP/r3.$fmt" >"$TMP/r3.out" 2>"$TMP/r3.err"
        rc3=$?
        "$PREDICT" "$TMP/A.h5" "$TMP/tree/test" "$TMP/raw" "$TMP/bad" --skip_bad --threads 1 --format $fmt \
            --out "$TMP/r1.$fmt" >"$TMP/r1.out" 2>"$TMP/r1.err"
        if [ $rc3 = 0 ] && [ -s "$TMP/r1.$fmt" ] && cmp -s "$TMP/r1.$fmt" "$TMP/r3.$fmt" && cmp -s "$TMP/r1.out" "$TMP/r3.out"; then
            ok "(c) $fmt: 3 ranks write the bytes 1 rank writes, $(wc -l <"$TMP/r1.$fmt") lines ($(cat "$TMP/r3.out"))"
        else
            bad "(c) $fmt: 3 ranks (exit $rc3) and 1 rank differ:"; cat "$TMP/r3.err" "$TMP/r3.out" "$TMP/r1.out"
            diff "$TMP/r1.$fmt" "$TMP/r3.$fmt" | head -5
        fi
    done
    t0=$(date +%s.%N)
    rm -f "$TMP/o3.csv"
    ranks 3 "$TMP/A.h5" "$TMP/raw" "$TMP/tree/test" "$TMP/bad" --threads 1 --out "$TMP/o3.csv" >"$TMP/f3.out" 2>"$TMP/f3.err"
    rc=$?
    if [ $rc != 0 ] && [ $rc != 124 ] && grep -q "ddptrain-predict: error: .*img02b.jpg: a truncated JPEG" "$TMP/f3.err" &&
       ! ls "$TMP"/o3.csv* >/dev/null 2>&1; then
        ok "(c) a bad image on one of 3 ranks ends the job: exit $rc in $(elapsed "$t0") s, no output"
    else
        bad "(c) a bad image on one of 3 ranks: exit $rc:"; cat "$TMP/f3.err"
    fi
else
    echo "note: no mpirun: (c) is not checked here"
fi
finish
