//! Feasibility estimates for hovers and code lenses (LANGUAGE §15): parameters,
//! the kernels one training step runs, its time and peak memory, on each device.
//!
//! The model is the runtime's (`mlpl_lang::estimate`: the step's kernels from the
//! checker's exact shapes, costed with each device's calibrated model, the same
//! as `mlpl estimate` and `estimate_train`). What the server adds is which
//! devices are shown and where each device's numbers come from, said in every
//! hover:
//!
//! - **cost model**: the calibration cache written by `mlpl calibrate` (the one
//!   `estimate_train` and `mlpl estimate` read), else a model assumed from the
//!   documented default of 50 GFLOPS for the CPU and from the nominal FP32
//!   throughput of a device in [`KNOWN_DEVICES`] for CUDA and MLX;
//! - **memory**: the host's memory (`/proc/meminfo`) for the CPU, the known-device
//!   table for CUDA and MLX (or the memory a runner recorded in the cache).

use mlpl_devices::math;
use std::path::PathBuf;

use mlpl_lang::estimate::calibration::{device_model, DeviceModel};
pub use mlpl_lang::estimate::calibration::{Calibration, CalibrationEntry};
use mlpl_lang::estimate::DEFAULT_GFLOPS;
use mlpl_lang::step_cost::cost::{estimate_step, Range, StepEstimate};
use mlpl_lang::train_loops::loops::{BatchInfo, TrainLoop};

use crate::measured::StepMeasured;
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

/// Where `mlpl calibrate` writes its cache (`mlpl_lang::estimate::calibration::default_path`).
pub fn default_cache_path() -> Option<PathBuf> {
    mlpl_lang::estimate::calibration::default_path()
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
    /// The cost model of the device.
    pub model: DeviceModel,
    /// Whether the model was calibrated on this device (`mlpl calibrate`).
    pub calibrated: bool,
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
        let what = match &e.model {
            Some(m) => format!(
                "GEMM at {} shapes, {} µs per kernel, {} GB/s",
                m.gemm.len(),
                sig3(m.dispatch_s.median * 1e6),
                sig3(m.bandwidth_gbs.median)
            ),
            None => e.size.map_or("calibrate_device".to_string(), |s| {
                format!("calibrate_device({s}); one GEMM size only")
            }),
        };
        format!(
            "measured by {} ({what}) in {}",
            e.source.as_deref().unwrap_or("`mlpl calibrate`"),
            cache_name(c)
        )
    };
    let mut out = Vec::new();
    // CPU.
    let cpu_entry = cal.and_then(|c| c.entry(Kind::Cpu.name()).map(|e| (e, c)));
    let (cpu_model, cpu_calibrated) = device_model(cal, "cpu", DEFAULT_GFLOPS);
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
        model: cpu_model,
        calibrated: cpu_calibrated,
    });
    for (kind, setting, default) in [(Kind::Cuda, cuda, "a100-80gb"), (Kind::Mlx, mlx, "m2")] {
        let entry = cal.and_then(|c| c.entry(kind.name()).map(|e| (e, c)));
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
        let (model, calibrated) = device_model(cal, kind.name(), table.gflops);
        out.push(DeviceProfile {
            kind,
            model,
            calibrated,
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

/// The margin a verdict of "fits" leaves: the estimated peak times this is at
/// most the device's memory.
pub const FIT_MARGIN: f64 = 1.25;

/// Whether a training run fits a device's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The estimate with a 25% margin fits.
    Fits,
    /// The estimate fits, but not with the margin.
    Tight,
    /// The estimate is more than the device's memory.
    DoesNotFit,
    /// The device's memory is unknown.
    Unknown,
    /// The batch is sized only at run time: the estimate is a lower bound,
    /// which fits, so whether the real peak does is unknown.
    BatchUnknown,
}

impl Verdict {
    /// Compares a memory need with a device's memory.
    pub fn of(need: f64, have: Option<f64>) -> Verdict {
        match have {
            None => Verdict::Unknown,
            Some(h) if need * FIT_MARGIN <= h => Verdict::Fits,
            Some(h) if need <= h => Verdict::Tight,
            Some(_) => Verdict::DoesNotFit,
        }
    }
    /// Compares a lower bound of a memory need (an unknown batch estimated
    /// for one row) with a device's memory: only "does not fit" is certain.
    pub fn of_lower_bound(need: f64, have: Option<f64>) -> Verdict {
        match Verdict::of(need, have) {
            Verdict::DoesNotFit => Verdict::DoesNotFit,
            Verdict::Unknown => Verdict::Unknown,
            _ => Verdict::BatchUnknown,
        }
    }
    /// `fits`, `tight`, `does not fit`, `memory unknown`, `fit unknown (batch unknown)`.
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Fits => "fits",
            Verdict::Tight => "tight",
            Verdict::DoesNotFit => "does not fit",
            Verdict::Unknown => "memory unknown",
            Verdict::BatchUnknown => "fit unknown (batch unknown)",
        }
    }
    /// The lens's wording: `fits` states its margin, `fits (25% margin)`.
    pub fn lens_text(self) -> String {
        match self {
            Verdict::Fits => format!("fits ({:.0}% margin)", (FIT_MARGIN - 1.0) * 100.0),
            v => v.text().to_string(),
        }
    }
}

/// The estimate of a loop on one device.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceEstimate {
    /// The device.
    pub profile: DeviceProfile,
    /// The step on it (time range, memory parts).
    pub step: StepEstimate,
    /// Seconds for all steps, when the count is known.
    pub total: Option<Range>,
    /// Whether the peak fits the device's memory.
    pub verdict: Verdict,
}

/// The estimate of one training loop (or one step) of a model.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainEstimate {
    /// Distinct parameters.
    pub params: f64,
    /// Parameters that are not frozen.
    pub trainable: f64,
    /// Steps, when known.
    pub steps: Option<f64>,
    /// Batch rows B used.
    pub batch: f64,
    /// Sequence length S used.
    pub seq: f64,
    /// Where B and S come from.
    pub batch_info: BatchInfo,
    /// Forward passes per step (the loss's, plus recorded metrics').
    pub forwards: f64,
    /// The device kind of the loop's `device` block, when it has one.
    pub block_device: Option<Kind>,
    /// Why the loop will run interpreted every step (`None`: captured).
    pub not_captured: Option<&'static str>,
    /// Per device.
    pub devices: Vec<DeviceEstimate>,
}

/// The device kind named by a `device("…")` target's kind.
fn kind_of(name: &str) -> Option<Kind> {
    [Kind::Cpu, Kind::Cuda, Kind::Mlx]
        .into_iter()
        .find(|k| k.name() == name)
}

/// Estimates a training loop on every device, captured or interpreted as the
/// program says it will run ([`TrainLoop::captured`]).
pub fn estimate(lp: &TrainLoop, devices: &[DeviceProfile]) -> TrainEstimate {
    let mut p = 0.0;
    let mut tr = 0.0;
    for spec in lp.model.param_specs() {
        let n: f64 = spec.shape.iter().map(|&d| d as f64).product();
        p += n;
        if !lp.frozen.contains(&spec.name) {
            tr += n;
        }
    }
    let steps = lp.steps.map(|n| n as f64);
    let devices = devices
        .iter()
        .map(|d| {
            let step = estimate_step(&lp.model, &lp.frozen, &lp.step, lp.captured(), &d.model);
            let verdict = if lp.batch.known() {
                Verdict::of(step.memory.total, d.memory_bytes)
            } else {
                Verdict::of_lower_bound(step.memory.total, d.memory_bytes)
            };
            DeviceEstimate {
                total: steps.map(|n| step.seconds.scale(n)),
                verdict,
                profile: d.clone(),
                step,
            }
        })
        .collect();
    TrainEstimate {
        params: p,
        trainable: tr,
        steps,
        batch: lp.step.batch,
        seq: lp.step.seq,
        batch_info: lp.batch.clone(),
        forwards: lp.step.forwards,
        block_device: lp.device.as_deref().and_then(kind_of),
        not_captured: lp.not_captured,
        devices,
    }
}

/// A time range as `1.2–1.8 s` (one value when the ends agree to 3 digits).
pub fn seconds_range(r: &Range) -> String {
    let (lo, hi) = (seconds(r.lo), seconds(r.hi));
    if lo == hi {
        return lo;
    }
    // One unit for both ends when they share it: `1.2–1.8 s`.
    match (lo.rsplit_once(' '), hi.rsplit_once(' ')) {
        (Some((a, u1)), Some((b, u2))) if u1 == u2 => format!("{a}–{b} {u1}"),
        _ => format!("{lo}–{hi}"),
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
    /// The device the lens shows: the loop's `device` block's, else the first
    /// (the CPU).
    pub fn lens_device(&self) -> Option<&DeviceEstimate> {
        self.block_device
            .and_then(|k| self.devices.iter().find(|d| d.profile.kind == k))
            .or_else(|| self.devices.first())
    }

    /// The short text of a `train` block's code lens:
    /// `≈ 1.2–1.8 s on CPU · fits (25% margin)`; with an unknown batch,
    /// `≥ 3 µs per step on CPU (batch unknown: one row) · fit unknown (batch
    /// unknown)`; on a model assumed, not calibrated, `… on CPU (not
    /// calibrated) · …` (both: `(batch unknown: one row; not calibrated)`).
    pub fn lens_text(&self) -> String {
        self.lens_text_measured(None)
    }

    /// [`TrainEstimate::lens_text`] after what the runner measured of this
    /// loop, when it did: `measured 12.3 ms/step, peak 410 MB, ETA 1m20s ·
    /// est. ≈ …`; the verdict then compares the measured peak (on the same
    /// device) with the device's memory.
    pub fn lens_text_measured(&self, measured: Option<&StepMeasured>) -> String {
        let Some(d) = self.lens_device() else {
            return "estimate unavailable".into();
        };
        let peak = measured
            .filter(|m| m.kind() == Some(d.profile.kind))
            .and_then(|m| m.peak());
        let verdict = match peak {
            Some((b, _)) => Verdict::of(b, d.profile.memory_bytes),
            None => d.verdict,
        }
        .lens_text();
        let mut notes = Vec::new();
        if !self.batch_info.known() {
            notes.push("batch unknown: one row");
        }
        if !d.profile.calibrated {
            notes.push("not calibrated");
        }
        let notes = if notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", notes.join("; "))
        };
        let device = d.profile.kind.label();
        let estimate = if !self.batch_info.known() {
            format!(
                "≥ {} per step on {device}{notes}",
                seconds(d.step.seconds.lo)
            )
        } else {
            let time = match &d.total {
                Some(t) => seconds_range(t),
                None => format!("{} per step", seconds_range(&d.step.seconds)),
            };
            format!("≈ {time} on {device}{notes}")
        };
        match measured {
            Some(m) => format!(
                "{} · est. {estimate} · {verdict}",
                m.lens_text(Some(d.profile.kind))
            ),
            None => format!("{estimate} · {verdict}"),
        }
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
        if let Some(d) = self.lens_device() {
            let m = &d.step.memory;
            s.push_str(&format!(
                "- memory on {} at the peak: **{}** = weights {} + gradients {} + optimizer state {} + activations the tape keeps {} + step buffers {} + process {} (float32)\n",
                d.profile.kind.label(),
                bytes(m.total),
                bytes(m.weights),
                bytes(m.grads),
                bytes(m.optimizer),
                bytes(m.tape),
                bytes(m.arena),
                bytes(m.baseline)
            ));
            s.push_str(&format!(
                "- one step: {} kernels, {} of GEMMs ({} forward pass{})\n",
                group_digits(d.step.totals.kernels),
                flops(d.step.totals.flops),
                self.forwards,
                if self.forwards == 1.0 {
                    ""
                } else {
                    "es: the loss's and the recorded metrics'"
                }
            ));
        }
        if let Some(n) = self.steps {
            s.push_str(&format!("- steps: {}\n", group_digits(n)));
        }
        s.push_str("\n| device | per step | all steps | peak memory | device memory | verdict |\n|---|---:|---:|---:|---:|---|\n");
        for d in &self.devices {
            let p = &d.profile;
            let name = if p.name == p.kind.label() {
                p.name.clone()
            } else {
                format!("{} ({})", p.kind.label(), p.name)
            };
            s.push_str(&format!(
                "| {}{} | {} | {} | {} | {} | {} |\n",
                name,
                if Some(p.kind) == self.block_device {
                    " — this block's device"
                } else {
                    ""
                },
                seconds_range(&d.step.seconds),
                d.total.as_ref().map_or("—".to_string(), seconds_range),
                bytes(d.step.memory.total),
                p.memory_bytes.map_or("?".to_string(), bytes),
                d.verdict.text()
            ));
        }
        s.push_str("\nWhere the numbers come from:\n");
        for d in &self.devices {
            let p = &d.profile;
            s.push_str(&format!(
                "- {} cost model: {}{}; memory: {}\n",
                p.kind.label(),
                p.gflops_source,
                if p.calibrated {
                    ""
                } else {
                    " (assumed, not calibrated: run `mlpl calibrate`)"
                },
                p.memory_source
            ));
        }
        let mode = match self.not_captured {
            None => "as a captured loop".to_string(),
            Some(why) => {
                format!("interpreted every step ({why}, so step capture cannot replay it)")
            }
        };
        s.push_str(&format!(
            "- time: the kernels one step runs, from the checker's shapes, each costed by the device's model (dispatch, GEMM throughput by shape, bandwidth, transcendental evaluations), {mode}; ranges from the calibration's 10th–90th percentiles; verdict: fits = peak × {FIT_MARGIN} ≤ memory, tight ≤ memory; with a batch sized only at run time the figures are a lower bound, so only \"does not fit\" is certain\n"
        ));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlpl_lang::check::query::check_with_facts;
    use mlpl_lang::train_loops::loops::train_loops;

    /// The loops of `src`, estimated on the CPU, CUDA and MLX profiles of `cal`.
    fn loops_of(src: &str, cal: Option<&Calibration>) -> Vec<TrainEstimate> {
        let (checked, facts) = check_with_facts(src);
        let devices = profiles(cal, "", "", Some(16.0 * GIB));
        train_loops(&checked.program, &facts)
            .iter()
            .map(|lp| estimate(lp, &devices))
            .collect()
    }

    const MLP: &str = "X = randn(1, [64, 32])\ny = argmax(randn(2, [64, 8]), 1)\nmodel = chain(linear(32, 128, 1), relu_layer(), linear(128, 8, 2))\ntrain 100 {\n  adam(cross_entropy(apply(model, X), y), model, 0.001, 0.9, 0.999, 1e-8)\n}\n";

    /// A cache whose CPU model is exact and simple enough to count by hand:
    /// 1 µs per kernel, every GEMM at 1 GFLOP/s, 1 GB/s, no spread.
    fn hand_cache() -> Calibration {
        let mut m = DeviceModel::assumed("cpu", 1.0);
        m.dispatch_s = mlpl_lang::estimate::calibration::Measured::exact(1e-6);
        m.interp_s = mlpl_lang::estimate::calibration::Measured::exact(0.0);
        m.cache_bandwidth_gbs = mlpl_lang::estimate::calibration::Measured::exact(1.0);
        m.bandwidth_gbs = mlpl_lang::estimate::calibration::Measured::exact(1.0);
        m.transcendental_s = mlpl_lang::estimate::calibration::Measured::exact(0.0);
        for p in &mut m.gemm {
            p.gflops = mlpl_lang::estimate::calibration::Measured::exact(1.0);
        }
        m.baseline_bytes = 1e6;
        m.arena_factor = 1.0;
        let mut c = Calibration::default();
        let e = c.entry_mut("cpu");
        e.gflops = 1.0;
        e.model = Some(m);
        c
    }

    #[test]
    fn time_and_memory_match_hand_counts() {
        let cal = hand_cache();
        let e = &loops_of(MLP, Some(&cal))[0];
        assert_eq!(e.params, 32.0 * 128.0 + 128.0 + 128.0 * 8.0 + 8.0);
        let d = &e.devices[0];
        assert!(d.profile.calibrated);
        // Kernels, as a recorded step lists them: 3 forward + 3 loss + 7 backward
        // (the ReLU's from its output, then the bias's sum) + 4 Adam updates.
        assert_eq!(d.step.totals.kernels, 17.0);
        // GEMM FLOPs: forward 2·64·(32·128 + 128·8), backward twice that but no
        // input gradient for the first layer (2·64·32·128 less).
        let fwd = 2.0 * 64.0 * (32.0 * 128.0 + 128.0 * 8.0);
        assert_eq!(
            d.step.totals.flops,
            fwd + 2.0 * fwd - 2.0 * 64.0 * 32.0 * 128.0
        );
        // At 1 GFLOP/s, 1 GB/s and 1 µs per kernel the step is exactly this:
        let secs = 17.0 * 1e-6 + d.step.totals.flops / 1e9 + d.step.totals.bytes / 1e9;
        assert!(
            (d.step.seconds.mid - secs).abs() < 1e-12,
            "{} vs {secs}",
            d.step.seconds.mid
        );
        assert_eq!(d.step.seconds.lo, d.step.seconds.hi);
        let m = &d.step.memory;
        let p = e.params;
        assert_eq!(
            (m.weights, m.grads, m.optimizer),
            (4.0 * p, 4.0 * p, 8.0 * p)
        );
        // The tape: the forward's outputs (two products, the fused bias+ReLU,
        // the bias add, the loss and its gradient).
        let fwd_out = 64.0 * 128.0 * 2.0 + 64.0 * 8.0 * 2.0 + (64.0 * 8.0 + 1.0);
        assert_eq!(m.tape, 4.0 * fwd_out);
        assert_eq!(
            m.total,
            m.weights + m.grads + m.optimizer + m.tape + m.arena + 1e6
        );
        assert_eq!(
            e.lens_text(),
            format!(
                "≈ {} on CPU · fits (25% margin)",
                seconds_range(&d.total.unwrap())
            )
        );
    }

    #[test]
    fn a_loop_that_will_not_be_captured_is_estimated_interpreted() {
        let mut cal = hand_cache();
        if let Some(m) = cal.devices[0].model.as_mut() {
            m.interp_s = mlpl_lang::estimate::calibration::Measured::exact(5e-6);
        }
        let plain = &loops_of(MLP, Some(&cal))[0];
        assert_eq!(plain.not_captured, None);
        // Gradient clipping (adamw's max_grad_norm) makes the step host-dependent.
        let clipped = MLP.replace(
            "adam(cross_entropy(apply(model, X), y), model, 0.001, 0.9, 0.999, 1e-8)",
            "adamw(cross_entropy(apply(model, X), y), model, 0.001, 0.9, 0.999, 1e-8, 0.01, 1.0)",
        );
        let e = &loops_of(&clipped, Some(&cal))[0];
        assert!(e.not_captured.unwrap().contains("gradient clipping"));
        let (a, b) = (&plain.devices[0].step, &e.devices[0].step);
        // Same kernels; each pays the interpreter's 5 µs more.
        assert_eq!(a.totals.kernels, b.totals.kernels);
        let extra = b.seconds.mid - a.seconds.mid;
        assert!(extra >= 5e-6 * a.totals.kernels * 0.999, "{extra}");
        let hover = e.markdown("this loop", "64 rows");
        assert!(
            hover.contains("interpreted every step (gradient clipping"),
            "{hover}"
        );
        // Without clipping (0, or the decay-class string in its place) it is captured.
        let unclipped = clipped.replace("1e-8, 0.01, 1.0)", "1e-8, 0.01, 0)");
        assert_eq!(loops_of(&unclipped, Some(&cal))[0].not_captured, None);
    }

    #[test]
    fn an_unknown_batch_is_labelled() {
        let src = "fn rows(n) { randn(1, [n, 4]) }\nX = rows(sum(ones([3])))\ny = argmax(randn(2, [3, 2]), 1)\nm = linear(4, 2, 0)\ntrain 10 {\n  adam(cross_entropy(apply(m, X), y), m, 0.1, 0.9, 0.999, 1e-8)\n}\n";
        let src = if loops_of(src, None)[0].batch_info.known() {
            // The checker sized it after all: make the size data-dependent (a
            // text read at run time).
            "text = load(\"corpus.txt\")\nX = shift_pairs_x(apply_tokenizer(train_bpe(text, 300, 0), text), 8)\nY = shift_pairs_y(apply_tokenizer(train_bpe(text, 300, 0), text), 8)\nm = chain(embed(300, 8, 0), linear(8, 300, 1))\ntrain 10 {\n  adam(cross_entropy(apply(m, X), Y), m, 0.1, 0.9, 0.999, 1e-8)\n}\n"
        } else {
            src
        };
        let e = &loops_of(src, None)[0];
        assert!(!e.batch_info.known(), "{:?}", e.batch_info);
        let lens = e.lens_text();
        assert!(
            lens.starts_with("≥ ")
                && lens.contains("per step on CPU (batch unknown: one row; not calibrated)"),
            "{lens}"
        );
        // One row's peak is a lower bound: "fits" cannot be said, "does not fit" can.
        assert!(lens.ends_with(" · fit unknown (batch unknown)"), "{lens}");
        assert!(e
            .markdown("x", "y")
            .contains("| fit unknown (batch unknown) |"));
        let (checked, facts) = check_with_facts(src);
        let lp = &train_loops(&checked.program, &facts)[0];
        let need = e.devices[0].step.memory.total;
        let small = profiles(None, "", "", Some(need * 0.9));
        assert_eq!(estimate(lp, &small).devices[0].verdict, Verdict::DoesNotFit);
        assert!(estimate(lp, &small)
            .lens_text()
            .ends_with(" · does not fit"));
    }

    #[test]
    fn a_measured_peak_decides_the_verdict_on_its_device() {
        let (checked, facts) = check_with_facts(MLP);
        let lp = &train_loops(&checked.program, &facts)[0];
        let e = &loops_of(MLP, None)[0];
        let need = e.devices[0].step.memory.total;
        // The estimate fits with its margin; the measured peak is twice the memory.
        let cpu = profiles(None, "", "", Some(need * 2.0));
        let est = estimate(lp, &cpu);
        assert!(est.lens_text().ends_with("fits (25% margin)"));
        let m: StepMeasured = serde_json::from_value(serde_json::json!({
            "uri": "file:///m.mlpl", "start_line": 4, "device": "cpu", "step": 100,
            "total": 100, "step_ms": 2.0, "peak_rss_bytes": need * 4.0, "done": true
        }))
        .unwrap();
        let lens = est.lens_text_measured(Some(&m));
        assert!(
            lens.starts_with("measured 2 ms/step, peak ")
                && lens.contains(", done (100 steps) · est. ≈ ")
                && lens.ends_with(" · does not fit"),
            "{lens}"
        );
        // Measured on another device than the lens's: the estimate's verdict stays.
        let on_cuda = StepMeasured {
            device: "cuda".into(),
            device_peak_bytes: Some(need * 4.0),
            ..m
        };
        let lens = est.lens_text_measured(Some(&on_cuda));
        assert!(
            lens.starts_with("measured 2 ms/step on CUDA, peak ")
                && lens.ends_with("fits (25% margin)"),
            "{lens}"
        );
    }

    #[test]
    fn the_lens_uses_the_blocks_device_and_ranges() {
        let src = format!("device(\"cuda\") {{\n{MLP}}}\n");
        let e = &loops_of(&src, None)[0];
        assert_eq!(e.block_device, Some(Kind::Cuda));
        let lens = e.lens_text();
        assert!(lens.contains("on CUDA"), "{lens}");
        assert!(e.markdown("x", "y").contains("this block's device"));
        // A calibrated model with spread gives a range, not one number.
        let mut cal = hand_cache();
        if let Some(m) = cal.devices[0].model.as_mut() {
            m.dispatch_s = mlpl_lang::estimate::calibration::Measured {
                median: 1e-6,
                lo: 0.5e-6,
                hi: 4e-6,
            };
        }
        let e = &loops_of(MLP, Some(&cal))[0];
        let r = e.devices[0].step.seconds;
        assert!(r.lo < r.mid && r.mid < r.hi, "{r:?}");
        assert!(seconds_range(&r).contains('–'), "{}", seconds_range(&r));
        assert_eq!(
            seconds_range(&Range {
                lo: 1.2,
                mid: 1.5,
                hi: 1.8
            }),
            "1.2–1.8 s"
        );
        assert_eq!(
            seconds_range(&Range {
                lo: 0.5,
                mid: 1.0,
                hi: 2.0
            }),
            "500 ms–2 s"
        );
    }

    #[test]
    fn verdicts_state_their_margin() {
        assert_eq!(Verdict::of(80.0, Some(100.0)), Verdict::Fits);
        assert_eq!(Verdict::of(81.0, Some(100.0)), Verdict::Tight);
        assert_eq!(Verdict::of(100.0, Some(100.0)), Verdict::Tight);
        assert_eq!(Verdict::of(100.5, Some(100.0)), Verdict::DoesNotFit);
        assert_eq!(Verdict::of(1.0, None), Verdict::Unknown);
        // Near a limit: the device's memory set just above and just below the peak.
        let e = &loops_of(MLP, None)[0];
        let need = e.devices[0].step.memory.total;
        let mut cpu = profiles(None, "", "", Some(need * 0.99));
        let (checked, facts) = check_with_facts(MLP);
        let lp = &train_loops(&checked.program, &facts)[0];
        assert_eq!(estimate(lp, &cpu).devices[0].verdict, Verdict::DoesNotFit);
        cpu[0].memory_bytes = Some(need * 1.01);
        assert_eq!(estimate(lp, &cpu).devices[0].verdict, Verdict::Tight);
        cpu[0].memory_bytes = Some(need * 1.3);
        assert!(estimate(lp, &cpu)
            .lens_text()
            .ends_with("fits (25% margin)"));
    }

    #[test]
    fn one_cache_for_the_editor_the_runner_and_the_builtins() {
        let text = r#"{"version":1,"devices":[{"device":"cpu","gflops":123.5,"size":1024,"measured_at":1},
                {"device":"cuda:0","gflops":40000,"name":"NVIDIA H200","memory_bytes":1.4e11,"source":"runner"}]}"#;
        let cal = Calibration::parse(text).unwrap();
        let p = profiles(Some(&cal), "t4", "m1", None);
        assert_eq!(p[0].gflops, 123.5);
        assert!(
            p[0].gflops_source.contains("calibrate_device(1024)"),
            "{}",
            p[0].gflops_source
        );
        // A version 1 entry: the model is assumed from its one throughput.
        assert!(!p[0].calibrated);
        assert_eq!(p[0].model, DeviceModel::assumed("cpu", 123.5));
        assert_eq!(p[1].name, "NVIDIA H200");
        assert_eq!(p[1].model, DeviceModel::assumed("cuda", 40000.0));
        assert_eq!(p[2].name, "Apple M1 (16 GB)");
        // A version 2 entry round-trips and is what the runtime reads too.
        let cal = hand_cache();
        let text = serde_json::to_string(&cal).unwrap();
        let back = Calibration::parse(&text).unwrap();
        let p = profiles(Some(&back), "", "", None);
        assert!(p[0].calibrated);
        assert_eq!(Some(&p[0].model), cal.devices[0].model.as_ref());
        let (m, calibrated) =
            mlpl_lang::estimate::calibration::device_model(Some(&back), "cpu", 50.0);
        assert!(calibrated);
        assert_eq!(m, p[0].model);
    }

    #[test]
    fn formats() {
        assert_eq!(bytes(27136.0), "27.1 kB");
        assert_eq!(seconds(3.24), "3.24 s");
        assert_eq!(seconds(0.00024576), "246 µs");
        assert_eq!(flops(12288000.0), "12.3 MFLOP");
    }
}
