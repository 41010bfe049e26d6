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
//!
//! A spinning job stops on its own once it has found no work for [`IDLE`]:
//! rayon runs jobs nested on a worker's stack, so a spinner that a worker
//! picked up while it waited inside another job (a kernel's half of a `join`)
//! holds that job until the spinner returns. Were the spinner to wait for its
//! guard alone, a guard owner blocked on the held job (two loops on two
//! threads, one waiting for the other) would never drop it. The loop that
//! owns the guard calls [`WarmWorkers::rearm`] once per iteration to bring
//! back spinners that stopped.

use crate::clock::Instant;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// How long a spinning worker polls without finding work before it stops
/// (and sleeps as rayon's workers do): far longer than the gaps between a
/// training step's parallel kernels (so a replayed step does not re-arm,
/// which allocates a job), short enough that a job it holds up resumes soon.
pub const IDLE: Duration = Duration::from_millis(100);

/// While alive, the other workers of the pool it was made in poll for work
/// instead of sleeping (see the module docs). Dropping it lets them sleep.
#[must_use = "the workers stay warm only while the guard lives"]
pub struct WarmWorkers {
    active: Option<Arc<Spinners>>,
}

/// What a guard shares with its spinning jobs.
struct Spinners {
    /// Cleared when the guard is dropped.
    on: AtomicBool,
    /// Spinning jobs spawned and not stopped yet (queued or polling): counted
    /// when spawned, so a re-arm while a broadcast still waits for its
    /// workers does not spawn another.
    running: AtomicUsize,
    /// The pool index of the thread that made the guard, if a worker.
    owner: Option<usize>,
}

impl Spinners {
    /// Parks a spinning job on every other worker of the current pool.
    fn spawn(self: &Arc<Spinners>) {
        let jobs = rayon::current_num_threads() - usize::from(self.owner.is_some());
        self.running.fetch_add(jobs, Ordering::AcqRel);
        let me = Arc::clone(self);
        rayon::spawn_broadcast(move |ctx| {
            if me.owner == Some(ctx.index()) {
                return;
            }
            let mut idle_since = Instant::now();
            let mut polls = 0u32;
            while me.on.load(Ordering::Acquire) {
                match rayon::yield_now() {
                    Some(rayon::Yield::Executed) => idle_since = Instant::now(),
                    _ => std::hint::spin_loop(),
                }
                polls = polls.wrapping_add(1);
                if polls.is_multiple_of(256) && idle_since.elapsed() > IDLE {
                    break;
                }
            }
            me.running.fetch_sub(1, Ordering::AcqRel);
        });
    }
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
        let spinners = Arc::new(Spinners {
            on: AtomicBool::new(true),
            running: AtomicUsize::new(0),
            owner: rayon::current_thread_index(),
        });
        spinners.spawn();
        WarmWorkers {
            active: Some(spinners),
        }
    }

    /// Whether other workers are being kept warm.
    pub fn is_active(&self) -> bool {
        self.active.is_some()
    }

    /// Parks spinning jobs again when all of them stopped after [`IDLE`]
    /// without work (a pause of the guard's thread): call it before a burst
    /// of kernels, such as each iteration of a loop.
    pub fn rearm(&self) {
        if let Some(s) = &self.active {
            if s.running.load(Ordering::Acquire) == 0 {
                s.spawn();
            }
        }
    }

    /// How many spinning jobs are armed now (queued or polling).
    pub fn spinning(&self) -> usize {
        self.active
            .as_ref()
            .map_or(0, |s| s.running.load(Ordering::Acquire))
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
        if let Some(s) = &self.active {
            s.on.store(false, Ordering::Release);
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
    fn idle_spinners_stop_and_rearming_brings_them_back() {
        pool(3).install(|| {
            let warm = WarmWorkers::new();
            let wait_for = |want: usize| {
                let start = Instant::now();
                while warm.spinning() != want {
                    assert!(
                        start.elapsed() < Duration::from_secs(10),
                        "{} spinning, want {want}",
                        warm.spinning()
                    );
                    std::thread::sleep(Duration::from_micros(200));
                }
            };
            // Two other workers spin, then stop once idle for `IDLE`.
            wait_for(0);
            warm.rearm();
            // Counted when spawned: a second re-arm before they start (or
            // while they poll) spawns none.
            assert_eq!(warm.spinning(), 2);
            warm.rearm();
            assert!(warm.spinning() <= 2, "{} spinning", warm.spinning());
            let s: u64 = (0..1000u64).into_par_iter().sum();
            assert_eq!(s, 499_500);
            wait_for(0);
        });
    }

    #[test]
    fn a_guard_blocked_on_a_job_its_spinner_holds_up_does_not_deadlock() {
        // Thread A runs parallel work on the global pool; thread B makes
        // guards while A's jobs run (so their spinners can land on a worker
        // above one of A's jobs, which then waits for the spinner) and keeps
        // them until A is done. Spinners that stop after `IDLE` let A finish.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|scope| {
            scope.spawn(move || {
                let mut guards = Vec::new();
                while rx.try_recv().is_err() {
                    if guards.len() < 64 {
                        guards.push(WarmWorkers::new());
                    }
                    std::thread::sleep(Duration::from_micros(50));
                }
            });
            for _ in 0..300 {
                let s: u64 = (0..20_000u64).into_par_iter().map(|x| x % 7).sum();
                assert_eq!(s, (0..20_000u64).map(|x| x % 7).sum::<u64>());
            }
            tx.send(()).unwrap();
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
