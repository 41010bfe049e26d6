//! Progress bars for `mlpl run` on a terminal: one bar per `train` loop, drawn
//! from the same `step` events the server streams.

use mlpl_devices::math;
use std::collections::HashMap;
use std::sync::Mutex;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::events::{Event, EventBody};

/// Draws `step` events as progress bars on standard error.
pub struct ProgressRenderer {
    multi: MultiProgress,
    bars: Mutex<HashMap<(String, u32), ProgressBar>>,
}

impl Default for ProgressRenderer {
    fn default() -> Self {
        ProgressRenderer::new()
    }
}

impl std::fmt::Debug for ProgressRenderer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressRenderer")
    }
}

/// A loss for a progress line: 6 significant digits, scientific when tiny or huge.
pub fn format_loss(loss: Option<f64>) -> String {
    match loss {
        None => "NaN".to_string(),
        Some(0.0) => "0".to_string(),
        Some(x) if (1e-3..1e6).contains(&x.abs()) => {
            let digits = 5 - math::log10(x.abs()).floor() as i32;
            let s = format!("{x:.*}", digits.clamp(0, 8) as usize);
            if s.contains('.') {
                s.trim_end_matches('0').trim_end_matches('.').to_string()
            } else {
                s
            }
        }
        Some(x) => format!("{x:.3e}"),
    }
}

/// The line a finished (or stopped) loop leaves behind.
fn summary(bar: &ProgressBar, indent: &str, loss: &str) -> String {
    let secs = bar.elapsed().as_secs_f64();
    let done = bar.position();
    let rate = if secs > 0.0 { done as f64 / secs } else { 0.0 };
    let total = bar.length().unwrap_or(done);
    let verb = if done >= total { "done" } else { "stopped" };
    format!("{indent}train {done}/{total} {verb}: loss {loss} ({secs:.2} s, {rate:.0} steps/s)")
}

fn style() -> ProgressStyle {
    ProgressStyle::with_template("{prefix}[{bar:30}] {pos}/{len} loss {msg} ETA {eta}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

impl ProgressRenderer {
    /// A renderer drawing on standard error.
    pub fn new() -> ProgressRenderer {
        ProgressRenderer {
            multi: MultiProgress::with_draw_target(ProgressDrawTarget::stderr()),
            bars: Mutex::new(HashMap::new()),
        }
    }

    /// Updates the bars from one event (other events are ignored; a
    /// `run_finished` leaves the run's unfinished bars where they stopped).
    pub fn handle(&self, e: &Event) {
        let mut bars = self.bars.lock().unwrap_or_else(|p| p.into_inner());
        match &e.body {
            EventBody::Step {
                loop_index,
                depth,
                step,
                total,
                loss,
                items_per_s,
                ..
            } => {
                let msg = match items_per_s {
                    Some(r) => format!("{}  {r:.0} steps/s", format_loss(*loss)),
                    None => format_loss(*loss),
                };
                let key = (e.run.clone(), *loop_index);
                let indent = "  ".repeat((*depth as usize).saturating_sub(1));
                let bar = bars.entry(key.clone()).or_insert_with(|| {
                    let b = ProgressBar::hidden();
                    b.set_length(*total);
                    b.set_style(style());
                    b.set_prefix(format!("{indent}train "));
                    b.set_message(msg.clone());
                    b.set_position(*step);
                    self.multi.add(b)
                });
                bar.set_message(msg);
                bar.set_position(*step);
                if step >= total {
                    if let Some(bar) = bars.remove(&key) {
                        self.close(&bar, &indent);
                    }
                }
            }
            EventBody::RunFinished { .. } => {
                let ended: Vec<_> = bars
                    .keys()
                    .filter(|(run, _)| *run == e.run)
                    .cloned()
                    .collect();
                for key in ended {
                    if let Some(bar) = bars.remove(&key) {
                        self.close(&bar, "");
                    }
                }
            }
            _ => {}
        }
    }

    /// Replaces a bar with its summary line.
    fn close(&self, bar: &ProgressBar, indent: &str) {
        let msg = bar.message();
        let loss = msg.split("  ").next().unwrap_or("");
        let line = summary(bar, indent, loss);
        bar.finish_and_clear();
        self.multi.remove(bar);
        self.multi.suspend(|| eprintln!("{line}"));
    }

    /// Runs `f` (e.g. printing a warning) with the bars hidden.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.multi.suspend(f)
    }

    /// Leaves every bar where it stopped.
    pub fn finish_all(&self) {
        let mut bars = self.bars.lock().unwrap_or_else(|p| p.into_inner());
        let mut all: Vec<_> = bars.drain().collect();
        all.sort_by_key(|((_, i), _)| *i);
        for (_, b) in all {
            self.close(&b, "");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::format_loss;

    #[test]
    fn losses_are_short() {
        assert_eq!(format_loss(Some(4.940199375152588)), "4.9402");
        assert_eq!(format_loss(Some(0.0)), "0");
        assert_eq!(format_loss(Some(3.694822e-13)), "3.695e-13");
        assert_eq!(format_loss(Some(1234.5678)), "1234.57");
        assert_eq!(format_loss(Some(0.012345678)), "0.0123457");
        assert_eq!(format_loss(None), "NaN");
    }
}
