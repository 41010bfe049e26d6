//! Reuse of kernel output buffers, so that a training loop's steady-state step
//! takes its large buffers from the previous step's instead of the allocator.
//!
//! Without it, every kernel output of a step is a fresh allocation and every
//! dead intermediate a free: glibc hands large freed blocks back to the kernel
//! and the next step faults the same pages in again and zeroes them (the
//! profile of `bench/train` at d = 32 spent about a third of its time there).
//!
//! The pool keeps a clone of the storage of every pooled output it hands out.
//! A buffer whose only remaining owner is the pool is free (no tensor holds it
//! any more) and the next output of the same length takes it. Weak handles
//! to a free buffer (the loss tape names released values by them) do not keep
//! it: the pool moves the elements out of the shared storage, so those handles
//! find their value dead, as they would without the pool, and the new output
//! gets a storage of its own (same elements, no copy). A reused buffer holds
//! stale values: kernels that ask for [`scratch`] overwrite every element.
//!
//! Memory: free buffers stay in the pool until reused, until [`release_free`]
//! (the end of a `train` loop), or until the pool's bytes (free and in use)
//! exceed twice what they were after the last sweep (and at least
//! [`SWEEP_MIN_BYTES`]): then buffers no tensor holds any more are released.
//!
//! While a step is recorded for capture ([`unpooled`]), outputs come from the
//! allocator and are not tracked: the recorder names values by weak handles on
//! their storages and tells from them which values the step still holds (its
//! live peak), and a pooled buffer stays alive, held by the pool, after its
//! tensor dies.

use crate::tensor::Tensor;
use std::cell::Cell;
use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, OnceLock};

/// Buffers of fewer elements come from the allocator directly (small blocks are
/// cheap there and never go back to the kernel).
const MIN_POOLED: usize = 4096;

/// The pool never sweeps while it holds less than this (the memory estimate
/// counts it for steps whose shapes change every step).
pub const SWEEP_MIN_BYTES: usize = 64 << 20;

/// Pooled buffers by element count.
#[derive(Default)]
struct Pool {
    buckets: HashMap<usize, Vec<Arc<Vec<f32>>>>,
    bytes: usize,
    sweep_at: usize,
}

impl Pool {
    /// Takes a free buffer of `n` elements out of its bucket, detached from
    /// any weak handle to its previous value.
    fn take(&mut self, n: usize) -> Option<Arc<Vec<f32>>> {
        let bucket = self.buckets.get_mut(&n)?;
        for _ in 0..bucket.len() {
            let i = bucket.iter().position(is_free)?;
            let mut buf = bucket.swap_remove(i);
            // No other handle, strong or weak (checked at once: a weak
            // handle upgraded and dropped meanwhile is seen).
            if Arc::get_mut(&mut buf).is_some() {
                self.bytes -= n * 4;
                return Some(buf);
            }
            // Weak handles only, unless one was upgraded since `is_free`:
            // then `try_unwrap` fails, and the buffer, in use again, stays
            // tracked. Once it succeeds no weak handle can upgrade.
            match Arc::try_unwrap(buf) {
                Ok(elements) => {
                    self.bytes -= n * 4;
                    return Some(Arc::new(elements));
                }
                Err(buf) => bucket.push(buf),
            }
        }
        None
    }

    /// Starts tracking `buf` (shared with the tensor that holds it).
    fn keep(&mut self, buf: Arc<Vec<f32>>) {
        let n = buf.len();
        self.bytes += n * 4;
        if self.bytes > self.sweep_at.max(SWEEP_MIN_BYTES) {
            self.sweep();
        }
        self.buckets.entry(n).or_default().push(buf);
    }

    /// Releases every buffer no tensor holds any more.
    fn sweep(&mut self) {
        for bucket in self.buckets.values_mut() {
            bucket.retain(|b| !is_free(b));
        }
        self.buckets.retain(|_, b| !b.is_empty());
        self.bytes = self
            .buckets
            .iter()
            .map(|(n, b)| n * 4 * b.len())
            .sum::<usize>();
        self.sweep_at = self.bytes * 2;
    }
}

/// Releases every pooled buffer no tensor holds any more (called when a
/// training loop ends, so a long-lived process does not keep a finished loop's
/// buffers).
pub(crate) fn release_free() {
    if let Ok(mut p) = pool().lock() {
        p.sweep();
    }
}

/// Whether no tensor holds `buf` (only the pool, and perhaps weak handles).
fn is_free(buf: &Arc<Vec<f32>>) -> bool {
    Arc::strong_count(buf) == 1
}

fn pool() -> &'static Mutex<Pool> {
    static POOL: OnceLock<Mutex<Pool>> = OnceLock::new();
    POOL.get_or_init(Mutex::default)
}

/// A kernel's output buffer, owned by the kernel until [`Out::into_tensor`].
pub(crate) struct Out {
    data: Arc<Vec<f32>>,
    pooled: bool,
}

impl Out {
    /// The finished output as a tensor of `shape` (whose element count must be
    /// the buffer's length). A pooled buffer is tracked for reuse from then on.
    pub(crate) fn into_tensor(self, shape: Vec<usize>) -> Tensor {
        if self.pooled {
            if let Ok(mut p) = pool().lock() {
                p.keep(self.data.clone());
            }
        }
        Tensor::from_arc(shape, self.data)
    }
}

impl Deref for Out {
    type Target = [f32];

    fn deref(&self) -> &[f32] {
        &self.data
    }
}

impl DerefMut for Out {
    fn deref_mut(&mut self) -> &mut [f32] {
        Arc::get_mut(&mut self.data)
            .expect("a kernel output is not shared before it is finished")
            .as_mut_slice()
    }
}

thread_local! {
    /// Whether outputs made on this thread bypass the pool.
    static UNPOOLED: Cell<bool> = const { Cell::new(false) };
}

/// Makes outputs on this thread bypass the pool (`true`) or use it again.
pub(crate) fn unpooled(on: bool) {
    UNPOOLED.with(|u| u.set(on));
}

/// An output buffer of `n` elements with unspecified (stale but initialised)
/// contents: the kernel must write every element.
pub(crate) fn scratch(n: usize) -> Out {
    if n < MIN_POOLED || UNPOOLED.with(Cell::get) {
        return Out {
            data: Arc::new(vec![0.0; n]),
            pooled: false,
        };
    }
    let reused = pool().lock().ok().and_then(|mut p| p.take(n));
    Out {
        data: reused.unwrap_or_else(|| Arc::new(vec![0.0; n])),
        pooled: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serialises these tests: one of them releases free buffers, which the
    /// others expect to find in the pool.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn a_dropped_output_is_reused_and_a_live_one_is_not() {
        let _serial = serial();
        // A length no other test uses, so concurrent tests cannot take it.
        let n = MIN_POOLED + 17;
        let mut a = scratch(n);
        a.fill(3.0);
        let a = a.into_tensor(vec![n]);
        let a_ptr = a.host().as_ptr();
        let b = scratch(n).into_tensor(vec![n]);
        assert_ne!(
            b.host().as_ptr(),
            a_ptr,
            "a live buffer was handed out again"
        );
        drop(a);
        let c = scratch(n);
        assert_eq!(c.as_ptr(), a_ptr, "the dropped buffer was not reused");
        assert!(c.iter().all(|&x| x == 3.0), "scratch keeps stale contents");
        drop(b);
    }

    #[test]
    fn a_weak_handle_does_not_keep_a_dropped_buffer_from_reuse() {
        let _serial = serial();
        let n = MIN_POOLED + 53;
        let mut a = scratch(n);
        a.fill(2.0);
        let a = a.into_tensor(vec![n]);
        let a_ptr = a.host().as_ptr();
        // The loss tape names released values this way.
        let named = a.downgrade();
        drop(a);
        // A handle upgraded again holds the buffer like any tensor.
        let again = named.upgrade().expect("the pool still holds the buffer");
        let other = scratch(n);
        assert_ne!(other.as_ptr(), a_ptr, "a buffer held again was reused");
        drop((again, other));
        let b = scratch(n);
        assert_eq!(
            b.as_ptr(),
            a_ptr,
            "a weak handle kept the dropped buffer from being reused"
        );
        assert!(
            named.upgrade().is_none() && !named.is_alive(),
            "the weak handle still reaches the buffer now reused"
        );
        // Reused as a new storage: its weak handles are its own.
        let b = b.into_tensor(vec![n]);
        assert!(!named.shares_storage(&b));
        let named_b = b.downgrade();
        drop(b);
        release_free();
        assert!(!named_b.is_alive(), "release kept a weakly named buffer");
        assert!(!pool().lock().unwrap().buckets.contains_key(&n));
    }

    #[test]
    fn a_clone_keeps_the_buffer_alive() {
        let _serial = serial();
        let n = MIN_POOLED + 29;
        let mut a = scratch(n);
        a.fill(1.5);
        let a = a.into_tensor(vec![n]);
        let keep = a.clone();
        let a_ptr = a.host().as_ptr();
        drop(a);
        let b = scratch(n);
        assert_ne!(
            b.as_ptr(),
            a_ptr,
            "a buffer still held by a clone was reused"
        );
        assert!(keep.host().iter().all(|&x| x == 1.5));
    }

    #[test]
    fn release_frees_dropped_buffers_only() {
        let _serial = serial();
        let n = MIN_POOLED + 41;
        let live = scratch(n).into_tensor(vec![n]);
        drop(scratch(n).into_tensor(vec![n]));
        release_free();
        let p = pool().lock().unwrap();
        let bucket = p.buckets.get(&n).expect("the live buffer is still tracked");
        assert_eq!(bucket.len(), 1, "the dropped buffer was released");
        assert_eq!(bucket[0].as_ptr(), live.host().as_ptr());
    }

    #[test]
    fn small_outputs_are_not_pooled() {
        let out = scratch(MIN_POOLED - 1);
        assert!(!out.pooled);
        assert_eq!(out.len(), MIN_POOLED - 1);
    }
}
