//! Feasibility estimates for hovers and code lenses (LANGUAGE §15): parameters,
//! memory, FLOPs and time per step of a model's training, on each device.
//!
//! The formulas are the runtime's (`mlpl_lang::nn::estimate`, the same as
//! `estimate_train`). What the server adds is where each device's numbers come
//! from, said in every hover:
//!
//! - **throughput**: the calibration cache written by `mlpl calibrate` (the
//!   `calibrate_device` measurement of each available device), else for the CPU the
//!   documented default of 50 GFLOPS (LANGUAGE §15.1), and for CUDA and MLX the
//!   nominal FP32 throughput of a device from [`KNOWN_DEVICES`];
//! - **memory**: the host's memory (`/proc/meminfo`) for the CPU, the known-device
//!   table for CUDA and MLX (or the memory a runner recorded in the cache).

use mlpl_devices::math;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use mlpl_lang::estimate::DEFAULT_GFLOPS;
use mlpl_lang::nn::estimate::cost;
use mlpl_lang::nn::Layer;
use serde::Deserialize;

use crate::values::group_digits;

/// A device kind, as written in `device("…")`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The host CPU.
    Cpu,
    /// An NVIDIA GPU.
    Cuda,
    /// An Apple GPU through MLX.
    Mlx,
}

impl Kind {
    /// `cpu`, `cuda` or `mlx`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Cpu => "cpu",
            Kind::Cuda => "cuda",
            Kind::Mlx => "mlx",
        }
    }
    /// `CPU`, `CUDA` or `MLX`.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Cpu => "CPU",
            Kind::Cuda => "CUDA",
            Kind::Mlx => "MLX",
        }
    }
}

/// A device whose throughput and memory are known without measuring it.
#[derive(Clone, Copy, Debug)]
pub struct KnownDevice {
    /// The id used in settings (`mlpl.estimates.cudaDevice`), e.g. `a100-80gb`.
    pub id: &'static str,
    /// The marketing name.
    pub name: &'static str,
    /// CUDA or MLX.
    pub kind: Kind,
    /// Nominal dense FP32 throughput in GFLOPS (the vendor's figure; real training
    /// reaches a fraction of it).
    pub gflops: f64,
    /// Device memory in bytes (unified memory for Apple chips).
    pub memory_bytes: f64,
}

const GB: f64 = 1e9;
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// The table of known devices (nominal FP32 figures from the vendors' data sheets).
pub const KNOWN_DEVICES: &[KnownDevice] = &[
    KnownDevice {
        id: "h200",
        name: "NVIDIA H200",
        kind: Kind::Cuda,
        gflops: 67_000.0,
        memory_bytes: 141.0 * GB,
    },
    KnownDevice {
        id: "h100-80gb",
        name: "NVIDIA H100 80GB (SXM)",
        kind: Kind::Cuda,
        gflops: 67_000.0,
        memory_bytes: 80.0 * GIB,
    },
    KnownDevice {
        id: "a100-80gb",
        name: "NVIDIA A100 80GB",
        kind: Kind::Cuda,
        gflops: 19_500.0,
        memory_bytes: 80.0 * GIB,
    },
    KnownDevice {
        id: "a100-40gb",
        name: "NVIDIA A100 40GB",
        kind: Kind::Cuda,
        gflops: 19_500.0,
        memory_bytes: 40.0 * GIB,
    },
    KnownDevice {
        id: "l4",
        name: "NVIDIA L4",
        kind: Kind::Cuda,
        gflops: 30_300.0,
        memory_bytes: 24.0 * GIB,
    },
    KnownDevice {
        id: "t4",
        name: "NVIDIA T4",
        kind: Kind::Cuda,
        gflops: 8_100.0,
        memory_bytes: 16.0 * GIB,
    },
    KnownDevice {
        id: "rtx-4090",
        name: "NVIDIA GeForce RTX 4090",
        kind: Kind::Cuda,
        gflops: 82_600.0,
        memory_bytes: 24.0 * GIB,
    },
    KnownDevice {
        id: "rtx-3090",
        name: "NVIDIA GeForce RTX 3090",
        kind: Kind::Cuda,
        gflops: 35_600.0,
        memory_bytes: 24.0 * GIB,
    },
    KnownDevice {
        id: "v100-16gb",
        name: "NVIDIA V100 16GB",
        kind: Kind::Cuda,
        gflops: 15_700.0,
        memory_bytes: 16.0 * GIB,
    },
    KnownDevice {
        id: "m1",
        name: "Apple M1 (16 GB)",
        kind: Kind::Mlx,
        gflops: 2_600.0,
        memory_bytes: 16.0 * GIB,
    },
    KnownDevice {
        id: "m2",
        name: "Apple M2 (16 GB)",
        kind: Kind::Mlx,
        gflops: 3_600.0,
        memory_bytes: 16.0 * GIB,
    },
    KnownDevice {
        id: "m2-max",
        name: "Apple M2 Max (64 GB)",
        kind: Kind::Mlx,
        gflops: 13_600.0,
        memory_bytes: 64.0 * GIB,
    },
    KnownDevice {
        id: "m3-max",
        name: "Apple M3 Max (64 GB)",
        kind: Kind::Mlx,
        gflops: 14_200.0,
        memory_bytes: 64.0 * GIB,
    },
    KnownDevice {
        id: "m4-pro",
        name: "Apple M4 Pro (24 GB)",
        kind: Kind::Mlx,
        gflops: 9_200.0,
        memory_bytes: 24.0 * GIB,
    },
];

/// The known device with this id, name or a name containing it (case-insensitive).
pub fn known_device(query: &str) -> Option<&'static KnownDevice> {
    let q = query.trim().to_ascii_lowercase();
    if q.is_empty() {
        return None;
    }
    KNOWN_DEVICES
        .iter()
        .find(|d| d.id == q || d.name.to_ascii_lowercase() == q)
        .or_else(|| {
            KNOWN_DEVICES
                .iter()
                .find(|d| d.name.to_ascii_lowercase().contains(&q))
        })
}

/// One measured device in the calibration cache.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct CalibrationEntry {
    /// The device target (`cpu`, `cuda`, `cuda:1`, `mlx`).
    pub device: String,
    /// Measured GFLOPS (`calibrate_device`).
    pub gflops: f64,
    /// The matrix size measured.
    #[serde(default)]
    pub size: Option<u64>,
    /// Seconds since the Unix epoch.
    #[serde(default)]
    pub measured_at: Option<u64>,
    /// The device's name, when the measuring program knew it.
    #[serde(default)]
    pub name: Option<String>,
    /// Device memory in bytes, when the measuring program knew it.
    #[serde(default)]
    pub memory_bytes: Option<f64>,
    /// Who measured it (`mlpl calibrate`, a runner).
    #[serde(default)]
    pub source: Option<String>,
}

/// The calibration cache file: `{"version": 1, "devices": [entries]}`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct Calibration {
    /// Format version (1).
    #[serde(default)]
    pub version: u32,
    /// The measured devices.
    #[serde(default)]
    pub devices: Vec<CalibrationEntry>,
    /// Where the file was read from (not part of the file).
    #[serde(skip)]
    pub path: Option<PathBuf>,
}

impl Calibration {
    /// The entry of a device kind (`cuda` also matches `cuda:N`).
    pub fn entry(&self, kind: Kind) -> Option<&CalibrationEntry> {
        self.devices.iter().find(|e| {
            let base = e.device.split(':').next().unwrap_or("");
            base == kind.name() && e.gflops.is_finite() && e.gflops > 0.0
        })
    }

    /// Reads a cache file; `None` when it is missing or malformed.
    pub fn load(path: &Path) -> Option<Calibration> {
        let text = std::fs::read_to_string(path).ok()?;
        let mut c: Calibration = serde_json::from_str(&text).ok()?;
        c.path = Some(path.to_path_buf());
        Some(c)
    }
}

/// Where `mlpl calibrate` writes its cache: `$MLPL_CACHE_DIR/calibration.json`, else
/// `$XDG_CACHE_HOME/mlpl/calibration.json`, else `~/.cache/mlpl/calibration.json`
/// (the directories of LANGUAGE §21.2).
pub fn default_cache_path() -> Option<PathBuf> {
    let dir = std::env::var_os("MLPL_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("mlpl")))
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("mlpl"))
        })?;
    Some(dir.join("calibration.json"))
}

/// The host's memory from `/proc/meminfo`, in bytes.
pub fn host_memory() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024.0)
}

/// A device as the estimates see it, with where each number comes from.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceProfile {
    /// The kind.
    pub kind: Kind,
    /// A readable name (`CPU`, `NVIDIA A100 80GB`).
    pub name: String,
    /// Throughput in GFLOPS.
    pub gflops: f64,
    /// Where the throughput comes from.
    pub gflops_source: String,
    /// Memory in bytes, when known.
    pub memory_bytes: Option<f64>,
    /// Where the memory comes from.
    pub memory_source: String,
}

/// The devices estimates are shown for: the CPU, one CUDA device and one MLX device.
/// `cuda` and `mlx` name entries of [`KNOWN_DEVICES`] (client settings); the
/// calibration cache overrides the throughput of any device it measured.
pub fn profiles(
    cal: Option<&Calibration>,
    cuda: &str,
    mlx: &str,
    host_mem: Option<f64>,
) -> Vec<DeviceProfile> {
    let cache_name = |c: &Calibration| {
        c.path
            .as_ref()
            .map_or("the calibration cache".to_string(), |p| {
                format!("`{}`", p.display())
            })
    };
    let measured = |e: &CalibrationEntry, c: &Calibration| {
        format!(
            "measured by {} ({}) in {}",
            e.source.as_deref().unwrap_or("`mlpl calibrate`"),
            e.size.map_or("calibrate_device".to_string(), |s| format!(
                "calibrate_device({s})"
            )),
            cache_name(c)
        )
    };
    let mut out = Vec::new();
    // CPU.
    let cpu_entry = cal.and_then(|c| c.entry(Kind::Cpu).map(|e| (e, c)));
    out.push(DeviceProfile {
        kind: Kind::Cpu,
        name: cpu_entry
            .and_then(|(e, _)| e.name.clone())
            .unwrap_or_else(|| "CPU".to_string()),
        gflops: cpu_entry.map_or(DEFAULT_GFLOPS, |(e, _)| e.gflops),
        gflops_source: match cpu_entry {
            Some((e, c)) => measured(e, c),
            None => format!(
                "the default of {} GFLOPS (LANGUAGE §15.1); run `mlpl calibrate` to measure this machine",
                DEFAULT_GFLOPS
            ),
        },
        memory_bytes: cpu_entry.and_then(|(e, _)| e.memory_bytes).or(host_mem),
        memory_source: if cpu_entry.and_then(|(e, _)| e.memory_bytes).is_some() {
            "recorded in the calibration cache".into()
        } else if host_mem.is_some() {
            "host memory (/proc/meminfo)".into()
        } else {
            "unknown".into()
        },
    });
    for (kind, setting, default) in [(Kind::Cuda, cuda, "a100-80gb"), (Kind::Mlx, mlx, "m2")] {
        let entry = cal.and_then(|c| c.entry(kind).map(|e| (e, c)));
        let table = entry
            .and_then(|(e, _)| e.name.as_deref().and_then(known_device))
            .or_else(|| known_device(setting))
            .or_else(|| known_device(default))
            .expect("default devices are in the table");
        let (gflops, gflops_source) = match entry {
            Some((e, c)) => (e.gflops, measured(e, c)),
            None => (
                table.gflops,
                format!(
                    "nominal FP32 throughput of the {} (known-device table; not measured)",
                    table.name
                ),
            ),
        };
        let (memory, memory_source) = match entry.and_then(|(e, _)| e.memory_bytes) {
            Some(m) => (m, "recorded in the calibration cache".to_string()),
            None => (
                table.memory_bytes,
                format!("the {} (known-device table)", table.name),
            ),
        };
        out.push(DeviceProfile {
            kind,
            name: entry
                .and_then(|(e, _)| e.name.clone())
                .unwrap_or_else(|| table.name.to_string()),
            gflops,
            gflops_source,
            memory_bytes: Some(memory),
            memory_source,
        });
    }
    out
}

/// Whether a training run fits a device's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Uses at most 80% of the memory.
    Fits,
    /// Uses 80–100% of the memory.
    Tight,
    /// Needs more memory than the device has.
    DoesNotFit,
    /// The device's memory is unknown.
    Unknown,
}

impl Verdict {
    /// Compares a memory need with a device's memory.
    pub fn of(need: f64, have: Option<f64>) -> Verdict {
        match have {
            None => Verdict::Unknown,
            Some(h) if need <= 0.8 * h => Verdict::Fits,
            Some(h) if need <= h => Verdict::Tight,
            Some(_) => Verdict::DoesNotFit,
        }
    }
    /// `fits`, `tight`, `does not fit`, `memory unknown`.
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Fits => "fits",
            Verdict::Tight => "tight",
            Verdict::DoesNotFit => "does not fit",
            Verdict::Unknown => "memory unknown",
        }
    }
}

/// The estimate of one training run (or one step) of a model.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainEstimate {
    /// Distinct parameters.
    pub params: f64,
    /// Parameters that are not frozen.
    pub trainable: f64,
    /// Bytes per element (4).
    pub dtype_bytes: f64,
    /// Weights: params · dt.
    pub weight_bytes: f64,
    /// Gradients: trainable · dt.
    pub grad_bytes: f64,
    /// Optimizer state: slots · trainable · dt.
    pub optimizer_bytes: f64,
    /// Activations kept for the backward pass: dt · B · S · Σ a.
    pub activation_bytes: f64,
    /// The sum of the four.
    pub total_bytes: f64,
    /// Training FLOPs per step (three forward passes).
    pub flops_per_step: f64,
    /// Steps, when known.
    pub steps: Option<f64>,
    /// Batch rows B used.
    pub batch: f64,
    /// Sequence length S used.
    pub seq: f64,
    /// Per device: (profile, seconds per step, seconds for all steps, verdict).
    pub devices: Vec<(DeviceProfile, f64, Option<f64>, Verdict)>,
}

/// Estimates training `layer` with `slots` optimizer state slots per parameter.
pub fn estimate(
    layer: &Layer,
    frozen: &HashSet<String>,
    batch: f64,
    seq: f64,
    steps: Option<f64>,
    slots: f64,
    devices: &[DeviceProfile],
) -> TrainEstimate {
    let dt = 4.0;
    let mut p = 0.0;
    let mut tr = 0.0;
    for spec in layer.param_specs() {
        let n: f64 = spec.shape.iter().map(|&d| d as f64).product();
        p += n;
        if !frozen.contains(&spec.name) {
            tr += n;
        }
    }
    let c = cost(layer, batch, seq);
    let act = dt * batch * seq * c.activations;
    let flops = 3.0 * c.flops;
    let total = p * dt + tr * dt + slots * tr * dt + act;
    let devices = devices
        .iter()
        .map(|d| {
            let per_step = flops / (d.gflops * 1e9);
            (
                d.clone(),
                per_step,
                steps.map(|n| n * per_step),
                Verdict::of(total, d.memory_bytes),
            )
        })
        .collect();
    TrainEstimate {
        params: p,
        trainable: tr,
        dtype_bytes: dt,
        weight_bytes: p * dt,
        grad_bytes: tr * dt,
        optimizer_bytes: slots * tr * dt,
        activation_bytes: act,
        total_bytes: total,
        flops_per_step: flops,
        steps,
        batch,
        seq,
        devices,
    }
}

/// Bytes as `12.3 MB` (decimal units).
pub fn bytes(b: f64) -> String {
    let units = [("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)];
    for (u, s) in units {
        if b >= s {
            return format!("{} {u}", sig3(b / s));
        }
    }
    format!("{} B", b.round())
}

/// Seconds as `3.2 s`, `4.1 ms`, `2.5 h`.
pub fn seconds(s: f64) -> String {
    if !s.is_finite() {
        return "?".into();
    }
    if s >= 86400.0 {
        format!("{} days", sig3(s / 86400.0))
    } else if s >= 3600.0 {
        format!("{} h", sig3(s / 3600.0))
    } else if s >= 60.0 {
        format!("{} min", sig3(s / 60.0))
    } else if s >= 1.0 {
        format!("{} s", sig3(s))
    } else if s >= 1e-3 {
        format!("{} ms", sig3(s * 1e3))
    } else if s >= 1e-6 {
        format!("{} µs", sig3(s * 1e6))
    } else {
        format!("{} ns", sig3(s * 1e9))
    }
}

/// FLOPs as `1.2 GFLOP`.
pub fn flops(f: f64) -> String {
    let units = [
        ("PFLOP", 1e15),
        ("TFLOP", 1e12),
        ("GFLOP", 1e9),
        ("MFLOP", 1e6),
        ("kFLOP", 1e3),
    ];
    for (u, s) in units {
        if f >= s {
            return format!("{} {u}", sig3(f / s));
        }
    }
    format!("{} FLOP", f.round())
}

/// Three significant digits, without trailing zeros.
pub fn sig3(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = (2 - math::log10(x.abs()).floor() as i32).max(0) as usize;
    let s = format!("{x:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

impl TrainEstimate {
    /// The short text of a `train` block's code lens: `≈ 3.2 s on CPU · fits`.
    pub fn lens_text(&self) -> String {
        let Some((d, per_step, total, verdict)) = self.devices.first() else {
            return "estimate unavailable".into();
        };
        let time = match total {
            Some(t) => seconds(*t),
            None => format!("{} per step", seconds(*per_step)),
        };
        format!("≈ {time} on {} · {}", d.kind.label(), verdict.text())
    }

    /// The Markdown of a hover.
    pub fn markdown(&self, what: &str, batch_note: &str) -> String {
        let mut s = format!("**Feasibility of {what}** (LANGUAGE §15)\n\n");
        s.push_str(&format!(
            "- parameters: {} ({} trainable)\n",
            group_digits(self.params),
            group_digits(self.trainable)
        ));
        s.push_str(&format!("- batch: {batch_note}\n"));
        s.push_str(&format!(
            "- memory: **{}** = weights {} + gradients {} + optimizer state {} + activations {} (float32)\n",
            bytes(self.total_bytes),
            bytes(self.weight_bytes),
            bytes(self.grad_bytes),
            bytes(self.optimizer_bytes),
            bytes(self.activation_bytes)
        ));
        s.push_str(&format!(
            "- FLOPs per step: {} (3 × forward, counted per layer from the rows that enter it)\n",
            flops(self.flops_per_step)
        ));
        if let Some(n) = self.steps {
            s.push_str(&format!("- steps: {}\n", group_digits(n)));
        }
        s.push_str("\n| device | GFLOPS | per step | all steps | memory | verdict |\n|---|---:|---:|---:|---:|---|\n");
        for (d, per_step, total, verdict) in &self.devices {
            let name = if d.name == d.kind.label() {
                d.name.clone()
            } else {
                format!("{} ({})", d.kind.label(), d.name)
            };
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                name,
                sig3(d.gflops),
                seconds(*per_step),
                total.map_or("—".to_string(), seconds),
                d.memory_bytes.map_or("?".to_string(), bytes),
                verdict.text()
            ));
        }
        s.push_str("\nWhere the numbers come from:\n");
        for (d, ..) in &self.devices {
            s.push_str(&format!(
                "- {} throughput: {}; memory: {}\n",
                d.kind.label(),
                d.gflops_source,
                d.memory_source
            ));
        }
        s.push_str("- parameters, FLOPs and activations: the formulas of `estimate_train` (LANGUAGE §15.2); verdict: fits ≤ 80% of memory, tight ≤ 100%\n");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlpl_lang::nn::layers::{Attention, Embed, Linear};
    use std::sync::Arc;

    #[test]
    fn matches_the_reference_example() {
        // LANGUAGE §15.2: P = 800, vram = 27136, flops = 12288000 for 100 steps.
        let m = Layer::Chain(vec![
            Arc::new(Layer::Embed(Embed {
                id: 1,
                vocab: 32,
                d: 8,
            })),
            Arc::new(Layer::Attention(Attention {
                id: 2,
                d: 8,
                heads: 2,
                kv_heads: 2,
                causal: true,
                rope: None,
                hd: 4,
                bias: false,
                qk_norm: None,
                sinks: false,
                window: None,
            })),
            Arc::new(Layer::Linear(Linear {
                id: 3,
                inp: 8,
                out: 32,
                bias: true,
            })),
        ]);
        let cpu = profiles(None, "", "", Some(16.0 * GIB));
        let e = estimate(&m, &HashSet::new(), 4.0, 8.0, Some(100.0), 2.0, &cpu);
        assert_eq!(e.params, 800.0);
        assert_eq!(e.total_bytes, 27136.0);
        assert_eq!(e.flops_per_step * 100.0, 12288000.0);
        let (d, per_step, total, v) = &e.devices[0];
        assert_eq!(d.gflops, 50.0);
        assert!((total.unwrap() - 0.00024576).abs() < 1e-12);
        assert!((per_step * 100.0 - 0.00024576).abs() < 1e-12);
        assert_eq!(*v, Verdict::Fits);
        assert!(
            e.lens_text().starts_with("≈ 246 µs on CPU · fits"),
            "{}",
            e.lens_text()
        );
        assert!(e.markdown("x", "y").contains("default of 50 GFLOPS"));
    }

    #[test]
    fn calibration_overrides_throughput() {
        let cal: Calibration = serde_json::from_str(
            r#"{"version":1,"devices":[{"device":"cpu","gflops":123.5,"size":1024,"measured_at":1},
                {"device":"cuda:0","gflops":40000,"name":"NVIDIA H200","memory_bytes":1.4e11,"source":"runner"}]}"#,
        )
        .unwrap();
        let p = profiles(Some(&cal), "t4", "m1", None);
        assert_eq!(p[0].gflops, 123.5);
        assert!(p[0].gflops_source.contains("calibrate_device(1024)"));
        assert_eq!(p[0].memory_bytes, None);
        assert_eq!(p[1].gflops, 40000.0);
        assert_eq!(p[1].name, "NVIDIA H200");
        assert_eq!(p[2].name, "Apple M1 (16 GB)");
        assert_eq!(Verdict::of(90.0, Some(100.0)), Verdict::Tight);
        assert_eq!(Verdict::of(190.0, Some(100.0)), Verdict::DoesNotFit);
    }

    #[test]
    fn formats() {
        assert_eq!(bytes(27136.0), "27.1 kB");
        assert_eq!(seconds(3.24), "3.24 s");
        assert_eq!(seconds(0.00024576), "246 µs");
        assert_eq!(flops(12288000.0), "12.3 MFLOP");
    }
}
