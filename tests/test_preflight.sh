#!/bin/sh
# Checks before training, 2 ranks under mpirun (src/roster.h, src/agree.h):
#   (a) rank 0's log has the table of ranks: rank, host, local rank, device;
#   (b) rank 1 started with another --batch_size: refused with one line naming rank 1, its host
#       and the flag, a non-zero exit, no rank left behind;
#   (c) rank 1 given another --data_dir with other shards: refused, naming the shard list.
. "${top_srcdir:-.}/tests/lib.sh"
mpi_leak_checks_off   # ranks started by mpirun/srun (see tests/lib.sh)
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found"; exit "$SKIP"; }
MPIRUN="mpirun --allow-run-as-root --oversubscribe -np 2"
export OMP_NUM_THREADS=1
HOST=$(uname -n)
make_synth "$TMP/data" --train 256 --test 64 --shards 2
make_synth "$TMP/other" --train 256 --test 64 --shards 4
FLAGS="--data_dir $TMP/data --width 4 --blocks 1 --batch_size 16 --max_steps 2 --threads 1 --comm_timeout 20"

# A wrapper that gives rank 1 extra flags (the last value of a flag wins).
cat >"$TMP/rank1.sh" <<'EOS'
#!/bin/sh
if [ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ]; then exec "$@" $RANK1_FLAGS; fi
exec "$@"
EOS
chmod +x "$TMP/rank1.sh"

# ---- (a) the table -------------------------------------------------------------------------
# shellcheck disable=SC2086
if timeout -k 5 120 $MPIRUN "$DDPTRAIN" $FLAGS --job_dir "$TMP/a" >"$TMP/a.out" 2>&1; then
    log="$TMP/a/logs/rank-00000.log"
    if grep -q "ranks: rank 0  host $HOST  local 0/2  cpu: 1 thread on [0-9]* core" "$log" &&
        grep -q "ranks: rank 1  host $HOST  local 1/2  cpu: 1 thread on [0-9]* core" "$log"; then
        ok "(a) the table: $(grep -m 1 'ranks: rank 1' "$log" | sed 's/.*INFO //')"
    else
        bad "(a) no table of ranks in rank 0's log"; grep ranks: "$log"
    fi
else
    bad "(a) a normal 2-rank run failed"; tail -n 10 "$TMP/a.out"
fi

# refused CASE PATTERN: run with RANK1_FLAGS set; the job must end non-zero within 60 s with one
# line matching PATTERN, and no training step.
refused() {
    t0=$(date +%s)
    # shellcheck disable=SC2086
    timeout -k 5 60 $MPIRUN "$TMP/rank1.sh" "$DDPTRAIN" $FLAGS --job_dir "$TMP/$1" >"$TMP/$1.out" 2>&1
    rc=$?
    dt=$(($(date +%s) - t0))
    line=$(grep -m 1 "ddptrain: error: " "$TMP/$1.out")
    echo "   ($1) exit $rc after $dt s: $line"
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && echo "$line" | grep -q "$2" && [ "$(grep -c "ddptrain: error: " "$TMP/$1.out")" -eq 1 ] &&
        ! grep -q "step 1/" "$TMP/$1.out"; then
        ok "($1) refused before training with one line naming rank 1 on host $HOST"
    else
        bad "($1) expected one error line matching '$2' and a non-zero exit"; tail -n 8 "$TMP/$1.out"
    fi
}

RANK1_FLAGS="--batch_size 32" refused b \
    "rank 1 on host $HOST disagrees on --batch_size: rank 0 on host $HOST has 16"
RANK1_FLAGS="--data_dir $TMP/other" refused c \
    "rank 1 on host $HOST disagrees on the train shard list of --data_dir with rank 0"
finish
