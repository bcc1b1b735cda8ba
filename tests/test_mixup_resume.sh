#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Training with the reference recipe's data options on synthetic data: --random_erase,
# --mixup_alpha with --cutmix_alpha (and label smoothing), and --ra_reps on 2 ranks, each
# stopped half way and resumed to the same final checkpoint bit for bit as a run never stopped
# (tests/helpers/ckpt_compare.py --all, as tests/test_resume.sh); the same batches without the
# prefetch thread and with 2 workers (the final checkpoint bit for bit); each option changes
# the training (another final checkpoint than without it). Refused with one line and no job
# directory: --ra_reps streamed (--data_in_memory no), --ra_reps on a split of fewer than 256
# images, and --random_erase out of [0, 1].
# shellcheck disable=SC2086  # $FLAGS and $MPIRUN are word lists
# shellcheck source=tests/helpers/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/helpers/lib.sh"
mpi_leak_checks_off
PY=$(find_python "h5py, numpy") || { echo "SKIP: no python3 with h5py and numpy"; exit "$SKIP"; }
CMP="$top_srcdir/tests/helpers/ckpt_compare.py"
export OMP_NUM_THREADS=1
# 512 training images, batch 32: 16 steps per epoch on 1 rank; with --ra_reps on 2 ranks
# 512 // 256 * 256 / 2 = 256 per rank, 8 steps per epoch
make_synth "$TMP/data" --train 512 --test 64 --shards 2
make_synth "$TMP/small" --train 200 --test 64
FLAGS="--data_dir $TMP/data --width 4 --blocks 1 --threads 1 --batch_size 32 --log_interval 1"
MPIRUN="mpirun --allow-run-as-root --oversubscribe"

same() { "$PY" "$CMP" --all "$1" "$2" 2>&1; }

# bitexact LABEL TAG NRANKS HALF FULL FLAGS...: FULL steps straight vs HALF + resume
bitexact() {
    label=$1 tag=$2 np=$3 half=$4 full=$5; shift 5
    s="$TMP/straight-$tag" r="$TMP/resumed-$tag"
    if ! train_job "$s" "$np" --max_steps "$full" "$@"; then bad "$label: straight run failed: $(tail -3 "$s.out")"; return; fi
    if ! train_job "$r" "$np" --max_steps "$half" "$@"; then bad "$label: first half failed: $(tail -3 "$r.out")"; return; fi
    mv "$r.out" "$r.first.out"
    if ! train_job "$r" "$np" --max_steps "$full" "$@"; then bad "$label: resumed run failed: $(tail -3 "$r.out")"; return; fi
    grep -q "resume: .*ckpt-$(printf %09d "$half").h5" "$r.out" || { bad "$label: the second run did not resume"; return; }
    if out=$(same "$(ckpt "$s" "$full")" "$(ckpt "$r" "$full")"); then ok "$label: $out"; else bad "$label: $out"; fi
}
# differs LABEL A B: two runs' final checkpoints must differ
differs() {
    if same "$2" "$3" >/dev/null; then bad "$1: the same checkpoint"; else ok "$1"; fi
}

MIX="--random_erase 0.5 --mixup_alpha 0.2 --cutmix_alpha 1.0 --label_smoothing 0.1"
bitexact "erasing, mixup and cutmix, 1 rank, 20 steps = 10 + resume 10 (across an epoch)" mix 1 10 20 $MIX
bitexact "--ra_reps 3 with erasing and mixup, 2 ranks, 12 steps = 6 + resume 6" ra 2 6 12 --ra_reps 3 --random_erase 0.25 --mixup_alpha 0.2
grep -q "^training: .* x 8 steps (batch 32 x accum 1 x 2 ranks" "$TMP/straight-ra.out" || bad "--ra_reps 3 on 2 ranks: not 8 steps per epoch: $(grep -m1 '^training:' "$TMP/straight-ra.out")"

train_job "$TMP/noprefetch" 1 --max_steps 20 $MIX --no-prefetch --data_workers 2 || bad "--no-prefetch run: $(tail -2 "$TMP/noprefetch.out")"
if out=$(same "$(ckpt "$TMP/straight-mix" 20)" "$(ckpt "$TMP/noprefetch" 20)"); then ok "no prefetch thread, 2 workers: $out"
else bad "no prefetch thread, 2 workers: $out"; fi

train_job "$TMP/plain" 1 --max_steps 20 --label_smoothing 0.1 || bad "plain run: $(tail -2 "$TMP/plain.out")"
train_job "$TMP/erase" 1 --max_steps 20 --label_smoothing 0.1 --random_erase 0.5 || bad "erase run"
train_job "$TMP/mixup" 1 --max_steps 20 --label_smoothing 0.1 --mixup_alpha 0.2 || bad "mixup run"
train_job "$TMP/cutmix" 1 --max_steps 20 --label_smoothing 0.1 --cutmix_alpha 1.0 || bad "cutmix run"
train_job "$TMP/ra" 1 --max_steps 20 --label_smoothing 0.1 --ra_reps 2 || bad "ra run"
for o in erase mixup cutmix ra; do differs "--$o changes the training" "$(ckpt "$TMP/plain" 20)" "$(ckpt "$TMP/$o" 20)"; done

# refuse LABEL WANT FLAGS...: one line naming WANT on stderr, non-zero exit, no job directory
refuse() {
    label=$1 want=$2; shift 2
    d="$TMP/refused-$(echo "$label" | tr -c 'a-z0-9' _)"
    if timeout -k 5 60 "$DDPTRAIN" $FLAGS --job_dir "$d" "$@" >"$d.out" 2>"$d.err"; then bad "$label: accepted"; return; fi
    if [ "$(wc -l <"$d.err")" -ne 1 ] || ! grep -q -- "$want" "$d.err"; then bad "$label: $(cat "$d.err")"; return; fi
    if [ -e "$d" ]; then bad "$label: the job directory was made"; return; fi
    ok "$label: $(cat "$d.err")"
}
refuse "--ra_reps streamed" "--ra_reps 3 needs the whole train split in memory" --ra_reps 3 --data_in_memory no
refuse "--ra_reps on 200 images" "--ra_reps 2: the train split's 200 samples" --ra_reps 2 --data_dir "$TMP/small"
refuse "--random_erase 1.5" "random_erase" --random_erase 1.5
finish
