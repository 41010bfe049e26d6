"""Peers of the MLPL training benchmark: the same transformer LM step in PyTorch
(eager and torch.compile), JAX (jit of the whole step) and MLX (mx.compile), as
a user of each writes it (attention through the library's fused causal
attention: `F.scaled_dot_product_attention(..., is_causal=True)`,
`jax.nn.dot_product_attention(..., is_causal=True)`,
`mx.fast.scaled_dot_product_attention(..., mask="causal")`).

The model of bench/train/lm.mlpl.in: V = 280, BLOCKS blocks of (RMSNorm →
HEADS-head causal attention, no biases → residual, RMSNorm → MLP 4d ReLU with
biases → residual), final RMSNorm → linear to V with bias, cross-entropy over
B windows of T tokens, Adam 1e-3; weights drawn from N(0, 0.02²), biases zero
(as MLPL's `reinit(model, "all_layers", 0.02, seed)`).

Usage: python peers.py IMPL CONFIG STEPS [WARMUP]
  IMPL: torch, torch_compile, jax, mlx
  CONFIG: BLOCKSxHEADS-dD-TT-bB, e.g. 1x1-d32-T32-b64 (the tiny LM), 4x4-d512-T1024-b2
Prints one JSON line: {"impl", "config", "ms_per_step" (median over STEPS
timed steps after WARMUP, default 3, untimed ones), "peak_mb" (the process's
peak RSS during the steps minus its RSS just before the first one, MiB)}.
"""
import json
import re
import statistics
import sys
import time

import numpy as np

V = 280


def parse_config(text):
    m = re.fullmatch(r"(\d+)x(\d+)-d(\d+)-T(\d+)-b(\d+)", text)
    if not m:
        raise SystemExit(f"config `{text}` is not BLOCKSxHEADS-dD-TT-bB (e.g. 4x4-d256-T256-b8)")
    return tuple(int(g) for g in m.groups())


def data(T, B):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(B, T)).astype(np.int32)
    y = rng.integers(0, 256, size=(B, T)).astype(np.int32)
    return x, y


def status_kb(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def time_steps(step, steps, sync, warmup):
    """Median ms of `steps` timed steps after `warmup` untimed ones, and the
    peak RSS (MiB) above the RSS before the first step."""
    try:  # reset VmHWM to the current RSS (Linux: "5" clears the peak)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    base = status_kb("VmRSS")
    for _ in range(warmup):
        step()
    sync()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    peak = status_kb("VmHWM")
    return statistics.median(times), (peak - base) / 1024


def run_torch(cfg, steps, warmup, compiled):
    import torch
    import torch.nn.functional as F

    blocks, heads, d, T, B = cfg
    hd = d // heads
    torch.manual_seed(0)

    def rms(x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-8)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q = torch.nn.Linear(d, d, bias=False)
            self.k = torch.nn.Linear(d, d, bias=False)
            self.v = torch.nn.Linear(d, d, bias=False)
            self.o = torch.nn.Linear(d, d, bias=False)
            self.up = torch.nn.Linear(d, 4 * d)
            self.down = torch.nn.Linear(4 * d, d)

        def forward(self, h):
            a = rms(h)
            split = lambda z: z.view(B, T, heads, hd).transpose(1, 2)
            y = F.scaled_dot_product_attention(split(self.q(a)), split(self.k(a)), split(self.v(a)), is_causal=True)
            h = h + self.o(y.transpose(1, 2).reshape(B, T, d))
            return h + self.down(torch.relu(self.up(rms(h))))

    class LM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(V, d)
            self.blocks = torch.nn.ModuleList(Block() for _ in range(blocks))
            self.head = torch.nn.Linear(d, V)
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    torch.nn.init.zeros_(p)
                else:
                    torch.nn.init.normal_(p, 0.0, 0.02)

        def forward(self, x):
            h = self.emb(x)
            for b in self.blocks:
                h = b(h)
            return self.head(rms(h))

    model = LM()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = (torch.from_numpy(a).long() for a in data(T, B))

    def step_fn():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    step = torch.compile(step_fn) if compiled else step_fn
    return time_steps(step, steps, lambda: None, warmup)


def run_jax(cfg, steps, warmup):
    import jax
    import jax.numpy as jnp

    blocks, heads, d, T, B = cfg
    hd = d // heads
    keys = iter(jax.random.split(jax.random.PRNGKey(0), 2 + 6 * blocks))
    init = lambda shape: 0.02 * jax.random.normal(next(keys), shape, jnp.float32)
    params = {
        "emb": init((V, d)), "head": init((d, V)), "head_b": jnp.zeros(V),
        "blocks": [
            {"q": init((d, d)), "k": init((d, d)), "v": init((d, d)), "o": init((d, d)),
             "up": init((d, 4 * d)), "up_b": jnp.zeros(4 * d),
             "down": init((4 * d, d)), "down_b": jnp.zeros(d)}
            for _ in range(blocks)
        ],
    }
    rms = lambda x: x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-8)
    split = lambda z: z.reshape(B, T, heads, hd)

    def loss_fn(p, x, y):
        h = p["emb"][x]
        for b in p["blocks"]:
            a = rms(h)
            att = jax.nn.dot_product_attention(split(a @ b["q"]), split(a @ b["k"]), split(a @ b["v"]), is_causal=True)
            h = h + att.reshape(B, T, d) @ b["o"]
            h = h + jax.nn.relu(rms(h) @ b["up"] + b["up_b"]) @ b["down"] + b["down_b"]
        logits = rms(h) @ p["head"] + p["head_b"]
        logp = jax.nn.log_softmax(logits, -1)
        return -jnp.take_along_axis(logp, y[..., None], -1).mean()

    b1, b2, eps, lr = 0.9, 0.999, 1e-8, 1e-3
    tree_map = jax.tree_util.tree_map

    @jax.jit
    def step(p, m, v, t, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        t = t + 1
        m = tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
        v = tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
        p = tree_map(lambda p, m, v: p - lr * (m / (1 - b1 ** t)) / (jnp.sqrt(v / (1 - b2 ** t)) + eps), p, m, v)
        return p, m, v, t, loss

    x, y = (jnp.asarray(a) for a in data(T, B))
    state = [params, tree_map(jnp.zeros_like, params), tree_map(jnp.zeros_like, params), 0.0]

    def one():
        state[0], state[1], state[2], state[3], loss = step(state[0], state[1], state[2], state[3], x, y)
        state.append(loss)
        del state[4:]

    def sync():
        if len(state) > 4:
            state[4].block_until_ready()
        tree_map(lambda a: a.block_until_ready(), state[0])

    return time_steps(one, steps, sync, warmup)


def run_mlx(cfg, steps, warmup):
    import mlx.core as mx
    import mlx.nn as nn
    import mlx.optimizers as optim

    blocks, heads, d, T, B = cfg
    hd = d // heads
    mx.random.seed(0)
    rms = lambda z: z * mx.rsqrt((z * z).mean(-1, keepdims=True) + 1e-8)
    split = lambda z: z.reshape(B, T, heads, hd).transpose(0, 2, 1, 3)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(d, d, bias=False)
            self.k = nn.Linear(d, d, bias=False)
            self.v = nn.Linear(d, d, bias=False)
            self.o = nn.Linear(d, d, bias=False)
            self.up = nn.Linear(d, 4 * d)
            self.down = nn.Linear(4 * d, d)

        def __call__(self, h):
            a = rms(h)
            y = mx.fast.scaled_dot_product_attention(
                split(self.q(a)), split(self.k(a)), split(self.v(a)), scale=hd ** -0.5, mask="causal")
            h = h + self.o(y.transpose(0, 2, 1, 3).reshape(B, T, d))
            return h + self.down(nn.relu(self.up(rms(h))))

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, d)
            self.blocks = [Block() for _ in range(blocks)]
            self.head = nn.Linear(d, V)

        def __call__(self, x):
            h = self.emb(x)
            for b in self.blocks:
                h = b(h)
            return self.head(rms(h))

    model = LM()
    normal = nn.init.normal(0.0, 0.02)
    model.apply(lambda p: normal(p) if p.ndim > 1 else mx.zeros_like(p))
    opt = optim.Adam(learning_rate=1e-3)
    x, y = (mx.array(a) for a in data(T, B))

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

    mx.eval(model.parameters())
    return time_steps(one, steps, sync, warmup)


def main():
    impl, config, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    warmup = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    cfg = parse_config(config)
    if impl in ("torch", "torch_compile"):
        import torch
        torch.set_num_threads(2)
        ms, peak = run_torch(cfg, steps, warmup, impl == "torch_compile")
    elif impl == "jax":
        ms, peak = run_jax(cfg, steps, warmup)
    elif impl == "mlx":
        ms, peak = run_mlx(cfg, steps, warmup)
    else:
        raise SystemExit(f"unknown impl {impl}")
    print(json.dumps({"impl": impl, "config": config, "ms_per_step": round(ms, 3), "peak_mb": round(peak, 1)}), flush=True)


if __name__ == "__main__":
    main()
