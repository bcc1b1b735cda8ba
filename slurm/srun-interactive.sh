#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# srun-interactive.sh - run ddptrain interactively, output straight to your terminal.
#
#   slurm/srun-interactive.sh 4 --data_dir data/synth --epochs 1     (4 ranks, one node)
#
# Equivalent by hand:
#   srun --mpi=pmix --kill-on-bad-exit=1 -N 1 -n 4 -c 2 -t 00:30:00 ddptrain --data_dir data/synth --epochs 1
# Or keep an allocation and launch several runs in it:
#   salloc -N 1 -n 4 -c 2 -t 01:00:00        (opens a shell inside the allocation)
#   srun --mpi=pmix --kill-on-bad-exit=1 ddptrain ...  (as often as you like; exit the shell to release)
# Ctrl-C once: srun forwards SIGINT to every rank; twice within a second: srun kills the step.
# Always pass --mpi=pmix (unless the cluster's MpiDefault is pmix): without it each task
# starts alone and ddptrain stops with "did you mean srun --mpi=pmix?".
set -eu
if [ $# -lt 1 ] || ! [ "$1" -ge 1 ] 2>/dev/null; then
  echo "usage: $0 NTASKS [ddptrain options...]" >&2
  exit 2
fi
NTASKS=$1
shift
DDPTRAIN=${DDPTRAIN:-ddptrain}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${CPUS_PER_TASK:-2}}
exec srun --mpi=pmix --kill-on-bad-exit=1 --nodes=1 --ntasks="$NTASKS" --cpus-per-task="${CPUS_PER_TASK:-2}" \
  --time="${TIME_LIMIT:-00:30:00}" "$DDPTRAIN" "$@"
