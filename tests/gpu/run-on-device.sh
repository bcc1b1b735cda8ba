#!/bin/sh
# run-on-device.sh - the GPU checks, in one go, on a machine with an NVIDIA GPU where nothing is
# built: the CUDA ops against the CPU ops and a one-rank NCCL communicator (tests/test_ops_cuda),
# convolution timings, and the same test under compute-sanitizer when it is installed.
# Everything it prints and measures lands under $OUT (default ./gpu-out); budget: under 8 min.
#
# The programs come prebuilt in a carried folder ($CARRY, default carry/gpu from the
# repository root; /carry/ is git-ignored) holding bin/ and lib/. Prepare it on the build
# machine, from the repository root:
#
#   mkdir -p b-gpu && cd b-gpu
#   ../configure --quiet --with-cuda-arch=90 --with-mpi=no --with-pmix=no --with-dnnl=no
#   make -j2 tests/test_ops_cuda ddptrain ddptrain-data && cd ..
#   rm -rf carry/gpu && mkdir -p carry/gpu/bin carry/gpu/lib
#   cp b-gpu/tests/test_ops_cuda b-gpu/ddptrain b-gpu/ddptrain-data carry/gpu/bin/
#   ldd carry/gpu/bin/* | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
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
# Exit status: that of the correctness test (0 pass, 1 failures, 77 no GPU); the rest is
# informational.
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
LD_LIBRARY_PATH=$carry/lib${nvlibs:+:$nvlibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
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
    echo
    command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi 2>&1
    echo
    ldd "$bin" 2>&1
} > "$out/environment.txt"
if grep -q "not found" "$out/environment.txt"; then
    note "warning: unresolved libraries:"
    grep "not found" "$out/environment.txt" | tee -a "$summary"
fi

# 1. Correctness, then convolution timings (--bench), in one run.
start=$(date +%s)
timeout 300 "$bin" --bench > "$out/test_ops_cuda.log" 2>&1
rc=$?
note "test_ops_cuda --bench: exit $rc after $(( $(date +%s) - start )) s (0 pass, 1 failures, 77 no GPU, 124 timeout)"
grep -E "^(CUDA:|FAIL|SKIP)|checks failed|internal error" "$out/test_ops_cuda.log" | tee -a "$summary"
grep -E "^bench .*all convs" "$out/test_ops_cuda.log" | tee -a "$summary"
grep -E "^     conv .* (OIHW|OHWI|auto)" "$out/test_ops_cuda.log" | sort -u > "$out/conv_algorithms.txt"

# 2. The same correctness run under compute-sanitizer (out-of-bounds or misaligned accesses in
#    the kernels), when the machine has it. Slow, so capped; informational.
cs=$(command -v compute-sanitizer 2>/dev/null || true)
[ -z "$cs" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && cs=/usr/local/cuda/bin/compute-sanitizer
if [ -n "$cs" ] && [ "$rc" != 77 ]; then
    start=$(date +%s)
    timeout 150 "$cs" --tool memcheck --leak-check no --error-exitcode 3 "$bin" > "$out/sanitizer.log" 2>&1
    src=$?
    note "compute-sanitizer memcheck: exit $src after $(( $(date +%s) - start )) s (0 clean, 3 errors found, 124 timeout)"
    grep -E "ERROR SUMMARY|Invalid|misaligned" "$out/sanitizer.log" | head -20 | tee -a "$summary"
else
    note "compute-sanitizer: not run (not installed, or no GPU)"
fi

# 3. Training on the GPU with ddptrain, when the carried folder has it (bin/ddptrain and
#    bin/ddptrain-data, with libhdf5 in lib/): the same 5 steps on the GPU and on the CPU must
#    give the same parameters (fp32, TF32 off), the loss must fall over 200 steps, and the
#    throughput at width 64, batch 512 is compared with PyTorch on the same GPU.
ddp=$carry/bin/ddptrain
if [ -x "$ddp" ] && [ -x "$carry/bin/ddptrain-data" ] && [ "$rc" != 77 ]; then
    work=$out/train
    mkdir -p "$work"
    "$carry/bin/ddptrain-data" synth --out "$work/data" --train 20000 --test 1000 > "$work/synth.log" 2>&1
    common="--data_dir $work/data --no-augment --no-shuffle --lr_schedule constant --width 16 --blocks 1 --batch_size 64 --max_steps 5 --log_interval 1"
    # shellcheck disable=SC2086
    timeout 120 "$ddp" $common --device cuda --job_dir "$work/agree-cuda" > "$work/agree-cuda.log" 2>&1
    arc=$?
    # shellcheck disable=SC2086
    timeout 120 "$ddp" $common --device cpu --threads 8 --job_dir "$work/agree-cpu" > "$work/agree-cpu.log" 2>&1
    note "ddptrain 5 steps: cuda exit $arc, cpu exit $?"
    "$py" - "$work/agree-cuda" "$work/agree-cpu" <<'EOF' 2>&1 | tee -a "$summary"
import glob, sys
try:
    import h5py, numpy as np
except ImportError:
    raise SystemExit("gpu vs cpu parameters: h5py/numpy missing, not compared")
a, b = (sorted(glob.glob(d + "/checkpoints/ckpt-*.h5"))[-1:] for d in sys.argv[1:3])
if not a or not b:
    raise SystemExit("gpu vs cpu parameters: a checkpoint is missing")
fa, fb = h5py.File(a[0], "r"), h5py.File(b[0], "r")
worst = max((float(np.max(np.abs(fa["model"][k][()] - fb["model"][k][()])) /
             max(float(np.max(np.abs(fb["model"][k][()]))), 1e-30), k)
            for k in fb["model"] if fb["model"][k].dtype.kind == "f")
print(f"gpu vs cpu parameters after 5 steps: max rel diff {worst[0]:.3e} ({worst[1]})")
EOF
    timeout 240 "$ddp" --data_dir "$work/data" --device cuda --width 64 --batch_size 512 --max_steps 200 \
        --log_interval 20 --job_dir "$work/bench" > "$work/bench.log" 2>&1
    note "ddptrain width 64 batch 512, 200 steps on the GPU: exit $?"
    grep -E '"loss"' "$work/bench/metrics.jsonl" 2>/dev/null | sed -n '1p;$p' | tee -a "$summary"
    for amp in "" "--amp bf16"; do
        # shellcheck disable=SC2086
        ref=$(cd "$root" && timeout 120 "$py" bench/torch_bench.py --device cuda --width 64 --batch 512 --steps 50 \
              --channels_last $amp 2>&1 | tail -n 1)
        note "reference: $ref"
    done
else
    note "ddptrain on the GPU: not run (bin/ddptrain not carried, or no GPU)"
fi

exit $rc
