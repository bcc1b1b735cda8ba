#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# --use_amp on the CPU where it cannot run, on every CPU (test_amp_cpu_torch.sh checks the bf16
# numerics where oneDNN has bf16 kernels, and skips elsewhere): the default (auto) trains in
# float32 and says so on its device line; --amp_dtype fp16 and a CPU without oneDNN bf16
# kernels (this one, or any capped with ONEDNN_MAX_CPU_ISA=AVX2) are refused in one line, exit
# status 2, before the job directory exists.
. "${top_srcdir:-.}/tests/helpers/lib.sh"

"$DDPDATA" synth --out "$TMP/d" --size 16 --train 32 --test 16 >/dev/null 2>&1 || bad "synth"
"$DDPTRAIN" --data_dir "$TMP/d" --job_dir "$TMP/j0" --image_size 16 --batch_size 8 --width 4 --epochs 1 --max_steps 1 >"$TMP/run0.out" 2>&1 &&
    grep -q "device: .*, float32" "$TMP/run0.out" && ! grep -q "bf16" "$TMP/run0.out" &&
    ok "default (auto): float32 on the CPU" || { bad "the default run is not float32"; tail -n 3 "$TMP/run0.out"; }
refused() {   # $1 = label, $2 = text expected, rest = env and flags
    label=$1; want=$2; shift 2
    env "$@" --data_dir "$TMP/d" --job_dir "$TMP/jr" --width 4 --max_steps 1 >"$TMP/r.out" 2>"$TMP/r.err"
    rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/r.err")" -eq 1 ] && grep -q -- "$want" "$TMP/r.err" && [ ! -e "$TMP/jr" ]; then
        ok "$label refused: $(cat "$TMP/r.err")"
    else
        bad "$label: rc $rc, $(cat "$TMP/r.err")"
    fi
}
refused "--amp_dtype fp16" "--amp_dtype fp16: the CPU backend's --use_amp computes in bf16 only" "$DDPTRAIN" --use_amp --amp_dtype fp16
refused "AVX2 only" "--use_amp: oneDNN has no bfloat16 kernels for this CPU's ISA (avx2" ONEDNN_MAX_CPU_ISA=AVX2 "$DDPTRAIN" --use_amp
# Without the cap: refused where this CPU has no bf16 kernels, a run otherwise
if "$top_builddir/tests/helpers/dump_model" "$TMP/probe.h5" --width 4 --blocks 1 --batch 2 --image_size 8 --amp 1 \
    >/dev/null 2>"$TMP/probe.err"; then
    "$DDPTRAIN" --data_dir "$TMP/d" --job_dir "$TMP/j1" --image_size 16 --batch_size 8 --width 4 --epochs 1 --max_steps 1 \
        --use_amp >"$TMP/run1.out" 2>&1 && grep -q "device: .*mixed precision bf16" "$TMP/run1.out" &&
        ok "this CPU has bf16 kernels: --use_amp runs" || bad "--use_amp did not run where dump_model --amp 1 did"
else
    refused "this CPU, without bf16 kernels," "--use_amp: oneDNN has no bfloat16 kernels for this CPU's ISA" \
        "$DDPTRAIN" --use_amp
fi
finish
