"""Builds the tiny random Hugging Face checkpoints of examples/hf/<family>/ and
their reference JSON (run through scripts/hf-fixtures.sh, which makes the venv).

For each family: `save_pretrained` (fp32 safetensors, under 2 MB) and
`reference.json` with the inputs, logits, the cross-entropy loss, gradients of
a few parameters, those parameters after one `torch.optim.AdamW` step (lr 1e-3,
weight decay 0.01) and greedy generation tokens. Two AdamW references are
written: `adamw_all` decays every parameter (torch's default) and
`adamw_matrices` exempts biases, norm gains and GPT-OSS's sinks (the one-axis
parameters and the per-expert biases).
"""

import json
import pathlib
import sys

import torch
import transformers as tf

ROOT = pathlib.Path(__file__).resolve().parent.parent / "examples" / "hf"
T = 8          # tokens of the reference input
NEW = 6        # greedy tokens generated


def families():
    yield "llama", tf.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=48,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, max_position_embeddings=64, rms_norm_eps=1e-5,
        rope_theta=10000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0,
                      "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 16},
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
        initializer_range=0.3, bos_token_id=1, eos_token_id=2, pad_token_id=0), tf.LlamaForCausalLM
    yield "qwen3", tf.Qwen3Config(
        vocab_size=64, hidden_size=32, intermediate_size=48,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, max_position_embeddings=64, rms_norm_eps=1e-6,
        rope_theta=1000000.0, tie_word_embeddings=True,
        use_sliding_window=False,
        initializer_range=0.3, bos_token_id=1, eos_token_id=2, pad_token_id=0), tf.Qwen3ForCausalLM
    yield "gpt2", tf.GPT2Config(
        vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=4,
        activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0, layer_norm_epsilon=1e-5, tie_word_embeddings=True,
        initializer_range=0.3, bos_token_id=1, eos_token_id=2, pad_token_id=0), tf.GPT2LMHeadModel
    # Sliding (window 3 of the 8 positions) then full attention, sinks, YaRN
    # with a ramp over the frequencies, heads x head_dim != d, and a clamp limit
    # the gate and up projections reach.
    yield "gpt_oss", tf.GptOssConfig(
        vocab_size=64, hidden_size=32, intermediate_size=16,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=12, num_local_experts=4, num_experts_per_tok=2,
        sliding_window=3, layer_types=["sliding_attention", "full_attention"],
        max_position_embeddings=256, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "yarn", "rope_theta": 100.0, "factor": 4.0,
                         "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                         "original_max_position_embeddings": 64},
        swiglu_limit=1.5, attention_bias=True, tie_word_embeddings=False,
        initializer_range=0.3, bos_token_id=1, eos_token_id=2, pad_token_id=0), tf.GptOssForCausalLM


def exempt(name, p):
    """Biases, norm gains and sinks: one-axis parameters, and GPT-OSS's
    per-expert biases `[experts, n]`."""
    return p.ndim <= 1 or name.endswith("_bias")


def tolist(t):
    return t.detach().to(torch.float64).flatten().tolist()


def build(name, config, cls):
    torch.manual_seed(17)
    model = cls(config).to(torch.float32)
    # Random, non-trivial norms and biases, so their mapping is tested too.
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.ndim == 1 or pname.endswith("_bias"):
                p.add_(0.1 * torch.randn_like(p))
    model.eval()
    out = ROOT / name
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    for extra in ("generation_config.json",):
        (out / extra).unlink(missing_ok=True)

    g = torch.Generator().manual_seed(3)
    ids = torch.randint(3, config.vocab_size, (1, T + 1), generator=g)
    x, y = ids[:, :-1], ids[:, 1:]
    logits = model(input_ids=x).logits
    loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, config.vocab_size), y.reshape(-1))
    loss.backward()
    named = dict(model.named_parameters())
    watched = [n for n in named if named[n].ndim >= 1][:: max(1, len(named) // 6)]
    grads = {n: tolist(named[n].grad) for n in watched}

    ref = {
        "family": name,
        "x": x.flatten().tolist(),
        "y": y.flatten().tolist(),
        "logits_shape": list(logits.shape[1:]),
        "logits": tolist(logits[0]),
        "loss": loss.item(),
        "grads": grads,
    }
    before = {n: p.detach().clone() for n, p in named.items()}
    for key, groups in (
        ("adamw_all", [{"params": list(named.values())}]),
        ("adamw_matrices", [
            {"params": [p for n, p in named.items() if not exempt(n, p)]},
            {"params": [p for n, p in named.items() if exempt(n, p)],
             "weight_decay": 0.0}]),
    ):
        with torch.no_grad():
            for n, p in named.items():
                p.copy_(before[n])
        opt = torch.optim.AdamW(groups, lr=1e-3, weight_decay=0.01)
        opt.step()
        ref[key] = {n: tolist(named[n]) for n in watched}
    with torch.no_grad():
        for n, p in named.items():
            p.copy_(before[n])
        p.grad = None
    gen = model.generate(input_ids=x, max_new_tokens=NEW, do_sample=False,
                         eos_token_id=None, pad_token_id=0,
                         attention_mask=torch.ones_like(x))
    ref["greedy"] = gen[0, x.shape[1]:].tolist()
    ref["versions"] = {"torch": torch.__version__,
                       "transformers": tf.__version__}
    (out / "reference.json").write_text(json.dumps(ref) + "\n")
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"{name}: {size} bytes, loss {loss.item():.6f}, greedy {ref['greedy']}")


if __name__ == "__main__":
    wanted = set(sys.argv[1:])
    for name, config, cls in families():
        if not wanted or name in wanted:
            build(name, config, cls)
