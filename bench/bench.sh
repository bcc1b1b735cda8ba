#!/bin/sh
# Training-step throughput of ddptrain against PyTorch on the same MiniResNet, the same batch
# size and the same number of threads, measured alternately in one run (the machine is shared
# and noisy: each side is run ROUNDS times and the best is kept). Prints both and the ratio.
#   bench/bench.sh [BUILD_DIR]     env: WIDTH (64) BATCH (64) THREADS (2) STEPS (20) ROUNDS (3)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-${top_builddir:-$here/../build}}
W=${WIDTH:-64}; N=${BATCH:-64}; T=${THREADS:-2}; S=${STEPS:-20}; R=${ROUNDS:-3}
PY=""
for py in "${PYTHON:-}" python3 /usr/bin/python3; do
    [ -n "$py" ] && command -v "$py" >/dev/null 2>&1 && "$py" -c "import torch" 2>/dev/null && { PY=$py; break; }
done
[ -n "$PY" ] || { echo "bench: no python3 with torch (apt-get install python3-torch)" >&2; exit 1; }
best_c=0; best_t=0; best_tcl=0
num() { sed -n 's/.*: \([0-9.]*\) images\/s.*/\1/p'; }
max() { awk -v a="$1" -v b="$2" 'BEGIN{print (a > b) ? a : b}'; }
i=0
while [ $i -lt "$R" ]; do
    c=$(OMP_NUM_THREADS=$T "$build/bench/bench_step" --width "$W" --batch "$N" --steps "$S")
    echo "$c"
    t=$("$PY" "$here/torch_bench.py" --width "$W" --batch "$N" --steps "$S" --threads "$T")
    echo "$t"
    tcl=$("$PY" "$here/torch_bench.py" --width "$W" --batch "$N" --steps "$S" --threads "$T" --channels_last)
    echo "$tcl"
    best_c=$(max "$best_c" "$(echo "$c" | num)")
    best_t=$(max "$best_t" "$(echo "$t" | num)")
    best_tcl=$(max "$best_tcl" "$(echo "$tcl" | num)")
    i=$((i + 1))
done
ref=$(max "$best_t" "$best_tcl")
echo "----"
echo "MiniResNet width $W, batch $N, $T threads, best of $R rounds of $S steps:"
echo "  ddptrain        $best_c images/s"
echo "  PyTorch         $best_t images/s (NCHW), $best_tcl images/s (channels_last)"
awk -v c="$best_c" -v r="$ref" 'BEGIN{printf "  ratio ddptrain / PyTorch (best layout): %.2f\n", c / r}'
