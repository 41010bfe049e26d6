//! Counter scopes: what the backends did for one piece of work (one run), even
//! while other threads use the same backends.
//!
//! A backend's [`Counters`](crate::Counters) are process-wide totals. A
//! [`CounterScope`] opened on a thread also receives every increment that a
//! backend records *on that thread* through [`count_in_scopes`], so a run that
//! executes on its own thread (as each session of `mlpl serve` does) reads only
//! its own uploads, downloads, bytes, kernel launches and CPU fallbacks.
//! Backends count on the calling thread, before handing work to worker threads,
//! so parallel kernels are attributed to the run that called them.
//!
//! Counts are kept per kind of device, so a run's `cuda` counters do not mix in
//! the kernels it ran on the CPU. Scopes nest: an increment goes to every scope
//! open on the thread.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::backend::{Counters, DeviceKind};

/// One counted backend event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    /// One kernel invocation.
    Kernel,
    /// One host-to-device copy of this many bytes.
    Upload(u64),
    /// One device-to-host copy of this many bytes.
    Download(u64),
    /// One operation handed to the CPU by a device that could not run it.
    Fallback,
    /// One evaluation of a lazy device's pending work.
    Evaluation,
}

#[derive(Debug, Default)]
struct Totals {
    uploads: AtomicU64,
    downloads: AtomicU64,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
    kernel_launches: AtomicU64,
    cpu_fallbacks: AtomicU64,
    evaluations: AtomicU64,
}

impl Totals {
    fn add(&self, c: Count) {
        let inc = |a: &AtomicU64, n: u64| {
            a.fetch_add(n, Ordering::Relaxed);
        };
        match c {
            Count::Kernel => inc(&self.kernel_launches, 1),
            Count::Upload(bytes) => {
                inc(&self.uploads, 1);
                inc(&self.bytes_up, bytes);
            }
            Count::Download(bytes) => {
                inc(&self.downloads, 1);
                inc(&self.bytes_down, bytes);
            }
            Count::Fallback => inc(&self.cpu_fallbacks, 1),
            Count::Evaluation => inc(&self.evaluations, 1),
        }
    }
}

/// A scope's totals, one set per kind of device.
#[derive(Debug, Default)]
struct ByKind {
    cpu: Totals,
    cuda: Totals,
    mlx: Totals,
}

impl ByKind {
    fn of(&self, kind: DeviceKind) -> &Totals {
        match kind {
            DeviceKind::Cpu => &self.cpu,
            DeviceKind::Cuda => &self.cuda,
            DeviceKind::Mlx => &self.mlx,
        }
    }
}

thread_local! {
    static OPEN: RefCell<Vec<Arc<ByKind>>> = const { RefCell::new(Vec::new()) };
}

/// Records `c`, done by a device of kind `kind`, in every counter scope open on
/// this thread (a no-op when none is). Backends call this next to their own
/// process-wide counters.
pub fn count_in_scopes(kind: DeviceKind, c: Count) {
    // `try_with`: nothing to record into while the thread is being torn down.
    let _ = OPEN.try_with(|open| {
        if let Ok(open) = open.try_borrow() {
            for t in open.iter() {
                t.of(kind).add(c);
            }
        }
    });
}

/// Counts what the backends do on this thread from [`CounterScope::enter`] until
/// the scope is dropped. Stays on the thread that opened it.
#[derive(Debug)]
pub struct CounterScope {
    totals: Arc<ByKind>,
    _on_this_thread: PhantomData<*const ()>,
}

impl CounterScope {
    /// Opens a scope on the current thread, with every count at zero.
    pub fn enter() -> CounterScope {
        let totals = Arc::new(ByKind::default());
        OPEN.with(|open| open.borrow_mut().push(totals.clone()));
        CounterScope {
            totals,
            _on_this_thread: PhantomData,
        }
    }

    /// A handle that reads this scope's counts (from any thread, also after
    /// the scope closed).
    pub fn counts(&self) -> ScopeCounts {
        ScopeCounts(self.totals.clone())
    }
}

impl Drop for CounterScope {
    fn drop(&mut self) {
        let _ = OPEN.try_with(|open| {
            if let Ok(mut open) = open.try_borrow_mut() {
                open.retain(|t| !Arc::ptr_eq(t, &self.totals));
            }
        });
    }
}

/// Reads the counts of one [`CounterScope`].
#[derive(Clone, Debug)]
pub struct ScopeCounts(Arc<ByKind>);

impl ScopeCounts {
    /// The counts of devices of kind `kind` so far (`memory_bytes` and
    /// `peak_memory_bytes` are 0: memory in use belongs to the device, not to a
    /// scope).
    pub fn snapshot(&self, kind: DeviceKind) -> Counters {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let t = self.0.of(kind);
        Counters {
            uploads: get(&t.uploads),
            downloads: get(&t.downloads),
            bytes_up: get(&t.bytes_up),
            bytes_down: get(&t.bytes_down),
            kernel_launches: get(&t.kernel_launches),
            cpu_fallbacks: get(&t.cpu_fallbacks),
            evaluations: get(&t.evaluations),
            ..Counters::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Backend, UnaryOp};
    use crate::cpu::CpuBackend;
    use crate::tensor::Tensor;

    fn launches(be: &CpuBackend, n: usize) {
        let x = Tensor::from_vec(vec![2], vec![1.0, 2.0]);
        for _ in 0..n {
            be.unary(UnaryOp::Exp, &x).unwrap();
        }
    }

    #[test]
    fn scopes_count_only_their_own_thread_and_nest() {
        let be = Arc::new(CpuBackend::new());
        let outer = CounterScope::enter();
        launches(&be, 3);
        let other = {
            let be = be.clone();
            std::thread::spawn(move || {
                let scope = CounterScope::enter();
                launches(&be, 5);
                scope.counts()
            })
            .join()
            .unwrap()
        };
        let inner = CounterScope::enter();
        count_in_scopes(DeviceKind::Cuda, Count::Upload(40));
        count_in_scopes(DeviceKind::Cuda, Count::Download(8));
        count_in_scopes(DeviceKind::Cuda, Count::Fallback);
        count_in_scopes(DeviceKind::Cuda, Count::Kernel);
        launches(&be, 1);
        let inner_counts = inner.counts();
        drop(inner);
        launches(&be, 2);
        assert_eq!(other.snapshot(DeviceKind::Cpu).kernel_launches, 5);
        // Each kind of device counts apart.
        let cpu = inner_counts.snapshot(DeviceKind::Cpu);
        assert_eq!((cpu.kernel_launches, cpu.uploads), (1, 0));
        assert_eq!(inner_counts.snapshot(DeviceKind::Mlx), Counters::default());
        let i = inner_counts.snapshot(DeviceKind::Cuda);
        assert_eq!(
            (
                i.kernel_launches,
                i.uploads,
                i.bytes_up,
                i.downloads,
                i.bytes_down,
                i.cpu_fallbacks
            ),
            (1, 1, 40, 1, 8, 1)
        );
        let outer_counts = outer.counts();
        let o = outer_counts.snapshot(DeviceKind::Cpu);
        assert_eq!(o.kernel_launches, 6);
        assert_eq!(outer_counts.snapshot(DeviceKind::Cuda).bytes_up, 40);
        // The backend's own counters stay process-wide.
        assert_eq!(be.counters().kernel_launches, 11);
        // A closed scope counts nothing more.
        drop(outer);
        launches(&be, 1);
        assert_eq!(outer_counts.snapshot(DeviceKind::Cpu).kernel_launches, 6);
    }
}
