#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""tests/helpers/tfevents_compare.py - TensorBoard's events of a run against its metrics.jsonl.

    tfevents_compare.py METRICS FIRST_LINE EVENTS_FILE [--ranks N]

The records of METRICS from line FIRST_LINE (1-based: a resumed run's records follow the earlier
run's) must come back, in order and one event each, from EVENTS_FILE, read by the independent
reader tfevents_read.py: the tags from the rule docs/job-directory.md states (written here
again from that text, not from the C), each value the record's number rounded to float32,
exactly, and a record with data_sec, compute_sec and comm_wait_sec also its three shares of
their sum. Events whose tags all start with "rank/" are the per-rank ones: with --ranks N (N >
1) there must be one at the step of every training record, holding rank/NNN/{data_sec,
compute_sec, comm_wait_sec, data_share, compute_share, comm_share} for each rank, whose
data_sec average to the record's data_sec, rank 0's comm_wait_sec being the record's, the
shares each rank's seconds over their sum; without, there must be none. The wall times must not
go back. Prints one "ok:" line per check passed; exit 1 with "FAIL:" lines otherwise.
"""
import json
import os
import re
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tfevents_read import FormatError, read_events  # noqa: E402

fails = []


def check(cond, msg):
    if cond:
        print("ok: " + msg)
    else:
        print("FAIL: " + msg)
        fails.append(msg)


def f32(x):
    return struct.unpack("<f", struct.pack("<f", float(x)))[0]


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def expected(rec):
    """(step, [(tag, value)]) of a record, or None when it has no step."""
    if "step" not in rec:
        return None
    event = rec.get("event") if isinstance(rec.get("event"), str) else None
    rank_group = event is not None and is_number(rec.get("rank")) and 0 <= rec["rank"] < 1e9
    if event is not None:
        base = re.sub(r"[^A-Za-z0-9_.-]", "_", event)
    elif any(k.startswith("test_") for k in rec):
        base = "test"
    else:
        base = "train"
    group = base + ("/rank/%03d" % int(rec["rank"]) if rank_group else "")
    prefix = base + "_"
    out = []
    for key, value in rec.items():
        if key == "step" or not is_number(value) or (rank_group and key == "rank"):
            continue
        name = key[len(prefix):] if key.startswith(prefix) and len(key) > len(prefix) else key
        out.append((group + "/" + name, f32(value)))
    if all(is_number(rec.get(k)) for k in ("data_sec", "compute_sec", "comm_wait_sec")):
        d, c, m = float(rec["data_sec"]), float(rec["compute_sec"]), float(rec["comm_wait_sec"])
        total = d + c + m
        if total > 0:
            out += [(group + "/data_share", f32(d / total)), (group + "/compute_share", f32(c / total)),
                    (group + "/comm_share", f32(m / total))]
    return int(rec["step"]), out


def main(argv):
    metrics, first, path = argv[1], int(argv[2]), argv[3]
    ranks = int(argv[5]) if len(argv) > 5 and argv[4] == "--ranks" else 1
    with open(metrics) as f:
        records = [json.loads(line) for line in f.read().splitlines()[first - 1:]]
    try:
        events = read_events(path)
    except (OSError, FormatError) as e:
        check(False, "read %s: %s" % (path, e))
        return 1
    check(events[0]["file_version"] == "brain.Event:2" and not events[0]["scalars"],
          "%s starts with the file_version event" % os.path.basename(path))
    walls = [e["wall_time"] for e in events]
    check(all(a <= b for a, b in zip(walls, walls[1:])), "the wall times never go back (%d events)" % len(events))
    per_rank = [e for e in events[1:] if e["scalars"] and all(t.startswith("rank/") for t, _ in e["scalars"])]
    others = [e for e in events[1:] if e not in per_rank]
    want = [x for x in (expected(r) for r in records) if x is not None]
    check(len(others) == len(want), "%d events for %d metrics records" % (len(others), len(want)))
    mismatches = 0
    for i, ((step, scalars), ev) in enumerate(zip(want, others)):
        if ev["step"] != step or ev["scalars"] != scalars:
            mismatches += 1
            if mismatches <= 3:
                print("  record %d: step %d %s\n  event:     step %d %s" % (i, step, scalars, ev["step"], ev["scalars"]))
    n_scalars = sum(len(s) for _, s in want)
    check(mismatches == 0 and n_scalars > 0,
          "every record's %d numbers (and shares) are its event's scalars, tags and float32 values exact" % n_scalars)
    tags = {t for _, s in want for t, _ in s}
    for t in ("train/loss", "train/lr", "train/images_per_sec", "train/data_share", "train/comm_share", "test/acc",
              "test/loss"):
        check(t in tags, "tag %s is written" % t)
    train = [r for r in records if "loss" in r and "event" not in r]
    if ranks == 1:
        check(not per_rank, "no per-rank scalars from one rank")
    else:
        check([e["step"] for e in per_rank] == [r["step"] for r in train],
              "a per-rank event at each of the %d training records' steps" % len(train))
        bad = 0
        for ev, rec in zip(per_rank, train):
            s = dict(ev["scalars"])
            names = ("data_sec", "compute_sec", "comm_wait_sec", "data_share", "compute_share", "comm_share")
            if set(s) != {"rank/%03d/%s" % (q, n) for q in range(ranks) for n in names}:
                bad += 1
                print("  step %d: tags %s" % (ev["step"], sorted(s)))
                continue
            mean_data = sum(s["rank/%03d/data_sec" % q] for q in range(ranks)) / ranks
            ok = abs(mean_data - rec["data_sec"]) <= 6e-5 + 1e-6 * rec["data_sec"]
            ok &= abs(s["rank/000/comm_wait_sec"] - rec["comm_wait_sec"]) <= 6e-5 + 1e-6 * rec["comm_wait_sec"]
            for q in range(ranks):
                sec = [s["rank/%03d/%s" % (q, n)] for n in names[:3]]
                share = [s["rank/%03d/%s" % (q, n)] for n in names[3:]]
                ok &= all(abs(sh - x / sum(sec)) <= 1e-5 for sh, x in zip(share, sec)) and min(sec) >= 0
            if not ok:
                bad += 1
                print("  step %d: record %s, per rank %s" % (ev["step"], rec, s))
        check(bad == 0 and per_rank, "per rank: the data times average to the record's, rank 0's communication "
              "wait is the record's, each share is its seconds over their sum (%d ranks)" % ranks)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
