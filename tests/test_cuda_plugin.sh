#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The CUDA backend is a module loaded on demand (src/device/plugin.h), so that a CUDA build starts on
# CPU nodes:
#  1. ddptrain, ddptrain-data and the CPU test and benchmark programs link none of libcudart,
#     libcudnn, libcublas, libnccl (readelf -d, ldd) and hold no static CUDA runtime (nm);
#  2. with the module directory pointed at an empty one, --device cuda fails with one line naming
#     the module's path and dlopen's reason (exit 1), and --device auto trains on the CPU and
#     logs why;
#  3. a module of another ABI version is refused with one line (exit 1), with auto too;
#  4. with the module just built, it exports its entry point only and needs the CUDA libraries,
#     and --device auto trains on the CPU where no GPU is visible (on the GPU where one is);
#  5. where a private mount namespace can hide the CUDA libraries (root), as on a CPU node:
#     --device cuda fails naming the missing library (exit 1), --device auto trains on the CPU.
# A build without CUDA: --device cuda exits 2 and auto trains on the CPU, as they always did.
# shellcheck source=tests/helpers/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/helpers/lib.sh"
B=${top_builddir:-.}
CUDA_LIBS_RE='lib(cudart|cudnn[a-z_]*|cublas(Lt)?|nccl)\.so'

# 1. Linking.
for t in readelf ldd nm; do
    command -v "$t" >/dev/null 2>&1 || { echo "SKIP: $t not found"; exit "$SKIP"; }
done
for p in ddptrain ddptrain-data tests/helpers/dump_model; do
    [ -x "$B/$p" ] || bad "$B/$p was not built"
done
# Every program of the build but the two GPU tests, which check the module's code linked in.
n=0
for f in "$B/ddptrain" "$B/ddptrain-data" "$B"/tests/* "$B"/bench/*; do
    [ -f "$f" ] && [ -x "$f" ] && readelf -h "$f" >/dev/null 2>&1 || continue
    p=${f#"$B"/}
    case $p in tests/test_ops_cuda|tests/test_device_data) continue ;; esac
    n=$((n + 1))
    needed=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -E "$CUDA_LIBS_RE" | tr '\n' ' ')
    loaded=$(ldd "$f" 2>&1 | grep -E "$CUDA_LIBS_RE" | awk '{print $1}' | tr '\n' ' ')
    static=$(nm "$f" 2>/dev/null | awk '$2 == "T" && $3 ~ /^cuda(GetDeviceCount|Malloc|StreamCreate)$/ {print $3}' | tr '\n' ' ')
    if [ -z "$needed$loaded$static" ]; then
        [ "$p" = ddptrain ] && ok "ddptrain needs: $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
    else
        bad "$p links CUDA: NEEDED [$needed] ldd [$loaded] static runtime [$static]"
    fi
done
[ "$FAILS" -eq 0 ] && ok "$n programs link no CUDA library (readelf -d, ldd, nm)"

make_synth "$TMP/data" --train 256 --test 64
RUN="--data_dir $TMP/data --width 4 --blocks 1 --batch_size 32 --max_steps 2 --log_interval 1 --save_every 0"

# Where the runs below look for the module; make check points DDPTRAIN_PLUGIN_DIR at the build.
built=${DDPTRAIN_PLUGIN_DIR:-$B}
plugdir=$built

# expect_fail NAME STATUS TEXT DDPTRAIN-ARGS...: one line on stderr holding TEXT, exit STATUS.
expect_fail() {
    name=$1 want_rc=$2 want=$3; shift 3
    # shellcheck disable=SC2086  # $RUN is a word list
    DDPTRAIN_PLUGIN_DIR=$plugdir "$DDPTRAIN" $RUN --job_dir "$TMP/$name" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    rc=$?
    lines=$(wc -l <"$TMP/$name.err")
    if [ "$rc" -eq "$want_rc" ] && [ "$lines" -eq 1 ] && grep -qF -- "$want" "$TMP/$name.err"; then
        ok "$name: exit $rc: $(cat "$TMP/$name.err")"
    else
        bad "$name: exit $rc (want $want_rc), $lines stderr line(s), wanted '$want': $(cat "$TMP/$name.err")"
    fi
}

# expect_cpu NAME TEXT DDPTRAIN-ARGS...: trains 2 steps on the CPU; its device line holds TEXT.
expect_cpu() {
    name=$1 want=$2; shift 2
    # shellcheck disable=SC2086
    if ! DDPTRAIN_PLUGIN_DIR=$plugdir "$DDPTRAIN" $RUN --job_dir "$TMP/$name" "$@" >"$TMP/$name.out" 2>&1; then
        bad "$name: training failed: $(tail -3 "$TMP/$name.out")"
        return
    fi
    line=$(grep -m1 "device: " "$TMP/$name/logs/rank-00000.log")
    steps=$(grep -c '"loss"' "$TMP/$name/metrics.jsonl")
    case $line in
        *"device: cpu "*"$want"*) [ "$steps" -eq 2 ] && ok "$name: 2 steps on the CPU; log: ${line#*device: }" ||
                                  bad "$name: $steps steps logged, want 2" ;;
        *) bad "$name: device line '$line' does not say cpu and '$want'" ;;
    esac
}

if ! grep -q "define HAVE_CUDA_BACKEND 1" "$B/build_config.h"; then
    expect_fail no-cuda 2 "built without the CUDA backend" --device cuda
    expect_cpu no-cuda-auto "built without the CUDA backend" --device auto
    finish
fi

# 2. No module where it is looked for.
mkdir "$TMP/empty"
module=$TMP/empty/ddptrain-cuda.so
plugdir=$TMP/empty
expect_fail missing-cuda 1 "cannot load the CUDA backend $module" --device cuda
grep -qF "cannot open shared object file" "$TMP/missing-cuda.err" && ok "missing-cuda: dlopen's reason is given" ||
    bad "missing-cuda: no dlopen reason: $(cat "$TMP/missing-cuda.err")"
expect_cpu missing-auto "cannot load the CUDA backend $module" --device auto
expect_cpu missing-cpu "" --device cpu

# 3. A module of another build.
plugdir=$B/tests/helpers/fake_plugin
expect_fail abi-cuda 1 "CUDA backend module ABI version" --device cuda
expect_fail abi-auto 1 "install the module built with this ddptrain" --device auto

# 4. The module just built (make check points DDPTRAIN_PLUGIN_DIR at it).
real=$built/ddptrain-cuda.so
if [ ! -f "$real" ]; then
    bad "$real was not built"
    finish
fi
exports=$(nm -D --defined-only "$real" | awk '$2 == "T" || $2 == "D" || $2 == "R" {print $3}' | tr '\n' ' ')
[ "$exports" = "ddptrain_cuda_plugin " ] && ok "the module exports $exports only" || bad "the module exports: $exports"
mneeds=$(readelf -d "$real" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -E "$CUDA_LIBS_RE" | tr '\n' ' ')
case $mneeds in
    *libcudnn*libcublas*|*libcublas*libcudnn*) ok "the module needs $mneeds" ;;
    *) bad "the module does not need cuDNN and cuBLAS: [$mneeds]" ;;
esac
# shellcheck disable=SC2086
if DDPTRAIN_PLUGIN_DIR=$built "$DDPTRAIN" $RUN --job_dir "$TMP/real" --device auto >"$TMP/real.out" 2>&1; then
    line=$(grep -m1 "device: " "$TMP/real/logs/rank-00000.log")
    case $line in
        *"device: cuda "*) ok "real-auto: a GPU is visible and the module trains on it: ${line#*device: }" ;;
        *"device: cpu "*"no usable GPU ("*) ok "real-auto: the module loads, sees no GPU, trains on the CPU: ${line#*device: }" ;;
        *) bad "real-auto: device line: $line" ;;
    esac
else
    bad "real-auto: training failed: $(tail -3 "$TMP/real.out")"
fi

# 5. A CPU node: the module is there but cuDNN's directory is hidden under an empty file system
# in a private mount namespace (where this user may make one: root, and not a system directory
# ddptrain itself needs).
cudnn=$(ldd "$real" | awk '$1 ~ /^libcudnn\.so/ && $3 ~ /^\// {print $3}' | head -1)
libdir=${cudnn%/*}
case $libdir in
    ""|/lib*|/usr/lib*) libdir= ;;
esac
[ -n "$libdir" ] && ldd "$DDPTRAIN" | grep -qF "$libdir/" && libdir=
if [ -n "$libdir" ] && unshare -m true 2>/dev/null; then
    hidden() {   # NAME ARGS...: ddptrain with $libdir hidden
        name=$1; shift
        # shellcheck disable=SC2016,SC2086  # $1 is the inner shell's; $RUN is a word list
        DDPTRAIN_PLUGIN_DIR=$built unshare -m sh -c 'mount -t tmpfs none "$1" && shift && exec "$@"' sh "$libdir" \
            "$DDPTRAIN" $RUN --job_dir "$TMP/$name" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    }
    hidden hidden-cuda --device cuda
    rc=$?
    if [ "$rc" -eq 1 ] && [ "$(wc -l <"$TMP/hidden-cuda.err")" -eq 1 ] &&
       grep -qF "cannot load the CUDA backend $real" "$TMP/hidden-cuda.err" &&
       grep -qF ": libcudnn" "$TMP/hidden-cuda.err"; then
        ok "$libdir hidden: --device cuda: exit 1: $(cat "$TMP/hidden-cuda.err")"
    else
        bad "$libdir hidden: --device cuda: exit $rc: $(cat "$TMP/hidden-cuda.err")"
    fi
    if hidden hidden-auto --device auto &&
       grep -m1 "device: " "$TMP/hidden-auto/logs/rank-00000.log" | grep -q "device: cpu .*libcudnn.*cannot open shared object file"; then
        ok "$libdir hidden: --device auto trains on the CPU: $(grep -m1 -o "cannot load.*" "$TMP/hidden-auto/logs/rank-00000.log")"
    else
        bad "$libdir hidden: --device auto: $(cat "$TMP/hidden-auto.err") $(grep -m1 "device: " "$TMP/hidden-auto.out")"
    fi
else
    echo "(no private mount namespace here: the run without the CUDA libraries was not made)"
fi
finish
