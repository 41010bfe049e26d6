"""Peers of the MLPL training benchmark: the same tiny transformer LM step in
PyTorch (eager and torch.compile), JAX (jit of the whole step) and MLX
(mx.compile). Prints one JSON line: {"impl", "d", "ms_per_step"} (median over
timed steps after warm-up).

Usage: python peers.py IMPL D STEPS   (IMPL: torch, torch_compile, jax, mlx)
"""
import json
import statistics
import sys
import time

import numpy as np

V, T, B = 280, 32, 64


def data():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(B, T)).astype(np.int32)
    y = rng.integers(0, 256, size=(B, T)).astype(np.int32)
    return x, y


def time_steps(step, steps, sync):
    for _ in range(3):
        step()
    sync()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def run_torch(d, steps, compiled):
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)

    class RMS(torch.nn.Module):
        def forward(self, x):
            return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-8)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(V, d)
            self.q = torch.nn.Linear(d, d, bias=False)
            self.k = torch.nn.Linear(d, d, bias=False)
            self.v = torch.nn.Linear(d, d, bias=False)
            self.o = torch.nn.Linear(d, d, bias=False)
            self.up = torch.nn.Linear(d, 4 * d)
            self.down = torch.nn.Linear(4 * d, d)
            self.head = torch.nn.Linear(d, V)
            self.norm = RMS()
            self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), 1))

        def forward(self, x):
            h = self.emb(x)
            a = self.norm(h)
            s = self.q(a) @ self.k(a).transpose(-1, -2) / d ** 0.5
            s = s.masked_fill(self.mask, -1e9)
            h = h + self.o(torch.softmax(s, -1) @ self.v(a))
            h = h + self.down(torch.relu(self.up(self.norm(h))))
            return self.head(self.norm(h))

    model = Block()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = (torch.from_numpy(a).long() for a in data())

    def step_fn():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    step = torch.compile(step_fn) if compiled else step_fn
    return time_steps(step, steps, lambda: None)


def run_jax(d, steps):
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(0)
    ks = jax.random.split(key, 8)
    init = lambda k, shape: 0.02 * jax.random.normal(k, shape, jnp.float32)
    params = {
        "emb": init(ks[0], (V, d)), "q": init(ks[1], (d, d)), "k": init(ks[2], (d, d)),
        "v": init(ks[3], (d, d)), "o": init(ks[4], (d, d)), "up": init(ks[5], (d, 4 * d)),
        "up_b": jnp.zeros(4 * d), "down": init(ks[6], (4 * d, d)), "down_b": jnp.zeros(d),
        "head": init(ks[7], (d, V)), "head_b": jnp.zeros(V),
    }
    mask = jnp.triu(jnp.ones((T, T), bool), 1)
    rms = lambda x: x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-8)

    def loss_fn(p, x, y):
        h = p["emb"][x]
        a = rms(h)
        s = (a @ p["q"]) @ jnp.swapaxes(a @ p["k"], -1, -2) / d ** 0.5
        s = jnp.where(mask, -1e9, s)
        h = h + (jax.nn.softmax(s, -1) @ (a @ p["v"])) @ p["o"]
        h = h + jax.nn.relu(rms(h) @ p["up"] + p["up_b"]) @ p["down"] + p["down_b"]
        logits = rms(h) @ p["head"] + p["head_b"]
        logp = jax.nn.log_softmax(logits, -1)
        return -jnp.take_along_axis(logp, y[..., None], -1).mean()

    b1, b2, eps, lr = 0.9, 0.999, 1e-8, 1e-3

    @jax.jit
    def step(p, m, v, t, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        t = t + 1
        m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
        p = jax.tree_util.tree_map(
            lambda p, m, v: p - lr * (m / (1 - b1 ** t)) / (jnp.sqrt(v / (1 - b2 ** t)) + eps), p, m, v)
        return p, m, v, t, loss

    x, y = (jnp.asarray(a) for a in data())
    state = [params, jax.tree_util.tree_map(jnp.zeros_like, params), jax.tree_util.tree_map(jnp.zeros_like, params), 0.0]

    def one():
        state[0], state[1], state[2], state[3], loss = step(state[0], state[1], state[2], state[3], x, y)
        state.append(loss)
        del state[4:]

    def sync():
        if len(state) > 4:
            state[4].block_until_ready()
        jax.tree_util.tree_map(lambda a: a.block_until_ready(), state[0])

    return time_steps(one, steps, sync)


def run_mlx(d, steps):
    import mlx.core as mx
    import mlx.nn as nn
    import mlx.optimizers as optim

    mx.random.seed(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, d)
            self.q = nn.Linear(d, d, bias=False)
            self.k = nn.Linear(d, d, bias=False)
            self.v = nn.Linear(d, d, bias=False)
            self.o = nn.Linear(d, d, bias=False)
            self.up = nn.Linear(d, 4 * d)
            self.down = nn.Linear(4 * d, d)
            self.head = nn.Linear(d, V)

        def __call__(self, x):
            rms = lambda z: z * mx.rsqrt((z * z).mean(-1, keepdims=True) + 1e-8)
            mask = mx.triu(mx.ones((T, T)), 1) * -1e9
            h = self.emb(x)
            a = rms(h)
            s = self.q(a) @ self.k(a).transpose(0, 2, 1) / d ** 0.5 + mask
            h = h + self.o(mx.softmax(s, -1) @ self.v(a))
            h = h + self.down(nn.relu(self.up(rms(h))))
            return self.head(rms(h))

    model = Block()
    opt = optim.Adam(learning_rate=1e-3)
    x, y = (mx.array(a) for a in data())

    def loss_fn(model, x, y):
        return nn.losses.cross_entropy(model(x), y).mean()

    loss_and_grad = nn.value_and_grad(model, loss_fn)
    state = [model.state, opt.state]

    def raw_step(x, y):
        loss, grads = loss_and_grad(model, x, y)
        opt.update(model, grads)
        return loss

    step = mx.compile(raw_step, inputs=state, outputs=state)
    out = []

    def one():
        out[:] = [step(x, y)]

    def sync():
        mx.eval(state, *out)

    return time_steps(one, steps, sync)


def main():
    impl, d, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if impl == "torch":
        import torch
        torch.set_num_threads(2)
        ms = run_torch(d, steps, False)
    elif impl == "torch_compile":
        import torch
        torch.set_num_threads(2)
        ms = run_torch(d, steps, True)
    elif impl == "jax":
        ms = run_jax(d, steps)
    elif impl == "mlx":
        ms = run_mlx(d, steps)
    else:
        raise SystemExit(f"unknown impl {impl}")
    print(json.dumps({"impl": impl, "d": d, "ms_per_step": round(ms, 3)}), flush=True)


if __name__ == "__main__":
    main()
