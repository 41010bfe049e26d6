//! [`MlxBackend`]: the shared MLX device, its counters, the seam between host
//! tensors and MLX arrays, and the error mapping (out of memory is E0503).

use std::sync::{Arc, Mutex, OnceLock, Weak};

use mlx_rs::{Array, Dtype};

use super::buffer::MlxBuffer;
use super::MlxUnavailable;
use crate::backend::{Backend, DeviceError, DeviceKind, Result};
use crate::device_stats::DeviceStats;
use crate::fallback::CpuFallback;
use crate::tensor::{Storage, Tensor};

/// The device's name as MLPL writes it.
pub(crate) const DEVICE: &str = "mlx";

/// How many host tensors' MLX copies are kept for reuse while the host
/// tensor lives (constants and batches used by several kernels).
const UPLOAD_CACHE: usize = 64;

/// MLX's graph and its evaluation are used from one thread at a time: every
/// kernel and every evaluation holds this lock.
static MLX: Mutex<()> = Mutex::new(());

thread_local! {
    /// Whether this thread holds [`MLX`] (a compiled step's graph is traced by
    /// calling the kernels while the compiled call holds the lock).
    static HELD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` holding the MLX lock (at once when this thread holds it already).
pub(crate) fn locked<T>(f: impl FnOnce() -> T) -> T {
    if HELD.with(|h| h.get()) {
        return f();
    }
    let _guard = MLX.lock().unwrap_or_else(|p| p.into_inner());
    /// Clears [`HELD`] when `f` returns or unwinds.
    struct Release;
    impl Drop for Release {
        fn drop(&mut self) {
            HELD.with(|h| h.set(false));
        }
    }
    HELD.with(|h| h.set(true));
    let _release = Release;
    f()
}

/// The MLX device: its counters, the CPU fallbacks taken since they were last
/// reported, and the MLX copies of live host tensors.
#[derive(Debug)]
pub struct MlxBackend {
    pub(super) stats: Arc<DeviceStats>,
    fallbacks: Mutex<Vec<&'static str>>,
    uploads: Mutex<Vec<Upload>>,
}

/// The MLX copy of a live host tensor, reused only on the thread that made it
/// (MLX's streams are per thread, see [`PENDING`]).
#[derive(Debug)]
struct Upload {
    host: Weak<Vec<f32>>,
    thread: std::thread::ThreadId,
    array: Array,
}

/// The process-wide backend (opened once; a failure is remembered).
pub(super) fn shared() -> std::result::Result<Arc<dyn Backend>, MlxUnavailable> {
    opened().map(|b| b as Arc<dyn Backend>)
}

/// The process-wide backend as its type.
fn opened() -> std::result::Result<Arc<CpuFallback<MlxBackend>>, MlxUnavailable> {
    type Opened = std::result::Result<Arc<CpuFallback<MlxBackend>>, MlxUnavailable>;
    static SHARED: OnceLock<Opened> = OnceLock::new();
    SHARED
        .get_or_init(|| MlxBackend::open().map(|b| Arc::new(CpuFallback(b))))
        .clone()
}

/// A device error from an MLX failure while doing `what`: out of memory
/// (E0503) when MLX says an allocation failed, else a backend error.
pub(crate) fn mlx_error(what: &str, e: impl std::fmt::Display) -> DeviceError {
    let message = e.to_string();
    let lower = message.to_lowercase();
    if lower.contains("allocat") || lower.contains("out of memory") || lower.contains("bad_alloc") {
        DeviceError::OutOfMemory {
            device: DEVICE.to_string(),
            op: what.to_string(),
            requested_bytes: 0,
            free_bytes: None,
        }
    } else {
        DeviceError::Backend {
            device: DEVICE.to_string(),
            message: format!("{what}: {message}"),
        }
    }
}

/// A row-major contiguous form of `a` (the same array when it already is).
pub(crate) fn contiguous(a: &Array) -> Result<Array> {
    locked(|| a.contiguous()).map_err(|e| mlx_error("contiguous", e))
}

thread_local! {
    /// Optimizer results not evaluated yet: the updates of one optimizer call
    /// (one `adam_update` per parameter) are evaluated together, by the next
    /// evaluation or the next other kernel ([`settle_pending`]). Per thread:
    /// MLX's streams belong to the thread that made them (an array made on
    /// one thread cannot be evaluated on another: "There is no Stream(cpu, N)
    /// in current thread"), and each program runs on one thread.
    static PENDING: std::cell::RefCell<Vec<Array>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Evaluates `arrays` and the pending optimizer results (one evaluation,
/// counted), holding the MLX lock.
pub(crate) fn evaluate<'a>(
    stats: &DeviceStats,
    arrays: impl IntoIterator<Item = &'a Array>,
    what: &str,
) -> Result<()> {
    stats.evaluation();
    locked(|| {
        let pending = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
        let mut all: Vec<&Array> = arrays.into_iter().collect();
        all.extend(&pending);
        mlx_rs::transforms::eval(all)
    })
    .map_err(|e| mlx_error(what, e))
}

/// Keeps `arrays` (a parameter update) for the next evaluation.
pub(crate) fn defer(arrays: impl IntoIterator<Item = Array>) {
    PENDING.with(|p| p.borrow_mut().extend(arrays));
}

/// Evaluates the pending optimizer results, if any (one evaluation).
pub(crate) fn settle_pending(stats: &DeviceStats) -> Result<()> {
    let any = PENDING.with(|p| !p.borrow().is_empty());
    if any && !tracing() {
        evaluate(stats, [], "settling the parameter updates")?;
    }
    Ok(())
}

thread_local! {
    /// Whether this thread is tracing a compiled step's graph (see
    /// [`trace_fallback`]).
    static TRACING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Why the trace cannot be one graph: the first kernel that fell back to
    /// the CPU or read an MLX value on the host while tracing.
    static TRACE_FALLBACK: std::cell::Cell<Option<&'static str>> = const { std::cell::Cell::new(None) };
}

/// Whether this thread is tracing a compiled step: nothing may be evaluated
/// or read on the host then.
pub(crate) fn tracing() -> bool {
    TRACING.with(|t| t.get())
}

/// Runs `f` as the trace of a compiled step; `Err` names the first kernel
/// that would have run on the CPU, or `"a read on the host"` (a compiled
/// graph can do neither: the step then is not compiled). Host reads while
/// tracing give zeros, uncounted; they only lead to that error.
pub(crate) fn traced<T>(f: impl FnOnce() -> T) -> std::result::Result<T, &'static str> {
    TRACING.with(|t| t.set(true));
    TRACE_FALLBACK.with(|t| t.set(None));
    let out = f();
    TRACING.with(|t| t.set(false));
    match TRACE_FALLBACK.with(|t| t.take()) {
        Some(kernel) => Err(kernel),
        None => Ok(out),
    }
}

/// The kernel that fell back while tracing, if any.
pub(crate) fn trace_fallback() -> Option<&'static str> {
    TRACE_FALLBACK.with(|t| t.get())
}

/// Notes, while tracing, that the trace cannot be one graph because of `what`.
pub(crate) fn spoil_trace(what: &'static str) {
    TRACE_FALLBACK.with(|t| t.set(t.get().or(Some(what))));
}

/// Why a kernel failed: in MLX, or at the seam (an upload or a reshape).
#[derive(Debug)]
pub(super) enum Fail {
    /// MLX raised an error.
    Mlx(mlx_rs::error::Exception),
    /// A device error.
    Device(DeviceError),
}

impl From<mlx_rs::error::Exception> for Fail {
    fn from(e: mlx_rs::error::Exception) -> Fail {
        Fail::Mlx(e)
    }
}

impl From<DeviceError> for Fail {
    fn from(e: DeviceError) -> Fail {
        Fail::Device(e)
    }
}

/// `usize` dimensions as MLX's `i32`.
pub(crate) fn dims(shape: &[usize]) -> Vec<i32> {
    shape.iter().map(|&d| d as i32).collect()
}

impl MlxBackend {
    /// Starts MLX: its library loaded ([`super::library`]), then one small
    /// computation evaluated, so a library that cannot run says so here rather
    /// than in the first kernel.
    fn open() -> std::result::Result<MlxBackend, MlxUnavailable> {
        super::library::load()?;
        let probe = std::panic::catch_unwind(|| {
            locked(|| {
                let a = Array::from_slice(&[1.0f32, 2.0], &[2]);
                let b = mlx_rs::ops::add(&a, &a)?;
                b.eval()?;
                Ok::<f32, mlx_rs::error::Exception>(b.as_slice::<f32>()[1])
            })
        });
        match probe {
            Ok(Ok(v)) if v == 4.0 => {}
            Ok(Ok(v)) => return Err(MlxUnavailable::Failed(format!("1 + 1 + 2 + 2 gave {v}"))),
            Ok(Err(e)) => return Err(MlxUnavailable::Failed(e.what().to_string())),
            Err(_) => return Err(MlxUnavailable::Failed("MLX panicked while starting".into())),
        }
        Ok(MlxBackend {
            stats: Arc::new(DeviceStats::new(DeviceKind::Mlx)),
            fallbacks: Mutex::new(Vec::new()),
            uploads: Mutex::new(Vec::new()),
        })
    }

    /// `t` as an MLX array of its shape: the array itself when `t` lives on
    /// this device, else a copy of its elements (an upload, counted; a live host
    /// tensor is copied once).
    pub(super) fn array(&self, t: &Tensor) -> Result<Array> {
        let shape = dims(t.shape());
        let flat = match t.storage() {
            Storage::Device(d) => match d.buffer().as_any().downcast_ref::<MlxBuffer>() {
                Some(b) => b.array(),
                None => self.copy_in(t.host()),
            },
            Storage::Host(data) => {
                let mut cache = self.uploads.lock().unwrap_or_else(|p| p.into_inner());
                cache.retain(|u| u.host.strong_count() > 0);
                let (key, thread) = (Arc::as_ptr(data), std::thread::current().id());
                match cache
                    .iter()
                    .find(|u| u.thread == thread && std::ptr::eq(u.host.as_ptr(), key))
                {
                    Some(u) => u.array.clone(),
                    None => {
                        let array = self.copy_in(data);
                        if cache.len() >= UPLOAD_CACHE {
                            cache.remove(0);
                        }
                        cache.push(Upload {
                            host: Arc::downgrade(data),
                            thread,
                            array: array.clone(),
                        });
                        array
                    }
                }
            }
        };
        if flat.shape() == shape.as_slice() {
            return Ok(flat);
        }
        flat.reshape(&shape).map_err(|e| mlx_error("reshape", e))
    }

    /// A new MLX array holding `data` (flat), counted as an upload.
    fn copy_in(&self, data: &[f32]) -> Array {
        self.stats.upload(4 * data.len() as u64);
        Array::from_slice(data, &[data.len() as i32])
    }

    /// A tensor of `a`'s shape holding `a` (cast to f32 when it is not).
    pub(super) fn tensor(&self, a: Array) -> Result<Tensor> {
        let a = if a.dtype() == Dtype::Float32 {
            a
        } else {
            a.as_dtype(Dtype::Float32)
                .map_err(|e| mlx_error("as f32", e))?
        };
        let shape: Vec<usize> = a.shape().iter().map(|&d| d as usize).collect();
        let n: usize = shape.iter().product();
        if n == 0 {
            return Ok(Tensor::zeros(shape));
        }
        self.check_fits(4 * n as u64)?;
        Ok(Tensor::from_device(
            shape,
            Box::new(MlxBuffer::new(a, &self.stats)),
        ))
    }

    /// Out of memory (E0503) now, when an array of `bytes` cannot fit in MLX's
    /// memory limit beside what MLX holds: a lazy array would otherwise fail
    /// only when it is evaluated, far from the operation that asked for it.
    fn check_fits(&self, bytes: u64) -> Result<()> {
        let limit = mlx_rs::memory::memory_limit().unwrap_or(usize::MAX) as u64;
        let active = mlx_rs::memory::active_memory().unwrap_or(0) as u64;
        if bytes > limit.saturating_sub(active) {
            return Err(DeviceError::OutOfMemory {
                device: DEVICE.to_string(),
                op: "allocating an MLX array".to_string(),
                requested_bytes: bytes,
                free_bytes: Some(limit.saturating_sub(active)),
            });
        }
        Ok(())
    }

    /// Runs one kernel `name` (counted) holding the MLX lock; MLX failures
    /// become device errors.
    pub(super) fn run<T>(
        &self,
        name: &str,
        f: impl FnOnce() -> std::result::Result<T, Fail>,
    ) -> Option<Result<T>> {
        self.stats.kernel();
        if name != "adam_update" {
            if let Err(e) = settle_pending(&self.stats) {
                return Some(Err(e));
            }
        }
        Some(locked(f).map_err(|e| match e {
            Fail::Mlx(e) => mlx_error(name, e),
            Fail::Device(e) => e,
        }))
    }

    /// Notes a kernel that runs on the CPU (counted, reported as W0503).
    pub(super) fn note_fallback(&self, kernel: &'static str) {
        if tracing() {
            spoil_trace(kernel);
            return;
        }
        self.stats.fallback();
        let mut names = self.fallbacks.lock().unwrap_or_else(|p| p.into_inner());
        if !names.contains(&kernel) {
            names.push(kernel);
        }
    }

    /// The fallbacks noted since the last call.
    pub(super) fn take_noted_fallbacks(&self) -> Vec<&'static str> {
        std::mem::take(&mut *self.fallbacks.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Evaluates `arrays` now with the pending updates (counted): where a
    /// step's state is settled, so that the graph does not grow across steps.
    pub(super) fn settle(&self, arrays: &[&Array], what: &str) -> Result<()> {
        evaluate(&self.stats, arrays.iter().copied(), what)
    }

    /// The process-wide backend this one is (for replaying kernels by name).
    pub(super) fn shared_backend() -> Arc<CpuFallback<MlxBackend>> {
        opened().expect("the MLX backend is open: one of its methods runs")
    }
}
