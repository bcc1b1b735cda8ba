#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Networks as files (--model FILE): every built-in prints as a file that reads back as itself,
# a printed network trains, a network of the MobileNet and EfficientNet kinds trains, and each
# malformed description is refused before anything is written with one line naming the file,
# the node and the field, exit 2.
. "${top_srcdir:-.}/tests/helpers/lib.sh"
DDP="$top_builddir/ddptrain"
DATA="$TMP/data"
"$top_builddir/ddptrain-data" synth --out "$DATA" --train 256 --test 64 >/dev/null 2>&1 ||
    "$top_builddir/ddptrain-data" synth --out "$DATA" >/dev/null 2>&1 || { bad "synth"; finish; }

for m in miniresnet resnet18 resnet34 resnet50; do
    "$DDP" --model "$m" --print_model >"$TMP/$m.json" && "$DDP" --model "$TMP/$m.json" --print_model >"$TMP/$m.2.json" &&
        cmp -s "$TMP/$m.json" "$TMP/$m.2.json" && ok "$m prints as a file that reads back as itself" ||
        bad "$m: printed file does not read back"
done

# A printed network trains as the built-in does: the same losses
"$DDP" --model miniresnet --width 8 --blocks 1 --print_model >"$TMP/mini8.json"
for m in miniresnet "$TMP/mini8.json"; do
    "$DDP" --model "$m" --width 8 --blocks 1 --data_dir "$DATA" --max_steps 4 --log_interval 2 --threads 1 \
        --job_dir "$TMP/job-$(basename "$m")" 2>&1 | grep -o 'loss [0-9.]*' >"$TMP/loss-$(basename "$m")"
done
if [ -s "$TMP/loss-miniresnet" ] && cmp -s "$TMP/loss-miniresnet" "$TMP/loss-mini8.json"; then
    ok "MiniResNet from its file trains as the built-in: $(tr '\n' ' ' <"$TMP/loss-miniresnet")"
else
    bad "MiniResNet from its file: $(cat "$TMP/loss-mini8.json") against $(cat "$TMP/loss-miniresnet")"
fi

# --use_blurpool: a blur node before each strided convolution of 16 or more input channels,
# printed as a file that reads back as itself and trains as the option does
"$DDP" --model resnet18 --use_blurpool --print_model >"$TMP/r18b.json" &&
    "$DDP" --model "$TMP/r18b.json" --print_model >"$TMP/r18b.2.json" && cmp -s "$TMP/r18b.json" "$TMP/r18b.2.json" &&
    ok "resnet18 --use_blurpool prints as a file that reads back as itself" || bad "resnet18 --use_blurpool: file"
"$DDP" --model miniresnet --width 16 --blocks 1 --use_blurpool --print_model >"$TMP/mini16b.json"
for m in miniresnet "$TMP/mini16b.json"; do
    flag=; [ "$m" = miniresnet ] && flag=--use_blurpool
    "$DDP" --model "$m" $flag --width 16 --blocks 1 --data_dir "$DATA" --max_steps 4 --log_interval 2 --threads 1 \
        --job_dir "$TMP/jobb-$(basename "$m")" 2>&1 | grep -o 'loss [0-9.]*' >"$TMP/lossb-$(basename "$m")"
done
if [ -s "$TMP/lossb-miniresnet" ] && cmp -s "$TMP/lossb-miniresnet" "$TMP/lossb-mini16b.json" &&
    ! cmp -s "$TMP/lossb-miniresnet" "$TMP/loss-miniresnet"; then
    ok "MiniResNet --use_blurpool from its file trains as the option: $(tr '\n' ' ' <"$TMP/lossb-miniresnet")"
else
    bad "MiniResNet --use_blurpool: $(cat "$TMP/lossb-mini16b.json") against $(cat "$TMP/lossb-miniresnet")"
fi
# its checkpoint is of another architecture than the network without the blur
out=$("$DDP" --model miniresnet --width 16 --blocks 1 --data_dir "$DATA" --max_steps 8 --threads 1 \
    --job_dir "$TMP/jobb-miniresnet" 2>&1); rc=$?
[ $rc -ne 0 ] && printf '%s' "$out" | grep -q "of architecture 'MiniResNet-blurpool' but this run is MiniResNet" &&
    ok "resuming a --use_blurpool job without it: $(printf '%s' "$out" | grep -o "error: .*" | cut -c1-90)..." ||
    bad "resuming a --use_blurpool job without it: $rc $out"
out=$("$DDP" --model miniresnet --width 4 --use_blurpool --data_dir "$DATA" --job_dir "$TMP/never" 2>&1); rc=$?
[ $rc -eq 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && printf '%s' "$out" | grep -q "use_blurpool: --model miniresnet has no convolution" &&
    [ ! -e "$TMP/never" ] && ok "--use_blurpool with nothing to blur: $out" || bad "--use_blurpool with nothing to blur: $rc $out"

# A squeeze-excitation block with the kinds of MobileNetV3 and EfficientNet (act, mul, dropout,
# stochastic_depth; batch norms with eps 0.001) trains on the CPU: finite losses, and the same
# loss lines on 1 and 2 threads (the masks and sums depend on no thread count)
cat >"$TMP/se.json" <<'EOF'
{"network": "se_tiny", "nodes": [
  {"name": "stem.conv", "kind": "conv", "in": "input", "out_channels": 16, "kernel": 3},
  {"name": "stem.bn", "kind": "bn", "eps": 0.001},
  {"name": "stem.act", "kind": "act", "function": "hardswish"},
  {"name": "block.expand", "kind": "conv", "out_channels": 32, "kernel": 1},
  {"name": "block.bn1", "kind": "bn", "eps": 0.001, "momentum": 0.01},
  {"name": "block.act1", "kind": "act", "function": "silu"},
  {"name": "block.se.pool", "kind": "avgpool"},
  {"name": "block.se.fc1", "kind": "conv", "out_channels": 8, "kernel": 1},
  {"name": "block.se.act", "kind": "act", "function": "relu6"},
  {"name": "block.se.fc2", "kind": "conv", "out_channels": 32, "kernel": 1},
  {"name": "block.se.gate", "kind": "act", "function": "hardsigmoid"},
  {"name": "block.se.mul", "kind": "mul", "in": "block.act1", "scale": "block.se.gate"},
  {"name": "block.project", "kind": "conv", "out_channels": 16, "kernel": 1},
  {"name": "block.bn2", "kind": "bn", "eps": 0.001},
  {"name": "block.sd", "kind": "stochastic_depth", "p": 0.5},
  {"name": "block.add", "kind": "add", "residual": "stem.act"},
  {"name": "head.conv", "kind": "conv", "out_channels": 32, "kernel": 1},
  {"name": "head.bn", "kind": "bn"},
  {"name": "head.act", "kind": "act", "function": "gelu"},
  {"name": "head.pool", "kind": "avgpool"},
  {"name": "head.drop", "kind": "dropout", "p": 0.2},
  {"name": "head.fc", "kind": "linear"}]}
EOF
for t in 1 2; do
    "$DDP" --model "$TMP/se.json" --data_dir "$DATA" --max_steps 3 --log_interval 1 --threads $t \
        --job_dir "$TMP/job-se$t" >"$TMP/se$t.out" 2>&1 || bad "the squeeze-excitation network on $t threads: $(tail -2 "$TMP/se$t.out")"
    grep -o '"loss": [-0-9.e]*' "$TMP/job-se$t/metrics.jsonl" >"$TMP/loss-se$t" 2>/dev/null
done
if [ "$(grep -c '"loss": [0-9]' "$TMP/loss-se1")" -eq 3 ] && cmp -s "$TMP/loss-se1" "$TMP/loss-se2"; then
    ok "act, mul, dropout and stochastic_depth train, the same losses on 1 and 2 threads: $(tr '\n' ' ' <"$TMP/loss-se1")"
else
    bad "the squeeze-excitation network: $(tr '\n' ' ' <"$TMP/loss-se1") against $(tr '\n' ' ' <"$TMP/loss-se2")"
fi

# $1 = label, $2 = the file's text, $3 = what the message must contain
refused() {
    printf '%s' "$2" >"$TMP/bad.json"
    out=$("$DDP" --model "$TMP/bad.json" --data_dir "$DATA" --job_dir "$TMP/never" 2>&1)
    rc=$?
    if [ $rc -eq 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && printf '%s' "$out" | grep -qF -- "$3" &&
        printf '%s' "$out" | grep -qF "bad.json" && [ ! -e "$TMP/never" ]; then
        ok "$1: $out"
    else
        bad "$1: rc $rc: $out (wanted '$3')"
    fi
}
H='{"network": "t", "nodes": ['
T='{"name": "pool", "kind": "avgpool"}, {"name": "fc", "kind": "linear"}]}'
refused "unknown kind" "$H"'{"name": "c", "kind": "convolution", "out_channels": 8, "kernel": 3}, '"$T" \
    'node 0: field "kind": unknown kind "convolution"'
refused "unknown field" "$H"'{"name": "c", "kind": "conv", "out_channels": 8, "kernal": 3}, '"$T" \
    'unknown field "kernal"'
refused "field of another kind" "$H"'{"name": "r", "kind": "relu", "kernel": 3}, '"$T" \
    'node "r": field "kernel" does not apply to a relu node'
refused "a field of a blur node" "$H"'{"name": "c", "kind": "conv", "out_channels": 16, "kernel": 3}, {"name": "b", "kind": "blur", "kernel": 3}, '"$T" \
    'node "b": field "kernel" does not apply to a blur node'
refused "missing field" "$H"'{"name": "c", "kind": "conv", "kernel": 3}, '"$T" \
    'node "c": a conv node needs the field "out_channels"'
refused "dangling input" "$H"'{"name": "c", "kind": "conv", "in": "nowhere", "out_channels": 8, "kernel": 3}, '"$T" \
    'node "c", field "in": "nowhere" names no node'
refused "cyclic input" "$H"'{"name": "c", "kind": "conv", "in": "r", "out_channels": 8, "kernel": 3}, {"name": "r", "kind": "relu", "in": "c"}, '"$T" \
    'node "c", field "in": "r" is not a node above this one'
refused "channels that differ at an add" "$H"'{"name": "c", "kind": "conv", "out_channels": 8, "kernel": 3}, {"name": "a", "kind": "add", "in": "c", "residual": "input"}, '"$T" \
    'node "a", field "residual": 3 channels added to 8'
refused "a stride that leaves no pixels" "$H"'{"name": "c", "kind": "conv", "out_channels": 8, "kernel": 3, "stride": 2}, {"name": "m", "kind": "maxpool", "kernel": 64, "stride": 64, "padding": 0}, '"$T" \
    'node "m", field "stride": a 64x64 window at stride 64 with padding 0 leaves no pixels'
refused "a last node that is not the classifier" "$H"'{"name": "c", "kind": "conv", "out_channels": 8, "kernel": 3}, {"name": "r", "kind": "relu"}]}' \
    'node "r", field "kind": the last node gives the logits'
refused "class maps of another class count" "$H"'{"name": "c", "kind": "conv", "out_channels": 8, "kernel": 3}, {"name": "pool", "kind": "avgpool"}]}' \
    'node "pool", field "in": the last node gives the logits: 8 outputs but --num_classes is 10'
# out_channels 0: one map per class, whatever --num_classes (SqueezeNet's classifier)
printf '%s' "$H"'{"name": "c", "kind": "conv", "out_channels": 0, "kernel": 1, "bias": true}, {"name": "pool", "kind": "avgpool"}]}' \
    >"$TMP/maps.json"
out=$("$DDP" --model "$TMP/maps.json" --threads 1 --data_dir "$DATA" --max_steps 1 --job_dir "$TMP/maps" 2>&1 |
    grep -o 'model: [^,]*parameters')
[ "$out" = "model: t: 40 parameters" ] && ok "class maps of out_channels 0, 10 classes: $out (3 x 10 + 10)" ||
    bad "class maps of out_channels 0, 10 classes: $out"
refused "a node of a name seen before" "$H"'{"name": "c", "kind": "conv", "out_channels": 8, "kernel": 3}, {"name": "c", "kind": "relu"}, '"$T" \
    'node "c", field "name": a second node of this name'
refused "a list where a value goes" "$H"'{"name": ["c"], "kind": "conv"}, '"$T" \
    'field "name" must be a string, not a list'
refused "an object in a list" "$H"'{"name": "c", "kind": "concat", "in": [{"a": 1}]}, '"$T" \
    'malformed JSON at line 1'
refused "a concat of one name" "$H"'{"name": "c", "kind": "concat", "in": "input"}, '"$T" \
    'node "c": a concat node'"'"'s "in" is a list of the names of its inputs'
refused "a list for a one-input node" "$H"'{"name": "c", "kind": "relu", "in": ["input"]}, '"$T" \
    'field "in" must be a string (one name) for a relu node, not a list'
refused "a concat of a node below" "$H"'{"name": "c", "kind": "concat", "in": ["input", "d"]}, {"name": "d", "kind": "relu"}, '"$T" \
    '"d" is not a node above this one'
refused "a kernel of three" "$H"'{"name": "c", "kind": "conv", "out_channels": 8, "kernel": [1, 7, 3]}, '"$T" \
    'field "kernel" must be a whole number or a list of two (height, width), not a list of 3'
refused "concatenated maps of two sizes" "$H"'{"name": "p", "kind": "maxpool", "kernel": 2}, {"name": "c", "kind": "concat", "in": ["input", "p"]}, '"$T" \
    'a concatenation joins maps of one size'
refused "a split that does not divide" "$H"'{"name": "c", "kind": "split", "chunks": 2, "index": 0}, '"$T" \
    'field "chunks": 2 does not divide the 3 channels'
refused "a name with a quote" "$H"'{"name": "c\"x", "kind": "relu"}, '"$T" \
    'field "name" must be 1 to 63 letters'
N='{"name": "c", "kind": "conv", "out_channels": 8, "kernel": 3}, '"$T"
# An unknown "init" names the twelve known ones (their list once outgrew its buffer: an
# internal error, found by fuzzing)
refused "an unknown init" '{"network": "t", "init": "xavier", "nodes": ['"$N" \
    '"init" is one of "pytorch", "resnet",'
# What the file says is escaped in the message: an unknown "init", key, field, kind or input
# holding a newline or an escape once printed it raw (two lines, a live escape; found by fuzzing)
refused "an unknown init holding a newline" '{"network": "t", "init": "x\nforged: line", "nodes": ['"$N" \
    'not "x\nforged: line"'
refused "an unknown kind holding an escape" "$H"'{"name": "c", "kind": "x\u001b[31m"}, '"$T" \
    'unknown kind "x\033[31m"'
refused "an unknown key holding a newline" '{"network": "t", "x\ny": 1, "nodes": ['"$N" \
    'a key holding a control character or a byte that is not UTF-8: "x\ny"'
# The network's name reaches the log, --print_model's JSON and the checkpoint unescaped: a
# quote once made --print_model write JSON that did not read back, and an escape or a newline
# reached the log raw (a forged line).
refused "a network name with a quote" '{"network": "t\"x", "nodes": ['"$N" \
    '"network" must be 1 to 47 letters, digits'
refused "a network name with a newline" '{"network": "t\nmodel: forged", "nodes": ['"$N" \
    '"network" must be 1 to 47 letters, digits'
refused "a network name with an escape" '{"network": "t\u001b[31m", "nodes": ['"$N" \
    '"network" must be 1 to 47 letters, digits'
refused "a node name of 64 characters" "$H"'{"name": "'"$(printf '%064d' 0)"'", "kind": "relu"}, '"$T" \
    'field "name" must be 1 to 63 letters'

# A batch norm's name of 63 characters, the longest a file may give, trains, checkpoints and
# resumes: its tensors' names run to 83 characters (".num_batches_tracked"), and a name of
# 44 to 47 characters once overflowed the 64 bytes those had ("internal error ... string too
# long" after the job directory was made).
long=$(printf 'b%.0s' $(seq 63))
printf '%s' '{"network": "longbn", "nodes": [{"name": "c", "kind": "conv", "out_channels": 8, "kernel": 3},
  {"name": "'"$long"'", "kind": "bn"}, {"name": "r", "kind": "relu"}, '"$T" >"$TMP/longbn.json"
"$DDP" --model "$TMP/longbn.json" --data_dir "$DATA" --max_steps 2 --batch_size 32 --job_dir "$TMP/job-longbn" \
    >"$TMP/longbn.out" 2>&1 &&
    "$DDP" --model "$TMP/longbn.json" --data_dir "$DATA" --max_steps 4 --batch_size 32 --job_dir "$TMP/job-longbn" \
        --resume auto >>"$TMP/longbn.out" 2>&1 && grep -q "^resume: .*global step 2 " "$TMP/longbn.out" &&
    ok "a 63-character batch-norm name trains and resumes" ||
    bad "a 63-character batch-norm name: $(grep -v '^ *$' "$TMP/longbn.out" | tail -3)"
out=$("$DDP" --model nosuchnet --data_dir "$DATA" 2>&1); rc=$?
[ $rc -eq 2 ] && printf '%s' "$out" | grep -q "not a built-in network" && ok "unknown built-in: $out" || bad "unknown built-in: $rc $out"
finish
