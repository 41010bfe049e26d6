//! Progress hooks: an optional observer that the interpreter tells about runs and
//! `train` loops, so that a session can stream `step` events (DESIGN §6) and the
//! CLI can draw progress bars, and `mlpl run --timeline` can time statements.
//! Without an observer nothing is measured.

/// Receives progress from an [`super::Interp`]. Every method has a default that
/// does nothing; calls come from the thread that runs the program.
pub trait RunObserver: Send {
    /// A run (`Interp::run`) has started; called after per-run state is reset, so
    /// an observer may re-assert a cancellation requested before the run began.
    fn on_run_start(&mut self) {}

    /// A `train` loop is about to run `total` iterations; `depth` is 1 for a loop
    /// at the top level, 2 for a loop inside another `train` body, and so on.
    fn on_train_start(&mut self, _total: usize, _depth: usize) {}

    /// Iteration `step` (1-based: the number of iterations completed) of `total`
    /// finished with the recorded `loss`; `lr` is the learning rate when known and
    /// `step_ms` the iteration's wall time in milliseconds.
    fn on_step(
        &mut self,
        _step: usize,
        _total: usize,
        _loss: f64,
        _lr: Option<f64>,
        _step_ms: f64,
    ) {
    }

    /// How the steps of the running `train` loop are executed from now on.
    fn on_step_mode(&mut self, _mode: &StepMode<'_>) {}

    /// A `train` loop ended after `completed` of `total` iterations (fewer when it
    /// failed or was cancelled).
    fn on_train_end(&mut self, _completed: usize, _total: usize, _depth: usize) {}

    /// A top-level statement of the run (its span in the run's source) is about
    /// to be evaluated (`mlpl run --timeline`).
    fn on_statement_start(&mut self, _span: mlpl_diag::Span) {}

    /// The top-level statement begun last ended, successfully or not.
    fn on_statement_end(&mut self, _span: mlpl_diag::Span, _ok: bool) {}
}

/// How a `train` loop's iterations run (see [`super::capture`]).
#[derive(Clone, Copy, Debug)]
pub struct StepMode<'a> {
    /// The loop's depth (1: outermost).
    pub depth: usize,
    /// Whether later iterations replay the captured step.
    pub captured: bool,
    /// Why they do not, when not captured.
    pub reason: Option<&'a str>,
    /// Whether the loop was recorded but the recorded iterations could not be
    /// replayed (a guard failed), rather than being ineligible from the start.
    pub guard_failed: bool,
    /// The loop's body.
    pub span: mlpl_diag::Span,
    /// The captured step's arena bytes (owned and aliased), when it has one.
    pub arena_bytes: Option<u64>,
    /// The eager step's live peak in bytes, when the loop was recorded.
    pub eager_live_peak: Option<u64>,
}
