//! Timing helpers shared by the `devices` benchmark examples (not timed tests):
//! calls are repeated in batches long enough to time, and the best batch is
//! kept, the one least disturbed by other work on the machine.

#![allow(dead_code)]

use std::sync::OnceLock;
use std::time::Instant;

/// Whether batches are timed in the calling thread's CPU time instead of wall
/// time (`MLPL_BENCH_CLOCK=thread`): on a loaded machine it leaves out the time
/// the thread waits for a core, so single-threaded runs of two builds compare
/// fairly (only with one thread: the pool's other threads are not counted).
fn thread_clock() -> bool {
    static THREAD: OnceLock<bool> = OnceLock::new();
    *THREAD.get_or_init(|| std::env::var("MLPL_BENCH_CLOCK").is_ok_and(|v| v == "thread"))
}

/// The calling thread's CPU time in seconds (Linux `CLOCK_THREAD_CPUTIME_ID`).
#[cfg(target_os = "linux")]
fn thread_seconds() -> f64 {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    ts.sec as f64 + ts.nsec as f64 * 1e-9
}

#[cfg(not(target_os = "linux"))]
fn thread_seconds() -> f64 {
    panic!("MLPL_BENCH_CLOCK=thread needs Linux; unset it to time in wall-clock time")
}

/// How many calls of `f` make a batch of about `batch_s` seconds, from a
/// probe of about `batch_s / 3` seconds (after one warm-up call).
pub fn reps_for(f: &mut impl FnMut(), batch_s: f64) -> u64 {
    f();
    let start = Instant::now();
    let mut reps = 0u64;
    while start.elapsed().as_secs_f64() < batch_s / 3.0 {
        f();
        reps += 1;
    }
    let per = start.elapsed().as_secs_f64() / reps as f64;
    ((batch_s / per) as u64).max(1)
}

/// Seconds per call of one batch of `reps` calls.
fn batch(f: &mut impl FnMut(), reps: u64) -> f64 {
    if thread_clock() {
        let t = thread_seconds();
        for _ in 0..reps {
            f();
        }
        return (thread_seconds() - t) / reps as f64;
    }
    let t = Instant::now();
    for _ in 0..reps {
        f();
    }
    t.elapsed().as_secs_f64() / reps as f64
}

/// Best seconds per call of `f` over 5 batches of about `batch_s` each.
pub fn best_per_call(batch_s: f64, mut f: impl FnMut()) -> f64 {
    let reps = reps_for(&mut f, batch_s);
    (0..5)
        .map(|_| batch(&mut f, reps))
        .fold(f64::INFINITY, f64::min)
}

/// Best seconds per call of `a` and of `b`, over `batches` interleaved batches
/// each (A B A B ...) of about `batch_s`, so both see the same machine load.
pub fn interleaved(
    mut a: impl FnMut(),
    mut b: impl FnMut(),
    batches: usize,
    batch_s: f64,
) -> (f64, f64) {
    let (ra, rb) = (reps_for(&mut a, batch_s), reps_for(&mut b, batch_s));
    let (mut ta, mut tb) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..batches {
        ta = ta.min(batch(&mut a, ra));
        tb = tb.min(batch(&mut b, rb));
    }
    (ta, tb)
}
