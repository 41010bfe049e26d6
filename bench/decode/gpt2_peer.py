"""GPT-2 decoding with transformers (PyTorch eager, key/value cache) for
bench/decode/run.sh (not a test).

Usage:
  python gpt2_peer.py make DIR LAYERS WIDTH HEADS VOCAB   write a random GPT-2
      (tied head, GELU, layer norm; seed 0) with save_pretrained into DIR
  python gpt2_peer.py decode DIR PROMPT NEW ROUNDS         time greedy decoding

`decode` times `generate` of 1 and of 1 + NEW tokens after the PROMPT-token
prompt (ids `7·i mod vocab`), ROUNDS times each, interleaved, and prints one
JSON line: the best per-token time over the rounds (the difference of the best
times, over NEW tokens), the prompt's time, and the generated ids.
"""

import json
import sys
import time

import torch
import transformers as tf


def make(out, layers, width, heads, vocab):
    torch.manual_seed(0)
    config = tf.GPT2Config(
        n_layer=layers,
        n_embd=width,
        n_head=heads,
        vocab_size=vocab,
        n_positions=1024,
        tie_word_embeddings=True,
        attn_pdrop=0.0,
        embd_pdrop=0.0,
        resid_pdrop=0.0,
    )
    tf.GPT2LMHeadModel(config).save_pretrained(out, safe_serialization=True)


def decode(path, prompt, new, rounds):
    torch.set_num_threads(2)
    model = tf.GPT2LMHeadModel.from_pretrained(path, dtype=torch.float32).eval()
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
    print(json.dumps({"impl": "torch", "ms_per_token": per_token * 1e3, "prompt_ms": best[1] * 1e3, "tokens": tokens}))


def main():
    what = sys.argv[1]
    if what == "make":
        make(sys.argv[2], *(int(a) for a in sys.argv[3:7]))
    elif what == "decode":
        decode(sys.argv[2], *(int(a) for a in sys.argv[3:6]))
    else:
        sys.exit(f"unknown command {what}: make | decode")


if __name__ == "__main__":
    main()
