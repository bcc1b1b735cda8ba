#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# installcheck.sh - the installed ddptrain, as a user of the installation runs it (make
# installcheck; tests/test_install.sh):
#   (a) from a directory outside the source and build trees, with only the installation's bin
#       directory added to PATH: --version, ddptrain-data makes a small synthetic dataset,
#       ddptrain trains a few steps and writes its job directory and a checkpoint, and
#       ddptrain-to-torch loads that checkpoint into PyTorch (when a python3 has torch and h5py);
#   (b) when the local Slurm cluster (tests/slurm/cluster_up.sh) is already up: the installed
#       train-cpu.sbatch, submitted with 2 tasks and no DDPTRAIN or PATH pointing at the
#       installation, trains on both ranks. This script never starts the cluster.
#
#   installcheck.sh BINDIR SLURMDIR SRCDIR
# Exit 0 pass, 1 fail.
[ $# -eq 3 ] || { echo "usage: $0 BINDIR SLURMDIR SRCDIR" >&2; exit 2; }
bindir=$1 slurmdir=$2 top_srcdir=$3
export top_srcdir
. "$top_srcdir/tests/helpers/lib.sh"
bindir=$(cd "$bindir" && pwd) || { echo "FAIL: $1: no such directory"; exit 1; }

# A working directory of its own: the checks must not find anything of the trees by accident.
work=$TMP/work
mkdir -p "$work" && cd "$work" || exit 1
PATH=$bindir:/usr/local/bin:/usr/bin:/bin
export PATH
unset DDPTRAIN_PLUGIN_DIR

# ---- (a) the installed programs ----------------------------------------------------------------
for p in ddptrain ddptrain-data ddptrain-plot ddptrain-to-torch ddptrain-diagnose ddptrain-predict ddptrain-export; do
    [ "$(command -v $p)" = "$bindir/$p" ] || bad "(a) $p is not $bindir/$p (found: $(command -v $p))"
done
v=$(ddptrain --version 2>&1) && echo "$v" | head -n 1 | grep -q '^ddptrain [0-9]' && echo "$v" | grep -q '^HDF5: [0-9]' &&
    ok "(a) ddptrain --version: $(echo "$v" | head -n 1)" || bad "(a) ddptrain --version: $v"
if ddptrain-data synth --out data --train 256 --test 64 --shards 2 >synth.out 2>&1 &&
   ddptrain-data inspect data >inspect.out 2>&1; then
    ok "(a) ddptrain-data synth and inspect in $work"
else
    bad "(a) ddptrain-data: $(tail -n 3 synth.out inspect.out 2>/dev/null)"
fi
OMP_NUM_THREADS=1 ddptrain --data_dir data --job_dir job --width 4 --blocks 1 --batch_size 32 \
    --max_steps 4 --log_interval 2 >train.out 2>&1
rc=$?
ckpt=$(ls job/checkpoints/ckpt-*.h5 2>/dev/null | tail -n 1)
[ $rc -eq 0 ] && grep -q '^done: 4 steps' train.out && [ "$(grep -c '"loss"' job/metrics.jsonl)" -eq 2 ] && [ -n "$ckpt" ] &&
    ok "(a) ddptrain trained 4 steps: job/metrics.jsonl, $ckpt" ||
    { bad "(a) ddptrain: exit $rc"; tail -n 10 train.out; }
if py=$(find_python "torch, h5py"); then
    PYTHON=$py ddptrain-to-torch "$ckpt" --data data >torch.out 2>&1 && grep -q '^test accuracy: ' torch.out &&
        ok "(a) ddptrain-to-torch $ckpt --data data: $(grep '^test accuracy' torch.out)" ||
        { bad "(a) ddptrain-to-torch"; tail -n 10 torch.out; }
else
    [ -x "$bindir/ddptrain-to-torch" ] && ok "(a) ddptrain-to-torch installed (not run: no python3 with torch and h5py)" ||
        bad "(a) $bindir/ddptrain-to-torch missing"
fi
ddptrain-export "$ckpt" --out model.onnx --test_data model-test >export.out 2>&1 && [ -s model.onnx ] &&
    [ -s model-test/test_data_set_0/output_0.pb ] && ok "(a) ddptrain-export: $(cut -c1-100 export.out)" ||
    { bad "(a) ddptrain-export"; tail -n 3 export.out; }

# ---- (b) the installed job script under Slurm ---------------------------------------------------
script=$slurmdir/train-cpu.sbatch
bin_in_script=$(sed -n 's/^DDPTRAIN=\${DDPTRAIN:-\(.*\)}.*/\1/p' "$script" 2>/dev/null)
. "$top_srcdir/tests/slurm/lib.sh"
if [ ! -f "$script" ]; then
    bad "(b) $script missing"
elif [ "$(realpath -q "$bin_in_script")" != "$(realpath "$bindir/ddptrain")" ]; then
    # A staged installation (DESTDIR) names the final place, which does not exist yet.
    echo "skip: (b) $script names ddptrain '$bin_in_script', which is not installed there (DESTDIR?)"
elif ! command -v sbatch >/dev/null 2>&1 || ! slurm_running; then
    echo "skip: (b) the local Slurm cluster is not up (tests/slurm/cluster_up.sh; not started here)"
else
    # shellcheck disable=SC1090
    SLURM_CONF=$(. "$STATE"; echo "$SLURM_CONF")
    export SLURM_CONF
    mpi_leak_checks_off   # ranks started by srun (see tests/helpers/lib.sh)
    mkdir -p submit
    # Nothing that points at the installation: the script must find its ddptrain itself.
    jid=$(cd submit && env -u DDPTRAIN PATH=/usr/local/bin:/usr/bin:/bin timeout 30 \
          sbatch --parsable -n 2 -c 1 -t 5 --output=slurm-%j.out "$script" \
          --data_dir "$work/data" --width 4 --blocks 1 --batch_size 32 --max_steps 4 --log_interval 2)
    if [ -z "$jid" ]; then
        bad "(b) sbatch $script did not submit"
    else
        st=$(sbatch_wait "$jid" 90)
        job=submit/runs/$jid
        if [ "$st" = COMPLETED ] && grep -q "bootstrap: pmix, rank 0/2" "$job/logs/rank-00000.log" &&
           grep -q "bootstrap: pmix, rank 1/2" "$job/logs/rank-00001.log" && grep -q '^done: 4 steps' "submit/slurm-$jid.out"; then
            ok "(b) sbatch -n 2 $script: job $jid COMPLETED, 2 pmix ranks, 4 steps"
        else
            bad "(b) job $jid ended $st"; tail -n 20 "submit/slurm-$jid.out"
        fi
    fi
fi
cd / || exit 1
finish
