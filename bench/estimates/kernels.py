#!/usr/bin/env python3
"""Per-kernel estimate vs measured for one script's first `train` loop.

Runs `mlpl estimate --kernels` and `mlpl run --timeline` on the script, takes
the replayed steps of the timeline (after the first three), and prints, per
kernel name, the calls per step and the estimated and measured (median over
steps) microseconds per step; when the two kernel lists have the same length
(the estimate lists what step capture records), also the calls whose
estimate is furthest off, with their operand shapes.

With `--loop N` it compares the script's N-th `train` loop (1: the first)
instead: the timeline's steps are split into loops where the step count
starts again.

Usage: kernels.py MLPL_BINARY CALIBRATION_FILE SCRIPT [--worst N] [--loop N]
"""
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

BIN, CAL, SCRIPT = sys.argv[1:4]
BIN = os.path.abspath(BIN)
WORST = int(sys.argv[sys.argv.index("--worst") + 1]) if "--worst" in sys.argv else 12
LOOP = int(sys.argv[sys.argv.index("--loop") + 1]) if "--loop" in sys.argv else 1


def estimated():
    out = subprocess.run([BIN, "estimate", "--kernels", "--calibration", CAL, SCRIPT],
                         capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    heads = [i for i, l in enumerate(lines) if not l.startswith("  ")]
    if LOOP > len(heads):
        sys.exit(f"the estimate lists {len(heads)} loops")
    first = heads[LOOP - 1]
    ks = []
    for line in lines[first + 1:]:
        if not line.startswith("  "):
            break
        m = re.match(r"\s+(\S+)\s+(\d+) FLOP\s+(\d+) out\s+([\d.e+-]+) (ns|µs|ms|s)", line)
        if m:
            scale = {"ns": 1e-3, "µs": 1.0, "ms": 1e3, "s": 1e6}[m.group(5)]
            ks.append((m.group(1), float(m.group(4)) * scale, float(m.group(2))))
    return lines[first], ks


def measured():
    with tempfile.TemporaryDirectory() as d:
        tl = os.path.join(d, "t.json")
        env = dict(os.environ, MLPL_NO_REFINE="1")
        subprocess.run([BIN, "run", "--timeline", tl, SCRIPT], capture_output=True,
                       env=env, check=True,
                       cwd=os.path.dirname(os.path.abspath(SCRIPT)))
        ev = json.load(open(tl))["traceEvents"]
    every = sorted((e["ts"], e["ts"] + e["dur"], e.get("args", {}).get("step", 0))
                   for e in ev if e.get("cat") == "train_step")
    # The loops' steps: a loop starts where the step count does not grow.
    loops = []
    for ts, end, n in every:
        if not loops or n <= loops[-1][-1][2]:
            loops.append([])
        loops[-1].append((ts, end, n))
    if LOOP > len(loops):
        sys.exit(f"the timeline has {len(loops)} loops")
    steps = [(ts, end) for ts, end, _ in loops[LOOP - 1]]
    skip = 3 if len(steps) > 4 else 2
    ks = sorted((e["ts"], e["dur"], e["name"], e.get("args", {}).get("inputs"))
                for e in ev if e.get("cat") == "kernel" and e.get("args", {}).get("replayed"))
    per_step = []
    # A step's kernels are those after the previous step's end (its first
    # kernel can start before its own step event does).
    for i in range(skip, len(steps)):
        a, b = steps[i - 1][1], steps[i][1]
        s = [k for k in ks if a < k[0] <= b]
        if s:
            per_step.append((b - a, s))
    return per_step


def main():
    head, est = estimated()
    steps = measured()
    print(head)
    if not steps:
        print("no replayed steps in the timeline")
        return
    print(f"measured: {len(steps)} replayed steps, median {statistics.median(s[0] for s in steps) / 1e3:.3f} ms, "
          f"{len(steps[0][1])} kernels per step (estimate lists {len(est)})")
    names = sorted({k[0] for k in est} | {k[2] for s in steps for k in s[1]})
    rows = []
    for n in names:
        e = sum(k[1] for k in est if k[0] == n)
        ec = sum(1 for k in est if k[0] == n)
        ms = [sum(k[1] for k in s[1] if k[2] == n) for s in steps]
        mc = max(sum(1 for k in s[1] if k[2] == n) for s in steps)
        rows.append((n, ec, mc, e, statistics.median(ms)))
    rows.sort(key=lambda r: -max(r[3], r[4]))
    print(f"{'kernel':24} {'calls est/meas':>14} {'est µs':>10} {'meas µs':>10} {'ratio':>6}")
    for n, ec, mc, e, m in rows:
        ratio = e / m if m > 0 else float("inf")
        print(f"{n:24} {ec:>6}/{mc:<7} {e:10.1f} {m:10.1f} {ratio:6.2f}")
    te, tm = sum(r[3] for r in rows), sum(r[4] for r in rows)
    print(f"{'sum':24} {'':14} {te:10.1f} {tm:10.1f} {te / tm:6.2f}")
    # Pair the i-th call of each kernel name in the estimate with the i-th
    # recorded one (the backward pass may order independent calls differently).
    pos = []
    taken = {}
    for i, (n, e, fl) in enumerate(est):
        j = taken.get(n, 0)
        taken[n] = j + 1
        calls = [[k for k in s[1] if k[2] == n] for s in steps]
        if any(len(c) <= j for c in calls):
            continue
        m = statistics.median(c[j][1] for c in calls)
        pos.append((abs(e - m), i, n, calls[0][j][3], e, m, fl))
    pos.sort(reverse=True)
    print(f"\nlargest differences by call (the i-th call of each name paired):")
    for d, i, n, shapes, e, m, fl in pos[:WORST]:
        print(f"  #{i:<4} {n} {shapes} est {e:.1f} µs meas {m:.1f} µs"
              + (f"  {fl / m / 1e3:.1f} GFLOP/s measured, {fl / e / 1e3:.1f} estimated" if fl and m > 0 else ""))


main()
