#!/usr/bin/env python3
"""Estimate-vs-measured sweep (docs/benchmarks.md, "Estimates").

For every loop of the sweep (generated MLPs and transformer LMs, the examples,
stress cases near a memory limit) this runs `mlpl estimate --json` and then
`mlpl run --profile` on the same script, measures the step time (the median
replayed step, or the loop's time per iteration when it was not captured) and
the process's peak RSS (wait4), and reports estimate / measured for time and
memory, and the fits / does-not-fit verdicts under 0.5 GB and 2 GB.

Usage: sweep.py MLPL_BINARY CALIBRATION_FILE OUT_DIR [--quick]
       sweep.py --report RESULTS_JSON   (the table of a saved run)
       sweep.py --rounds RESULTS_JSON...  (several rounds, each with its own
           calibration: per loop the median ratio over the rounds, and each
           round's distribution)

Verdicts are the editor's (lsp/src/feasibility.rs): "fits" when the estimate
times 1.25 is within the limit (right when the measured peak is), "does not fit"
when the estimate is over it (right when the peak is), "tight" between (right
when the peak is within 25% of the limit, either side).
"""
import json
import os
import re
import subprocess
import sys
import time

BIN, CAL, OUT = (sys.argv[1:4] + ["", "", ""])[:3]
QUICK = "--quick" in sys.argv
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIMITS = [0.5e9, 2e9]
# Steps of the stress loops: two recorded, the rest replayed, whose median is
# the measured step (with 3 steps it was one replayed step, and two quiet runs
# of the same tree differed up to 1.4x on them).
STRESS_STEPS = 6
# The editor's margin (lsp/src/feasibility.rs, FIT_MARGIN).
MARGIN = 1.25


def verdict(est, peak, lim):
    """The editor's verdict on `est` under `lim`, and whether `peak` bears it out."""
    if est * MARGIN <= lim:
        return "fits", peak <= lim
    if est > lim:
        return "no", peak > lim
    return "tight", lim / MARGIN <= peak <= lim * MARGIN


def mlp(width, batch, depth=2, feat=32, classes=10, steps=20):
    layers = [f"linear({feat}, {width}, 1)", "relu_layer()"]
    for i in range(depth - 1):
        layers += [f"linear({width}, {width}, {i + 2})", "relu_layer()"]
    layers.append(f"linear({width}, {classes}, 9)")
    return f"""X = randn(1, [{batch}, {feat}])
y = argmax(randn(2, [{batch}, {classes}]), 1)
model = chain({", ".join(layers)})
train {steps} {{
  adam(cross_entropy(apply(model, X), y), model, 0.001, 0.9, 0.999, 1e-8)
}}
"""


def lm(d, t, batch, depth=1, heads=2, vocab=256, steps=12, metric=False, swiglu=False):
    block = (
        f"residual(chain(rms_norm({d}, 1), causal_attention({d}, {heads}, 1))),\n"
        + (
            f"  residual(chain(rms_norm({d}, 1), swiglu({d}, {4 * d}, 2))),\n"
            if swiglu
            else f"  residual(chain(rms_norm({d}, 1), linear({d}, {4 * d}, 2), relu_layer(), linear({4 * d}, {d}, 3))),\n"
        )
    )
    m = "\n  loss_metric = cross_entropy(apply(model, X), Y)" if metric else ""
    return f"""X = argmax(randn(1, [{batch}, {t}, {vocab}]), 2)
Y = argmax(randn(2, [{batch}, {t}, {vocab}]), 2)
model = chain(
  embed({vocab}, {d}, 0),
  {"  ".join([block] * depth)}  rms_norm({d}, 1),
  linear({d}, {vocab}, 4),
)
reinit(model, "all_layers", 0.02, 5)
train {steps} {{
  adam(cross_entropy(apply(model, X), Y), model, 0.001, 0.9, 0.999, 1e-8){m}
}}
"""


def cases():
    out = []
    for w in [8, 64, 256, 1024]:
        for b in [1, 32, 512]:
            out.append((f"mlp w{w} b{b}", mlp(w, b), None))
    for d, t, b, depth in [
        (16, 16, 4, 1), (32, 16, 8, 1), (64, 32, 8, 1), (64, 64, 4, 2),
        (128, 32, 8, 1), (128, 64, 8, 2), (256, 32, 4, 1), (256, 64, 8, 1),
        (64, 128, 4, 1), (32, 32, 32, 3), (128, 16, 32, 1), (256, 16, 16, 2),
    ]:
        out.append((f"lm d{d} T{t} B{b} L{depth}", lm(d, t, b, depth, steps=8 if d >= 256 else 12), None))
    # Longer sequences with several heads: T >= 256 runs the fused attention
    # kernel (nn/attention.rs, FUSED_MIN_SCORES), which the loops above never do.
    for d, t, b, depth, heads in [(128, 256, 4, 2, 4), (64, 512, 2, 2, 4), (256, 256, 2, 4, 4)]:
        out.append((f"lm d{d} T{t} B{b} L{depth} h{heads}", lm(d, t, b, depth, heads=heads, steps=5), None))
    out.append(("lm d64 T32 B8 + metric", lm(64, 32, 8, metric=True), None))
    out.append(("lm d128 T32 B8 swiglu", lm(128, 32, 8, swiglu=True), None))
    for ex in ["tiny_mlp", "tiny_lm", "logistic_regression", "gpt2_block", "llama_block",
               "moe_block", "lora_finetune", "functions_block", "engram_lm"]:
        p = os.path.join(ROOT, "examples", ex + ".mlpl")
        if os.path.exists(p):
            out.append((f"example {ex}", open(p).read(), os.path.dirname(p)))
    # Stress cases near the 0.5 GB and 2 GB limits: wide MLPs at large batches.
    for w, b, depth in [(2048, 128, 2), (3072, 128, 2), (4096, 64, 2), (4096, 128, 3), (5120, 64, 2), (6144, 64, 2)]:
        out.append((f"stress mlp w{w} b{b} L{depth}", mlp(w, b, depth, steps=STRESS_STEPS), None))
    out.append(("stress lm d256 T128 B32", lm(256, 128, 32, steps=STRESS_STEPS), None))
    return out[:12] + out[24:29] if QUICK else out



def measured_loops(profile):
    loops = {}
    for m in re.finditer(r"train loop at line (\d+): (\d+) iterations in ([\d.]+) ms.*?\n(    .*)", profile):
        line, iters, wall, rest = int(m.group(1)), int(m.group(2)), float(m.group(3)), m.group(4)
        r = re.search(r"median ([\d.]+) ms", rest)
        if r:
            loops[line] = (float(r.group(1)) / 1e3, True)
        else:
            loops[line] = (wall / 1e3 / max(iters, 1), False)
    return loops


def run(name, src, data_dir):
    path = os.path.join(OUT, re.sub(r"[^a-z0-9]+", "_", name.lower()) + ".mlpl")
    open(path, "w").write(src)
    dd = ["--data-dir", data_dir] if data_dir else []
    est = subprocess.run([BIN, "estimate", "--json", "--calibration", CAL, path],
                         capture_output=True, text=True)
    ests = [json.loads(l) for l in est.stdout.splitlines() if l.startswith("{")]
    t0 = time.time()
    p = subprocess.Popen([BIN, "run", "--profile", *dd, path],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.time() - t0
    peak = usage.ru_maxrss * 1024.0
    loops = measured_loops(err)
    rows = []
    for e in ests:
        if e["line"] not in loops:
            continue
        secs, captured = loops[e["line"]]
        # The estimate of the mode the program predicts (what the editor shows).
        predicted = e.get("captured", True)
        t_est = e["seconds"][1] if "seconds" in e else e["captured_seconds"][1]
        m_est = e["memory_bytes"] if predicted else e["interpreted_memory_bytes"]
        rows.append({
            "name": name if len(ests) == 1 else f"{name}:{e['line']}",
            "captured": captured, "predicted_captured": predicted, "status": status, "wall_s": wall,
            "kernels": e["kernels"], "batch_known": e["batch_known"],
            "est_step_s": t_est, "step_s": secs, "time_ratio": t_est / secs,
            "est_mem": m_est, "peak_rss": peak, "mem_ratio": m_est / peak,
        })
    if not rows and status == 0 and est.returncode == 0 and not ests:
        # The program runs, and `mlpl estimate` has nothing to say: its `train`
        # loops update arrays, not a model (hand-written gradients, or an
        # optimizer over a list of parameters), which the estimates do not cover.
        rows.append({"name": name, "skipped": "its train loop trains no model"})
    elif not rows:
        rows.append({"name": name, "error": (est.stderr + err)[-300:], "status": status})
    return rows


def main():
    if sys.argv[1] == "--report":
        report(json.load(open(sys.argv[2])))
        return
    if sys.argv[1] == "--rounds":
        rounds([json.load(open(p)) for p in sys.argv[2:]])
        return
    os.makedirs(OUT, exist_ok=True)
    results = []
    for name, src, data_dir in cases():
        for r in run(name, src, data_dir):
            results.append(r)
            if "skipped" in r:
                print(f"{r['name']:34} skipped: {r['skipped']}", file=sys.stderr)
            elif "error" in r:
                print(f"{r['name']:34} ERROR {r['error']!r}", file=sys.stderr)
            else:
                print(f"{r['name']:34} step {r['step_s']*1e3:9.3f} ms est {r['est_step_s']*1e3:9.3f} "
                      f"(x{r['time_ratio']:.2f})  peak {r['peak_rss']/1e6:8.1f} MB est {r['est_mem']/1e6:8.1f} "
                      f"(x{r['mem_ratio']:.2f}){'' if r['captured'] else '  [not captured]'}", file=sys.stderr)
    json.dump(results, open(os.path.join(OUT, "results.json"), "w"), indent=1)
    report(results)


def report(results):
    ok = [r for r in results if "error" not in r and "skipped" not in r]
    skipped = [r for r in results if "skipped" in r]
    print("| loop | captured | kernels | step measured | step estimated | ratio | peak RSS | memory estimated | ratio | 0.5 GB | 2 GB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
    wrong = 0
    for r in ok:
        verdicts = []
        for lim in LIMITS:
            v, right = verdict(r["est_mem"], r["peak_rss"], lim)
            wrong += not right
            verdicts.append(v + ("" if right else " **WRONG**"))
        cap = 'yes' if r['captured'] else 'no'
        if r.get('predicted_captured', r['captured']) != r['captured']:
            cap += ' (predicted ' + ('yes' if r['predicted_captured'] else 'no') + ')'
        print(f"| {r['name']} | {cap} | {r['kernels']:.0f} | {r['step_s']*1e3:.3g} ms | "
              f"{r['est_step_s']*1e3:.3g} ms | {r['time_ratio']:.2f} | {r['peak_rss']/1e6:.0f} MB | "
              f"{r['est_mem']/1e6:.0f} MB | {r['mem_ratio']:.2f} | {verdicts[0]} | {verdicts[1]} |")
    tr = sorted(r["time_ratio"] for r in ok)
    mr = sorted(r["mem_ratio"] for r in ok)
    n = len(ok)
    med = lambda v: v[len(v) // 2] if v else float("nan")
    t_in = sum(0.67 <= x <= 1.5 for x in tr)
    m_in = sum(1 / 1.5 <= x <= 1.5 for x in mr)
    print()
    failed = len(results) - n - len(skipped)
    print(f"loops: {n} ({failed} failed to run or estimate; not estimated: "
          + (", ".join(f"{r['name']} ({r['skipped']})" for r in skipped) or "none") + ")")
    print(f"time per step, estimate / measured: median {med(tr):.2f}, range {tr[0]:.2f} – {tr[-1]:.2f}, within [0.67, 1.5]: {t_in} of {n} ({100 * t_in / max(n, 1):.0f}%)")
    print(f"memory, estimate / peak RSS: median {med(mr):.2f}, range {mr[0]:.2f} – {mr[-1]:.2f}, within 1.5x: {m_in} of {n} ({100 * m_in / max(n, 1):.0f}%)")
    print(f"verdicts under 0.5 GB and 2 GB (the editor's, margin {MARGIN}): {2 * n - wrong} of {2 * n} right")
    mis = sum(r.get('predicted_captured', r['captured']) != r['captured'] for r in ok)
    print(f"capture predicted right for {n - mis} of {n} loops")
    worst = sorted(ok, key=lambda r: abs(__import__('math').log(r['time_ratio'])), reverse=True)[:5]
    print("worst time ratios: " + ", ".join(f"{r['name']} {r['time_ratio']:.2f}" for r in worst))


def rounds(runs):
    """Per loop, the median of its ratios over the rounds (each round had its
    own calibration), reported like one run; then each round's summary."""
    by = {}
    order = []
    for run in runs:
        for r in run:
            if "error" in r or "skipped" in r:
                continue
            if r["name"] not in by:
                order.append(r["name"])
            by.setdefault(r["name"], []).append(r)
    med = lambda v: sorted(v)[len(v) // 2] if len(v) % 2 else 0.5 * sum(sorted(v)[len(v) // 2 - 1:len(v) // 2 + 1])
    merged = [r for r in runs[0] if "skipped" in r]
    for name in order:
        rs = by[name]
        m = dict(rs[0])
        for key in ["step_s", "est_step_s", "time_ratio", "peak_rss", "est_mem", "mem_ratio"]:
            m[key] = med([r[key] for r in rs])
        m["time_ratios"] = [r["time_ratio"] for r in rs]
        merged.append(m)
    print(f"## {len(runs)} rounds: per loop the median over the rounds "
          "(of each column on its own: a ratio is the median ratio, not the quotient of the medians)")
    print()
    report(merged)
    print()
    print("per loop, time ratio in each round: " + "; ".join(
        f"{m['name']} " + "/".join(f"{x:.2f}" for x in m["time_ratios"]) for m in merged if "time_ratios" in m))
    for i, run in enumerate(runs):
        ok = [r for r in run if "error" not in r and "skipped" not in r]
        tr = sorted(r["time_ratio"] for r in ok)
        if not tr:
            continue
        t_in = sum(0.67 <= x <= 1.5 for x in tr)
        print(f"round {i + 1}: time within [0.67, 1.5]: {t_in} of {len(tr)} ({100 * t_in / len(tr):.0f}%), "
              f"median {tr[len(tr) // 2]:.2f}, range {tr[0]:.2f} – {tr[-1]:.2f}")


main()
