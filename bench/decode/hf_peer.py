"""Decoding with transformers (PyTorch eager, key/value cache) for
bench/decode/run.sh (not a test).

Usage:
  python hf_peer.py make DIR MODEL      write a random checkpoint of MODEL
      (seed 0) with save_pretrained into DIR; MODEL is a preset name (see
      PRESETS) or LAYERSxWIDTHxHEADS, a GPT-2 of that size
  python hf_peer.py decode DIR PROMPT NEW ROUNDS   time loading and greedy decoding

`decode` loads the checkpoint as float32, then times `generate` of 1 and of
1 + NEW tokens after the PROMPT-token prompt (ids `7·i mod vocab`), ROUNDS
times each, interleaved, and prints one JSON line: the best per-token time
over the rounds (the difference of the best times, over NEW tokens), the
prompt's time, the load's time, the process's peak RSS over its RSS after
importing torch and transformers (MB), and the generated ids.
"""

import json
import re
import resource
import sys
import time

import torch
import transformers as tf


def gpt2(layers, width, heads):
    return tf.GPT2Config(
        n_layer=layers,
        n_embd=width,
        n_head=heads,
        vocab_size=50257,
        n_positions=1024,
        tie_word_embeddings=True,
        attn_pdrop=0.0,
        embd_pdrop=0.0,
        resid_pdrop=0.0,
    )


# The shapes of released checkpoints (their config.json), random weights.
# Llama and Qwen 3 are written in bfloat16, as released; GPT-2 in float32.
PRESETS = {
    "gpt2-small": lambda: (gpt2(12, 768, 12), torch.float32),
    "gpt2-medium": lambda: (gpt2(24, 1024, 16), torch.float32),
    # meta-llama/Llama-3.2-1B: GQA 32/8, llama3 rope scaling, tied head.
    "llama-3.2-1b": lambda: (
        tf.LlamaConfig(
            hidden_size=2048,
            intermediate_size=8192,
            num_hidden_layers=16,
            num_attention_heads=32,
            num_key_value_heads=8,
            head_dim=64,
            vocab_size=128256,
            max_position_embeddings=131072,
            rms_norm_eps=1e-5,
            rope_theta=500000.0,
            rope_scaling={
                "rope_type": "llama3",
                "factor": 32.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
            },
            tie_word_embeddings=True,
        ),
        torch.bfloat16,
    ),
    # Qwen/Qwen3-0.6B: GQA 16/8, head width 128, q/k norms, tied head.
    "qwen3-0.6b": lambda: (
        tf.Qwen3Config(
            hidden_size=1024,
            intermediate_size=3072,
            num_hidden_layers=28,
            num_attention_heads=16,
            num_key_value_heads=8,
            head_dim=128,
            vocab_size=151936,
            max_position_embeddings=40960,
            rms_norm_eps=1e-6,
            rope_theta=1000000.0,
            tie_word_embeddings=True,
        ),
        torch.bfloat16,
    ),
}


def make(out, model):
    torch.manual_seed(0)
    size = re.fullmatch(r"(\d+)x(\d+)x(\d+)", model)
    if size:
        config, dtype = gpt2(*(int(g) for g in size.groups())), torch.float32
    elif model in PRESETS:
        config, dtype = PRESETS[model]()
    else:
        sys.exit(f"unknown model {model}: LAYERSxWIDTHxHEADS or one of {', '.join(PRESETS)}")
    lm = tf.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    lm.to(dtype).save_pretrained(out, safe_serialization=True)
    print(sum(p.numel() for p in lm.parameters()))


def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def decode(path, prompt, new, rounds):
    torch.set_num_threads(2)
    baseline = rss_mb()
    start = time.perf_counter()
    model = tf.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    load_s = time.perf_counter() - start
    vocab = model.config.vocab_size
    ids = torch.tensor([[7 * i % vocab for i in range(prompt)]])

    def run(n):
        start = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(
                ids,
                # Every prompt position attends (token 0 is the pad id too).
                attention_mask=torch.ones_like(ids),
                max_new_tokens=n,
                min_new_tokens=n,
                do_sample=False,
                use_cache=True,
                pad_token_id=0,
            )
        return time.perf_counter() - start, out[0, prompt:].tolist()

    run(2)  # warm-up
    best = {1: float("inf"), 1 + new: float("inf")}
    tokens = []
    for _ in range(rounds):
        for n in best:
            t, toks = run(n)
            best[n] = min(best[n], t)
            if n > 1:
                tokens = toks
    per_token = (best[1 + new] - best[1]) / new
    print(
        json.dumps(
            {
                "impl": "torch",
                "ms_per_token": per_token * 1e3,
                "prompt_ms": best[1] * 1e3,
                "load_s": load_s,
                "peak_mb": rss_mb() - baseline,
                "tokens": tokens,
            }
        )
    )


def main():
    what = sys.argv[1]
    if what == "make":
        make(sys.argv[2], sys.argv[3])
    elif what == "decode":
        decode(sys.argv[2], *(int(a) for a in sys.argv[3:6]))
    else:
        sys.exit(f"unknown command {what}: make | decode")


if __name__ == "__main__":
    main()
