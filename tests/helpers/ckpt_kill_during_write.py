# SPDX-License-Identifier: BSD-3-Clause
"""Kills a process with SIGKILL while it writes a checkpoint: polls a checkpoint directory until
a temporary file (ckpt-*.h5.tmp.*) appears, waits a random 0..--max-delay-ms more, and sends
SIGKILL to --pid. Prints one line: the file seen, the delay, and whether the temporary file was
still there after the kill (the kill landed inside the write). Exit 0 when it killed, 1 when the
process ended or --timeout passed first.

With --measure it kills nothing and prints how long temporary files exist (write windows)."""
import argparse
import os
import random
import signal
import sys
import time


def tmp_names(d):
    try:
        return [n for n in os.listdir(d) if ".h5.tmp" in n]
    except FileNotFoundError:
        return []


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped) counts as ended
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--max-delay-ms", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--measure", action="store_true")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    t_end = time.monotonic() + args.timeout
    if args.measure:
        seen, windows = {}, []
        while time.monotonic() < t_end and alive(args.pid):
            now = time.monotonic()
            names = set(tmp_names(args.dir))
            for n in names - set(seen):
                seen[n] = now
            for n in set(seen) - names:
                windows.append(now - seen.pop(n))
        if windows:
            windows.sort()
            print(f"{len(windows)} writes seen: median {1e3 * windows[len(windows) // 2]:.1f} ms, "
                  f"max {1e3 * windows[-1]:.1f} ms")
        else:
            print("no writes seen")
        return 0
    while time.monotonic() < t_end:
        names = tmp_names(args.dir)
        if names:
            delay = rng.uniform(0.0, args.max_delay_ms) / 1e3
            time.sleep(delay)
            os.kill(args.pid, signal.SIGKILL)
            time.sleep(0.05)
            inside = any(n in tmp_names(args.dir) for n in names)
            print(f"SIGKILL {1e3 * delay:.2f} ms after {names[0]} appeared; "
                  f"temporary file {'still there: killed inside the write' if inside else 'gone: the write had ended'}")
            return 0
        if not alive(args.pid):
            print("the process ended before a checkpoint write was seen")
            return 1
    print(f"no checkpoint write seen within {args.timeout:g} s")
    return 1


if __name__ == "__main__":
    sys.exit(main())
