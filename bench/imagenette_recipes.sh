#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# torchvision's published ImageNet recipes (recipes/torchvision-*.json) trained from scratch on
# Imagenette by ddptrain and by torchvision (bench/torch_imagefolder.py), on a shortened schedule
# both sides share: every recipe file is rewritten once with the overrides below, and the one
# rewritten file is what both sides read. Prints one row per recipe and side: the top-1 of the
# last epoch (the EMA's where the recipe averages), the training time per epoch, the loader's
# wait, and the mean training loss of the last epoch (on the mixed targets where the recipe
# mixes: on a schedule this short, the loss tells more than a top-1 near chance). Each side
# runs with the same 2-rank global batch: ddptrain as 2 ranks of 1 thread under mpirun,
# torchvision as one process of THREADS threads taking both ranks' batches, with
# WORKERS DataLoader processes.
#   bench/imagenette_recipes.sh IMAGENETTE_DIR WORK_DIR [BUILD_DIR]
#   IMAGENETTE_DIR holds train/ and val/ ImageFolder trees (thunderInfy/imagenette: 224x224 JPEG)
#   env: RECIPES ("mobilenet_v3_large efficientnet_b0 resnet50-v2"), TRAIN_EVERY (3: every 3rd
#        training file of each class, by name), VAL_EVERY (4), EPOCHS (4), CROP (128: the
#        training crop; evaluation at Resize(CROP*8/7) CenterCrop(CROP)), BATCH (32 per rank),
#        WARMUP_EPOCHS (1, where the recipe warms up), THREADS (2), WORKERS (2), SEED (42)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { echo "usage: imagenette_recipes.sh IMAGENETTE_DIR WORK_DIR [BUILD_DIR]" >&2; exit 2; }
src=$1; work=$2
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
bench_setup imagenette_recipes.sh "${3:-${top_builddir:-$here/../build}}"
torch_python imagenette_recipes.sh "torch, torchvision"
RECIPES=${RECIPES:-mobilenet_v3_large efficientnet_b0 resnet50-v2}
TE=${TRAIN_EVERY:-3}; VE=${VAL_EVERY:-4}; E=${EPOCHS:-4}; C=${CROP:-128}; N=${BATCH:-32}
WE=${WARMUP_EPOCHS:-1}; T=${THREADS:-2}; W=${WORKERS:-2}; SEED=${SEED:-42}
for d in train val; do
    [ -d "$src/$d" ] || { echo "imagenette_recipes.sh: $src/$d: no such folder (an ImageFolder tree is expected)" >&2; exit 2; }
done
mkdir -p "$work"

# The subset: hard links (the importer takes regular files only) to every TE-th training file
# and every VE-th validation file of each class, in name order, so that both sides read the
# same files; then ddptrain's JPEG shards of it, as docs/benchmarks.md's Imagenette runs.
sub=$work/subset
if [ ! -d "$sub" ]; then
    for d in train val; do
        every=$TE; [ $d = val ] && every=$VE
        for cls in "$src/$d"/*/; do
            c=$(basename "$cls"); mkdir -p "$sub.tmp/$d/$c"
            find "$cls" -maxdepth 1 -type f | sort | awk -v k="$every" 'NR % k == 1' |
                while read -r f; do ln "$f" "$sub.tmp/$d/$c/" 2>/dev/null || cp "$f" "$sub.tmp/$d/$c/"; done
        done
    done
    mv "$sub.tmp" "$sub"
fi
shards=$work/shards
if [ ! -d "$shards" ]; then
    "$DDPDATA" import --in "$sub" --out "$shards.tmp" --size 224 --encoding jpeg > "$work/import.log" 2>&1
    mv "$shards.tmp" "$shards"
fi
ntrain=$(find "$sub/train" -type f | wc -l); nval=$(find "$sub/val" -type f | wc -l)

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "# torchvision's recipes on Imagenette from scratch: ddptrain against torchvision $("$PY" -c 'import torchvision; print(torchvision.__version__)')"
echo "# CPU: ${cpu:-unknown}, $(nproc) CPUs online; ddptrain 2 ranks x 1 thread, torchvision 1 process x $T threads + $W loader workers"
[ -r /proc/loadavg ] && echo "# load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $ntrain training images (every ${TE}th), $nval evaluation images (every ${VE}th); $E epochs, crop $C,"
echo "# evaluation Resize($((C * 8 / 7))) CenterCrop($C), batch $N per rank x 2, warm-up $WE epoch(s), seed $SEED"
fmt="%-1s %-20s %-12s %8s %10s %10s %s\n"
# shellcheck disable=SC2059
printf "$fmt" "#" recipe side "top-1" "loss" "s/epoch" "data wait"

for r in $RECIPES; do
    file=$here/../recipes/torchvision-$r.json
    [ -r "$file" ] || { echo "imagenette_recipes.sh: $file: no such recipe" >&2; exit 2; }
    job=$work/$r; mkdir -p "$job"; short=$job/recipe.json
    # The shortened recipe: the dataset's classes and size, the crops, the batch, the epochs;
    # a warm-up longer than the run is cut to WE epochs. Everything else is the published recipe.
    "$PY" - "$file" "$short" "$C" "$N" "$E" "$WE" "$SEED" <<'EOF'
import json, sys
src, dst, crop, batch, epochs, warm, seed = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
c = json.load(open(src))
c.update(num_classes=10, image_size=224, train_crop_size=crop, val_resize_size=crop * 8 // 7,
         val_crop_size=crop, batch_size=batch, epochs=epochs, seed=seed)
if c.get("lr_warmup_epochs", 0) > warm:
    c["lr_warmup_epochs"] = warm
json.dump(c, open(dst, "w"), indent=2)
EOF
    rm -rf "$job/ddp"
    OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to none "$DDPTRAIN" --config "$short" --data_dir "$shards" --job_dir "$job/ddp" --threads 1 \
        --eval_every "$E" > "$job/ddptrain.log" 2>&1 || { echo "imagenette_recipes.sh: ddptrain failed on $r: see $job/ddptrain.log" >&2; exit 1; }
    acc=$(sed -n 's/^done: .*final test_acc \([0-9.]*\).*/\1/p' "$job/ddptrain.log" | tail -n 1)
    total=$(sed -n 's/^done: [0-9]* steps in \([0-9.]*\) s.*/\1/p' "$job/ddptrain.log" | tail -n 1)
    ev=$(grep ' test_acc ' "$job/ddptrain.log" | sed -n 's/.*(\([0-9.]*\) s)$/\1/p' | tail -n 1)
    # the last epoch's loss: the mean of its progress records, each the mean of its steps
    loss=$(grep '"loss"' "$job/ddp/metrics.jsonl" | grep "\"epoch\": $E," | sed 's/.*"loss": \([0-9.]*\).*/\1/' |
        awk '{s += $1; n++} END {if (n) printf "%.4f", s / n}')
    wait_pct=$(grep 'images/s (data' "$job/ddptrain.log" | sed 's/.*(data \([0-9]*\)%.*/\1/' | awk '{s += $1; n++} END {if (n) printf "%.0f%%", s / n}')
    # shellcheck disable=SC2059
    printf "$fmt" "" "$r" ddptrain "$acc" "${loss:-?}" "$(awk -v t="$total" -v e="${ev:-0}" -v n="$E" 'BEGIN{printf "%.1f", (t - e) / n}')" "${wait_pct:-?} of steps"
    OMP_NUM_THREADS=$T "$PY" "$here/torch_imagefolder.py" "$short" --train "$sub/train" --val "$sub/val" --ranks 2 \
        --threads "$T" --workers "$W" --eval_every "$E" > "$job/torch.log" 2>&1 ||
        { echo "imagenette_recipes.sh: torch_imagefolder.py failed on $r: see $job/torch.log" >&2; exit 1; }
    acc=$(sed -n 's/.* test_acc \([0-9.]*\) .*/\1/p' "$job/torch.log" | tail -n 1)
    loss=$(sed -n 's/.* mean_loss \([0-9.]*\) .*/\1/p' "$job/torch.log" | tail -n 1)
    per=$(sed -n 's/.* train \([0-9.]*\) s (data wait \([0-9.]*\) s).*/\1 \2/p' "$job/torch.log" |
        awk '{t += $1; w += $2; n++} END {if (n) printf "%.1f %.1f", t / n, w / n}')
    # shellcheck disable=SC2059
    printf "$fmt" "" "$r" torchvision "$acc" "${loss:-?}" "${per% *}" "${per#* } s/epoch"
done
