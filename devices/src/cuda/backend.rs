//! [`CudaBackend`]: opening a device, moving data, launching kernels, and the
//! [`Backend`] implementation that dispatches to the op-family modules.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use cudarc::driver::{
    sys::CUresult, CudaContext, CudaFunction, CudaSlice, CudaStream, DriverError, LaunchArgs,
    LaunchConfig,
};

use super::buffer::{CudaBuffer, Stats};
use super::kernels::MODULES;
use super::layout::split_at_axis;
use super::reduce::reduction_view;
use super::CudaUnavailable;
use crate::backend::{
    AdamStep, Backend, BinaryOp, Counters, DeviceError, DeviceKind, ReduceOp, Result, UnaryOp,
};
use crate::cpu::CpuBackend;
use crate::tensor::{Storage, Tensor};

/// The environment variable naming an NVRTC library file to load before the
/// system's (e.g. the one `scripts/nvrtc-venv.sh` installs).
pub const NVRTC_LIB_VAR: &str = "MLPL_NVRTC_LIB";

/// Most host tensors whose device copies are kept (see [`CudaBackend::operand`]).
const UPLOAD_CACHE: usize = 64;

/// Threads per block of the element-wise kernels.
const THREADS: u32 = 256;
/// Most blocks one launch asks for (the kernels loop over the rest).
const MAX_BLOCKS: u64 = 1 << 20;

/// One NVIDIA GPU: a context, its stream, a cuBLAS handle and the loaded kernels.
pub struct CudaBackend {
    name: String,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    pub(super) blas: cudarc::cublas::CudaBlas,
    functions: HashMap<&'static str, CudaFunction>,
    pub(super) stats: Arc<Stats>,
    fallbacks: Mutex<Vec<&'static str>>,
    /// Device copies of host tensors, keyed by their (live) host storage.
    uploads: Mutex<Vec<(Weak<Vec<f32>>, Arc<CudaBuffer>)>>,
    cpu: CpuBackend,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend")
            .field("device", &self.name)
            .finish()
    }
}

/// The process-wide backend of device `ordinal` (opened once; failures are remembered).
pub(super) fn shared(ordinal: usize) -> std::result::Result<Arc<dyn Backend>, CudaUnavailable> {
    type Opened = std::result::Result<Arc<CudaBackend>, CudaUnavailable>;
    static OPENED: OnceLock<Mutex<HashMap<usize, Opened>>> = OnceLock::new();
    let mut map = OPENED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let entry = map
        .entry(ordinal)
        .or_insert_with(|| CudaBackend::open(ordinal).map(Arc::new));
    entry.clone().map(|b| b as Arc<dyn Backend>)
}

/// Loads the NVRTC library named by [`NVRTC_LIB_VAR`] and keeps it loaded, so that
/// the driver-independent name lookup of cudarc finds it already in the process.
pub fn preload_nvrtc() -> std::result::Result<Option<String>, String> {
    static LOADED: OnceLock<std::result::Result<Option<String>, String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let Some(path) = std::env::var_os(NVRTC_LIB_VAR) else {
                return Ok(None);
            };
            let shown = path.to_string_lossy().into_owned();
            // SAFETY: loading NVIDIA's NVRTC runs its (trusted) initialisers only.
            match unsafe { libloading::Library::new(&path) } {
                Ok(lib) => {
                    std::mem::forget(lib);
                    Ok(Some(shown))
                }
                Err(e) => Err(format!("{NVRTC_LIB_VAR}={shown} could not be loaded: {e}")),
            }
        })
        .clone()
}

/// Keeps memory freed by dropped tensors in the device's default pool instead of
/// returning it to the driver at every synchronisation (the pool's default), so
/// the steady state of a training loop allocates without driver calls. Best effort:
/// devices without stream-ordered allocation keep the default.
fn keep_freed_memory_pooled(ctx: &Arc<CudaContext>) {
    use cudarc::driver::sys;
    if !ctx.has_async_alloc() {
        return;
    }
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    let mut threshold: u64 = u64::MAX;
    // SAFETY: `pool` receives the device's default pool; the attribute takes a u64.
    unsafe {
        if sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) == sys::CUresult::CUDA_SUCCESS
        {
            let _ = sys::cuMemPoolSetAttribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut threshold as *mut u64).cast(),
            );
        }
    }
}

/// Returns the unused memory of the device's default pool to the driver.
fn trim_pool(ctx: &Arc<CudaContext>, stream: &Arc<CudaStream>) {
    use cudarc::driver::sys;
    if !ctx.has_async_alloc() || stream.synchronize().is_err() {
        return;
    }
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: `pool` receives the device's default pool.
    unsafe {
        if sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) == sys::CUresult::CUDA_SUCCESS
        {
            let _ = sys::cuMemPoolTrimTo(pool, 0);
        }
    }
}

/// A kernel's grid for `n` independent items.
pub(super) fn grid(n: usize) -> LaunchConfig {
    let blocks = (n as u64).div_ceil(THREADS as u64).clamp(1, MAX_BLOCKS) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A kernel's grid for `rows` rows of `len` elements, one block per row.
pub(super) fn row_grid(rows: usize, len: usize) -> LaunchConfig {
    let threads = (len.max(1).next_power_of_two() as u32).clamp(32, 512);
    LaunchConfig {
        grid_dim: ((rows as u64).clamp(1, MAX_BLOCKS) as u32, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// An input of a kernel: a tensor already on this GPU, or the device copy of a
/// host tensor.
pub(super) enum Operand<'a> {
    Resident(&'a CudaBuffer),
    Uploaded(Arc<CudaBuffer>),
}

impl Operand<'_> {
    /// The device memory.
    pub(super) fn slice(&self) -> &CudaSlice<f32> {
        match self {
            Operand::Resident(b) => b.slice(),
            Operand::Uploaded(b) => b.slice(),
        }
    }
}

impl CudaBackend {
    /// Opens device `ordinal`: loads the driver, cuBLAS and NVRTC, and compiles and
    /// loads every kernel module. Never panics (cudarc's own panics are caught).
    pub fn open(ordinal: usize) -> std::result::Result<CudaBackend, CudaUnavailable> {
        match catch_unwind(AssertUnwindSafe(|| CudaBackend::open_inner(ordinal))) {
            Ok(r) => r,
            Err(p) => {
                let why = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "the CUDA libraries panicked".to_string());
                Err(CudaUnavailable::Failed(why))
            }
        }
    }

    fn open_inner(ordinal: usize) -> std::result::Result<CudaBackend, CudaUnavailable> {
        use CudaUnavailable as U;
        // SAFETY: these only try to dlopen the libraries.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(U::DriverNotFound);
        }
        preload_nvrtc().map_err(U::Failed)?;
        let failed = |what: &str, e: &dyn std::fmt::Display| U::Failed(format!("{what}: {e}"));
        let count = CudaContext::device_count().map_err(|e| failed("counting devices", &e))?;
        let count = count.max(0) as usize;
        if ordinal >= count {
            return Err(U::NoDevice { ordinal, count });
        }
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(U::LibraryNotFound("NVRTC (libnvrtc.so)"));
        }
        if !unsafe { cudarc::cublas::sys::is_culib_present() } {
            return Err(U::LibraryNotFound("cuBLAS (libcublas.so)"));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| failed("creating a context", &e))?;
        // One stream: kernels are ordered by it, so cross-stream events are not needed.
        // SAFETY: every buffer of this backend is used on this one stream.
        unsafe { ctx.disable_event_tracking() };
        keep_freed_memory_pooled(&ctx);
        let stream = ctx.default_stream();
        let blas = cudarc::cublas::CudaBlas::new(stream.clone())
            .map_err(|e| failed("creating a cuBLAS handle", &e))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(|e| failed("reading the compute capability", &e))?;
        let arch: &'static str = Box::leak(format!("compute_{major}{minor}").into_boxed_str());
        let mut functions = HashMap::new();
        for m in MODULES {
            let ptx = m
                .compile(arch)
                .map_err(|e| failed(&format!("compiling kernels/{}.cu", m.name), &e))?;
            let module = ctx
                .load_module(ptx)
                .map_err(|e| failed(&format!("loading kernels/{}.cu", m.name), &e))?;
            for f in m.functions() {
                let func = module
                    .load_function(f)
                    .map_err(|e| failed(&format!("loading kernel {f}"), &e))?;
                functions.insert(f, func);
            }
        }
        Ok(CudaBackend {
            name: if ordinal == 0 {
                "cuda".to_string()
            } else {
                format!("cuda:{ordinal}")
            },
            ctx,
            stream,
            blas,
            functions,
            stats: Arc::new(Stats::new(crate::DeviceKind::Cuda)),
            fallbacks: Mutex::new(Vec::new()),
            uploads: Mutex::new(Vec::new()),
            cpu: CpuBackend::new(),
        })
    }

    /// The device's name as MLPL writes it (`cuda`, `cuda:1`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The stream every kernel of this backend runs on.
    pub(super) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Turns a driver failure during `op` into a device error; out-of-memory
    /// becomes [`DeviceError::OutOfMemory`] with the bytes asked and free.
    pub(super) fn driver_error(&self, e: DriverError, op: &str, bytes: usize) -> DeviceError {
        if e.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            DeviceError::OutOfMemory {
                device: self.name.clone(),
                op: op.to_string(),
                requested_bytes: bytes as u64,
                free_bytes: self.ctx.mem_get_info().ok().map(|(free, _)| free as u64),
            }
        } else {
            DeviceError::Backend {
                device: self.name.clone(),
                message: format!("{op}: {e}"),
            }
        }
    }

    /// A backend failure during `op` that is not a driver error.
    pub(super) fn failure(&self, op: &str, message: impl std::fmt::Display) -> DeviceError {
        DeviceError::Backend {
            device: self.name.clone(),
            message: format!("{op}: {message}"),
        }
    }

    /// Uninitialised device memory for `n` elements (at least one is allocated).
    /// When the device is full, the memory pooled from freed tensors is returned
    /// to the driver and the allocation tried once more before reporting E0503.
    pub(super) fn alloc(&self, n: usize, op: &str) -> Result<CudaBuffer> {
        let bytes = 4 * n.max(1);
        // SAFETY: every kernel writes all `n` elements it is given before they are read.
        let first = unsafe { self.stream.alloc::<f32>(n.max(1)) };
        let slice = match first {
            Err(e) if e.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                trim_pool(&self.ctx, &self.stream);
                // SAFETY: as above.
                unsafe { self.stream.alloc::<f32>(n.max(1)) }
            }
            other => other,
        }
        .map_err(|e| self.driver_error(e, op, bytes))?;
        Ok(CudaBuffer::new(slice, n, &self.name, &self.stats))
    }

    /// Zeroed device memory for `n` elements.
    pub(super) fn zeros(&self, n: usize, op: &str) -> Result<CudaBuffer> {
        let mut buf = self.alloc(n, op)?;
        self.stream
            .memset_zeros(buf.slice_mut())
            .map_err(|e| self.driver_error(e, op, 4 * n.max(1)))?;
        Ok(buf)
    }

    /// Copies host data to a new buffer (one counted upload).
    fn upload_slice(&self, data: &[f32], op: &str) -> Result<CudaBuffer> {
        if data.is_empty() {
            return self.zeros(0, op);
        }
        let mut buf = self.alloc(data.len(), op)?;
        self.stream
            .memcpy_htod(data, buf.slice_mut())
            .map_err(|e| self.driver_error(e, op, 4 * data.len()))?;
        self.stats.upload(4 * data.len() as u64);
        Ok(buf)
    }

    /// `t` as a kernel input: its buffer when it already lives on this GPU, otherwise
    /// a device copy of its host data. Copies are kept while the host storage lives
    /// (a data batch or a frozen parameter used every step is uploaded once); host
    /// storage cannot change in place while the cache watches it (`Arc::make_mut`
    /// moves it), so a kept copy is never stale.
    pub(super) fn operand<'a>(&self, t: &'a Tensor, op: &str) -> Result<Operand<'a>> {
        match t.storage() {
            Storage::Device(d) => {
                if let Some(cb) = d.buffer().as_any().downcast_ref::<CudaBuffer>() {
                    if cb.in_context(&self.ctx) {
                        return Ok(Operand::Resident(cb));
                    }
                }
                // Another device's tensor: through host memory.
                Ok(Operand::Uploaded(Arc::new(
                    self.upload_slice(t.host(), op)?,
                )))
            }
            Storage::Host(data) => {
                let mut cache = self.uploads.lock().unwrap_or_else(|p| p.into_inner());
                cache.retain(|(host, _)| host.strong_count() > 0);
                let key = Arc::as_ptr(data);
                if let Some((_, buf)) = cache
                    .iter()
                    .find(|(host, _)| std::ptr::eq(host.as_ptr(), key))
                {
                    return Ok(Operand::Uploaded(buf.clone()));
                }
                let buf = Arc::new(self.upload_slice(data, op)?);
                if cache.len() >= UPLOAD_CACHE {
                    cache.remove(0);
                }
                cache.push((Arc::downgrade(data), buf.clone()));
                Ok(Operand::Uploaded(buf))
            }
        }
    }

    /// A tensor of `shape` owning `buf` (an empty one needs no device memory).
    pub(super) fn tensor(&self, shape: Vec<usize>, buf: CudaBuffer) -> Tensor {
        if shape.iter().product::<usize>() == 0 {
            return Tensor::zeros(shape);
        }
        Tensor::from_device(shape, Box::new(buf))
    }

    /// The loaded kernel `name`.
    pub(super) fn function(&self, name: &'static str) -> Result<&CudaFunction> {
        self.functions
            .get(name)
            .ok_or_else(|| self.failure(name, "kernel not loaded"))
    }

    /// Launches a prepared kernel call and counts it.
    pub(super) fn launch(
        &self,
        mut args: LaunchArgs<'_>,
        cfg: LaunchConfig,
        op: &str,
    ) -> Result<()> {
        // SAFETY: the op modules pass the argument list their kernel declares, with
        // buffers of the sizes it indexes.
        unsafe { args.launch(cfg) }.map_err(|e| self.driver_error(e, op, 0))?;
        self.stats.kernel();
        Ok(())
    }

    /// Runs `op` on the CPU because this GPU has no kernel for these inputs:
    /// counted, and reported by [`Backend::take_fallbacks`] (W0503).
    pub(super) fn on_cpu<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&CpuBackend) -> Result<T>,
    ) -> Result<T> {
        self.stats.fallback();
        let mut names = self.fallbacks.lock().unwrap_or_else(|p| p.into_inner());
        if !names.contains(&op) {
            names.push(op);
        }
        drop(names);
        f(&self.cpu)
    }
}

impl Backend for CudaBackend {
    fn kind(&self) -> DeviceKind {
        DeviceKind::Cuda
    }

    fn counters(&self) -> Counters {
        self.stats.snapshot()
    }

    fn reset_counters(&self) {
        self.stats.reset();
    }

    fn take_fallbacks(&self) -> Vec<&'static str> {
        std::mem::take(&mut *self.fallbacks.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn upload(&self, t: &Tensor) -> Result<Tensor> {
        if let Some(b) = t.device_buffer() {
            if let Some(cb) = b.as_any().downcast_ref::<CudaBuffer>() {
                if cb.in_context(&self.ctx) {
                    return Ok(t.clone());
                }
            }
        }
        let buf = self.upload_slice(t.host(), "upload")?;
        Ok(self.tensor(t.shape().to_vec(), buf))
    }

    fn download(&self, t: &Tensor) -> Result<Tensor> {
        match t.device_buffer() {
            Some(b) => Ok(Tensor::from_vec(t.shape().to_vec(), b.to_host()?)),
            None => Ok(t.clone()),
        }
    }

    fn unary(&self, op: UnaryOp, x: &Tensor) -> Result<Tensor> {
        self.unary_op(op, x)
    }

    fn binary(&self, op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.binary_op(op, a, b)
    }

    fn matmul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.matmul_op(a, b, false, false)
    }

    fn matmul_t(
        &self,
        a: &Tensor,
        b: &Tensor,
        transpose_a: bool,
        transpose_b: bool,
    ) -> Result<Tensor> {
        self.matmul_op(a, b, transpose_a, transpose_b)
    }

    fn reduce(&self, op: ReduceOp, x: &Tensor, axis: Option<usize>) -> Result<Tensor> {
        self.reduce_op(op, x, axis)
    }

    fn argmax(&self, x: &Tensor, axis: Option<usize>) -> Result<Tensor> {
        self.argmax_op(x, axis)
    }

    fn softmax(&self, x: &Tensor, axis: usize) -> Result<Tensor> {
        self.along_axis(
            "softmax_fwd",
            x,
            x.shape().to_vec(),
            split_at_axis(x.shape(), axis),
            true,
        )
    }

    fn log_softmax(&self, x: &Tensor, axis: usize) -> Result<Tensor> {
        self.along_axis(
            "log_softmax_fwd",
            x,
            x.shape().to_vec(),
            split_at_axis(x.shape(), axis),
            true,
        )
    }

    fn logsumexp(&self, x: &Tensor, axis: usize) -> Result<Tensor> {
        let (shape, view) = reduction_view(x.shape(), Some(axis));
        self.along_axis("logsumexp_fwd", x, shape, view, true)
    }

    fn softmax_backward(&self, y: &Tensor, dy: &Tensor, axis: usize) -> Result<Tensor> {
        self.softmax_backward_op(y, dy, axis)
    }

    fn cross_entropy(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        want_grad: bool,
    ) -> Result<(Tensor, Option<Tensor>)> {
        self.cross_entropy_op(logits, targets, want_grad)
    }

    fn permute(&self, x: &Tensor, perm: &[usize]) -> Result<Tensor> {
        self.permute_op(x, perm)
    }

    fn select(&self, cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.select_op(cond, a, b)
    }

    fn slice_axis(
        &self,
        x: &Tensor,
        axis: usize,
        start: usize,
        step: usize,
        len: usize,
    ) -> Result<Tensor> {
        self.slice_axis_op(x, axis, start, step, len)
    }

    fn unslice_axis(
        &self,
        g: &Tensor,
        shape: &[usize],
        axis: usize,
        start: usize,
        step: usize,
    ) -> Result<Tensor> {
        self.unslice_axis_op(g, shape, axis, start, step)
    }

    fn gather_rows(&self, table: &Tensor, ids: &Tensor) -> Result<Tensor> {
        self.gather_rows_op(table, ids)
    }

    fn scatter_add_rows(&self, ids: &Tensor, src: &Tensor, vocab: usize) -> Result<Tensor> {
        self.scatter_add_rows_op(ids, src, vocab)
    }

    fn engram_hash(
        &self,
        ids: &Tensor,
        orders: &[usize],
        heads: usize,
        rows: usize,
        seed: u64,
    ) -> Result<Tensor> {
        self.engram_hash_op(ids, orders, heads, rows, seed)
    }

    fn causal_conv(&self, x: &Tensor, w: &Tensor) -> Result<Tensor> {
        self.causal_conv_op(x, w)
    }

    fn causal_conv_backward(
        &self,
        x: &Tensor,
        w: &Tensor,
        dy: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        self.causal_conv_backward_op(x, w, dy)
    }

    fn sum_to_shape(&self, g: &Tensor, shape: &[usize]) -> Result<Tensor> {
        self.sum_to_shape_op(g, shape)
    }

    fn rms_norm(&self, x: &Tensor, eps: f32) -> Result<(Tensor, Tensor)> {
        self.rms_norm_op(x, eps)
    }

    fn rms_norm_backward(&self, x: &Tensor, inv_rms: &Tensor, dy: &Tensor) -> Result<Tensor> {
        self.rms_norm_backward_op(x, inv_rms, dy)
    }

    fn layer_norm(&self, x: &Tensor, eps: f32) -> Result<(Tensor, Tensor, Tensor)> {
        self.layer_norm_op(x, eps)
    }

    fn layer_norm_backward(
        &self,
        x: &Tensor,
        mean: &Tensor,
        inv_std: &Tensor,
        dy: &Tensor,
    ) -> Result<Tensor> {
        self.layer_norm_backward_op(x, mean, inv_std, dy)
    }

    fn unary_backward(&self, op: UnaryOp, x: &Tensor, y: &Tensor, dy: &Tensor) -> Result<Tensor> {
        self.unary_backward_op(op, x, y, dy)
    }

    fn bias_act(&self, x: &Tensor, bias: &Tensor, act: UnaryOp) -> Result<Tensor> {
        self.bias_act_op(x, bias, act)
    }

    fn bias_act_backward(
        &self,
        x: &Tensor,
        bias: &Tensor,
        y: &Tensor,
        dy: &Tensor,
        act: UnaryOp,
        want_bias: bool,
    ) -> Result<(Tensor, Option<Tensor>)> {
        self.bias_act_backward_op(x, bias, y, dy, act, want_bias)
    }

    fn masked_softmax(&self, x: &Tensor, divisor: f32, causal: bool) -> Result<Tensor> {
        self.masked_softmax_op(x, divisor, causal)
    }

    fn masked_softmax_backward(
        &self,
        y: &Tensor,
        dy: &Tensor,
        divisor: f32,
        causal: bool,
    ) -> Result<Tensor> {
        self.masked_softmax_backward_op(y, dy, divisor, causal)
    }

    fn dropout_mask(
        &self,
        shape: &[usize],
        key: crate::DropoutKey,
        p: f64,
    ) -> Result<Option<Tensor>> {
        self.dropout_mask_op(shape, key.key(), p).map(Some)
    }

    fn adam_update(
        &self,
        p: &mut Tensor,
        g: &Tensor,
        m: &mut Tensor,
        v: &mut Tensor,
        step: AdamStep,
    ) -> Result<()> {
        self.adam_update_op(p, g, m, v, step.constants())
    }
}
