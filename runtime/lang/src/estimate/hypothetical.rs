//! Architectures for `estimate_hypothetical` (LANGUAGE §15.3, docs/estimates.md):
//! decoder-only transformers with RMS norms, grouped-query attention and a SwiGLU
//! feed-forward block (or a mixture of SwiGLU experts), in the Llama, Qwen 3 and
//! GPT-OSS shapes. The named ones are a table; a description
//! (`"llama(d = 4096, …)"`, `estimate::spec`) or a Hugging Face `config.json`
//! (read by the builtin, `builtins::feasibility`) gives any other.

use super::Estimate;

/// A decoder-only transformer's sizes and options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Architecture {
    /// The name users pass (a table name, or the family of a description).
    pub name: &'static str,
    /// Vocabulary size V.
    pub vocab: u64,
    /// Model width D.
    pub d: u64,
    /// Layers L.
    pub layers: u64,
    /// Feed-forward width F (of each expert, with experts).
    pub ff: u64,
    /// Attention heads H.
    pub heads: u64,
    /// Key/value heads KV.
    pub kv_heads: u64,
    /// Head width hd (D / H unless the architecture says otherwise).
    pub head_dim: u64,
    /// Whether the q/k/v projections have biases.
    pub qkv_bias: bool,
    /// Whether the output projection has a bias.
    pub o_bias: bool,
    /// Whether queries and keys are RMS-normed per head (Qwen 3).
    pub qk_norm: bool,
    /// Whether the output head is the embedding table.
    pub tied: bool,
    /// Whether each layer has one learned sink logit per head (GPT-OSS).
    pub sinks: bool,
    /// Experts E of the feed-forward block (0: one dense SwiGLU block).
    pub experts: u64,
    /// Experts each token is routed to (k).
    pub top_k: u64,
    /// Whether the router and the experts have biases (GPT-OSS).
    pub expert_bias: bool,
    /// The sliding window W of the sliding layers (0: none).
    pub window: u64,
    /// How many layers use the sliding window.
    pub sliding_layers: u64,
}

/// A Llama-shaped dense architecture: no biases, untied, no experts. The base
/// of the table's entries and of `llama(…)` descriptions.
pub const LLAMA: Architecture = Architecture {
    name: "llama",
    vocab: 0,
    d: 0,
    layers: 0,
    ff: 0,
    heads: 0,
    kv_heads: 0,
    head_dim: 0,
    qkv_bias: false,
    o_bias: false,
    qk_norm: false,
    tied: false,
    sinks: false,
    experts: 0,
    top_k: 0,
    expert_bias: false,
    window: 0,
    sliding_layers: 0,
};

/// Qwen 3: Llama with per-head q/k norms.
pub const QWEN3: Architecture = Architecture {
    name: "qwen3",
    qk_norm: true,
    ..LLAMA
};

/// GPT-OSS: biased attention with sinks and a biased mixture of experts.
pub const GPT_OSS: Architecture = Architecture {
    name: "gpt_oss",
    qkv_bias: true,
    o_bias: true,
    sinks: true,
    expert_bias: true,
    ..LLAMA
};

/// The families a description may start from, with their defaults.
pub const FAMILIES: &[Architecture] = &[LLAMA, QWEN3, GPT_OSS];

/// A dense, tied table entry (SmolLM, Llama 3.2, Qwen 2.5 style).
const fn tied(
    name: &'static str,
    vocab: u64,
    d: u64,
    layers: u64,
    ff: u64,
    heads: u64,
    kv_heads: u64,
) -> Architecture {
    Architecture {
        name,
        vocab,
        d,
        layers,
        ff,
        heads,
        kv_heads,
        head_dim: d / heads,
        tied: true,
        ..LLAMA
    }
}

/// The named architectures, in table order (LANGUAGE §15.3 and the larger
/// ones of docs/estimates.md).
pub const ARCHITECTURES: &[Architecture] = &[
    tied("smollm-135m", 49152, 576, 30, 1536, 9, 3),
    tied("smollm-360m", 49152, 960, 32, 2560, 15, 5),
    tied("smollm-1.7b", 49152, 2048, 24, 8192, 32, 32),
    tied("llama-3.2-1b", 128256, 2048, 16, 8192, 32, 8),
    Architecture {
        qkv_bias: true,
        ..tied("qwen-2.5-0.5b", 151936, 896, 24, 4864, 14, 2)
    },
    Architecture {
        tied: false,
        ..tied("llama-3-8b", 128256, 4096, 32, 14336, 32, 8)
    },
    Architecture {
        name: "qwen3-0.6b",
        vocab: 151936,
        d: 1024,
        layers: 28,
        ff: 3072,
        heads: 16,
        kv_heads: 8,
        head_dim: 128,
        tied: true,
        ..QWEN3
    },
    Architecture {
        name: "qwen3-8b",
        vocab: 151936,
        d: 4096,
        layers: 36,
        ff: 12288,
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        ..QWEN3
    },
    Architecture {
        name: "gpt-oss-20b",
        vocab: 201088,
        d: 2880,
        layers: 24,
        ff: 2880,
        heads: 64,
        kv_heads: 8,
        head_dim: 64,
        experts: 32,
        top_k: 4,
        window: 128,
        sliding_layers: 12,
        ..GPT_OSS
    },
    Architecture {
        name: "gpt-oss-120b",
        vocab: 201088,
        d: 2880,
        layers: 36,
        ff: 2880,
        heads: 64,
        kv_heads: 8,
        head_dim: 64,
        experts: 128,
        top_k: 4,
        window: 128,
        sliding_layers: 18,
        ..GPT_OSS
    },
];

/// The architecture called `name`.
pub fn lookup(name: &str) -> Option<&'static Architecture> {
    ARCHITECTURES.iter().find(|a| a.name == name)
}

/// The family `name` (`llama`, `qwen3`, `gpt_oss`) with its defaults.
pub fn family(name: &str) -> Option<&'static Architecture> {
    FAMILIES.iter().find(|a| a.name == name)
}

/// The comma-separated list of names, for E0105.
pub fn names() -> String {
    ARCHITECTURES
        .iter()
        .map(|a| a.name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Architecture {
    /// Width of the queries (and of the attention's context): H·hd.
    fn q_width(&self) -> f64 {
        (self.heads * self.head_dim) as f64
    }

    /// Width of the keys (and of the values): KV·hd.
    fn kv_width(&self) -> f64 {
        (self.kv_heads * self.head_dim) as f64
    }

    /// Parameters of the attention projections, biases included.
    fn attention_params(&self) -> f64 {
        let (d, q, kv) = (self.d as f64, self.q_width(), self.kv_width());
        let mut p = 2.0 * d * q + 2.0 * d * kv;
        if self.qkv_bias {
            p += q + 2.0 * kv;
        }
        if self.o_bias {
            p += d;
        }
        p
    }

    /// Parameters of one SwiGLU block (one expert), biases included.
    fn swiglu_params(&self) -> f64 {
        let (d, f) = (self.d as f64, self.ff as f64);
        3.0 * d * f
            + if self.expert_bias && self.experts > 0 {
                2.0 * f + d
            } else {
                0.0
            }
    }

    /// Parameters of the router (0 without experts).
    fn router_params(&self) -> f64 {
        let e = self.experts as f64;
        if self.experts == 0 {
            0.0
        } else {
            self.d as f64 * e + if self.expert_bias { e } else { 0.0 }
        }
    }

    /// Feed-forward blocks a token runs through: k of the experts, or the one block.
    fn active_blocks(&self) -> f64 {
        if self.experts == 0 {
            1.0
        } else {
            self.top_k as f64
        }
    }

    /// Parameters of one transformer layer that a token multiplies by: the
    /// attention projections, the router and its k experts (norm gains, q/k
    /// norms and sinks excluded).
    pub fn layer_params(&self) -> f64 {
        self.attention_params() + self.router_params() + self.active_blocks() * self.swiglu_params()
    }

    /// Parameters of one layer besides its projections and experts: two norm
    /// gains, the q/k norms and the sinks.
    fn layer_extras(&self) -> f64 {
        let mut p = 2.0 * self.d as f64;
        if self.qk_norm {
            p += 2.0 * self.head_dim as f64;
        }
        if self.sinks {
            p += self.heads as f64;
        }
        p
    }

    /// Total parameters: embeddings (and an untied head), layers with all their
    /// experts, norm gains.
    pub fn params(&self) -> f64 {
        let (v, d, l) = (self.vocab as f64, self.d as f64, self.layers as f64);
        let blocks = self.experts.max(1) as f64;
        let layer = self.attention_params()
            + self.router_params()
            + blocks * self.swiglu_params()
            + self.layer_extras();
        let head = if self.tied { 0.0 } else { v * d };
        v * d + head + l * layer + d
    }

    /// Parameters active for one token: all but the experts it is not routed to
    /// and the embedding table it only gathers from (unless the table is also
    /// the head): GPT-OSS-20B's 3.6 B of 20.9 B.
    pub fn active_params(&self) -> f64 {
        let idle = (self.experts.max(1) as f64 - self.active_blocks()) * self.swiglu_params();
        let table = if self.tied {
            0.0
        } else {
            (self.vocab * self.d) as f64
        };
        self.params() - self.layers as f64 * idle - table
    }

    /// Keys summed over the layers that one query of a length-`seq` sequence
    /// attends to: S on full layers, min(S, W) on sliding ones.
    fn attended(&self, seq: f64) -> f64 {
        let sliding = self.sliding_layers.min(self.layers) as f64;
        let w = if self.window == 0 {
            seq
        } else {
            seq.min(self.window as f64)
        };
        (self.layers as f64 - sliding) * seq + sliding * w
    }

    /// Parameters LoRA of rank `r` trains: adapters on every projection of the
    /// attention and of every expert (or the one SwiGLU block).
    fn lora_params(&self, r: f64) -> f64 {
        let (d, f, q, kv) = (
            self.d as f64,
            self.ff as f64,
            self.q_width(),
            self.kv_width(),
        );
        let blocks = self.experts.max(1) as f64;
        self.layers as f64 * r * (2.0 * (d + q) + 2.0 * (d + kv) + blocks * 3.0 * (d + f))
    }

    /// Elements one token keeps per layer for the backward pass, besides the
    /// attention scores: two norms, queries, keys and values, context and
    /// output, the normed queries and keys (Qwen 3), the feed-forward block
    /// (gate, up, activation, product and output: LANGUAGE §15.2's SwiGLU and
    /// MoE rows) and two residual sums.
    fn layer_activations(&self) -> f64 {
        let (d, f, q, kv) = (
            self.d as f64,
            self.ff as f64,
            self.q_width(),
            self.kv_width(),
        );
        let mut a = 2.0 * (d + 1.0) + 2.0 * q + d + 2.0 * kv + 2.0 * d;
        if self.qk_norm {
            a += q + kv;
        }
        a += if self.experts == 0 {
            4.0 * f + d
        } else {
            2.0 * self.experts as f64 + self.top_k as f64 * (4.0 * f + d) + d
        };
        a
    }

    /// The estimate for `steps` steps of batch `batch` and sequence `seq`, with
    /// `dtype_bytes` per element, LoRA rank `lora_rank` (0 = full training) and
    /// throughput `gflops`.
    pub fn estimate(
        &self,
        steps: f64,
        batch: f64,
        seq: f64,
        dtype_bytes: f64,
        lora_rank: f64,
        gflops: f64,
    ) -> Estimate {
        let (v, d, l) = (self.vocab as f64, self.d as f64, self.layers as f64);
        let h = self.heads as f64;
        let p = self.params();
        let tr = if lora_rank == 0.0 {
            p
        } else {
            self.lora_params(lora_rank)
        };
        // Scores and probabilities: 2·H per key attended (and per sink).
        let sink = if self.sinks { l } else { 0.0 };
        let scores = 2.0 * h * (self.attended(seq) + sink);
        let act = d + 2.0 * v + l * self.layer_activations() + scores;
        let act_bytes = dtype_bytes * batch * seq * act;
        let vram = (p + tr + 2.0 * tr) * dtype_bytes + act_bytes;
        let c = if lora_rank == 0.0 { 6.0 } else { 4.0 };
        let per_step = c * batch * seq * (l * self.layer_params() + v * d)
            + 12.0 * batch * seq * self.attended(seq) * self.q_width();
        let flops = per_step * steps;
        Estimate {
            params: p,
            vram_bytes: vram,
            disk_bytes: p * dtype_bytes,
            flops,
            wall_seconds: flops / (gflops * 1e9),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_parameter_counts() {
        // LANGUAGE §15.3's five, then Llama-3-8B (8.03 B), Qwen3-0.6B (0.6 B:
        // 0.44 B without embeddings), Qwen3-8B (8.2 B: 6.95 B without), and
        // GPT-OSS 20B (20.91 B) and 120B (116.83 B), from the model cards.
        let expected = [
            134515008.0,
            361821120.0,
            1711376384.0,
            1235814400.0,
            494032768.0,
            8030261248.0,
            596049920.0,
            8190735360.0,
            20914757184.0,
            116829156672.0,
        ];
        assert_eq!(ARCHITECTURES.len(), expected.len());
        for (a, e) in ARCHITECTURES.iter().zip(expected) {
            assert_eq!(a.params(), e, "{}", a.name);
        }
    }

    #[test]
    fn active_parameters_of_the_mixtures() {
        // The GPT-OSS model card: 3.61 B and 5.13 B active per token.
        let a20 = lookup("gpt-oss-20b").unwrap().active_params();
        let a120 = lookup("gpt-oss-120b").unwrap().active_params();
        assert!((a20 / 1e9 - 3.61).abs() < 0.005, "{a20}");
        assert!((a120 / 1e9 - 5.13).abs() < 0.005, "{a120}");
        // A dense tied model uses all of its parameters.
        let s = lookup("smollm-135m").unwrap();
        assert_eq!(s.active_params(), s.params());
    }

    #[test]
    fn smollm_example_of_the_reference() {
        let e = lookup("smollm-135m")
            .unwrap()
            .estimate(100.0, 4.0, 512.0, 4.0, 0.0, 50.0);
        let got: Vec<String> = e
            .to_array()
            .iter()
            .map(|&x| crate::display::format_f32(x as f32))
            .collect();
        // LANGUAGE §15.3 prints the wall time as `3739.843`, but that decimal reads
        // back as a different float32 (3739.843018) than the computed 3739.842773;
        // the shortest round-trip form that §7.2 requires is `3739.8428`.
        assert_eq!(
            got.join(" "),
            "134515008 7964464128 538060032 186992138649600 3739.8428"
        );
        assert!((e.wall_seconds - 3739.843).abs() < 1e-3);
    }

    #[test]
    fn sliding_layers_attend_to_their_window_only() {
        let oss = *lookup("gpt-oss-20b").unwrap();
        let full = Architecture {
            window: 0,
            sliding_layers: 0,
            ..oss
        };
        // Below the window nothing changes; above it half the layers see 128 keys.
        let (short, long) = (64.0, 4096.0);
        let f = |a: &Architecture, s| a.estimate(1.0, 1.0, s, 2.0, 0.0, 50.0);
        assert_eq!(f(&oss, short), f(&full, short));
        let (w, n) = (f(&oss, long), f(&full, long));
        let attn = |s: f64, keys: f64| 12.0 * s * keys * oss.q_width();
        let expected = attn(long, 12.0 * long + 12.0 * 128.0) - attn(long, 24.0 * long);
        assert!((w.flops - n.flops - expected).abs() < 1e-6 * n.flops);
        assert!(w.vram_bytes < n.vram_bytes);
    }

    #[test]
    fn experts_cost_memory_for_all_and_flops_for_top_k() {
        let oss = *lookup("gpt-oss-20b").unwrap();
        let wider = Architecture { experts: 64, ..oss };
        let (a, b) = (
            oss.estimate(1.0, 1.0, 64.0, 2.0, 0.0, 50.0),
            wider.estimate(1.0, 1.0, 64.0, 2.0, 0.0, 50.0),
        );
        // Twice the experts: more parameters and memory, FLOPs only for the
        // router's extra columns.
        assert!(b.params > 1.9 * a.params);
        assert!(b.vram_bytes > 1.9 * a.vram_bytes);
        let router = 6.0 * 64.0 * 24.0 * (2880.0 * 32.0 + 32.0);
        assert!(
            (b.flops - a.flops - router).abs() < 1.0,
            "{} {}",
            b.flops - a.flops,
            router
        );
    }
}
