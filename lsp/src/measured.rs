//! What the runner measured of a document's `train` loops, forwarded by the
//! client as the custom notification `mlpl/stepMeasured` (the runner's
//! `step_measured` event with the document's URI; docs/language-server.md).
//! A measurement is kept for the loop it was made on and shown in that loop's
//! lens and hover while the loop is the same: its text, and what its estimate
//! is computed from (model, batch, device block, mode). The server runs nothing.

use lsp_types::Url;
use mlpl_lang::check::query::TrainBlock;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

use crate::analysis::Analysis;
use crate::feasibility::{bytes, seconds, Kind, TrainEstimate};
use crate::features::train_estimate;
use crate::values::group_digits;

/// The notification's method.
pub const METHOD: &str = "mlpl/stepMeasured";

/// Measurements kept per document (the oldest are dropped).
const PER_DOCUMENT: usize = 64;

/// The notification's parameters: a `step_measured` event (docs/telemetry.md)
/// and the document it is about. Fields the server does not use are ignored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepMeasured {
    /// The document whose loop was run.
    pub uri: Url,
    /// The 1-based line of the `train` statement.
    pub start_line: u32,
    /// The device kind it ran on (`cpu`, `cuda`, `mlx`).
    pub device: String,
    /// `captured` or `eager`.
    #[serde(default)]
    pub mode: String,
    /// Iterations completed.
    pub step: u64,
    /// Iterations the loop runs.
    pub total: u64,
    /// Iterations measured.
    #[serde(default)]
    pub measured_steps: u64,
    /// Median milliseconds per step.
    pub step_ms: f64,
    /// Its 10th percentile.
    #[serde(default)]
    pub step_ms_lo: Option<f64>,
    /// Its 90th percentile.
    #[serde(default)]
    pub step_ms_hi: Option<f64>,
    /// The process's peak resident memory.
    #[serde(default)]
    pub peak_rss_bytes: Option<f64>,
    /// The device's peak memory (CUDA, MLX).
    #[serde(default)]
    pub device_peak_bytes: Option<f64>,
    /// Seconds left.
    #[serde(default)]
    pub eta_s: Option<f64>,
    /// Whether the loop has ended.
    #[serde(default)]
    pub done: bool,
}

impl StepMeasured {
    /// Why the parameters cannot be shown, if they cannot.
    pub fn invalid(&self) -> Option<&'static str> {
        if !(self.step_ms.is_finite() && self.step_ms >= 0.0) {
            return Some("`step_ms` is not a finite, non-negative number of milliseconds");
        }
        if self.start_line == 0 {
            return Some("`start_line` is 0: the runner did not find the loop's statement");
        }
        if self.step > self.total {
            return Some("`step` is more than `total`");
        }
        None
    }

    /// The device kind.
    pub fn kind(&self) -> Option<Kind> {
        [Kind::Cpu, Kind::Cuda, Kind::Mlx]
            .into_iter()
            .find(|k| k.name() == self.device)
    }

    /// The peak that counts against the device's memory: the device's own on
    /// CUDA and MLX, the process's on the CPU.
    pub fn peak(&self) -> Option<(f64, &'static str)> {
        match (self.device.as_str(), self.device_peak_bytes) {
            ("cpu", _) | (_, None) => self
                .peak_rss_bytes
                .map(|b| (b, "the process's peak resident memory")),
            (_, Some(b)) => Some((b, "the device's peak memory")),
        }
    }

    /// The lens's measured part: `measured 12.3 ms/step, peak 410 MB, ETA 1m20s`
    /// (`… on CUDA …` when the loop ran on another device than `shown`).
    pub fn lens_text(&self, shown: Option<Kind>) -> String {
        let mut s = format!("measured {}/step", seconds(self.step_ms / 1e3));
        if let Some(k) = self.kind().filter(|k| Some(*k) != shown) {
            s.push_str(&format!(" on {}", k.label()));
        }
        if let Some((b, _)) = self.peak() {
            s.push_str(&format!(", peak {}", bytes(b)));
        }
        if self.done {
            s.push_str(&format!(
                ", done ({} steps)",
                group_digits(self.step as f64)
            ));
        } else {
            let eta = self.eta_s.unwrap_or_else(|| {
                (self.total.saturating_sub(self.step)) as f64 * self.step_ms / 1e3
            });
            s.push_str(&format!(", ETA {}", eta_text(eta)));
        }
        s
    }

    /// The hover's section on the measurement, compared with `estimate`.
    pub fn markdown(&self, estimate: &TrainEstimate) -> String {
        let on = self
            .kind()
            .map_or(self.device.clone(), |k| k.label().to_string());
        let mut s = format!(
            "**Measured** by the runner on {on} ({}; step {} of {}, {}):\n\n",
            if self.mode == "captured" {
                "replayed captured steps"
            } else {
                "interpreted steps"
            },
            group_digits(self.step as f64),
            group_digits(self.total as f64),
            if self.done { "done" } else { "running" }
        );
        let same = estimate
            .devices
            .iter()
            .find(|d| Some(d.profile.kind) == self.kind());
        let spread = match (self.step_ms_lo, self.step_ms_hi) {
            (Some(lo), Some(hi)) => format!(
                " (10th–90th percentile {})",
                crate::feasibility::seconds_range(&mlpl_lang::step_cost::cost::Range {
                    lo: lo / 1e3,
                    mid: self.step_ms / 1e3,
                    hi: hi / 1e3
                })
            ),
            _ => String::new(),
        };
        s.push_str(&format!(
            "- time per step: **{}**, the median of {} measured steps{spread}",
            seconds(self.step_ms / 1e3),
            group_digits(self.measured_steps as f64)
        ));
        if let Some(d) = same.filter(|_| self.step_ms > 0.0) {
            let est = d.step.seconds.mid;
            s.push_str(&format!(
                "; estimated {} (estimate ÷ measured {})",
                seconds(est),
                crate::feasibility::sig3(est / (self.step_ms / 1e3))
            ));
        }
        s.push('\n');
        if let Some((b, what)) = self.peak() {
            s.push_str(&format!("- peak memory: **{}** ({what})", bytes(b)));
            if let Some(d) = same {
                s.push_str(&format!(
                    "; estimated {}; verdict from the measured peak: {}",
                    bytes(d.step.memory.total),
                    crate::feasibility::Verdict::of(b, d.profile.memory_bytes).text()
                ));
            }
            s.push('\n');
        }
        if !self.done {
            let eta = self.eta_s.unwrap_or(0.0);
            s.push_str(&format!("- ETA: {} at the median\n", eta_text(eta)));
        }
        s.push_str("\nThe runner stores measured ÷ estimated in the calibration cache when the loop ends, and later estimates use it (docs/estimates.md).\n\n---\n");
        s
    }
}

/// A remaining time as `45s`, `1m20s`, `2h05m`.
pub fn eta_text(s: f64) -> String {
    if !s.is_finite() || s < 0.0 {
        return "?".into();
    }
    let s = s.round() as u64;
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    }
}

/// What must stay the same for a measurement to describe a loop.
#[derive(Clone, Debug, PartialEq)]
struct LoopKey {
    text: String,
    params: f64,
    trainable: f64,
    batch: f64,
    seq: f64,
    forwards: f64,
    steps: Option<f64>,
    device: Option<Kind>,
    captured: bool,
}

fn key(a: &Analysis, t: &TrainBlock) -> Option<LoopKey> {
    let (e, _) = train_estimate(a, t, &[])?;
    Some(LoopKey {
        text: a.text.get(t.span.start..t.span.end)?.to_string(),
        params: e.params,
        trainable: e.trainable,
        batch: e.batch,
        seq: e.seq,
        forwards: e.forwards,
        steps: e.steps,
        device: e.block_device,
        captured: e.not_captured.is_none(),
    })
}

/// The measurements of one document.
#[derive(Clone, Debug, Default)]
pub struct DocMeasurements {
    kept: Vec<(LoopKey, StepMeasured)>,
}

impl DocMeasurements {
    /// The measurement of `t`, when one was made on this loop as it is now.
    pub fn of(&self, a: &Analysis, t: &TrainBlock) -> Option<&StepMeasured> {
        if self.kept.is_empty() {
            return None;
        }
        let k = key(a, t)?;
        self.kept
            .iter()
            .rev()
            .find(|(kk, _)| *kk == k)
            .map(|(_, m)| m)
    }

    /// Keeps `m` for the `train` block that starts on its line in `a` (the
    /// document now), replacing an older measurement of the same loop.
    pub fn record(&mut self, a: &Analysis, m: StepMeasured) -> Result<(), String> {
        if let Some(why) = m.invalid() {
            return Err(why.to_string());
        }
        let line = m.start_line - 1;
        let t = a
            .facts
            .trains
            .iter()
            .find(|t| a.lines.position(&a.text, t.span.start).line == line)
            .ok_or_else(|| format!("no `train` statement starts on line {}", m.start_line))?;
        let k = key(a, t).ok_or_else(|| {
            format!(
                "the `train` statement on line {} has no estimate (its model is not known statically)",
                m.start_line
            )
        })?;
        self.kept.retain(|(kk, _)| *kk != k);
        self.kept.push((k, m));
        if self.kept.len() > PER_DOCUMENT {
            self.kept.remove(0);
        }
        Ok(())
    }
}

/// Every document's measurements.
#[derive(Debug, Default)]
pub struct Measurements {
    docs: HashMap<Url, DocMeasurements>,
}

impl Measurements {
    /// Records a forwarded measurement against `a`, the analysis of its
    /// document now.
    pub fn record(&mut self, a: &Analysis, m: StepMeasured) -> Result<(), String> {
        let uri = m.uri.clone();
        self.docs.entry(uri).or_default().record(a, m)
    }

    /// The measurements of a document.
    pub fn of(&self, uri: &Url) -> Option<&DocMeasurements> {
        self.docs.get(uri)
    }

    /// Forgets a closed document's.
    pub fn forget(&mut self, uri: &Url) {
        self.docs.remove(uri);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MLP: &str = "X = randn(1, [64, 32])\ny = argmax(randn(2, [64, 8]), 1)\nmodel = chain(linear(32, 128, 1), relu_layer(), linear(128, 8, 2))\ntrain 100 {\n  adam(cross_entropy(apply(model, X), y), model, 0.001, 0.9, 0.999, 1e-8)\n}\n";

    fn measured(line: u32) -> StepMeasured {
        serde_json::from_value(serde_json::json!({
            "uri": "file:///m.mlpl", "start_line": line, "device": "cpu", "mode": "captured",
            "step": 40, "total": 100, "measured_steps": 38, "step_ms": 12.3,
            "step_ms_lo": 11.9, "step_ms_hi": 13.0, "peak_rss_bytes": 4.1e8,
            "device_peak_bytes": null, "eta_s": 80.0, "done": false,
            "loop": 0, "estimate": null
        }))
        .unwrap()
    }

    #[test]
    fn a_measurement_is_shown_while_its_loop_is_unchanged() {
        let a = Analysis::new(MLP);
        let t = &a.facts.trains[0];
        let mut doc = DocMeasurements::default();
        assert!(doc.record(&a, measured(3)).unwrap_err().contains("line 3"));
        doc.record(&a, measured(4)).unwrap();
        assert_eq!(doc.of(&a, t).unwrap().step_ms, 12.3);
        // An edit elsewhere that changes nothing the loop depends on keeps it.
        let b = Analysis::new(&format!("# a comment\n{MLP}"));
        assert!(doc.of(&b, &b.facts.trains[0]).is_some());
        // A wider layer, a different batch or an edited body does not.
        for changed in [
            MLP.replace("128", "256"),
            MLP.replace("[64, 32]", "[32, 32]")
                .replace("[64, 8]", "[32, 8]"),
            MLP.replace("0.001", "0.01"),
        ] {
            let c = Analysis::new(&changed);
            assert!(doc.of(&c, &c.facts.trains[0]).is_none(), "{changed}");
        }
    }

    #[test]
    fn lens_text_and_eta() {
        let m = measured(4);
        assert_eq!(
            m.lens_text(Some(Kind::Cpu)),
            "measured 12.3 ms/step, peak 410 MB, ETA 1m20s"
        );
        assert_eq!(
            m.lens_text(Some(Kind::Cuda)),
            "measured 12.3 ms/step on CPU, peak 410 MB, ETA 1m20s"
        );
        let done = StepMeasured {
            done: true,
            step: 1000,
            total: 1000,
            ..m.clone()
        };
        assert_eq!(
            done.lens_text(Some(Kind::Cpu)),
            "measured 12.3 ms/step, peak 410 MB, done (1,000 steps)"
        );
        assert_eq!(eta_text(59.4), "59s");
        assert_eq!(eta_text(7325.0), "2h02m");
        assert_eq!(eta_text(f64::NAN), "?");
        let bad = StepMeasured {
            step_ms: f64::INFINITY,
            ..m
        };
        assert!(bad.invalid().is_some());
    }
}
