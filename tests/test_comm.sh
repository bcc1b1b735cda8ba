#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# test_comm.sh - rank discovery and collectives (tests/test_comm) under every launcher this
# machine has: a plain process, torchrun-style variables, mpirun, and srun on a local Slurm
# cluster (started with tests/slurm/cluster_up.sh when none is up, stopped again afterwards).
# Also the failure modes: a rank that never joins a collective, a rank killed mid-run, a rank
# that fails at start-up, and srun without PMIx. Exit 0 pass, 1 fail, 77 skip (nothing to run).
#
# Environment: top_builddir/top_srcdir (set by make check), TEST_COMM (the test program),
# DDP_SLURM_STATE (see cluster_up.sh), DDP_SLURM_KEEP=1 to leave a cluster we started running.
set -u
top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
BIN=${TEST_COMM:-$top_builddir/tests/test_comm}
[ -x "$BIN" ] || { echo "test_comm.sh: $BIN not built"; exit 1; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")   # srun runs it from its own cwd
TO=5           # collective timeout (s) for the failure cases; each must end within TO+10 s
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_comm.XXXXXX")
# shellcheck source=tests/slurm/lib.sh disable=SC1091
. "$top_srcdir/tests/slurm/lib.sh"
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  slurm_down_if_started
  rm -rf "$TMP"
}
trap cleanup EXIT

npass=0 nfail=0 nskip=0
pass() { echo "  PASS"; npass=$((npass + 1)); }
fail() { echo "  FAIL: $*"; sed 's/^/    | /' "$TMP/out" | tail -n 25; nfail=$((nfail + 1)); }
skip() { echo "SKIP: $*"; nskip=$((nskip + 1)); }

# check NAME WANT MAXSEC PATTERN -- COMMAND...
#   WANT: 0 (exit status 0) or fail (non-zero); PATTERN: extended regex that must appear in
#   the output ("" for none); MAXSEC: the whole command must end within it.
check() {
  local name=$1 want=$2 maxs=$3 pat=$4
  shift 5
  echo "CASE: $name"
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout -k 5 $((maxs + 30)) "$@" >"$TMP/out" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  local dt
  dt=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')
  echo "  exit $rc after $dt s"
  if [ "$want" = 0 ] && [ $rc != 0 ]; then fail "expected exit 0"; return; fi
  if [ "$want" = fail ] && [ $rc = 0 ]; then fail "expected a non-zero exit"; return; fi
  if awk -v d="$dt" -v m="$maxs" 'BEGIN{exit !(d > m)}'; then fail "took $dt s, limit $maxs s"; return; fi
  if [ -n "$pat" ] && ! grep -Eq -- "$pat" "$TMP/out"; then fail "output lacks /$pat/"; return; fi
  pass
}

FEATURES=$("$BIN" --features) || { echo "test_comm.sh: $BIN --features failed"; exit 1; }
echo "test_comm built with: $FEATURES"
HAVE_MPI=0; case $FEATURES in *mpi=1*) HAVE_MPI=1;; esac
HAVE_PMIX=0; case $FEATURES in *pmix=1*) HAVE_PMIX=1;; esac

# ---- (a) one process, (d) torchrun-style variables ------------------------------------------
# No launcher variables at all: a run from an interactive shell must not pick up ones that
# happen to be exported there.
CLEAN=(env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u GROUP_RANK -u NNODES
       -u SLURM_PROCID -u SLURM_NTASKS -u SLURM_STEP_NUM_TASKS -u SLURM_JOB_ID -u SLURM_LOCALID
       -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u PMIX_RANK -u PMIX_NAMESPACE)
check "single process: method 'single', every collective is exact, kv returns -1" 0 20 \
  'bootstrap: single, rank 0/1.*' -- "${CLEAN[@]}" "$BIN"
check "torchrun-style WORLD_SIZE=1 RANK=0: method 'torchrun', checks pass" 0 20 \
  'bootstrap: torchrun, rank 0/1, local 0/1' -- "${CLEAN[@]}" WORLD_SIZE=1 RANK=0 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 "$BIN"
check "torchrun-style WORLD_SIZE=abc: error naming the variable" fail 20 \
  "WORLD_SIZE='abc' is not a non-negative integer" -- "${CLEAN[@]}" WORLD_SIZE=abc RANK=0 "$BIN"
check "torchrun-style RANK=2 WORLD_SIZE=2: error 'RANK=2 is not below WORLD_SIZE=2'" fail 20 \
  'RANK=2 is not below WORLD_SIZE=2' -- "${CLEAN[@]}" WORLD_SIZE=2 RANK=2 "$BIN"
check "single process, start-up failure of rank 0: exits 2 with its own message" fail 20 \
  'rank 0: cannot read' -- "${CLEAN[@]}" "$BIN" --fail-startup 0

# ---- (b) mpirun -----------------------------------------------------------------------------
# Launched ranks: see mpi_leak_checks_off in tests/helpers/lib.sh.
if [ "${DDP_SANITIZE:-no}" = yes ]; then ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0; export ASAN_OPTIONS; fi
if ! command -v mpirun >/dev/null 2>&1; then
  skip "mpirun not found: mpirun cases"
elif ! mpirun --version 2>&1 | grep -q "Open MPI"; then
  skip "mpirun is not Open MPI: mpirun cases"
elif [ $HAVE_MPI = 0 ]; then
  check "mpirun -np 2 of a build without MPI: clear error" fail 30 'built without MPI' -- \
    mpirun --allow-run-as-root --oversubscribe -np 2 "$BIN"
else
  MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2)
  method=$([ $HAVE_PMIX = 1 ] && echo pmix || echo ompi-env)
  check "mpirun -np 2: method $method, allreduce/broadcast/barrier/iallreduce exact, kv" 0 60 \
    "rank 1: bootstrap: $method, rank 1/2" -- "${MPIRUN[@]}" "$BIN"
  grep -q 'rank 0: all checks passed' "$TMP/out" && grep -q 'rank 1: all checks passed' "$TMP/out" ||
    { echo "  (not every rank reported 'all checks passed')"; nfail=$((nfail + 1)); }
  check "mpirun -np 3: COMM_AVG is the sum divided by 3, not a sum of values scaled by 1/3" 0 60 \
    'rank 2: avg = sum / 3 over 2001 values \([1-9][0-9]* would differ if scaled before the sum\): ok' -- \
    mpirun --allow-run-as-root --oversubscribe -np 3 "$BIN"
  check "mpirun: rank 1 never joins an allreduce: timeout names the context, job ends" fail $((TO + 10)) \
    "rank 0: collective allreduce \(step 7, bucket 3\) did not complete within $TO s; rank 1, the only other rank, did not complete it" -- \
    "${MPIRUN[@]}" "$BIN" --timeout $TO --skip-rank 1
  check "mpirun: rank 1 never joins an allreduce outside the buckets: the line names the step first" fail $((TO + 10)) \
    "rank 0: collective allreduce \(step 7, loss for the log\) did not complete within $TO s; rank 1, the only other rank" -- \
    "${MPIRUN[@]}" "$BIN" --timeout $TO --skip-rank 1 --log-context
  check "mpirun: rank 1 SIGKILLed mid-run: the other rank ends too" fail $((TO + 10)) '' -- \
    "${MPIRUN[@]}" "$BIN" --timeout $TO --kill-rank 1 --kill-at-step 3
  # A device communicator's stream semantics on the CPU (test_comm.c's fake): the world carries
  # rank 0's id to every rank; a collective handed to the device stream is drained, under the
  # timeout, by the guard before the host waits on the stream; a peer that never comes ends
  # the job there with the usual line instead of a host wait that hangs forever.
  check "mpirun, fake device comm: id from rank 0 everywhere, stream request completed through the guard" 0 60 \
    'rank 1: fake device: iallreduce handed to the stream, host wait after the guard: ok' -- \
    "${MPIRUN[@]}" "$BIN" --fake-device --timeout $TO
  grep -q 'rank 0: fake device communicator: every rank has rank 0.s id: ok' "$TMP/out" ||
    { echo "  (rank 0 did not confirm the id)"; nfail=$((nfail + 1)); }
  check "mpirun, fake device comm: rank 1 never posts; the guarded host wait times out and ends the job" fail $((TO + 10)) \
    "rank 0: collective iallreduce \(step 7, bucket 3\) did not complete within $TO s; rank 1, the only other rank" -- \
    "${MPIRUN[@]}" "$BIN" --fake-device --timeout $TO --skip-rank 1
  check "mpirun: rank 1 fails at start-up: rank 0 says so and every rank exits" fail $((TO + 10)) \
    'rank 1 failed at start-up on host [^:]*: cannot read data/train-00001.h5 \(test failure\)' -- "${MPIRUN[@]}" "$BIN" --timeout $TO --fail-startup 1
fi

# ---- (c) srun on the local Slurm cluster ----------------------------------------------------
if ! command -v srun >/dev/null 2>&1; then
  skip "srun not found: Slurm cases"
else
  up_rc=0
  slurm_up >"$TMP/up" 2>&1 || up_rc=$?   # not in $(...): it sets STARTED and SLURM_CONF
  if [ $up_rc = 77 ]; then
    skip "local Slurm cluster unavailable: $(tail -n 1 "$TMP/up")"
  elif [ $up_rc != 0 ]; then
    echo "FAIL: could not bring up the local Slurm cluster:"; sed 's/^/    | /' "$TMP/up"
    nfail=$((nfail + 1))
  else
    SRUN=(srun -t 2 -n 2)
    if [ $HAVE_MPI = 1 ]; then
      method=$([ $HAVE_PMIX = 1 ] && echo pmix || echo slurm)
      check "srun --mpi=pmix -n 2: method $method, collectives exact, kv" 0 60 \
        "rank 1: bootstrap: $method, rank 1/2" -- "${SRUN[@]}" --mpi=pmix "$BIN"
      grep -q 'rank 0: all checks passed' "$TMP/out" && grep -q 'rank 1: all checks passed' "$TMP/out" ||
        { echo "  (not every rank reported 'all checks passed')"; nfail=$((nfail + 1)); }
      check "srun: rank 0 never joins an allreduce: timeout names the context, step ends" fail $((TO + 10)) \
        "rank 1: collective allreduce \(step 7, bucket 3\) did not complete within $TO s; rank 0, the only other rank" -- \
        "${SRUN[@]}" --mpi=pmix "$BIN" --timeout $TO --skip-rank 0
      check "srun: rank 1 SIGKILLed mid-run: the other rank ends too" fail $((TO + 10)) '' -- \
        "${SRUN[@]}" --mpi=pmix "$BIN" --timeout $TO --kill-rank 1 --kill-at-step 3
      check "srun: rank 1 fails at start-up: rank 0 says so and every rank exits" fail $((TO + 10)) \
        'rank 1 failed at start-up on host [^:]*: cannot read data/train-00001.h5 \(test failure\)' -- "${SRUN[@]}" --mpi=pmix "$BIN" --timeout $TO --fail-startup 1
    fi
    if [ $HAVE_MPI = 1 ]; then
      check "srun --mpi=none -n 2: refused with 'did you mean srun --mpi=pmix?'" fail 30 \
        'did you mean srun --mpi=pmix\?' -- "${SRUN[@]}" --mpi=none "$BIN"
    else
      check "srun --mpi=none -n 2 of a build without MPI: clear error" fail 30 \
        'built without MPI' -- "${SRUN[@]}" --mpi=none "$BIN"
    fi
    [ $HAVE_MPI = 0 ] && check "srun --mpi=pmix -n 2 of a build without MPI: clear error" fail 30 \
      'built without MPI' -- "${SRUN[@]}" --mpi=pmix "$BIN"
  fi
fi

echo "test_comm.sh: $npass passed, $nfail failed, $nskip skipped"
[ $nfail = 0 ] || exit 1
[ $npass -gt 0 ] || exit 77
exit 0
