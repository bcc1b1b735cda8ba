#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The sbatch scripts' requeue decision, without Slurm: srun and scontrol are stand-ins on PATH.
# With srun --kill-on-bad-exit=1 a preempted job's srun may return 137 (the ranks killed after
# the first exited 3) instead of 3; the scripts then requeue only when the job directory's
# "preempted" file (written by rank 0 after the checkpoint) names the current restart.
#   (a) srun exits 3                                   -> requeue, script exits 0
#   (b) srun exits 137, marker "restart 2 ..." at restart 2 -> requeue
#   (c) srun exits 137, marker of restart 1 at restart 2    -> no requeue, exit 137
#   (d) srun exits 1, no marker                         -> no requeue, exit 1
#   (e) --job_dir DIR and --job_dir=DIR name where the marker is looked for
# shellcheck source=tests/helpers/lib.sh disable=SC1091
. "${top_srcdir:-.}/tests/helpers/lib.sh"
command -v bash >/dev/null 2>&1 || { echo "SKIP: no bash"; exit "$SKIP"; }
slurm_dir=$(cd "$top_srcdir/slurm" && pwd)

mkdir -p "$TMP/bin" "$TMP/submit"
cat >"$TMP/bin/srun" <<'S'
#!/bin/sh
# stand-in: checks that the script passes --kill-on-bad-exit=1, then exits $FAKE_SRUN_RC
case " $* " in *" --kill-on-bad-exit=1 "*) ;; *) echo "srun stand-in: no --kill-on-bad-exit=1 in: $*" >&2; exit 99 ;; esac
exit "${FAKE_SRUN_RC:-0}"
S
cat >"$TMP/bin/scontrol" <<'S'
#!/bin/sh
echo "$*" >>"$FAKE_SCONTROL_LOG"
S
chmod +x "$TMP/bin/srun" "$TMP/bin/scontrol"

# case SCRIPT NAME SRUN_RC MARKER(text or -) MARKER_DIR WANT_RC WANT_REQUEUE(0/1) ARGS...
case_() {
    script=$1 name=$2 src=$3 marker=$4 mdir=$5 want_rc=$6 want_rq=$7
    shift 7
    rm -rf "$TMP/submit/runs" "$TMP/jd" "$TMP/scontrol.log"
    : >"$TMP/scontrol.log"
    if [ "$marker" != - ]; then mkdir -p "$mdir"; echo "$marker" >"$mdir/preempted"; fi
    (cd "$TMP/submit" && PATH="$TMP/bin:$PATH" FAKE_SRUN_RC=$src FAKE_SCONTROL_LOG="$TMP/scontrol.log" \
        SLURM_JOB_ID=4242 SLURM_SUBMIT_DIR="$TMP/submit" SLURM_RESTART_COUNT=2 DDPTRAIN=true \
        bash "$slurm_dir/$script" "$@" >"$TMP/out" 2>&1)
    rc=$?
    rq=0
    grep -q "^requeue 4242$" "$TMP/scontrol.log" && rq=1
    if [ "$rc" = "$want_rc" ] && [ "$rq" = "$want_rq" ]; then ok "$script: $name (exit $rc, requeue $rq)"
    else bad "$script: $name: exit $rc requeue $rq, want exit $want_rc requeue $want_rq: $(tail -n 2 "$TMP/out")"; fi
}

for s in train-cpu.sbatch train-cpu-multinode.sbatch train-gpu.sbatch; do
    def=$TMP/submit/runs/4242
    case_ $s "(a) srun exits 3" 3 - "$def" 0 1 --data_dir d
    case_ $s "(b) srun exits 137, marker of this restart" 137 "restart 2 step 40" "$def" 0 1 --data_dir d
    case_ $s "(c) srun exits 137, marker of an earlier restart" 137 "restart 1 step 20" "$def" 137 0 --data_dir d
    case_ $s "(d) srun exits 1, no marker" 1 - "$def" 1 0 --data_dir d
    case_ $s "(e) --job_dir DIR" 137 "restart 2 step 40" "$TMP/jd" 0 1 --data_dir d --job_dir "$TMP/jd"
    case_ $s "(e) --job_dir=DIR" 137 "restart 2 step 40" "$TMP/jd" 0 1 --job_dir="$TMP/jd" --data_dir d
done
finish
