//! Built-in architectures for `estimate_hypothetical` (LANGUAGE §15.3): decoder-only
//! transformers with RMS norms, grouped-query attention, SwiGLU and tied embeddings.

use super::Estimate;

/// A published architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Architecture {
    /// The name users pass.
    pub name: &'static str,
    /// Vocabulary size.
    pub vocab: u64,
    /// Model width.
    pub d: u64,
    /// Layers.
    pub layers: u64,
    /// Feed-forward width.
    pub ff: u64,
    /// Attention heads.
    pub heads: u64,
    /// Key/value heads.
    pub kv_heads: u64,
    /// Whether q/k/v projections have biases.
    pub qkv_bias: bool,
}

/// The architectures of LANGUAGE §15.3, in table order.
pub const ARCHITECTURES: &[Architecture] = &[
    Architecture {
        name: "smollm-135m",
        vocab: 49152,
        d: 576,
        layers: 30,
        ff: 1536,
        heads: 9,
        kv_heads: 3,
        qkv_bias: false,
    },
    Architecture {
        name: "smollm-360m",
        vocab: 49152,
        d: 960,
        layers: 32,
        ff: 2560,
        heads: 15,
        kv_heads: 5,
        qkv_bias: false,
    },
    Architecture {
        name: "smollm-1.7b",
        vocab: 49152,
        d: 2048,
        layers: 24,
        ff: 8192,
        heads: 32,
        kv_heads: 32,
        qkv_bias: false,
    },
    Architecture {
        name: "llama-3.2-1b",
        vocab: 128256,
        d: 2048,
        layers: 16,
        ff: 8192,
        heads: 32,
        kv_heads: 8,
        qkv_bias: false,
    },
    Architecture {
        name: "qwen-2.5-0.5b",
        vocab: 151936,
        d: 896,
        layers: 24,
        ff: 4864,
        heads: 14,
        kv_heads: 2,
        qkv_bias: true,
    },
];

/// The architecture called `name`.
pub fn lookup(name: &str) -> Option<&'static Architecture> {
    ARCHITECTURES.iter().find(|a| a.name == name)
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
    /// Parameters of one transformer layer.
    pub fn layer_params(&self) -> f64 {
        let (d, kv, f) = (self.d as f64, self.kv_heads as f64, self.ff as f64);
        let hd = d / self.heads as f64;
        let mut layer = 2.0 * d * d + 2.0 * d * kv * hd + 3.0 * d * f;
        if self.qkv_bias {
            layer += d + 2.0 * kv * hd;
        }
        layer
    }

    /// Total parameters: embeddings, layers and norm gains.
    pub fn params(&self) -> f64 {
        let (v, d, l) = (self.vocab as f64, self.d as f64, self.layers as f64);
        v * d + l * self.layer_params() + 2.0 * d * l + d
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
        let (v, d, l, f) = (
            self.vocab as f64,
            self.d as f64,
            self.layers as f64,
            self.ff as f64,
        );
        let (h, kv) = (self.heads as f64, self.kv_heads as f64);
        let hd = d / h;
        let p = self.params();
        let r = lora_rank;
        let tr = if r == 0.0 {
            p
        } else {
            l * r * (2.0 * (d + d) + 2.0 * (d + kv * hd) + 3.0 * (d + f))
        };
        let a_layer = 8.0 * d + 2.0 + 2.0 * kv * hd + 2.0 * h * seq + 4.0 * f;
        let act_bytes = dtype_bytes * batch * seq * (d + 2.0 * v + l * a_layer);
        let vram = (p + tr + 2.0 * tr) * dtype_bytes + act_bytes;
        let c = if r == 0.0 { 6.0 } else { 4.0 };
        let per_step =
            c * batch * seq * (l * self.layer_params() + v * d) + 12.0 * l * batch * seq * seq * d;
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
        let expected = [
            134515008.0,
            361821120.0,
            1711376384.0,
            1235814400.0,
            494032768.0,
        ];
        for (a, e) in ARCHITECTURES.iter().zip(expected) {
            assert_eq!(a.params(), e, "{}", a.name);
        }
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
}
