//! The log of tensor elements read on the host, per thread: [`Tensor::host`]
//! notes each read here while noting is on, and step capture (which sits above
//! tensors) turns noting on and reads the log. Tensors know nothing of capture.
//!
//! [`Tensor::host`]: crate::Tensor::host

use std::cell::{Cell, RefCell};

thread_local! {
    /// Whether host reads on this thread are being noted.
    static NOTING: Cell<bool> = const { Cell::new(false) };
    /// The storages read on the host while noting.
    static READS: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// Notes a host read of the storage `key`, when noting is on on this thread.
pub(crate) fn note(key: usize) {
    if NOTING.with(Cell::get) {
        READS.with(|r| r.borrow_mut().push(key));
    }
}

/// Starts noting host reads on this thread, with an empty log.
pub(crate) fn start() {
    READS.with(|r| r.borrow_mut().clear());
    NOTING.with(|n| n.set(true));
}

/// Stops noting host reads on this thread and returns the storages read, in order.
pub(crate) fn stop() -> Vec<usize> {
    NOTING.with(|n| n.set(false));
    READS.with(|r| std::mem::take(&mut *r.borrow_mut()))
}

/// Runs `f` with host reads not noted (a kernel reading its own inputs).
pub(crate) fn unnoted<T>(f: impl FnOnce() -> T) -> T {
    let was = NOTING.with(|n| n.replace(false));
    let out = f();
    NOTING.with(|n| n.set(was));
    out
}
