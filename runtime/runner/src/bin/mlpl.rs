//! `mlpl`: run, check and explain MLPL programs and serve the runner (LANGUAGE §21.2).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use mlpl_devices::capture::AllocatorEvent;
use mlpl_diag::render::{render_with, to_json, RenderOptions};
use mlpl_diag::{codes, Diagnostic, SourceFile};
use mlpl_lang::check::check_source;
use mlpl_lang::estimate::calibration::{self, Calibration};
use mlpl_lang::eval::{Interp, Trace, Workspace};
use mlpl_lang::step_cost::cost;
use mlpl_lang::step_cost::kernels::Transcendental;
use mlpl_lang::train_loops::{loops, measure};
use mlpl_lang::value::{DeviceTarget, Value};
use mlpl_runner::serve::{self, ServeConfig};
use mlpl_runner::session::progress::ProgressRenderer;
use mlpl_runner::session::{
    CellRef, Emitter, EventSink, Meter, RefineOptions, RunRequest, RunStatus, Session,
    SessionOptions, StepObserver, STEP_INTERVAL,
};
use mlpl_runner::timeline::TimelineObserver;
use mlpl_syntax::lexer::decode_source;

/// mimalloc: the checker and the interpreter allocate many small, short-lived
/// values, which it serves markedly faster than the system allocator
/// (docs/benchmarks.md, static checker); large blocks (tensor data) start on
/// a cache line (`LineAligned`), as the SIMD kernels read them best.
#[global_allocator]
static GLOBAL: mlpl_devices::cpu::LineAligned<mimalloc::MiMalloc> =
    mlpl_devices::cpu::LineAligned(mimalloc::MiMalloc);

/// mimalloc's around step capture (`mlpl_devices::capture::release`): while a
/// step is recorded (every value a fresh allocation), freed pages go back to
/// the OS at once instead of after mimalloc's purge delay; once the step is
/// compiled, the freed pages of the recording are collected, as a replayed
/// step allocates nothing and mimalloc would otherwise keep them.
fn allocator_hook(event: AllocatorEvent) {
    use libmimalloc_sys as mi;
    use std::sync::atomic::{AtomicI64, Ordering};
    /// mimalloc 2's `mi_option_purge_delay` (milliseconds; not among the
    /// constants `libmimalloc-sys` declares).
    const PURGE_DELAY: mi::mi_option_t = 15;
    /// The purge delay before recording started.
    static SAVED: AtomicI64 = AtomicI64::new(i64::MIN);
    // SAFETY: mimalloc is this binary's global allocator; its options may be
    // read and set at any time (the delay is one integer it reads when it
    // purges) and `mi_collect` has no preconditions.
    unsafe {
        match event {
            AllocatorEvent::RecordingStarts => {
                // `c_long`: i64 here, i32 on some targets.
                #[allow(clippy::useless_conversion)]
                SAVED.store(i64::from(mi::mi_option_get(PURGE_DELAY)), Ordering::Relaxed);
                mi::mi_option_set(PURGE_DELAY, 0);
            }
            AllocatorEvent::RecordingEnds => {
                let saved = SAVED.swap(i64::MIN, Ordering::Relaxed);
                if saved != i64::MIN {
                    mi::mi_option_set(PURGE_DELAY, saved as _);
                }
            }
            AllocatorEvent::StepCompiled => mi::mi_collect(true),
        }
    }
}

/// MLPL: a typed array language for machine learning, with named axes.
#[derive(Parser)]
#[command(name = "mlpl", version, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a script and print the value of its last statement.
    ///
    /// Diagnostics and warnings go to standard error. Exit status: 0 on success,
    /// 1 on an error in the program, 2 on a usage error.
    ///
    /// On the CPU the printed numbers are bit-identical on every x86-64 machine
    /// and thread count (docs/reproducibility.md). Environment: RAYON_NUM_THREADS
    /// (CPU threads), MLPL_CPU_ISA=scalar|avx2|avx512 (the GEMM's instruction
    /// set; the default is the best the CPU has) and MLPL_GEMM_BLOCKING=MC,NC
    /// (its cache blocks) change speed only, never results.
    Run(RunArgs),
    /// Check scripts without running them and print their diagnostics.
    ///
    /// Exit status 1 if any file has an error.
    Check(CheckArgs),
    /// Explain a diagnostic code, e.g. `mlpl explain E0201`.
    Explain {
        /// The code (E0201, W0001, ...).
        code: String,
    },
    /// Measure each available device (GEMM at several shapes, kernel dispatch
    /// replayed and interpreted, bandwidth, baseline memory; medians and spread
    /// of repetitions, a few seconds) and store the cost models that `estimate_train`,
    /// `mlpl estimate` and the editor's estimates read (LANGUAGE §21.2).
    ///
    /// Writes `calibration.json` in $MLPL_CACHE_DIR, else $XDG_CACHE_HOME/mlpl, else
    /// ~/.cache/mlpl (format: docs/estimates.md). Entries of devices not measured
    /// now are kept.
    Calibrate(CalibrateArgs),
    /// Print the estimate of every `train` loop of a script without running it:
    /// the kernels one step runs, seconds per step (a range) captured and
    /// interpreted, and the memory at the peak, on the device of the loop's
    /// `device` block or `--device`, from the calibration cache.
    Estimate(EstimateArgs),
    /// Start the runner the editor uses: sessions, cells and live events over HTTP.
    ///
    /// Prints `mlpl serve listening on http://ADDR` (and the token when it generated
    /// one) on standard output. Routes: docs/runner-protocol.md.
    Serve(ServeArgs),
}

#[derive(clap::Args)]
struct CalibrateArgs {
    /// Write the cache here instead of the default location.
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Measure only this device (cpu, cuda or mlx; repeatable); default: every available one.
    #[arg(long, value_name = "DEVICE")]
    device: Vec<String>,
}

#[derive(clap::Args)]
struct EstimateArgs {
    /// The script.
    file: PathBuf,
    /// Device for loops outside `device` blocks: cpu, cuda or mlx.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Read the calibration cache from FILE instead of the default location.
    #[arg(long, value_name = "FILE")]
    calibration: Option<PathBuf>,
    /// Print one JSON object per loop instead of text.
    #[arg(long)]
    json: bool,
    /// List each kernel of the step with its estimated time.
    #[arg(long)]
    kernels: bool,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Address to listen on; port 0 picks a free port. Non-loopback addresses need a token.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878")]
    bind: String,
    /// Bearer token clients must send (default: a random token, printed).
    #[arg(long, conflicts_with = "token_file")]
    token: Option<String>,
    /// Read the bearer token from a file (its first line).
    #[arg(long, value_name = "PATH")]
    token_file: Option<PathBuf>,
    /// Save sessions here after every run and restore them on start.
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Directory that `load` and `save` may access (default: none; file builtins fail).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Largest accepted request body in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = serve::MAX_BODY_BYTES)]
    max_body_bytes: usize,
    /// Most sessions at once (one more is refused with 503 `too_many_sessions`).
    #[arg(long, value_name = "N", default_value_t = serve::MAX_SESSIONS)]
    max_sessions: usize,
    /// Largest single result a cell may allocate, in bytes (E0410 past it;
    /// default: half the machine's memory; 0: no budget).
    #[arg(long, value_name = "BYTES")]
    memory_budget: Option<usize>,
    /// Most bytes one session's variables may hold together, a new result
    /// included (E0410 past it, naming the largest variables; default: half the
    /// machine's memory; 0: no budget).
    #[arg(long, value_name = "BYTES")]
    session_memory_budget: Option<usize>,
    /// Seconds a client may take to send a request's headers before its
    /// connection is closed.
    #[arg(long, value_name = "SECS", default_value_t = serve::HEADER_TIMEOUT.as_secs())]
    header_timeout: u64,
    /// Seconds a client may take to send a request's body once its headers
    /// arrived (408 `timeout` past it).
    #[arg(long, value_name = "SECS", default_value_t = serve::BODY_TIMEOUT.as_secs())]
    body_timeout: u64,
    /// The one web origin whose pages may call this server (the browser
    /// playground's, e.g. http://127.0.0.1:8000): CORS answers for it, 403
    /// `forbidden_origin` for pages of any other origin.
    #[arg(long, value_name = "ORIGIN")]
    allow_origin: Option<String>,
    /// Stop when standard input closes: an editor that starts the server with a
    /// pipe on its input stops it by exiting, even when it is killed.
    #[arg(long)]
    exit_with_stdin: bool,
}

#[derive(clap::Args)]
struct RunArgs {
    /// The script to run.
    file: PathBuf,
    /// Directory that `load` and `save` may access (default: the script's directory).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Write experiment records under DIR/NAME/TIMESTAMP/run.json.
    #[arg(long, value_name = "DIR")]
    exp_dir: Option<PathBuf>,
    /// Directory for SVG charts (default: $MLPL_CACHE_DIR, the user cache dir, or the temp dir).
    #[arg(long, value_name = "DIR")]
    svg_out: Option<PathBuf>,
    /// Device for code outside `device` blocks: cpu, cuda, cuda:N or mlx.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Print the run's telemetry events (docs/telemetry.md) on standard output
    /// instead of its value and diagnostics.
    #[arg(long, value_enum, value_name = "FORMAT")]
    events: Option<EventsFormat>,
    /// Interpret every iteration of `train` loops instead of replaying the step
    /// recorded in their first two iterations (the results are the same; for
    /// comparing speed or ruling out a capture problem).
    #[arg(long)]
    no_capture: bool,
    /// After the run, print on standard error the process's peak RSS and how
    /// each `train` loop ran: iterations replayed from the captured step (or
    /// why none were), their time each and median, and the share of the
    /// replayed iterations' time spent inside kernels (what `mlpl estimate`
    /// predicts; docs/estimates.md).
    #[arg(long)]
    profile: bool,
    /// Write the evaluation trace (LANGUAGE §19) to FILE as pretty-printed JSON:
    /// `{"source", "events"}`, one event per evaluated node (`seq`, `op`, `span`,
    /// `inputs`, `output`), the format of the original MLPL's trace. Written
    /// also when the run fails (the events up to the error). While tracing,
    /// `train` loops evaluate every iteration (no step capture). See docs/traces.md.
    #[arg(long, value_name = "FILE", conflicts_with = "events")]
    trace: Option<PathBuf>,
    /// Write a timeline of the run to FILE in the Chrome Trace Event Format
    /// (open it in Perfetto, https://ui.perfetto.dev, or chrome://tracing): each top-level
    /// statement (with its lines and kernel count), each `train` loop and
    /// iteration (with its loss), every kernel call with its input shapes
    /// (those of a captured loop's replayed iterations marked `replayed`),
    /// and the device counters (kernel launches, transfers,
    /// memory) as counter tracks. Times in microseconds from the
    /// start of the run. Written also when the run fails. See docs/traces.md.
    #[arg(long, value_name = "FILE", conflicts_with = "events")]
    timeline: Option<PathBuf>,
    /// Most bytes the script's values may hold together, a new result
    /// included; one result may not exceed it either. Past it the run ends
    /// with E0410 naming the largest variables (docs/limits.md). Default: half
    /// the machine's memory, as `mlpl serve`; 0: no budget.
    #[arg(long, value_name = "BYTES")]
    memory_budget: Option<usize>,
    /// Do not store what the run's `train` loops measured in the calibration
    /// cache (by default, when the cache exists, each loop's measured ÷
    /// estimated step time and peak memory refine its device's correction;
    /// docs/estimates.md). The environment variable MLPL_NO_REFINE=1 does the same.
    #[arg(long)]
    no_refine: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum EventsFormat {
    /// One JSON object per line.
    Jsonl,
}

#[derive(clap::Args)]
struct CheckArgs {
    /// Scripts to check.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// rustc-style text.
    Human,
    /// A JSON array of diagnostics.
    Json,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    if !matches!(cli.command, Command::Serve(_)) {
        quiet_on_closed_pipe();
    }
    mlpl_devices::capture::set_allocator_hook(Some(allocator_hook));
    match cli.command {
        Command::Run(args) => run(args),
        Command::Check(args) => check(args),
        Command::Explain { code } => explain(&code),
        Command::Calibrate(args) => calibrate(args),
        Command::Estimate(args) => estimate(args),
        Command::Serve(args) => serve_cmd(args),
    }
}

/// Output into a closed pipe (`mlpl explain E0201 | head -1`) ends the process
/// quietly with status 141, as a Unix tool killed by SIGPIPE, instead of the
/// print macros' "failed printing to stdout" panic. Not for `mlpl serve`, whose
/// standard output may close while it serves.
fn quiet_on_closed_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to std") && msg.contains("(os error 32)") {
            std::process::exit(141);
        }
        default(info)
    }));
}

fn color() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

fn read_source(path: &Path) -> Result<String, ExitCode> {
    let bytes = std::fs::read(path).map_err(|e| {
        eprintln!("error: cannot read {}: {e}", path.display());
        ExitCode::from(2)
    })?;
    decode_source(&bytes).map_err(|d| {
        // Shown with the invalid bytes replaced, so the error points at its line.
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let src = SourceFile::new(path.display().to_string(), text);
        eprintln!(
            "{}",
            render_with(&d, &src, &RenderOptions { color: color() })
        );
        ExitCode::from(1)
    })
}

fn run(args: RunArgs) -> ExitCode {
    let text = match read_source(&args.file) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let src = SourceFile::new(args.file.display().to_string(), text);
    let Some(device) = DeviceTarget::parse(&args.device) else {
        eprintln!(
            "error: unknown device `{}`; use cpu, cuda, cuda:N or mlx",
            args.device
        );
        return ExitCode::from(2);
    };
    set_run_budget(args.memory_budget);
    if args.events.is_some() {
        return run_events(&args, src, device);
    }
    let parsed = mlpl_syntax::parse(src.text());
    let opts = RenderOptions { color: color() };
    let mut failed = false;
    for d in &parsed.diagnostics {
        eprintln!("{}", render_with(d, &src, &opts));
        failed |= d.is_error();
    }
    if failed {
        return ExitCode::from(1);
    }
    let mut ws = Workspace::new();
    ws.data_dir = args
        .data_dir
        .clone()
        .or_else(|| Some(script_dir(&args.file)));
    ws.exp_dir = args.exp_dir.clone();
    ws.default_device = Some(device);
    ws.calibration = Calibration::load_default().map(Arc::new);
    join_thread_pool();
    let mut it = Interp::new(ws);
    it.capture_steps = !args.no_capture;
    mlpl_runner::http::install(&mut it);
    if args.trace.is_some() {
        it.trace = Some(Trace::new(src.text()));
    }
    if let Err(why) = it.devices.availability(device) {
        eprintln!(
            "warning[W0501]: device `{device}` is not available ({}); running on the CPU",
            why.reason()
        );
    }
    // On a terminal, each `train` loop gets a progress bar drawn from `step`
    // events; with a calibration cache, the loops' measurements refine it.
    let progress = std::io::stderr()
        .is_terminal()
        .then(|| Arc::new(ProgressRenderer::new()));
    let refine = RefineOptions::from_env(true, args.no_refine);
    if progress.is_some() || refine.cache.is_some() {
        let sink: EventSink = match &progress {
            Some(p) => {
                let p2 = p.clone();
                Box::new(move |e| p2.handle(e))
            }
            None => Box::new(|_| {}),
        };
        let emitter = Arc::new(Emitter::new("cli", 0, sink));
        let backend = it.devices.backend(device);
        let meter = Meter::new(
            refine,
            src.clone(),
            &parsed.program,
            device,
            it.ws.calibration.clone(),
        );
        it.set_observer(Box::new(
            StepObserver::new(emitter, "run-1", STEP_INTERVAL, backend, device.to_string())
                .with_meter(meter),
        ));
    }
    let timeline = args.timeline.as_ref().map(|_| {
        let inner = it.take_observer();
        let t = TimelineObserver::new(src.clone(), it.devices.backend(device), inner);
        it.devices.set_profile(Some(t.kernel_log()));
        let data = t.data();
        it.set_observer(Box::new(t));
        data
    });
    let warn_src = src.clone();
    let warn_progress = progress.clone();
    it.set_warning_sink(Box::new(move |d: &Diagnostic| {
        let text = render_with(d, &warn_src, &opts);
        match &warn_progress {
            Some(p) => p.suspend(|| eprintln!("{text}")),
            None => eprintln!("{text}"),
        }
    }));
    let started = std::time::Instant::now();
    let result = it.run(&parsed.program);
    if let Some(p) = &progress {
        p.finish_all();
    }
    let elapsed = started.elapsed();
    if let (Some(path), Some(trace)) = (&args.trace, it.trace.take()) {
        if let Err(e) = std::fs::write(path, trace.to_json()) {
            eprintln!("error: cannot write the trace to {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    if let (Some(path), Some(data)) = (&args.timeline, timeline) {
        let title = format!("mlpl run {}", args.file.display());
        let json = data
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .to_json(&title, &device.to_string());
        if let Err(e) = std::fs::write(path, json) {
            eprintln!(
                "error: cannot write the timeline to {}: {e}",
                path.display()
            );
            return ExitCode::from(2);
        }
    }
    let code = match result {
        Ok(Some(v)) => {
            print_value(&v, args.svg_out.as_deref());
            ExitCode::SUCCESS
        }
        Ok(None) => ExitCode::SUCCESS,
        Err(d) => {
            eprintln!("{}", render_with(&d, &src, &opts));
            ExitCode::from(1)
        }
    };
    if args.profile {
        let _ = std::io::stdout().flush();
        eprint!("{}", profile_report(&it, &src, elapsed));
    }
    code
}

/// `mlpl run --memory-budget`: this thread's budgets of one result and of all
/// the script's values together (both the flag's bytes, by default
/// [`serve::default_memory_budget`], none for 0).
fn set_run_budget(flag: Option<usize>) {
    let bytes = match flag {
        Some(0) => None,
        Some(b) => Some(b),
        None => serve::default_memory_budget(),
    };
    mlpl_lang::eval::ops::set_memory_budget(bytes);
    mlpl_lang::eval::ops::set_session_budget(bytes.map(|limit| {
        mlpl_lang::eval::ops::SessionBudget {
            limit,
            raise: "`mlpl run --memory-budget BYTES`".to_string(),
        }
    }));
}

/// Makes this thread, which runs the program, worker 0 of rayon's global pool
/// (with one thread fewer spawned): the kernels' parallel work is then queued
/// on this thread's own deque, for the other workers to take, instead of being
/// handed to the pool from outside and waited for. Fails harmlessly when the
/// pool already exists.
fn join_thread_pool() {
    let _ = rayon::ThreadPoolBuilder::new()
        .use_current_thread()
        .build_global();
}

/// `--profile`: one paragraph per top-level `train` loop of the run.
fn profile_report(it: &Interp, src: &SourceFile, total: std::time::Duration) -> String {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let kernels: std::time::Duration = it.loop_stats.iter().map(|s| s.replay_kernels).sum();
    let mut out = format!(
        "profile: run {:.1} ms, of which {:.1} ms ({:.1}%) inside the kernels of replayed steps (interpreted code is not timed)\n",
        ms(total),
        ms(kernels),
        100.0 * ms(kernels) / ms(total).max(1e-9)
    );
    if let Some(peak) = measure::peak_resident_bytes() {
        out += &format!("  peak RSS: {peak:.0} bytes\n");
    }
    for s in &it.loop_stats {
        let (line, _) = src.line_col(s.span.start);
        out += &format!(
            "  train loop at line {line}: {} iterations in {:.1} ms ({:.1}% of the run)\n",
            s.iterations,
            ms(s.wall),
            100.0 * ms(s.wall) / ms(total).max(1e-9)
        );
        match (&s.eager_reason, s.replay_kind) {
            (_, Some(kind)) if s.replayed > 0 => {
                let share = 100.0 * ms(s.replay_kernels) / ms(s.replay_wall).max(1e-9);
                out += &format!(
                    "    {} replayed from the captured step ({kind}) in {:.1} ms, {} ms each (median {} ms); {:.1} ms inside kernels ({share:.1}%)\n",
                    s.replayed,
                    ms(s.replay_wall),
                    sig(ms(s.replay_wall) / s.replayed as f64),
                    s.replay_median.map_or("?".to_string(), |d| sig(ms(d))),
                    ms(s.replay_kernels),
                );
            }
            (Some(why), _) => out += &format!("    not captured: {why}\n"),
            _ => out += "    not captured\n",
        }
        if let Some(peak) = s.eager_live_peak {
            out += &format!("    step memory: eager live peak {peak} bytes");
            if let Some(a) = s.arena_bytes {
                out += &format!(
                    "; captured arena {} bytes ({} owned, {} inputs read in place)",
                    a.total(),
                    a.owned,
                    a.aliased
                );
            }
            out += "\n";
        }
    }
    out
}

fn script_dir(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn print_value(v: &Value, svg_out: Option<&Path>) {
    let text = v.display();
    let mut out = std::io::stdout().lock();
    if v.is_svg() {
        if let Some(path) = write_svg(&text, svg_out) {
            let _ = writeln!(out, "viz: {}", path.display());
            return;
        }
    }
    let _ = writeln!(out, "{text}");
}

/// The directory for SVG charts (LANGUAGE §21.2).
fn svg_dir(svg_out: Option<&Path>) -> PathBuf {
    svg_out
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("MLPL_CACHE_DIR").map(PathBuf::from))
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("mlpl")))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("mlpl")))
        .unwrap_or_else(std::env::temp_dir)
}

/// Writes a chart to DIR/H.svg (LANGUAGE §21.2) and returns the path.
fn write_svg(text: &str, svg_out: Option<&Path>) -> Option<PathBuf> {
    mlpl_runner::session::write_svg(text, &svg_dir(svg_out))
}

/// `mlpl run --events jsonl`: the file runs as one cell of a session whose
/// events are printed one JSON object per line.
fn run_events(args: &RunArgs, src: SourceFile, device: mlpl_lang::value::DeviceTarget) -> ExitCode {
    let sink = Box::new(|e: &mlpl_runner::session::Event| {
        let mut out = std::io::stdout().lock();
        if let Ok(line) = serde_json::to_string(e) {
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    });
    let opts = SessionOptions {
        data_dir: args
            .data_dir
            .clone()
            .or_else(|| Some(script_dir(&args.file))),
        exp_dir: args.exp_dir.clone(),
        device,
        artifact_dir: Some(svg_dir(args.svg_out.as_deref())),
        capture_steps: !args.no_capture,
        calibration: Calibration::load_default().map(Arc::new),
        refine: RefineOptions::from_env(true, args.no_refine),
        ..SessionOptions::default()
    };
    join_thread_pool();
    let mut session = Session::new("cli", opts, sink);
    let req = RunRequest {
        code: src.text().to_string(),
        cell: Some(CellRef {
            uri: src.name().to_string(),
            index: 0,
            start_line: 0,
        }),
        device: None,
        timeline: false,
    };
    match session.run("run-1", &req).status {
        RunStatus::Ok => ExitCode::SUCCESS,
        RunStatus::Error | RunStatus::Cancelled => ExitCode::from(1),
    }
}

fn serve_cmd(args: ServeArgs) -> ExitCode {
    let addr: std::net::SocketAddr = match args.bind.parse() {
        Ok(a) => a,
        Err(_) => {
            eprintln!(
                "error: `{}` is not an address such as 127.0.0.1:7878",
                args.bind
            );
            return ExitCode::from(2);
        }
    };
    let given = match (&args.token, &args.token_file) {
        (Some(t), _) => Some(t.trim().to_string()),
        (None, Some(path)) => match std::fs::read_to_string(path) {
            Ok(text) => Some(text.lines().next().unwrap_or("").trim().to_string()),
            Err(e) => {
                eprintln!("error: cannot read {}: {e}", path.display());
                return ExitCode::from(2);
            }
        },
        (None, None) => None,
    };
    if given.as_deref() == Some("") {
        eprintln!("error: the token is empty");
        return ExitCode::from(2);
    }
    if given.is_none() && serve::needs_token(&addr) {
        eprintln!("error: refusing to listen on {addr} without a token: it is not a loopback address; pass --token or --token-file");
        return ExitCode::from(2);
    }
    let generated = given.is_none();
    let token = match given.map_or_else(serve::random_token, Ok) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let data_dir = match &args.data_dir {
        Some(d) => match d.canonicalize() {
            Ok(p) if p.is_dir() => Some(p),
            _ => {
                eprintln!("error: the data directory {} does not exist", d.display());
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    if let Some(d) = &args.state_dir {
        if let Err(e) = std::fs::create_dir_all(d) {
            eprintln!(
                "error: cannot create the state directory {}: {e}",
                d.display()
            );
            return ExitCode::from(2);
        }
    }
    let allow_origin = match args.allow_origin.as_deref().map(serve::parse_origin) {
        Some(Err(e)) => {
            eprintln!("error: --allow-origin: {e}");
            return ExitCode::from(2);
        }
        Some(Ok(o)) => Some(o),
        None => None,
    };
    let config = ServeConfig {
        allow_origin,
        state_dir: args.state_dir.clone(),
        data_dir,
        max_body_bytes: args.max_body_bytes,
        max_sessions: args.max_sessions,
        memory_budget: match args.memory_budget {
            Some(0) => None,
            Some(b) => Some(b),
            None => serve::default_memory_budget(),
        },
        session_memory_budget: match args.session_memory_budget {
            Some(0) => None,
            Some(b) => Some(b),
            None => serve::default_memory_budget(),
        },
        header_timeout: std::time::Duration::from_secs(args.header_timeout.max(1)),
        body_timeout: std::time::Duration::from_secs(args.body_timeout.max(1)),
        ..ServeConfig::new(token.clone())
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the server runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
            eprintln!("error: cannot listen on {addr}: {e}");
        })?;
        let bound = listener.local_addr().unwrap_or(addr);
        let on_restore = move |lines: Vec<String>| {
            for l in lines {
                eprintln!("mlpl serve: {l}");
            }
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "mlpl serve listening on http://{bound}");
            if generated {
                let _ = writeln!(out, "token: {token}");
            }
            let _ = out.flush();
        };
        let stdin_closed = args.exit_with_stdin.then(stdin_closed);
        let shutdown = async move {
            match stdin_closed {
                Some(closed) => {
                    tokio::select! {
                        _ = tokio::signal::ctrl_c() => {}
                        _ = closed => {}
                    }
                }
                None => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        };
        serve::serve(listener, config, on_restore, shutdown)
            .await
            .map_err(|e| eprintln!("error: {e}"))
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(()) => ExitCode::from(1),
    }
}

/// Completes when standard input reaches its end (or fails): read on a thread of
/// its own, since reading a pipe blocks.
fn stdin_closed() -> tokio::sync::oneshot::Receiver<()> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        use std::io::Read;
        let mut buf = [0u8; 4096];
        let mut input = std::io::stdin().lock();
        while matches!(input.read(&mut buf), Ok(n) if n > 0) {}
        let _ = tx.send(());
    });
    rx
}

fn check(args: CheckArgs) -> ExitCode {
    let mut any_error = false;
    let mut json = Vec::new();
    let opts = RenderOptions { color: color() };
    // A file that cannot be read or decoded is one more diagnostic; the other
    // files are still checked and reported (exit status 2 when a file could not
    // be read at all).
    let mut unreadable = false;
    for file in &args.files {
        let name = file.display().to_string();
        let bytes = match std::fs::read(file) {
            Ok(b) => b,
            Err(e) => {
                unreadable = true;
                let d =
                    Diagnostic::of(mlpl_diag::code::E0405).note(format!("cannot read {name}: {e}"));
                let src = SourceFile::new(name.clone(), String::new());
                match args.format {
                    Format::Human => eprintln!("error: cannot read {name}: {e}"),
                    Format::Json => {
                        if let serde_json::Value::Array(items) = to_json(&[d], &src) {
                            json.extend(items);
                        }
                    }
                }
                continue;
            }
        };
        let (text, decode_error) = match decode_source(&bytes) {
            Ok(t) => (t, None),
            Err(d) => (String::from_utf8_lossy(&bytes).into_owned(), Some(d)),
        };
        let src = SourceFile::new(name, text);
        let checked = match decode_error {
            None => check_source(src.text()),
            Some(d) => mlpl_lang::check::Checked {
                program: mlpl_syntax::parse("").program,
                diagnostics: vec![d],
            },
        };
        any_error |= checked.diagnostics.iter().any(Diagnostic::is_error);
        match args.format {
            Format::Human => {
                for d in &checked.diagnostics {
                    eprintln!("{}", render_with(d, &src, &opts));
                }
            }
            Format::Json => {
                if let serde_json::Value::Array(items) = to_json(&checked.diagnostics, &src) {
                    json.extend(items);
                }
            }
        }
    }
    if let Format::Json = args.format {
        println!(
            "{}",
            serde_json::to_string_pretty(&json).expect("JSON values serialize")
        );
    }
    if unreadable {
        ExitCode::from(2)
    } else if any_error {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn explain(code: &str) -> ExitCode {
    match codes::explain(code) {
        Some(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        None => {
            eprintln!("error: `{code}` is not a diagnostic code; codes look like E0201 or W0001 (see docs/diagnostics.md)");
            ExitCode::from(2)
        }
    }
}

/// `mlpl calibrate`: runs the calibration suite (`mlpl_lang::train_loops::measure`)
/// on every available device and stores the models in the cache, keeping the
/// entries of devices not measured now and each device's learnt correction.
fn calibrate(args: CalibrateArgs) -> ExitCode {
    let Some(path) = args.output.clone().or_else(calibration::default_path) else {
        eprintln!("error: no cache directory (set MLPL_CACHE_DIR or pass --output FILE)");
        return ExitCode::from(2);
    };
    let mut cache = Calibration::load(&path).unwrap_or_default();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let probe = Interp::new(Workspace::new());
    join_thread_pool();
    for name in ["cpu", "cuda", "mlx"] {
        if !args.device.is_empty() && !args.device.iter().any(|d| d == name) {
            continue;
        }
        let target = DeviceTarget::parse(name).expect("a known device target");
        if let Err(why) = probe.devices.availability(target) {
            println!("{name}: not available ({})", why.reason());
            continue;
        }
        let started = std::time::Instant::now();
        let run_loop = |src: &str, captured: bool| calibration_loop(name, src, captured);
        let trace_loop = |src: &str| calibration_trace(name, src);
        match measure::calibrate(name, probe.devices.backend(target), &run_loop, &trace_loop) {
            Ok(mut model) => {
                let entry = cache.entry_mut(name);
                if let Some(old) = &entry.model {
                    model.correction = old.correction;
                }
                let best = model
                    .gemm
                    .iter()
                    .map(|p| p.gflops.median)
                    .fold(0.0, f64::max);
                // The largest square product (the step-like shapes follow the squares).
                let square = model
                    .gemm
                    .iter()
                    .filter(|p| p.batch == 1 && !p.ta && !p.tb && p.m == p.k && p.k == p.n)
                    .max_by_key(|p| p.m);
                let largest = square.map(|p| p.gflops.median).unwrap_or(best);
                let size = square.map_or(0, |p| p.m);
                // Each function's ns per evaluation, smallest to largest array.
                let funcs: Vec<String> = Transcendental::ALL
                    .iter()
                    .map(|f| {
                        let ns: Vec<String> = model
                            .transcendentals
                            .iter()
                            .filter(|p| p.func == f.name())
                            .map(|p| sig(p.seconds.median * 1e9))
                            .collect();
                        format!("{} {}", f.name(), ns.join("/"))
                    })
                    .collect();
                let sizes: Vec<String> = measure::TRANSCENDENTAL_SIZES
                    .iter()
                    .map(|n| n.to_string())
                    .collect();
                println!(
                    "{name}: GEMM {} GFLOP/s at {}³ (best {}), {} µs per kernel replayed, {} µs more interpreted, {} GB/s ({} in cache), {} ns per transcendental ({} ns at {} elements), GEMM tile {}×{}, baseline {} MB, step factor {}, step buffers ×{} of activations and ×{} of parameters ({:.1} s)",
                    sig(largest),
                    size,
                    sig(best),
                    sig(model.dispatch_s.median * 1e6),
                    sig(model.interp_s.median * 1e6),
                    sig(model.bandwidth_gbs.median),
                    sig(model.cache_bandwidth_gbs.median),
                    sig(model.transcendental_s.median * 1e9),
                    funcs.join(", "),
                    sizes.join("/"),
                    model.tile[0],
                    model.tile[1],
                    sig(model.baseline_bytes / 1e6),
                    sig(model.step_factor),
                    sig(model.arena_factor),
                    sig(model.param_factor),
                    started.elapsed().as_secs_f64()
                );
                entry.gflops = largest;
                entry.size = Some(size);
                entry.measured_at = Some(now);
                entry.source = Some("`mlpl calibrate`".into());
                entry.model = Some(model);
            }
            Err(why) => println!("{name}: measurement failed ({why})"),
        }
    }
    match cache.save(&path) {
        Ok(()) => {
            println!("wrote {}", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: cannot write {}: {e}", path.display());
            ExitCode::from(1)
        }
    }
}

/// Runs a calibration loop with this binary as `mlpl run --profile` runs a
/// user's script (a child process per repetition): seconds per step from the
/// replayed steps' wall time or, interpreted, the loop's; and the smallest
/// peak RSS the children reported.
fn calibration_loop(device: &str, src: &str, captured: bool) -> Result<measure::LoopRun, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let dir = std::env::temp_dir().join(format!("mlpl-calibrate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let file = dir.join("loop.mlpl");
    std::fs::write(&file, src).map_err(|e| e.to_string())?;
    let mut samples = Vec::new();
    let mut peak = f64::INFINITY;
    let reps = if captured { measure::REPS } else { 3 };
    let result = (|| {
        for _ in 0..reps {
            let mut cmd = std::process::Command::new(&exe);
            // The suite's own loops teach the cache nothing.
            cmd.args(["run", "--profile", "--no-refine", "--device", device]);
            if !captured {
                cmd.arg("--no-capture");
            }
            let out = cmd.arg(&file).output().map_err(|e| e.to_string())?;
            let text = String::from_utf8_lossy(&out.stderr);
            let p = ProfileLine::parse(&text);
            // A replayed step's median, as the sweep and the refinement
            // measure a loop (the mean let one slow step of a shared machine
            // move the dispatch cost); an interpreted loop's mean.
            let per_step = match (captured, p.replayed_median) {
                (true, Some(ms)) => Some((1.0, ms)),
                (true, None) => p.replayed,
                (false, _) => p.iterations,
            };
            match per_step {
                Some((n, ms)) if n > 0.0 => samples.push(ms / 1e3 / n),
                _ => return Err(format!("unexpected profile output: {}", text.trim())),
            }
            peak = peak.min(p.peak_bytes.unwrap_or(f64::INFINITY));
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result.map(|()| (samples, if peak.is_finite() { peak } else { 0.0 }))
}

/// Runs a calibration loop captured with this binary and `--timeline` (a child
/// process) and returns the timeline's text.
fn calibration_trace(device: &str, src: &str) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let dir = std::env::temp_dir().join(format!("mlpl-calibrate-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let (file, trace) = (dir.join("loop.mlpl"), dir.join("trace.json"));
    let result = (|| {
        std::fs::write(&file, src).map_err(|e| e.to_string())?;
        let out = std::process::Command::new(&exe)
            .args(["run", "--no-refine", "--device", device, "--timeline"])
            .arg(&trace)
            .arg(&file)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "the timeline run failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        std::fs::read_to_string(&trace).map_err(|e| e.to_string())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// What `calibration_loop` reads from `--profile`'s report of one loop.
struct ProfileLine {
    /// (iterations, ms) of the loop.
    iterations: Option<(f64, f64)>,
    /// (replayed steps, ms) of its replayed steps.
    replayed: Option<(f64, f64)>,
    /// The median replayed step, ms.
    replayed_median: Option<f64>,
    /// The peak RSS line.
    peak_bytes: Option<f64>,
}

impl ProfileLine {
    fn parse(text: &str) -> ProfileLine {
        // `N <after>… in MS ms`: the count before `after`, the milliseconds
        // after the first ` in ` that follows it.
        let pair = |after: &str| -> Option<(f64, f64)> {
            let line = text.lines().find(|l| l.contains(after))?;
            let (count, rest) = line.trim().split_once(after)?;
            let count: f64 = count.rsplit(' ').next()?.trim().parse().ok()?;
            let (_, rest) = rest.split_once(" in ")?;
            let ms: f64 = rest.trim_start().split(" ms").next()?.trim().parse().ok()?;
            Some((count, ms))
        };
        ProfileLine {
            iterations: pair(" iterations"),
            // Whatever the program's kind (`(arena)`, `(calls)`, `(graph)`).
            replayed: pair(" replayed from the captured step"),
            replayed_median: text
                .lines()
                .find(|l| l.contains(" replayed from the captured step"))
                .and_then(|l| {
                    l.split_once("(median ")?
                        .1
                        .split(" ms")
                        .next()?
                        .parse()
                        .ok()
                }),
            peak_bytes: text
                .lines()
                .find_map(|l| l.trim().strip_prefix("peak RSS: "))
                .and_then(|r| r.split(' ').next()?.parse().ok()),
        }
    }
}

/// Three significant digits.
fn sig(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = (2 - mlpl_devices::math::log10(x.abs()).floor() as i32).max(0) as usize;
    format!("{x:.digits$}")
}

/// `mlpl estimate`: the estimate of every `train` loop of a script.
fn estimate(args: EstimateArgs) -> ExitCode {
    let text = match read_source(&args.file) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let cal = match &args.calibration {
        Some(p) => Calibration::load(p),
        None => Calibration::load_default(),
    };
    let (checked, facts) = mlpl_lang::check::query::check_with_facts(&text);
    let src = SourceFile::new(args.file.display().to_string(), text);
    let opts = RenderOptions { color: color() };
    for d in checked.diagnostics.iter().filter(|d| d.is_error()) {
        eprintln!("{}", render_with(d, &src, &opts));
    }
    let mut out = std::io::stdout().lock();
    for lp in loops::train_loops(&checked.program, &facts) {
        let kind = lp.device.clone().unwrap_or_else(|| args.device.clone());
        let kind = kind.split(':').next().unwrap_or("cpu").to_string();
        let (model, calibrated) =
            calibration::device_model(cal.as_ref(), &kind, mlpl_lang::estimate::DEFAULT_GFLOPS);
        let captured = cost::estimate_step(&lp.model, &lp.frozen, &lp.step, true, &model);
        let eager = cost::estimate_step(&lp.model, &lp.frozen, &lp.step, false, &model);
        let (line, _) = src.line_col(lp.span.start);
        let predicted = if lp.captured() { &captured } else { &eager };
        let m = &predicted.memory;
        let doc = serde_json::json!({
            "line": line,
            "device": kind,
            "calibrated": calibrated,
            "steps": lp.steps,
            "batch": lp.step.batch,
            "seq": lp.step.seq,
            "batch_known": lp.batch.known(),
            "forwards": lp.step.forwards,
            "captured": lp.captured(),
            "not_captured": lp.not_captured,
            "seconds": [predicted.seconds.lo, predicted.seconds.mid, predicted.seconds.hi],
            "kernels": captured.totals.kernels,
            "gemm_flops": captured.totals.flops,
            "captured_seconds": [captured.seconds.lo, captured.seconds.mid, captured.seconds.hi],
            "interpreted_seconds": [eager.seconds.lo, eager.seconds.mid, eager.seconds.hi],
            "memory_bytes": captured.memory.total,
            "interpreted_memory_bytes": eager.memory.total,
            "memory": {"weights": m.weights, "grads": m.grads, "optimizer": m.optimizer,
                       "tape": m.tape, "arena": m.arena, "baseline": m.baseline},
        });
        let _ = if args.json {
            writeln!(out, "{doc}")
        } else {
            writeln!(
                out,
                "train loop at line {line} on {kind}{}: {} kernels per step, {}–{} ms per step captured ({}–{} ms interpreted{}), peak memory ≈ {} MB{}",
                if calibrated { "" } else { " (not calibrated: run `mlpl calibrate`)" },
                captured.totals.kernels,
                sig(captured.seconds.lo * 1e3),
                sig(captured.seconds.hi * 1e3),
                sig(eager.seconds.lo * 1e3),
                sig(eager.seconds.hi * 1e3),
                lp.not_captured.map_or(String::new(), |why| format!("; runs interpreted: {why}")),
                sig(m.total / 1e6),
                if lp.batch.known() { "" } else { " (batch unknown: shown for one row)" }
            )
        };
        if args.kernels {
            for k in &captured.kernels {
                let secs = cost::kernel_seconds(&model, k, |m| m.median);
                let _ = writeln!(
                    out,
                    "  {:<24} {:>12.0} FLOP {:>12.0} out  {} µs",
                    k.name,
                    k.flops(),
                    k.out_elems,
                    sig(secs * 1e6)
                );
            }
        }
    }
    ExitCode::SUCCESS
}
