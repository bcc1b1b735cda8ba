#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# --config FILE: a run repeated from another run's config.json (with a new --job_dir) ends with
# the same final checkpoint bit for bit (every dataset but /config, every attribute) and the
# same config.json but for job_dir and config; flags override the file before and after
# --config alike. An unknown key, a value of the wrong type or out of range, a repeated key, a
# malformed or missing file: one line on stderr naming the file (and the key), exit 2.
# shellcheck disable=SC2086  # $FLAGS is a word list
. "${top_srcdir:-.}/tests/helpers/lib.sh"
PY=$(find_python "h5py, numpy") || { echo "SKIP: no python3 with h5py and numpy"; exit "$SKIP"; }
CMP="$top_srcdir/tests/helpers/ckpt_compare.py"
export OMP_NUM_THREADS=1
make_synth "$TMP/data" --train 128 --test 32 --shards 1
FLAGS="--data_dir $TMP/data --width 4 --blocks 1 --threads 1 --batch_size 32 --log_interval 1"
# configs_equal A B: the two config.json files agree on every key but job_dir and config
configs_equal() { "$PY" "$top_srcdir/tests/helpers/configs_equal.py" "$1" "$2"; }

# the original: options off their defaults, the recipes' among them
if timeout -k 5 120 "$DDPTRAIN" $FLAGS --job_dir "$TMP/orig" --epochs 2 --lr 0.05 --momentum 0.8 --nesterov \
        --label_smoothing 0.1 --no_decay_1d --lr_schedule onecycle --onecycle_anneal linear --seed 7 \
        --no-augment >"$TMP/orig.out" 2>&1; then
    ok "original run: $(grep '^.*done:' "$TMP/orig.out" | sed 's/.*done: //')"
else
    bad "original run failed: $(tail -3 "$TMP/orig.out")"; finish
fi
if timeout -k 5 120 "$DDPTRAIN" --config "$TMP/orig/config.json" --job_dir "$TMP/again" >"$TMP/again.out" 2>&1; then
    if out=$(configs_equal "$TMP/orig/config.json" "$TMP/again/config.json"); then ok "repeated run's config.json: $out"
    else bad "repeated run's config.json: $out"; fi
    if out=$("$PY" "$CMP" --all "$(ckpt "$TMP/orig" 8)" "$(ckpt "$TMP/again" 8)" 2>&1); then
        ok "--config orig/config.json --job_dir again: final checkpoint $out"
    else
        bad "--config orig/config.json: final checkpoints differ: $out"
    fi
else
    bad "--config orig/config.json failed: $(tail -3 "$TMP/again.out")"
fi

# flags override the file, before --config and after it; --help never reads it
for order in before after; do
    if [ $order = before ]; then set -- --lr 0.02 --max_steps 2 --config "$TMP/orig/config.json"
    else set -- --config "$TMP/orig/config.json" --lr 0.02 --max_steps 2; fi
    rm -rf "$TMP/over"
    if timeout -k 5 120 "$DDPTRAIN" "$@" --job_dir "$TMP/over" >"$TMP/over.out" 2>&1 &&
        grep -q '"lr": 0.02,' "$TMP/over/config.json" && grep -q '"max_steps": 2,' "$TMP/over/config.json" &&
        grep -q '"momentum": 0.80000000000000004,' "$TMP/over/config.json" && [ -s "$(ckpt "$TMP/over" 2)" ]; then
        ok "flags $order --config override it (lr 0.02, max_steps 2; momentum 0.8 from the file)"
    else
        bad "flags $order --config: $(tail -2 "$TMP/over.out"; grep -E '"(lr|max_steps|momentum)"' "$TMP/over/config.json" 2>&1)"
    fi
done
printf '{"lr": [1]}' >"$TMP/nested.json"
if "$DDPTRAIN" --config "$TMP/nested.json" --help >/dev/null 2>&1; then ok "--help with --config: the file is not read"
else bad "--help with a bad --config failed"; fi

# A path that is not UTF-8 (byte 0xff, as a Latin-1 file system holds): config.json stays valid
# JSON for Python (the byte as \udcff, surrogateescape: os.fsencode gives it back), and a run
# repeated from it reads the same path.
raw="$TMP/d$(printf '\377')ata"
cp -r "$TMP/data" "$raw"
if timeout -k 5 120 "$DDPTRAIN" --data_dir "$raw" --width 4 --blocks 1 --threads 1 --batch_size 32 --max_steps 1 \
        --job_dir "$TMP/latin1" >"$TMP/latin1.out" 2>&1 &&
   out=$("$PY" -c "
import json, os, sys
c = json.load(open(sys.argv[1], encoding='utf-8'))
ok = os.fsencode(c['data_dir']) == os.fsencode(sys.argv[2])
print('json.load reads it, data_dir %s' % ('gives the path back' if ok else 'differs: %r' % c['data_dir']))
sys.exit(not ok)" "$TMP/latin1/config.json" "$raw"); then
    ok "--data_dir with byte 0xff: config.json $out"
else bad "--data_dir with byte 0xff: config.json: $out $(tail -2 "$TMP/latin1.out")"; fi
if timeout -k 5 120 "$DDPTRAIN" --config "$TMP/latin1/config.json" --job_dir "$TMP/latin1b" >"$TMP/latin1b.out" 2>&1 &&
   out=$(configs_equal "$TMP/latin1/config.json" "$TMP/latin1b/config.json"); then
    ok "--config of that config.json: the same data_dir read back, $out"
else bad "--config of the config.json with byte 0xff: $(tail -2 "$TMP/latin1b.out") $out"; fi

# refusals: exactly one line on stderr naming the file (and the key), nothing on stdout, exit 2
refused() {   # $1 = name, $2 = file content (printf format), $3 = text expected after "FILE: "
    f="$TMP/$1.json"
    # shellcheck disable=SC2059  # the content is the format
    printf "$2" >"$f"
    "$DDPTRAIN" --config "$f" $FLAGS --job_dir "$TMP/refused" >"$TMP/r.out" 2>"$TMP/r.err"
    rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/r.err")" -eq 1 ] && [ ! -s "$TMP/r.out" ] &&
        grep -qF -- "$f: $3" "$TMP/r.err"; then
        ok "$1 -> exit 2: $(sed "s|$TMP/||" "$TMP/r.err")"
    else
        bad "$1 -> rc=$rc: $(cat "$TMP/r.err") (wanted '$f: $3')"
    fi
}
refused unknown_key   '{"lr": 0.1, "learning_rate": 0.1}'  'unknown key "learning_rate"'
refused wrong_type    '{"epochs": "2"}'                      'key "epochs": the value must be a number, not a string'
refused bool_type     '{"nesterov": 1}'                      'key "nesterov": the value must be true or false, not a number'
refused out_of_range  '{"momentum": 1.5}'                    'key "momentum": --momentum: 1.5 is out of range'
refused not_integer   '{"epochs": 2.5}'                      "key \"epochs\": --epochs: '2.5' is not an integer"
refused bad_choice    '{"lr_schedule": "stepwise"}'          "key \"lr_schedule\": --lr_schedule: 'stepwise' is not one of"
refused repeated      '{"lr": 0.1, "lr": 0.2}'               'key "lr" appears twice'
refused null_value    '{"lr": null}'                         'malformed JSON at line 1, column 8 (key "lr"): a value must be a string, a number, true or false, not null'
refused nested        '{"lr": {"x": 1}}'                     'malformed JSON at line 1, column 8 (key "lr"): a value must be'
refused no_comma      '{"lr": 0.1\n "epochs": 2}'            "malformed JSON at line 2, column 2 (after key \"lr\"): expected ',' or '}'"
refused unterminated  '{"lr": 0.1, "epo'                     'malformed JSON at line 1, column 17 (after key "lr"): the string does not end'
refused trailing      '{"lr": 0.1} x'                        'malformed JSON at line 1, column 13 (after key "lr"): text after the object'
refused not_object    '["lr", 0.1]'                          "malformed JSON at line 1, column 1: expected '{'"
refused empty         ''                                     "malformed JSON at line 1, column 1: expected '{'"
# control characters: a key holding them is refused, quoted; one in a value is escaped in the line
refused control_key   '{"lr": 0.1, "a\\u001b[31mb\\nc": 1}'  'malformed JSON at line 1, column 13 (after key "lr"): a key holding a control character or a byte that is not UTF-8: "a\033[31mb\nc"'
refused control_value '{"lr_schedule": "st\\u001b[2Jep"}'   "key \"lr_schedule\": --lr_schedule: 'st\\033[2Jep' is not one of"
"$DDPTRAIN" --config "$TMP/missing.json" >"$TMP/r.out" 2>"$TMP/r.err"
rc=$?
if [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/r.err")" -eq 1 ] && grep -q "missing.json: No such file" "$TMP/r.err"; then
    ok "missing file -> exit 2: $(sed "s|$TMP/||" "$TMP/r.err")"
else
    bad "missing file -> rc=$rc: $(cat "$TMP/r.err")"
fi
finish
