#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# run-on-device.sh - every GPU check and the GPU benchmark, in one go, on a machine with an NVIDIA
# GPU where nothing is built. Budget: under 8 minutes. Everything it prints and measures lands
# under $OUT (default ./gpu-out); summary.txt has the figures.
#   1. tests/test_ops_cuda --bench: every CUDA op against the CPU op (fp32, and the bf16/fp16
#      convolutions), the loss-scaler kernels, a one-rank NCCL communicator; conv timings.
#   2. tests/test_device_data: batches made on the GPU against the CPU loader's, byte for byte.
#   3. tests/test_gpu_train.sh: one batch on the GPU against PyTorch and the CPU backend (logits,
#      loss, every gradient); ddptrain on the GPU: GPU vs CPU after 5 fp32 steps, bf16 and fp16
#      lowering the loss like fp32 over 200 steps, the fp16 scaler state in checkpoints, and a
#      checkpoint moving GPU -> CPU -> GPU.
#   4. Benchmark: ddptrain at width 64, batch 512 (fp32, bf16, fp16; --cudnn_benchmark) against
#      PyTorch on the same GPU and model (channels_last, autocast, the same batch size,
#      cudnn.benchmark on), with the ratios and the targets (>= 1.5x PyTorch and >= 40,000 images/s in bf16).
#   5. compute-sanitizer memcheck of 2 and 1 when installed (capped; informational).
# SKIP_BENCH=1 leaves out 4.
#
# The programs come prebuilt in a carried folder ($CARRY, default carry/gpu from the
# repository root; /carry/ is git-ignored) holding bin/ and lib/, and the CUDA backend module
# that ddptrain and dump_model load (lib/ddptrain/ddptrain-cuda.so; DDPTRAIN_PLUGIN_DIR is set
# to that folder below). Prepare it on the build machine, from the repository root:
#
#   mkdir -p b-gpu && cd b-gpu
#   ../configure --quiet --with-cuda-arch=90 --with-mpi=no --with-pmix=no --with-dnnl=no
#   make -j2 tests/test_ops_cuda tests/test_device_data tests/helpers/dump_model ddptrain ddptrain-data ddptrain-cuda.so && cd ..
#   rm -rf carry/gpu && mkdir -p carry/gpu/bin/tests/helpers carry/gpu/lib/ddptrain
#   cp b-gpu/tests/test_ops_cuda b-gpu/tests/test_device_data b-gpu/ddptrain b-gpu/ddptrain-data carry/gpu/bin/
#   cp b-gpu/tests/helpers/dump_model carry/gpu/bin/tests/helpers/
#   cp b-gpu/ddptrain-cuda.so carry/gpu/lib/ddptrain/
#   find carry/gpu/bin carry/gpu/lib/ddptrain -type f -exec ldd {} + | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
#     grep -vE '/(libc|libm|libpthread|libdl|librt|libresolv|ld-linux[^/]*)\.so' |
#     grep -vE '/lib(cuda|cudart|cudnn[a-z_]*|cublas(Lt)?|nccl|nvrtc|nvJitLink)\.so' |
#     xargs -r cp -L -t carry/gpu/lib/
#
# MPI, PMIx and oneDNN are left out of that build because the GPU checks need none of them (the
# CPU side of the comparisons uses the reference convolution; ddptrain runs one rank) and their
# libraries would bloat the folder. The CUDA libraries are not carried: the GPU machine has
# cuDNN, cuBLAS, NCCL and the CUDA runtime as pip wheels of its python
# (site-packages/nvidia/*/lib), found below by asking that python.
#
# Exit status: 0 when every correctness check passed, 1 when one failed, 77 without a GPU;
# the benchmark is informational.
set -u

root=$(cd "$(dirname "$0")/../.." && pwd)
carry=${CARRY:-$root/carry/gpu}
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
summary=$out/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

bin=$carry/bin/test_ops_cuda
if [ ! -x "$bin" ]; then
    note "error: $bin is missing: prepare the carried folder (see the top of $0)"
    exit 2
fi

# The nvidia/*/lib folders of the python that has the CUDA wheels (PYTHON to choose another).
py=${PYTHON:-python3}
nvlibs=$("$py" - <<'EOF' 2>/dev/null
import os
try:
    import nvidia
except ImportError:
    raise SystemExit(0)
dirs = []
for base in list(getattr(nvidia, "__path__", [])):
    for name in sorted(os.listdir(base)):
        lib = os.path.join(base, name, "lib")
        if os.path.isdir(lib):
            dirs.append(lib)
print(":".join(dirs))
EOF
)
# Python (PyTorch) must not see the carried libraries: they come from the build machine's
# distribution, and an older libstdc++ or libssl ahead of the system's breaks its imports. It
# runs through a wrapper that drops the carried folder from its library path.
pyreal=$(command -v "$py" 2>/dev/null || echo "$py")
pywrap=$(mktemp -d)/python3
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "${nvlibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$pyreal" > "$pywrap"
chmod +x "$pywrap"
py=$pywrap
LD_LIBRARY_PATH=$carry/lib${nvlibs:+:$nvlibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
# The CUDA backend module ddptrain and dump_model load (src/device/plugin.h).
DDPTRAIN_PLUGIN_DIR=${DDPTRAIN_PLUGIN_DIR:-$carry/lib/ddptrain}
export DDPTRAIN_PLUGIN_DIR
module=$DDPTRAIN_PLUGIN_DIR/ddptrain-cuda.so
[ -f "$module" ] || note "warning: $module is missing: ddptrain and dump_model cannot use the GPU (see the top of $0)"
# Threads for the CPU reference side of the comparisons; NCCL explains its own failures.
OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export OMP_NUM_THREADS NCCL_DEBUG

# What the machine is, and whether every library resolves.
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "host: $(uname -a)"
    echo "python: $(command -v "$py") ($("$py" --version 2>&1))"
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    echo "DDPTRAIN_PLUGIN_DIR=$DDPTRAIN_PLUGIN_DIR"
    echo
    command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi 2>&1
    echo
    ldd "$bin" 2>&1
    [ -f "$module" ] && { echo "$module:"; ldd "$module" 2>&1; }
} > "$out/environment.txt"
if grep -q "not found" "$out/environment.txt"; then
    note "warning: unresolved libraries:"
    grep "not found" "$out/environment.txt" | tee -a "$summary"
fi

# Seconds since the script started: the last, informational steps are skipped when the budget
# (8 minutes) is nearly spent, so that the figures before them come back.
t_script=$(date +%s)
elapsed() { echo $(( $(date +%s) - t_script )); }

# 1. Op correctness, then convolution timings (--bench), in one run.
start=$(date +%s)
timeout 240 "$bin" --bench > "$out/test_ops_cuda.log" 2>&1
rc=$?
note "test_ops_cuda --bench: exit $rc after $(( $(date +%s) - start )) s (0 pass, 1 failures, 77 no GPU, 124 timeout)"
grep -E "^(CUDA:|FAIL|SKIP)|checks failed|internal error" "$out/test_ops_cuda.log" | tee -a "$summary"
grep -E "^bench .*all convs" "$out/test_ops_cuda.log" | tee -a "$summary"
grep -E "^     conv " "$out/test_ops_cuda.log" | sort -u > "$out/conv_algorithms.txt"
if [ "$rc" = 77 ]; then
    note "no GPU: nothing else to run"
    exit 77
fi
status=0
fail() { [ "$1" = 0 ] || status=1; }
fail "$rc"

# 2. Batches made on the GPU.
dd=$carry/bin/test_device_data
if [ -x "$dd" ]; then
    timeout 120 "$dd" > "$out/test_device_data.log" 2>&1
    drc=$?
    note "test_device_data: exit $drc (0 pass, 1 failures, 77 no GPU)"
    grep -E "^(FAIL|SKIP)|FAILED|checks? (passed|failed)" "$out/test_device_data.log" | tee -a "$summary"
    fail "$drc"
else
    note "test_device_data: not carried"
fi

# 3. ddptrain on the GPU: the script make check runs, with the carried programs.
ddp=$carry/bin/ddptrain
if [ -x "$ddp" ] && [ -x "$carry/bin/ddptrain-data" ]; then
    start=$(date +%s)
    top_builddir=$carry/bin top_srcdir=$root PYTHON=$py timeout 330 sh "$root/tests/test_gpu_train.sh" \
        > "$out/test_gpu_train.log" 2>&1
    trc=$?
    note "test_gpu_train.sh: exit $trc after $(( $(date +%s) - start )) s (0 pass, 1 failures, 77 skipped)"
    grep -E "^(ok|FAIL|SKIP|device)" "$out/test_gpu_train.log" | tee -a "$summary"
    fail "$trc"
else
    note "ddptrain on the GPU: not run (bin/ddptrain not carried)"
fi

# 4. Benchmark: images/s of ddptrain (mean of the log intervals after the first) and of PyTorch.
# SKIP_BENCH=1 leaves it out (a correctness rerun in little time).
if [ -x "$ddp" ] && [ "${SKIP_BENCH:-0}" != 1 ]; then
    work=$out/bench
    mkdir -p "$work"
    "$carry/bin/ddptrain-data" synth --out "$work/data" --train 25600 --test 512 > "$work/synth.log" 2>&1
    for t in fp32 bf16 fp16 bf16act32; do
        case $t in
            fp32) amp=--no-use_amp ;;
            bf16act32) amp="--use_amp --amp_dtype bf16 --amp_activations 32" ;;
            *) amp="--use_amp --amp_dtype $t" ;;
        esac
        # shellcheck disable=SC2086
        timeout 100 "$ddp" --data_dir "$work/data" --device cuda --width 64 --batch_size 512 $amp --cudnn_benchmark \
            --max_steps 200 --log_interval 40 --eval_every 0 --save_every 0 --job_dir "$work/$t" \
            > "$work/$t.log" 2>&1
        brc=$?
        ips=$("$py" -c "
import json, sys
v = [json.loads(l)['images_per_sec'] for l in open(sys.argv[1]) if 'images_per_sec' in l]
print(f'{sum(v[1:]) / len(v[1:]):.0f}' if len(v) > 1 else 'nan')" "$work/$t/metrics.jsonl" 2>/dev/null || echo nan)
        eval "ddp_$t=\$ips"
        note "ddptrain width 64 batch 512 $t: $ips images/s (exit $brc)"
        grep -m1 "device:" "$work/$t.log" >> "$work/devices.txt"
    done
    for t in fp32 bf16 fp16; do
        case $t in fp32) amp= ;; *) amp="--amp $t" ;; esac
        # shellcheck disable=SC2086
        line=$(cd "$root" && timeout 100 "$py" bench/torch_bench.py --device cuda --width 64 --batch 512 \
               --warmup 20 --steps 100 --channels_last --cudnn_benchmark $amp 2>&1 | tail -n 1)
        ips=$(echo "$line" | sed -n 's/.*: \([0-9.]*\) images\/s$/\1/p')
        eval "pt_$t=\${ips:-nan}"
        note "reference: $line"
    done
    # shellcheck disable=SC2154  # ddp_* and pt_* are set by eval above
    "$py" - "$ddp_fp32" "$pt_fp32" "$ddp_bf16" "$pt_bf16" "$ddp_fp16" "$pt_fp16" "$ddp_bf16act32" <<'PYEOF' | tee -a "$summary"
import sys
v = [float(x) if x not in ("", "nan") else float("nan") for x in sys.argv[1:8]]
for (t, d, p) in (("fp32", v[0], v[1]), ("bf16", v[2], v[3]), ("fp16", v[4], v[5]),
                  ("bf16, 32-bit activations", v[6], v[3])):
    print(f"{t}: ddptrain {d:.0f} images/s, PyTorch {p:.0f} images/s, ratio {d / p:.2f}"
          + (" (PyTorch's fp32 convolutions use TF32; ddptrain's only with --tf32)" if t == "fp32" else ""))
r = v[2] / v[3]
print(f"targets in bf16: ratio {r:.2f} (>= 1.5: {'met' if r >= 1.5 else 'NOT met'}); "
      f"{v[2]:.0f} images/s (>= 40000: {'met' if v[2] >= 40000 else 'NOT met'})")
PYEOF
fi

# 5. compute-sanitizer memcheck (slow: capped, informational).
cs=$(command -v compute-sanitizer 2>/dev/null || true)
[ -z "$cs" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && cs=/usr/local/cuda/bin/compute-sanitizer
if [ -n "$cs" ] && [ "$(elapsed)" -gt 350 ]; then
    note "compute-sanitizer: skipped, $(elapsed) s of the budget spent"
elif [ -n "$cs" ]; then
    for prog in "$dd" "$bin"; do
        [ -x "$prog" ] || continue
        name=$(basename "$prog")
        start=$(date +%s)
        timeout 60 "$cs" --tool memcheck --leak-check no --error-exitcode 3 "$prog" > "$out/sanitizer-$name.log" 2>&1
        note "compute-sanitizer memcheck $name: exit $? after $(( $(date +%s) - start )) s (0 clean, 3 errors found, 124 timeout)"
        grep -E "ERROR SUMMARY|Invalid|misaligned" "$out/sanitizer-$name.log" | head -10 | tee -a "$summary"
        # NCCL's start-up asks for the kernel images of every architecture it was built for and
        # gets "no kernel image" for the others: reported as errors, raised inside NCCL alone.
        nn=$(awk '/^========= Program hit/ { n++; inside = 0 } /ncclInitKernelsForDevice/ && !inside { c++; inside = 1 }
                  END { print c + 0 }' "$out/sanitizer-$name.log")
        [ "$nn" -gt 0 ] && note "  of which $nn raised inside NCCL's ncclInitKernelsForDevice (its probe of kernel images)"
    done
else
    note "compute-sanitizer: not installed"
fi

note "correctness: exit $status (0 all passed); $(elapsed) s in all"
exit $status
