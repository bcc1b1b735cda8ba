#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# quickstart.sh - from a fresh Debian 12 machine to a trained model, or to a test run.
#
#   scripts/quickstart.sh          install what is missing, build, generate the synthetic
#                                  dataset, train MiniResNet on it (the README's first command)
#   scripts/quickstart.sh test     install what is missing, build, run every test and print
#                                  "N passed, N failed, N skipped" (the README's second command)
#
# Packages are installed with apt-get when run as root; otherwise the script says which are
# missing and how to install them. Builds out of tree in ./build.
set -eu
cd "$(dirname "$0")/.."
mode=${1:-train}
case "$mode" in train|test) ;; *) echo "usage: $0 [train|test]" >&2; exit 2;; esac

BUILD_PKGS="build-essential autoconf automake libtool pkg-config libhdf5-dev hdf5-tools libjpeg62-turbo-dev libpng-dev libdnnl-dev libopenmpi-dev openmpi-bin libpmix-dev libpmix-bin"
TEST_PKGS="python3 python3-torch python3-torchvision python3-h5py python3-numpy python3-pil python3-opencv python3-onnx slurm-wlm munge gnuplot-nox procps valgrind lmod man-db"
pkgs=$BUILD_PKGS
[ "$mode" = test ] && pkgs="$pkgs $TEST_PKGS"

missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" -eq 0 ]; then
        echo "== installing:$missing"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >/dev/null || true
        # shellcheck disable=SC2086
        apt-get install -y -qq --no-install-recommends $missing >/dev/null
    else
        echo "missing packages:$missing" >&2
        echo "install them with: sudo apt-get install$missing   (or run this script as root)" >&2
        exit 1
    fi
fi

jobs=$(nproc 2>/dev/null || echo 2)
if [ ! -x build/config.status ] || [ configure.ac -nt build/config.status ]; then
    echo "== configuring"
    autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
    mkdir -p build
    (cd build && ../configure --quiet)
fi
echo "== building"
make -C build -j"$jobs" --no-print-directory >/dev/null 2>&1 || make -C build --no-print-directory

if [ "$mode" = train ]; then
    if [ ! -f data/synth/train-00000-of-00002.h5 ]; then
        echo "== generating the synthetic dataset in data/synth"
        build/ddptrain-data synth --out data/synth
    fi
    echo "== training MiniResNet (job directory under runs/)"
    exec build/ddptrain --data_dir data/synth --epochs 4
fi

echo "== running the tests"
# One local Slurm cluster (munge, slurmctld, slurmd on localhost) for the whole suite, started
# here and stopped at the end; the Slurm tests skip where it cannot be started (not root).
top_srcdir=.
. tests/slurm/lib.sh
if slurm_up >build/slurm-up.out 2>&1; then
    # Stopped at the end only if started here; the tests leave it running meanwhile.
    [ "$STARTED" = 1 ] && trap 'DDP_SLURM_KEEP=0 slurm_down_if_started' EXIT
    export DDP_SLURM_KEEP=1
else
    echo "(local Slurm not started: $(tail -n 1 build/slurm-up.out))"
fi
# The multi-node test cluster (tests/slurm/multinode_up.sh: 3 nodes as network namespaces, its
# own SLURM_CONF and ports) for tests/test_multinode.sh, whose jobs take 2 of them, and
# tests/test_preflight.sh, which needs 3 to name a slow host; likewise.
DDP_MN_NODES=${DDP_MN_NODES:-3}
export DDP_MN_NODES
if mn_up >build/slurm-mn-up.out 2>&1; then
    if [ "$MN_STARTED" = 1 ]; then
        trap 'DDP_SLURM_KEEP=0 mn_down_if_started; DDP_SLURM_KEEP=0 slurm_down_if_started' EXIT
    fi
else
    echo "(multi-node test cluster not started: $(tail -n 1 build/slurm-mn-up.out))"
fi
# The single-node cluster's SLURM_CONF for the tests; test_multinode.sh reads the other one
# from the state file.
SLURM_CONF=$(. "$STATE"; echo "$SLURM_CONF") 2>/dev/null || unset SLURM_CONF
rc=0
make -C build -j"$jobs" --no-print-directory check >build/check.out 2>&1 || rc=$?
grep -E '^(PASS|FAIL|SKIP|ERROR|XPASS|XFAIL):' build/check.out || true
if [ $rc -ne 0 ]; then
    for f in $(grep -l -E '^:test-result: (FAIL|ERROR|XPASS)' build/tests/*.trs 2>/dev/null); do
        echo "---- ${f%.trs}.log"; tail -n 40 "${f%.trs}.log"
    done
fi
sh scripts/summarize-tests.sh build
exit $rc
