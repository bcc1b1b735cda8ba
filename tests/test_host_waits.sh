#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Every host wait of the CUDA backend that can sit behind a collective is watched: in the
# module's sources (every file of src/cuda/), every call that blocks the
# host on the device (cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize,
# cudaFree, cudaFreeHost, a synchronous cudaMemcpy) must come after a call of
# comm_guard_host_sync() (or, inside the NCCL communicator, nccl_drain(), or nccl_wait() of the
# collective whose result a synchronous cudaMemcpy copies out: that copy runs on the legacy
# stream, which does not wait for the communicator's non-blocking streams) in the same
# function; the guard waits for the collectives in flight under --comm_timeout first (comm.h). A new wait
# added without the guard fails this test. Runs on any machine: it reads the sources.
# shellcheck source=tests/helpers/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "re") || { echo "SKIP: no python3"; exit "$SKIP"; }

out=$("$PY" - "$top_srcdir"/src/cuda/* <<'PYEOF'
import re
import sys

blocking = re.compile(r"\b(cudaStreamSynchronize|cudaEventSynchronize|cudaDeviceSynchronize|cudaFreeHost|cudaFree|cudaMemcpy)\s*\(")
guard = re.compile(r"\b(comm_guard_host_sync|nccl_drain|nccl_wait)\s*\(")
calls = bad = 0
for path in sys.argv[1:]:
    guarded = False
    for no, line in enumerate(open(path), 1):
        code = line.split("//")[0]
        if re.match(r"^\S.*\)\s*\{\s*$", line) or line.startswith("}"):
            guarded = False           # a function starts or ends
        if guard.search(code):
            guarded = True
        for m in blocking.finditer(code):
            if "/*" in code[:m.start()]:
                continue              # inside a comment
            calls += 1
            if not guarded:
                bad += 1
                print(f"{path.split('/src/')[-1]}:{no}: {m.group(1)} without comm_guard_host_sync() before it")
print(f"{calls} host waits checked, {bad} unguarded")
sys.exit(1 if bad else 0)
PYEOF
)
rc=$?
echo "$out"
if [ $rc -eq 0 ]; then ok "every host wait in the CUDA backend is guarded: $(echo "$out" | tail -n 1)"
else bad "unguarded host waits: $(echo "$out" | tail -n 1)"; fi
finish
