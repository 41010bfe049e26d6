"""NumPy (OpenBLAS) or PyTorch (torch.mm: oneDNN/MKL) f32 matmul on the cases of
devices/examples/bench_gemm.rs (not a test).

Usage: python gemm_peers.py numpy|torch CASE...   (a case is `MxNxK.LL`, as in
bench_gemm.rs: C [M, N] = op(A)·op(B), `LL` the layouts of A and B, `n` stored
as is, `t` stored transposed and passed as a transposed view, which both
libraries hand to their BLAS as a transpose flag, not a copy).

Prints `numpy matmul CASE GFLOPS` (or `torch ...`) per case and
`numpy overhead_ns add4 NS` (a + b on 4-element arrays), in the format of the
Rust bench, timed the same way: best of 5 batches of about 0.15 s each after a
short warm-up. Run it through bench/devices/run.sh (which clears
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE so OpenBLAS picks its own kernels for
this CPU, and gives every library 2 threads).

With `MLPL_BENCH_COPIES=N` the calls cycle through `N` copies of each case's
operands, as `bench_gemm` does with the same variable: operands that earlier
work left in memory rather than in the cache, as in a training step.
"""

import os
import sys
import time

import numpy as np


def time_per_call(f):
    f()
    start = time.perf_counter()
    reps = 0
    while time.perf_counter() - start < 0.05:
        f()
        reps += 1
    per = (time.perf_counter() - start) / reps
    reps = max(1, int(0.15 / per))
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(reps):
            f()
        best = min(best, (time.perf_counter() - t) / reps)
    return best


def data(n, seed):
    i = np.arange(n, dtype=np.uint64)
    return (((i * 2654435761 + seed) % (1 << 32)) % 1000).astype(np.float32) / 1000.0 - 0.5


def parse(case):
    sizes, _, layouts = case.partition(".")
    m, n, k = (int(s) for s in sizes.split("x"))
    layouts = layouts or "nn"
    return m, n, k, layouts[0] == "t", layouts[1] == "t"


def main():
    who, cases = sys.argv[1], sys.argv[2:]
    if who == "torch":
        import torch

        torch.set_num_threads(int(os.environ.get("PEER_THREADS", "2")))
        asarray, mm = torch.from_numpy, torch.mm
    elif who == "numpy":
        asarray, mm = (lambda a: a), np.matmul
    else:
        raise SystemExit(f"unknown peer {who}")
    copies = max(1, int(os.environ.get("MLPL_BENCH_COPIES", "1") or "1"))
    for case in cases:
        m, n, k, ta, tb = parse(case)
        operands = []
        for _ in range(copies):
            a = asarray(data(m * k, 1).reshape((k, m) if ta else (m, k)))
            b = asarray(data(k * n, 2).reshape((n, k) if tb else (k, n)))
            operands.append(((a.T if ta else a), (b.T if tb else b)))
        if copies == 1:
            a, b = operands[0]
            t = time_per_call(lambda: mm(a, b))
        else:
            turn = [0]

            def call():
                a, b = operands[turn[0]]
                turn[0] = (turn[0] + 1) % copies
                mm(a, b)

            t = time_per_call(call)
        print(f"{who} matmul {case} {2.0 * m * n * k / t / 1e9:.2f}", flush=True)
    x, y = asarray(data(4, 3)), asarray(data(4, 4))
    t = time_per_call(lambda: x + y)
    print(f"{who} overhead_ns add4 {t * 1e9:.0f}", flush=True)


if __name__ == "__main__":
    main()
