"""The numpy side of the interpreter-overhead benchmark: the same loops as
runtime/benches/interp.rs, printing one JSON line per case."""
import json
import sys
import time

import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def cases():
    f32 = np.float32
    yield "scalar_add", 200_000, (lambda: 0.0), (lambda x: x + 1)
    yield "vec8_add", 200_000, (lambda: np.zeros(8, f32)), (lambda x: x + f32(1))
    yield "vec8_exp_mul", 100_000, (lambda: np.zeros(8, f32)), (lambda x: np.exp(x * f32(0.5)) - f32(1))
    a16 = np.ones((16, 16), f32) / 16
    yield "mat16_matmul", 50_000, (lambda: np.ones((16, 16), f32)), (lambda x: x @ a16)
    a64 = np.ones((64, 64), f32) / 64
    yield "mat64_matmul", 10_000, (lambda: np.ones((64, 64), f32)), (lambda x: x @ a64)
    r = np.random.default_rng(1).standard_normal((32, 64)).astype(f32)
    yield "softmax_32x64", 20_000, (lambda: r), (lambda x: (softmax(x), x)[1])


def main():
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 3
    for _ in range(rounds):
        for name, iters, setup, body in cases():
            x = setup()
            start = time.perf_counter()
            for _ in range(iters):
                x = body(x)
            ns = (time.perf_counter() - start) * 1e9 / iters
            print(json.dumps({"impl": "numpy", "case": name, "ns_per_iter": round(ns, 1)}), flush=True)


if __name__ == "__main__":
    main()
