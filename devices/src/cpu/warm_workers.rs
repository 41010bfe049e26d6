//! Keeping rayon's other workers awake while a training loop runs.
//!
//! Between two kernels a worker that found no work for a while goes to sleep,
//! and the next parallel kernel waits for the operating system to wake it:
//! tens of microseconds on the VMs measured, for kernels that take a few
//! hundred. A step of a small model is dozens of such kernels, so the waits
//! added up (a `d = 64` LM step ran faster on one thread than on two). This
//! is what OpenMP's active wait policy avoids, as PyTorch runs it.
//!
//! [`WarmWorkers`] parks a job on every other worker of the current pool that
//! keeps asking rayon for work ([`rayon::yield_now`]): it runs any job that
//! appears at once, and spins otherwise, until the guard is dropped. The thread
//! that made the guard is left alone (its copy of the job returns at once), so
//! it can never wait on itself. Only timing changes: the same jobs run, split
//! the same way, so results are the same bits.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// While alive, the other workers of the pool it was made in poll for work
/// instead of sleeping (see the module docs). Dropping it lets them sleep.
#[must_use = "the workers stay warm only while the guard lives"]
pub struct WarmWorkers {
    active: Option<Arc<AtomicBool>>,
}

impl WarmWorkers {
    /// Keeps the other workers of the current rayon pool warm (nothing when
    /// the pool has one thread, or when the environment sets
    /// `MLPL_WARM_WORKERS=0`: the workers then sleep when idle, and a
    /// parallel kernel waits for them to wake). Call it on the thread that
    /// then launches the kernels.
    pub fn new() -> WarmWorkers {
        if rayon::current_num_threads() < 2 || !enabled() {
            return WarmWorkers { active: None };
        }
        let active = Arc::new(AtomicBool::new(true));
        let owner = rayon::current_thread_index();
        let flag = Arc::clone(&active);
        rayon::spawn_broadcast(move |ctx| {
            if owner == Some(ctx.index()) {
                return;
            }
            while flag.load(Ordering::Acquire) {
                match rayon::yield_now() {
                    Some(rayon::Yield::Executed) => {}
                    _ => std::hint::spin_loop(),
                }
            }
        });
        WarmWorkers {
            active: Some(active),
        }
    }

    /// Whether other workers are being kept warm.
    pub fn is_active(&self) -> bool {
        self.active.is_some()
    }
}

/// Whether guards keep workers warm: not when `MLPL_WARM_WORKERS` is `0`.
fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var("MLPL_WARM_WORKERS").map_or(true, |v| v.trim() != "0"))
}

impl Default for WarmWorkers {
    fn default() -> WarmWorkers {
        WarmWorkers::new()
    }
}

impl Drop for WarmWorkers {
    fn drop(&mut self) {
        if let Some(a) = &self.active {
            a.store(false, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a pool")
    }

    #[test]
    fn parallel_work_runs_and_ends_while_the_workers_are_kept_warm() {
        pool(3).install(|| {
            let warm = WarmWorkers::new();
            assert!(warm.is_active());
            for n in [1usize, 10, 1000, 100_000] {
                let s: u64 = (0..n as u64).into_par_iter().map(|x| x * x).sum();
                assert_eq!(s, (0..n as u64).map(|x| x * x).sum::<u64>());
            }
            // Nested joins reach the warm workers too.
            let (a, b) = rayon::join(
                || (0..1000u64).into_par_iter().sum::<u64>(),
                || (0..1000u64).into_par_iter().sum::<u64>(),
            );
            assert_eq!(a + b, 2 * 499_500);
            drop(warm);
            // Once dropped, the pool still runs work (the spinners ended).
            let s: u64 = (0..1000u64).into_par_iter().sum();
            assert_eq!(s, 499_500);
        });
    }

    #[test]
    fn a_pool_of_one_thread_keeps_nothing_warm() {
        pool(1).install(|| assert!(!WarmWorkers::new().is_active()));
    }

    #[test]
    fn guards_made_one_after_another_do_not_pile_up() {
        pool(2).install(|| {
            for _ in 0..50 {
                let _warm = WarmWorkers::new();
                let s: u64 = (0..100u64).into_par_iter().sum();
                assert_eq!(s, 4950);
            }
        });
    }
}
