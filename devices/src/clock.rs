//! Wall-clock time on every target. Natively this is `std::time`. On
//! `wasm32-unknown-unknown` std has no clock (`Instant::now` panics there), so
//! the embedder installs one with [`set_source`] (the browser build passes
//! `performance.now()` and `Date.now()`); without one, time stands still at 0,
//! which makes durations zero and never fails.

use std::time::Duration;

/// A point in time for measuring durations (`std::time::Instant` natively).
#[derive(Clone, Copy, Debug)]
pub struct Instant {
    #[cfg(not(target_arch = "wasm32"))]
    at: std::time::Instant,
    /// Milliseconds from the embedder's monotonic clock.
    #[cfg(target_arch = "wasm32")]
    at: f64,
}

impl Instant {
    /// Now.
    pub fn now() -> Instant {
        #[cfg(not(target_arch = "wasm32"))]
        {
            Instant {
                at: std::time::Instant::now(),
            }
        }
        #[cfg(target_arch = "wasm32")]
        {
            Instant {
                at: wasm::monotonic_ms(),
            }
        }
    }

    /// The time since this instant (zero if the clock went backwards).
    pub fn elapsed(&self) -> Duration {
        #[cfg(not(target_arch = "wasm32"))]
        {
            self.at.elapsed()
        }
        #[cfg(target_arch = "wasm32")]
        {
            let ms = wasm::monotonic_ms() - self.at;
            Duration::from_secs_f64((ms / 1000.0).max(0.0))
        }
    }
}

/// Nanoseconds since the Unix epoch (0 when no clock is known).
pub fn unix_nanos() -> u128 {
    #[cfg(not(target_arch = "wasm32"))]
    {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    }
    #[cfg(target_arch = "wasm32")]
    {
        (wasm::unix_ms().max(0.0) * 1e6) as u128
    }
}

/// The clocks an embedder without `std::time` provides: a monotonic clock and
/// the Unix time, both in milliseconds. Only the browser build calls it.
#[cfg(target_arch = "wasm32")]
pub fn set_source(monotonic_ms: fn() -> f64, unix_ms: fn() -> f64) {
    let _ = wasm::SOURCE.set((monotonic_ms, unix_ms));
}

#[cfg(target_arch = "wasm32")]
mod wasm {
    use std::sync::OnceLock;

    pub(super) static SOURCE: OnceLock<(fn() -> f64, fn() -> f64)> = OnceLock::new();

    pub(super) fn monotonic_ms() -> f64 {
        SOURCE.get().map_or(0.0, |s| (s.0)())
    }

    pub(super) fn unix_ms() -> f64 {
        SOURCE.get().map_or(0.0, |s| (s.1)())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_measured_and_the_epoch_is_known() {
        let start = Instant::now();
        let later = Instant::now();
        assert!(later.elapsed() <= start.elapsed());
        assert!(unix_nanos() > 1_600_000_000u128 * 1_000_000_000);
    }
}
