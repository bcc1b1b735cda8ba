#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ddptrain --device cuda end to end on a machine without a GPU, through the fake device module
# (tests/helpers/fake_device.h): the CUDA module's table over the CPU backend's operations, with
# "device" memory the host cannot touch outside an operation. It checks the host side's device
# discipline (what lives on the device, that the host reaches it only by upload and download,
# that every operand of an operation is device memory, what is refused) and nothing about the
# GPU's kernels. Since the arithmetic is the CPU backend's, every run must equal the same run
# with --device cpu bit for bit (tests/helpers/ckpt_compare.py --all: every dataset of the
# checkpoints; and the losses, learning rates and test figures of metrics.jsonl):
#  1. MiniResNet, 3 steps with a test evaluation; then resumed from its checkpoint to 6;
#  2. gradient accumulation, an average of the weights, evaluation every 2 steps, the training
#     split streamed from the shards (its batches made on the host and uploaded);
#  3. fp16's loss scaler on the device (the weights and the optimizer state compared: the scaler's
#     state is in the fake's checkpoint alone), two loader workers, weights from --init_from;
#  4. --train_crop_size (RandomResizedCrop on the host, uploaded; evaluation at another size);
#  5. refusals: --nesterov and a network with max pooling, one line each and no job directory;
#  6. the guard itself: host code that reads a device buffer, writes its guard page or passes
#     host memory to an operation dies with the message (tests/helpers/fake_device_touch).
# shellcheck disable=SC2086  # $RUN is a word list
# shellcheck source=tests/helpers/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/helpers/lib.sh"
B=${top_builddir:-.}
grep -q "define HAVE_CUDA_BACKEND 1" "$B/build_config.h" || { echo "SKIP: built without the CUDA backend"; exit "$SKIP"; }
PY=$(find_python "h5py, numpy") || { echo "SKIP: no python3 with h5py and numpy"; exit "$SKIP"; }
CMP="$top_srcdir/tests/helpers/ckpt_compare.py"
FAKE=$B/tests/helpers/fake_device
[ -f "$FAKE/ddptrain-cuda.so" ] || { bad "$FAKE/ddptrain-cuda.so was not built"; finish; }

make_synth "$TMP/data" --train 256 --test 64
RUN="--data_dir $TMP/data --width 4 --blocks 1 --batch_size 32 --eval_batch_size 32 --log_interval 1 --seed 3"

# run DIR DEVICE ARGS...: ddptrain on the fake device (cuda) or the CPU into $TMP/DIR.
run() {
    dir=$TMP/$1 dev=$2; shift 2
    DDPTRAIN_PLUGIN_DIR=$FAKE timeout -k 5 60 "$DDPTRAIN" $RUN --device "$dev" --job_dir "$dir" "$@" >"$dir.out" 2>&1 ||
        { bad "$1 ($dev) failed: $(grep -v '^ *$' "$dir.out" | tail -3)"; return 1; }
}

# the metrics without their clocks
figures() { sed -E 's/"(images_per_sec|data_sec|compute_sec|comm_wait_sec|time)": [0-9.e+-]+(, )?//g' "$1/metrics.jsonl"; }

# same NAME STEP ARGS...: NAME on the fake device and on the CPU, compared at STEP's checkpoint.
same() {
    name=$1 step=$2; shift 2
    run "$name.gpu" cuda "$@" && run "$name.cpu" cpu "$@" || return
    grep -q "device: cuda GPU 0: fake device" "$TMP/$name.gpu.out" || { bad "$name: not on the fake device"; return; }
    check "$name: fake device against --device cpu at step $step" ${ALL-"--all"} "$(ckpt "$TMP/$name.gpu" "$step")" \
        "$(ckpt "$TMP/$name.cpu" "$step")"
    figures "$TMP/$name.gpu" >"$TMP/$name.gpu.fig"
    figures "$TMP/$name.cpu" >"$TMP/$name.cpu.fig"
    if cmp -s "$TMP/$name.gpu.fig" "$TMP/$name.cpu.fig"; then
        ok "$name: $(wc -l <"$TMP/$name.cpu.fig") metrics lines the same (losses, lr, test figures)"
    else
        bad "$name: metrics differ:"; diff "$TMP/$name.gpu.fig" "$TMP/$name.cpu.fig" | head -6
    fi
}

# 1. MiniResNet, then resumed (both job directories again, to 6 steps).
same base 3 --epochs 2 --max_steps 3
grep -q "data: held on GPU 0" "$TMP/base.gpu.out" && ok "base: the splits held on the device (batches from plans)" ||
    bad "base: the splits were not held on the device"
same base 6 --epochs 2 --max_steps 6
grep -q "resum" "$TMP/base.gpu.out" && ok "base: resumed: $(grep -m1 -i "resum" "$TMP/base.gpu.out" | cut -c1-120)" ||
    bad "base: the second run did not resume"

# 2. Accumulation, EMA, step evaluations, a streamed split.
same opts 4 --epochs 1 --max_steps 4 --grad_accum_steps 2 --ema_decay 0.9 --eval_every_steps 2 --data_in_memory no
grep -q "training images stay on the host" "$TMP/opts.gpu.out" && ok "opts: the streamed split's batches uploaded" ||
    bad "opts: no upload path"

# 3. fp16 (the scaler on the device), workers, --init_from the CPU's checkpoint.
# (fp16's scaler state is in the fake's checkpoint alone: the weights and the optimizer compared)
ALL=
same fp16 2 --epochs 1 --max_steps 2 --amp_dtype fp16 --data_workers 2 --init_from "$(ckpt "$TMP/base.cpu" 3)"
unset ALL

# 4. RandomResizedCrop on the host, uploaded; evaluated at 32 px after a resize to 36.
same crop 3 --epochs 1 --max_steps 3 --train_crop_size 24 --val_resize_size 36 --val_crop_size 32

# 5. Refusals, as the CUDA module's (tests/test_gpu_refusals.sh checks the whole list).
for args in "--nesterov" "--model resnet18"; do
    name=refuse-$(echo "$args" | tr -dc 'a-z0-9')
    DDPTRAIN_PLUGIN_DIR=$FAKE "$DDPTRAIN" $RUN --device cuda --job_dir "$TMP/$name" $args >"$TMP/$name.out" 2>"$TMP/$name.err"
    rc=$?
    if [ "$rc" -ne 0 ] && [ "$(wc -l <"$TMP/$name.err")" -eq 1 ] && [ ! -e "$TMP/$name" ]; then
        ok "$args refused: exit $rc: $(cat "$TMP/$name.err")"
    else
        bad "$args: exit $rc, $(wc -l <"$TMP/$name.err") line(s): $(head -3 "$TMP/$name.err")"
    fi
done

# 6. The guard.
TOUCH=$B/tests/helpers/fake_device_touch
out=$(DDPTRAIN_PLUGIN_DIR=$FAKE "$TOUCH" ok 2>&1)
[ "$out" = "2 4 6 8" ] && ok "touch ok: upload, add_inplace, download: $out" || bad "touch ok: $out"
for mode in read write; do
    DDPTRAIN_PLUGIN_DIR=$FAKE "$TOUCH" $mode >"$TMP/t.out" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] && grep -q "^fake device: device memory touched by the host at 0x" "$TMP/t.out" &&
       grep -A2 "allocated at:" "$TMP/t.out" | grep -q "fake_device_touch(main"; then
        ok "touch $mode: exit $rc: $(head -1 "$TMP/t.out")"
    else
        bad "touch $mode: exit $rc: $(head -3 "$TMP/t.out")"
    fi
done
DDPTRAIN_PLUGIN_DIR=$FAKE "$TOUCH" operand >"$TMP/t.out" 2>&1
rc=$?
[ "$rc" -ne 0 ] && grep -q "add_inplace: operand 2 of (d, s), 0x[0-9a-f]*, is not device memory" "$TMP/t.out" &&
    ok "touch operand: exit $rc: $(cat "$TMP/t.out")" || bad "touch operand: exit $rc: $(cat "$TMP/t.out")"
finish
