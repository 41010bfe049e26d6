//! The calibration cache: what `mlpl calibrate` measured on each device (GEMM
//! throughput at several shapes, the cost of one kernel call, memory bandwidth,
//! the interpreter's cost per kernel, the process's baseline memory) and the
//! corrections learnt from measured runs. The editor, `estimate_train` and
//! `feasible` read this one file.
//!
//! Format (`version` 2; version 1 files, with only `gflops`, still read):
//! `{"version": 2, "devices": [{"device": "cpu", "gflops": G, "name", "memory_bytes",
//! "measured_at", "source", "model": {DeviceModel}}]}`.

use mlpl_devices::math;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A measured quantity: the median of repetitions and the 10th and 90th
/// percentiles (`lo` ≤ `median` ≤ `hi`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// The median.
    pub median: f64,
    /// The 10th percentile.
    pub lo: f64,
    /// The 90th percentile.
    pub hi: f64,
}

impl Measured {
    /// A value without spread.
    pub fn exact(v: f64) -> Measured {
        Measured {
            median: v,
            lo: v,
            hi: v,
        }
    }

    /// The median and percentiles of `samples` (which must not be empty).
    pub fn of(samples: &[f64]) -> Measured {
        let mut s: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        if s.is_empty() {
            return Measured::exact(f64::NAN);
        }
        s.sort_by(f64::total_cmp);
        let at = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
        Measured {
            median: at(0.5),
            lo: at(0.1),
            hi: at(0.9),
        }
    }
}

/// GEMM throughput measured at one shape: `batch` products `[m, k]·[k, n]`,
/// the left operand stored transposed when `ta`, the right one when `tb` (as
/// a step's weight and input gradients read them).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct GemmPoint {
    /// Rows.
    pub m: u64,
    /// Inner size.
    pub k: u64,
    /// Columns.
    pub n: u64,
    /// Independent products (1: one product).
    #[serde(default = "one_u64", skip_serializing_if = "is_one")]
    pub batch: u64,
    /// The left operand is read transposed.
    #[serde(default, skip_serializing_if = "is_false")]
    pub ta: bool,
    /// The right operand is read transposed.
    #[serde(default, skip_serializing_if = "is_false")]
    pub tb: bool,
    /// GFLOP/s.
    pub gflops: Measured,
}

impl GemmPoint {
    /// One plain product `[m, k]·[k, n]` measured at `gflops`.
    pub fn plain(m: u64, k: u64, n: u64, gflops: Measured) -> GemmPoint {
        GemmPoint {
            m,
            k,
            n,
            batch: 1,
            ta: false,
            tb: false,
            gflops,
        }
    }
}

fn one_u64() -> u64 {
    1
}

fn is_one(x: &u64) -> bool {
    *x == 1
}

fn is_false(x: &bool) -> bool {
    !*x
}

/// Seconds per evaluation of one transcendental function (its cache name,
/// `step_cost::kernels::Transcendental::name`) in an element-wise kernel over
/// arrays of `elems` elements, beyond the bytes it moves at the in-cache
/// bandwidth.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TranscendentalPoint {
    /// The function (`exp`, `tanh`, `gelu`, `gelu_backward`, …).
    pub func: String,
    /// Elements of the array it was measured on.
    pub elems: u64,
    /// Seconds per evaluation.
    pub seconds: Measured,
}

/// Throughput of the fused attention kernel (one direction) at one
/// calibrated shape: GFLOP/s of the multiply-adds the model counts for it
/// (`step_cost::kernels::attention_fmas`, two FLOPs each), so a call of
/// another shape costs its own count at this rate. Its exponentials, the
/// transposed tiles and the online softmax are in the rate, not priced apart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttentionPoint {
    /// The backward pass (`attention_backward`), else the forward.
    pub backward: bool,
    /// Query heads over the batch (B·H).
    pub heads: u64,
    /// Queries (and keys) per head.
    pub t: u64,
    /// Head width.
    pub d: u64,
    /// Causal.
    pub causal: bool,
    /// GFLOP/s of the counted work.
    pub gflops: Measured,
}

/// What a measured run taught: measured ÷ estimated, for time and memory, as a
/// running geometric mean over `runs` runs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Correction {
    /// Measured step time ÷ estimated.
    pub time: f64,
    /// Measured peak memory ÷ estimated.
    pub memory: f64,
    /// Runs averaged.
    pub runs: u32,
}

impl Default for Correction {
    fn default() -> Self {
        Correction {
            time: 1.0,
            memory: 1.0,
            runs: 0,
        }
    }
}

impl Correction {
    /// The most one run's ratio counts: a ratio further off than 10× either
    /// way is a different workload, not a calibration error.
    pub const RATIO_BOUNDS: (f64, f64) = (0.1, 10.0);
    /// The most one run moves the correction, either way (a factor).
    pub const MAX_STEP: f64 = 2.0;

    /// Adds one run's ratios (measured ÷ the uncorrected estimate; a ratio
    /// that is not finite, such as `f64::NAN` for "not measured", leaves its
    /// figure as it was). Each figure becomes the geometric mean of the last
    /// (up to) 10 runs' ratios, each clamped to [`Correction::RATIO_BOUNDS`],
    /// and moves by at most [`Correction::MAX_STEP`] per run, so one odd run
    /// cannot wreck it.
    pub fn add(&mut self, time: f64, memory: f64) {
        let n = self.runs.min(9) as f64;
        let mix = |old: f64, new: f64| {
            let (lo, hi) = Correction::RATIO_BOUNDS;
            let new = new.clamp(lo, hi);
            let old = if old.is_finite() && old > 0.0 {
                old
            } else {
                1.0
            };
            if new.is_finite() {
                let mean = math::exp((math::log(old) * n + math::log(new)) / (n + 1.0));
                mean.clamp(old / Correction::MAX_STEP, old * Correction::MAX_STEP)
            } else {
                old
            }
        };
        self.time = mix(self.time, time);
        self.memory = mix(self.memory, memory);
        self.runs = self.runs.saturating_add(1);
    }
}

/// Stores one measured run's ratios (measured ÷ the uncorrected estimate;
/// `f64::NAN` for one not measured) in the correction of device kind `kind`
/// (`cpu`, `cuda`, `mlx`) in the cache file at `path` ([`Correction::add`]).
/// Only an existing cache with a calibrated model of that device is changed
/// (`Ok(None)` otherwise: no file is created). The file is read again just
/// before the change and replaced atomically (written beside it, then
/// renamed), so a reader never sees half a file; of two processes learning at
/// the same moment, the last one's write wins.
pub fn learn(
    path: &Path,
    kind: &str,
    time: f64,
    memory: f64,
) -> std::io::Result<Option<Correction>> {
    let Some(mut cal) = Calibration::load(path) else {
        return Ok(None);
    };
    let Some(entry) = cal
        .devices
        .iter_mut()
        .find(|e| e.kind() == kind && e.gflops.is_finite() && e.gflops > 0.0 && e.model.is_some())
    else {
        return Ok(None);
    };
    let Some(model) = entry.model.as_mut() else {
        return Ok(None);
    };
    model.correction.add(time, memory);
    let learnt = model.correction;
    cal.version = 2;
    let text = serde_json::to_string_pretty(&cal).map_err(std::io::Error::other)?;
    let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text + "\n")?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })?;
    Ok(Some(learnt))
}

/// The cost model of one device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceModel {
    /// Seconds one kernel call costs in a replayed (captured) step, beyond its work.
    pub dispatch_s: Measured,
    /// Extra seconds per kernel call when the step is interpreted.
    pub interp_s: Measured,
    /// Extra seconds per byte of kernel outputs when the step is interpreted
    /// (fresh allocations).
    #[serde(default)]
    pub interp_byte_s: f64,
    /// GEMM throughput at the measured shapes.
    pub gemm: Vec<GemmPoint>,
    /// Bandwidth of element-wise kernels on arrays in cache, GB/s.
    pub cache_bandwidth_gbs: Measured,
    /// Bandwidth of element-wise kernels on arrays from memory, GB/s.
    pub bandwidth_gbs: Measured,
    /// Seconds of one evaluation of a transcendental function (`tanh`, `exp`)
    /// in an element-wise kernel, beyond the bytes it moves: both functions
    /// pooled, on arrays in cache that one thread runs. The cost of a function
    /// without [`DeviceModel::transcendentals`] of its own (a cache written
    /// before they were measured).
    #[serde(default)]
    pub transcendental_s: Measured,
    /// Seconds per evaluation of each function at several array sizes
    /// ([`DeviceModel::transcendental_seconds`]): a large array runs on every
    /// thread of the CPU's pool, a small one on one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transcendentals: Vec<TranscendentalPoint>,
    /// Rows and columns of the GEMM micro-kernel's tile: products compute whole
    /// tiles (`[1, 1]` when unknown).
    #[serde(default = "unit_tile")]
    pub tile: [u64; 2],
    /// Resident bytes of a process that has loaded a program and its data,
    /// before training.
    pub baseline_bytes: f64,
    /// Bytes the step's buffers hold at the peak per byte of kernel outputs
    /// (from the reference loop's peak memory).
    #[serde(default = "one")]
    pub arena_factor: f64,
    /// Bytes held at the peak, beyond weights, gradients and optimizer state,
    /// per byte of trainable parameters (the step's copies of them and their
    /// updates; from the parameter-heavy reference loop).
    #[serde(default = "param_default")]
    pub param_factor: f64,
    /// Measured ÷ modelled work time of the reference loop's step: the factor
    /// of kernels without one of their own in [`DeviceModel::kernel_factors`].
    #[serde(default = "one")]
    pub step_factor: f64,
    /// Measured ÷ modelled work time of each kernel (by its kernel-table name),
    /// from the calibration loops' timelines: what the bandwidth and GEMM
    /// figures miss for a kernel (strided reads, several passes, reductions).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kernel_factors: BTreeMap<String, f64>,
    /// The fused attention kernel's throughput at calibrated shapes
    /// ([`DeviceModel::attention_gflops`]); without them its calls are costed
    /// as batches of per-head products at the GEMM points.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attention: Vec<AttentionPoint>,
    /// Seconds per row of a row-wise kernel (softmax, cross-entropy, norms and
    /// their backward passes) beyond its bytes and evaluations: setting up
    /// the row (its maximum, a logarithm or root, a reduction in f64), which
    /// dominates short rows (`cross_entropy` of 2 classes took about 80 ns a
    /// row where its bytes said 4). 0 in a cache from before it was measured.
    #[serde(default)]
    pub row_s: Measured,
    /// Learnt from measured runs.
    #[serde(default)]
    pub correction: Correction,
}

/// The kernels that are one GEMM (or a batch of them) and nothing else: their
/// time is the calibrated throughput at their shape ([`DeviceModel::gemm`]),
/// without a kernel factor. A factor fitted on the calibration loops' small
/// products had charged the large products of other steps for the small ones'
/// overheads (the `matmul_t` factor 2.45 made a 4096-wide MLP's products 2.4×
/// too slow).
pub const PLAIN_PRODUCTS: &[&str] = &["matmul", "matmul_t"];

fn one() -> f64 {
    1.0
}

fn unit_tile() -> [u64; 2] {
    [1, 1]
}

fn param_default() -> f64 {
    2.0
}

impl DeviceModel {
    /// The model assumed for a device never calibrated, from its nominal GEMM
    /// throughput (`gflops`): dispatch and bandwidth figures typical of the kind
    /// (documented in docs/estimates.md), GEMMs at `gflops` from 256³ up and
    /// falling linearly in size below it.
    pub fn assumed(kind: &str, gflops: f64) -> DeviceModel {
        let (dispatch, interp, bw, base, trans) = match kind {
            "cuda" => (8e-6, 60e-6, 900.0, 400e6, 0.0),
            "mlx" => (15e-6, 60e-6, 200.0, 300e6, 0.0),
            _ => (0.5e-6, 2e-6, 10.0, 25e6, 3e-9),
        };
        let pts = [(16u64, 0.01), (64, 0.15), (256, 1.0), (1024, 1.0)];
        DeviceModel {
            dispatch_s: Measured::exact(dispatch),
            interp_s: Measured::exact(interp),
            gemm: pts
                .iter()
                .map(|&(s, f)| GemmPoint::plain(s, s, s, Measured::exact(gflops * f)))
                .collect(),
            cache_bandwidth_gbs: Measured::exact(4.0 * bw),
            bandwidth_gbs: Measured::exact(bw),
            transcendental_s: Measured::exact(trans),
            transcendentals: Vec::new(),
            tile: unit_tile(),
            baseline_bytes: base,
            interp_byte_s: 0.0,
            arena_factor: 2.5,
            param_factor: 2.0,
            step_factor: 1.0,
            kernel_factors: BTreeMap::new(),
            attention: Vec::new(),
            row_s: Measured::default(),
            correction: Correction::default(),
        }
    }

    /// GFLOP/s of the fused attention kernel (its `backward` pass or the
    /// forward) at head width `d`, from the percentile `pick` of its
    /// calibrated points ([`DeviceModel::attention`]): interpolated in log
    /// width and log throughput between the two nearest widths, the nearest
    /// one's beyond them; `None` without points of that direction.
    pub fn attention_gflops(
        &self,
        backward: bool,
        d: f64,
        pick: fn(&Measured) -> f64,
    ) -> Option<f64> {
        let mut pts: Vec<(f64, f64)> = self
            .attention
            .iter()
            .filter(|p| p.backward == backward && p.d > 0)
            .map(|p| (p.d as f64, pick(&p.gflops)))
            .filter(|(_, g)| g.is_finite() && *g > 0.0)
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (&first, &last) = (pts.first()?, pts.last()?);
        if d <= first.0 {
            return Some(first.1);
        }
        if d >= last.0 {
            return Some(last.1);
        }
        let i = pts.partition_point(|p| p.0 <= d);
        let ((x0, y0), (x1, y1)) = (pts[i - 1], pts[i]);
        if x1 <= x0 {
            return Some(y0);
        }
        let t = (math::log(d) - math::log(x0)) / (math::log(x1) - math::log(x0));
        Some(math::exp(
            math::log(y0) + t * (math::log(y1) - math::log(y0)),
        ))
    }

    /// Seconds per evaluation of function `func` (a
    /// [`TranscendentalPoint::func`] name) in a kernel over `elems` elements,
    /// from the percentile `pick`: its calibrated points' figures,
    /// interpolated in log size and log seconds between the two nearest sizes
    /// (as the bandwidth is) and the nearest point's beyond them; the pooled
    /// [`DeviceModel::transcendental_s`] for a function without points.
    pub fn transcendental_seconds(
        &self,
        func: &str,
        elems: f64,
        pick: fn(&Measured) -> f64,
    ) -> f64 {
        let mut pts: Vec<(f64, f64)> = self
            .transcendentals
            .iter()
            .filter(|p| p.func == func && p.elems > 0)
            .map(|p| (p.elems as f64, pick(&p.seconds)))
            .filter(|(_, s)| s.is_finite() && *s > 0.0)
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (Some(&first), Some(&last)) = (pts.first(), pts.last()) else {
            return pick(&self.transcendental_s);
        };
        if elems <= first.0 {
            return first.1;
        }
        if elems >= last.0 {
            return last.1;
        }
        let i = pts.partition_point(|p| p.0 <= elems);
        let ((x0, y0), (x1, y1)) = (pts[i - 1], pts[i]);
        if x1 <= x0 {
            return y0;
        }
        let t = (math::log(elems) - math::log(x0)) / (math::log(x1) - math::log(x0));
        math::exp(math::log(y0) + t * (math::log(y1) - math::log(y0)))
    }

    /// The factor of kernel `name`'s work time: 1 for the plain products
    /// ([`PLAIN_PRODUCTS`]: their throughput is measured at step-like shapes),
    /// else its own, else the step factor.
    pub fn kernel_factor(&self, name: &str) -> f64 {
        if PLAIN_PRODUCTS.contains(&name) {
            return 1.0;
        }
        self.kernel_factors
            .get(name)
            .copied()
            .unwrap_or(self.step_factor)
    }
}

/// One device's entry in the cache.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CalibrationEntry {
    /// The device target (`cpu`, `cuda`, `cuda:1`, `mlx`).
    pub device: String,
    /// The median GEMM GFLOP/s of the largest measured shape (version 1's only figure).
    pub gflops: f64,
    /// The matrix size of a version 1 measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_at: Option<u64>,
    /// The device's name, when the measuring program knew it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Device memory in bytes, when the measuring program knew it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<f64>,
    /// Who measured it (`mlpl calibrate`, a runner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The cost model (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<DeviceModel>,
}

impl CalibrationEntry {
    /// The entry's cost model: the measured one, else one assumed from `gflops`.
    pub fn device_model(&self) -> DeviceModel {
        match &self.model {
            Some(m) => m.clone(),
            None => DeviceModel::assumed(self.kind(), self.gflops),
        }
    }

    /// The device kind (`cuda` for `cuda:1`).
    pub fn kind(&self) -> &str {
        self.device.split(':').next().unwrap_or("")
    }
}

/// The cache file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Format version (2; 1 is read too).
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
    pub fn entry(&self, kind: &str) -> Option<&CalibrationEntry> {
        self.devices
            .iter()
            .find(|e| e.kind() == kind && e.gflops.is_finite() && e.gflops > 0.0)
    }

    /// The mutable entry of a device target, made when missing.
    pub fn entry_mut(&mut self, device: &str) -> &mut CalibrationEntry {
        let i = match self.devices.iter().position(|e| e.device == device) {
            Some(i) => i,
            None => {
                self.devices.push(CalibrationEntry {
                    device: device.to_string(),
                    gflops: 0.0,
                    size: None,
                    measured_at: None,
                    name: None,
                    memory_bytes: None,
                    source: None,
                    model: None,
                });
                self.devices.len() - 1
            }
        };
        &mut self.devices[i]
    }

    /// Parses a cache file's text.
    pub fn parse(text: &str) -> Option<Calibration> {
        serde_json::from_str(text).ok()
    }

    /// Reads a cache file; `None` when it is missing or malformed.
    pub fn load(path: &Path) -> Option<Calibration> {
        let text = std::fs::read_to_string(path).ok()?;
        let mut c = Calibration::parse(&text)?;
        c.path = Some(path.to_path_buf());
        Some(c)
    }

    /// Reads the cache at [`default_path`].
    pub fn load_default() -> Option<Calibration> {
        Calibration::load(&default_path()?)
    }

    /// Writes the cache as pretty JSON (version 2), making its directory.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut doc = self.clone();
        doc.version = 2;
        let text = serde_json::to_string_pretty(&doc).map_err(std::io::Error::other)?;
        std::fs::write(path, text + "\n")
    }
}

/// Where the cache lives: `$MLPL_CACHE_DIR/calibration.json`, else
/// `$XDG_CACHE_HOME/mlpl/calibration.json`, else `~/.cache/mlpl/calibration.json`.
pub fn default_path() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let dir = var("MLPL_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| var("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("mlpl")))
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache").join("mlpl")))?;
    Some(dir.join("calibration.json"))
}

/// The cost model of device kind `kind` (`cpu`, `cuda`, `mlx`): the cache's
/// calibrated one, else one assumed from `nominal_gflops`; and whether it was
/// calibrated.
pub fn device_model(
    cal: Option<&Calibration>,
    kind: &str,
    nominal_gflops: f64,
) -> (DeviceModel, bool) {
    match cal.and_then(|c| c.entry(kind)) {
        Some(e) => (e.device_model(), e.model.is_some()),
        None => (DeviceModel::assumed(kind, nominal_gflops), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_correction_moves_at_most_twofold_per_run_toward_the_bounded_ratio() {
        let mut c = Correction::default();
        // A wild ratio counts as 10, and moves the correction 2× at most.
        c.add(1e6, 1e-6);
        assert_eq!((c.time, c.memory, c.runs), (2.0, 0.5, 1));
        c.add(10.0, 0.1);
        assert_eq!((c.time, c.memory, c.runs), (4.0, 0.25, 2));
        // A figure not measured keeps its value; the run still counts.
        c.add(4.0, f64::NAN);
        assert_eq!((c.time, c.memory, c.runs), (4.0, 0.25, 3));
        // Steady ratios: the geometric mean of the runs.
        let mut c = Correction::default();
        c.add(1.5, 1.0);
        c.add(1.5, 1.0);
        assert!((c.time - 1.5).abs() < 1e-12);
        c.add(1.0, 1.0);
        assert!((c.time - math::exp(math::log(1.5) * 2.0 / 3.0)).abs() < 1e-12);
    }

    #[test]
    fn learn_changes_only_an_existing_calibrated_entry() {
        let dir = std::env::temp_dir().join(format!("mlpl-learn-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("calibration.json");
        // No file: none is made.
        assert_eq!(learn(&path, "cpu", 2.0, 2.0).unwrap(), None);
        assert!(!path.exists());
        // A version 1 entry (no model) and no CUDA entry: unchanged.
        let v1 = r#"{"version":1,"devices":[{"device":"cpu","gflops":20,"size":512}]}"#;
        std::fs::write(&path, v1).unwrap();
        assert_eq!(learn(&path, "cpu", 2.0, 2.0).unwrap(), None);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), v1);
        // A calibrated entry learns, and the file says so.
        let mut cal = Calibration::default();
        let e = cal.entry_mut("cpu");
        e.gflops = 20.0;
        e.model = Some(DeviceModel::assumed("cpu", 20.0));
        cal.save(&path).unwrap();
        assert_eq!(learn(&path, "cuda", 2.0, 2.0).unwrap(), None);
        let c = learn(&path, "cpu", 1.5, f64::NAN).unwrap().unwrap();
        assert_eq!((c.time, c.memory, c.runs), (1.5, 1.0, 1));
        let back = Calibration::load(&path).unwrap();
        assert_eq!(back.devices[0].model.as_ref().unwrap().correction, c);
        // Nothing is left beside it.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).ok();
    }
}
