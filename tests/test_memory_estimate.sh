#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The run's peak memory is estimated before the model is allocated (memory_check.h): on the
# model's log line, within 15% of the peak resident memory measured for MiniResNet and three
# networks of the zoo; and a network that cannot fit is refused in one line, before the job
# directory exists, with the figures and the largest --batch_size that fits.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python json) || { echo "skip: no python3 to read the peak resident memory"; exit $SKIP; }
make_synth "$TMP/d32" --size 32 --train 256 --test 64 --shards 1
make_synth "$TMP/d64" --size 64 --train 128 --test 64 --shards 1

# Two hostile network files of the kind a shared directory may hold: one convolution and
# 1,500 ReLUs (each keeps its map for backward: about 23 GiB at batch 64 on 32x32 images), and
# one convolution of 65,536 channels (about 32 GiB).
"$PY" - "$TMP" <<'PYEOF'
import json, sys
nodes = [{"name": "conv", "kind": "conv", "in": "input", "out_channels": 64, "kernel": 3, "stride": 1, "padding": 1}]
for i in range(1500):
    nodes.append({"name": "r%d" % i, "kind": "relu", "in": nodes[-1]["name"]})
tail = [{"name": "pool", "kind": "maxpool", "kernel": 32, "stride": 32, "padding": 0}, {"name": "fc", "kind": "linear", "in": "pool"}]
def write(name, nodes):
    tail[0]["in"] = nodes[-1]["name"]
    with open("%s/%s.json" % (sys.argv[1], name), "w") as f:
        json.dump({"network": name, "nodes": nodes + tail}, f)
write("relus", nodes)
write("wide", [{"name": "conv", "kind": "conv", "in": "input", "out_channels": 65536, "kernel": 3, "stride": 1, "padding": 1}])
PYEOF

# Every refusal below runs under an address-space limit too, so that a build that does not
# refuse fails to allocate instead of taking the node's memory.
limited() { (ulimit -v 4000000 && "$@"); }

# A node of 2,000,000 kB for rank 0: the hostile networks are refused before anything is written.
for net in relus wide; do
    J="$TMP/job-$net"
    DDPTRAIN_TEST_MEMAVAILABLE_KB=0:2000000 limited "$DDPTRAIN" --data_dir "$TMP/d32" --job_dir "$J" \
        --model "$TMP/$net.json" --batch_size 64 --max_steps 1 --threads 1 >"$TMP/$net.out" 2>"$TMP/$net.err"
    rc=$?
    if [ $rc -ne 0 ] && [ "$(wc -l <"$TMP/$net.err")" -eq 1 ] && [ ! -e "$J" ] &&
        grep -q "$net.json needs about [0-9.]* GiB of memory at --batch_size 64 (.* available to this rank beyond the .* it holds: MemAvailable 1953.1 MiB); .*--no-memory_check" "$TMP/$net.err"; then
        ok "$net: refused in one line, no job directory: $(cat "$TMP/$net.err")"
    else
        bad "$net: exit $rc, job directory $(test -e "$J" && echo made || echo absent): $(head -c 600 "$TMP/$net.err")"
    fi
done

# The batch it names fits (the check passes: --preflight stops before the model is built),
# and one more image does not.
fits=$(sed -n 's/.*at most --batch_size \([0-9]*\) fits.*/\1/p' "$TMP/relus.err")
if [ -n "$fits" ]; then
    DDPTRAIN_TEST_MEMAVAILABLE_KB=0:2000000 limited "$DDPTRAIN" --data_dir "$TMP/d32" --job_dir "$TMP/fits" \
        --model "$TMP/relus.json" --batch_size "$fits" --preflight --threads 1 >/dev/null 2>"$TMP/fits.err" &&
        ok "relus: --batch_size $fits passes the check" || bad "relus: --batch_size $fits refused: $(cat "$TMP/fits.err")"
    DDPTRAIN_TEST_MEMAVAILABLE_KB=0:2000000 limited "$DDPTRAIN" --data_dir "$TMP/d32" --job_dir "$TMP/fits1" \
        --model "$TMP/relus.json" --batch_size $((fits + 1)) --preflight --threads 1 >/dev/null 2>"$TMP/fits1.err" &&
        bad "relus: --batch_size $((fits + 1)) passes the check" || ok "relus: --batch_size $((fits + 1)) refused"
else
    bad "relus: no batch size named"
fi

# --no-memory_check lets it through (to --preflight's end: nothing of the model allocated).
DDPTRAIN_TEST_MEMAVAILABLE_KB=0:2000000 limited "$DDPTRAIN" --data_dir "$TMP/d32" --job_dir "$TMP/nocheck" \
    --model "$TMP/wide.json" --batch_size 64 --preflight --no-memory_check --threads 1 >/dev/null 2>"$TMP/nocheck.err" &&
    ok "--no-memory_check skips the refusal" || bad "--no-memory_check: $(cat "$TMP/nocheck.err")"

# An address-space limit alone (no test override) is a budget too.
(ulimit -v 3000000 && exec "$DDPTRAIN" --data_dir "$TMP/d32" --job_dir "$TMP/ulimit" --model "$TMP/relus.json" \
    --batch_size 64 --max_steps 1 --threads 1) >/dev/null 2>"$TMP/ulimit.err"
[ $? -ne 0 ] && [ ! -e "$TMP/ulimit" ] && grep -q "needs about .*ulimit -v" "$TMP/ulimit.err" &&
    ok "ulimit -v: refused: $(cat "$TMP/ulimit.err")" || bad "ulimit -v: $(head -c 600 "$TMP/ulimit.err")"

# The estimate against the measured peak: the model line's figure over ru_maxrss.
if [ "${DDP_SANITIZE:-no}" = yes ]; then
    echo "skip: the estimate against the peak (a sanitizer's shadow memory is no part of the estimate)"
    finish
fi
check_peak() {
    name=$1; shift
    out=$("$PY" - "$DDPTRAIN" --job_dir "$TMP/peak-$name" --epochs 1 --max_steps 2 --threads 2 "$@" <<'PYEOF'
import os, re, resource, subprocess, sys
with open(os.devnull, "w") as null:
    rc = subprocess.call(sys.argv[1:], stdout=null)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024.0
job = sys.argv[sys.argv.index("--job_dir") + 1]
est = None
for line in open(os.path.join(job, "logs", "rank-00000.log")):
    m = re.search(r"INFO model: .*estimated peak ([0-9.]+) (MiB|GiB)", line)
    if m: est = float(m.group(1)) * (1 << (20 if m.group(2) == "MiB" else 30))
if rc != 0 or est is None:
    print("bad exit %d, estimate %s" % (rc, est))
else:
    r = est / peak
    print("%s estimate %.0f MiB, peak %.0f MiB, ratio %.3f" % ("ok" if 0.85 <= r <= 1.15 else "bad", est / 2**20, peak / 2**20, r))
PYEOF
)
    case $out in ok*) ok "$name: ${out#ok }" ;; *) bad "$name: ${out#bad }" ;; esac
}
check_peak miniresnet --data_dir "$TMP/d32" --width 64 --batch_size 64
check_peak resnet18 --data_dir "$TMP/d64" --image_size 64 --model resnet18 --batch_size 32
check_peak mobilenet_v2 --data_dir "$TMP/d64" --image_size 64 --model mobilenet_v2 --batch_size 32
check_peak densenet121 --data_dir "$TMP/d64" --image_size 64 --model densenet121 --batch_size 8 --eval_batch_size 32
finish
