"""NumPy float32 matmul at the sizes of devices/examples/bench_gemm.rs (not a test).

Prints `numpy matmul N GFLOPS` for N = 64..1024 and `numpy overhead_ns add4 NS`
(a + b on 4-element arrays), in the same format as the Rust bench, using the
same method: best of 5 batches of about 0.15 s each after a short warm-up.
Run it through bench/devices/run.sh (which clears OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE so OpenBLAS picks its own kernels for this CPU).
"""

import time

import numpy as np

SIZES = [64, 128, 256, 512, 1024]


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


def main():
    for n in SIZES:
        a = data(n * n, 1).reshape(n, n)
        b = data(n * n, 2).reshape(n, n)
        t = time_per_call(lambda: a @ b)
        print(f"numpy matmul {n} {2.0 * n**3 / t / 1e9:.2f}", flush=True)
    x, y = data(4, 3), data(4, 4)
    t = time_per_call(lambda: x + y)
    print(f"numpy overhead_ns add4 {t * 1e9:.0f}", flush=True)


if __name__ == "__main__":
    main()
