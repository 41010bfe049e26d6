//! `mlpl`: run, check and explain MLPL programs (LANGUAGE §21.2).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use mlpl_runtime::check::check_source;
use mlpl_runtime::diag::render::{render_with, to_json, RenderOptions};
use mlpl_runtime::diag::{codes, Diagnostic, SourceFile};
use mlpl_runtime::eval::{Interp, Workspace};
use mlpl_runtime::syntax::lexer::decode_source;
use mlpl_runtime::value::{DeviceTarget, Value};
use sha2::{Digest, Sha256};

/// MLPL: a typed array language for machine learning, with named axes.
#[derive(Parser)]
#[command(name = "mlpl", version, about, long_about = None, propagate_version = true)]
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
    match cli.command {
        Command::Run(args) => run(args),
        Command::Check(args) => check(args),
        Command::Explain { code } => explain(&code),
    }
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
        let src = SourceFile::new(path.display().to_string(), String::new());
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
    let parsed = mlpl_runtime::syntax::parse(src.text());
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
    let mut it = Interp::new(ws);
    if let Err(why) = it.devices.availability(device) {
        eprintln!(
            "warning: device `{device}` is not available ({}); running on the CPU",
            why.reason()
        );
    }
    let warn_src = src.clone();
    it.set_warning_sink(Box::new(move |d: &Diagnostic| {
        eprintln!("{}", render_with(d, &warn_src, &opts))
    }));
    match it.run(&parsed.program) {
        Ok(Some(v)) => {
            print_value(&v, args.svg_out.as_deref());
            ExitCode::SUCCESS
        }
        Ok(None) => ExitCode::SUCCESS,
        Err(d) => {
            eprintln!("{}", render_with(&d, &src, &opts));
            ExitCode::from(1)
        }
    }
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

/// Writes a chart to DIR/H.svg (LANGUAGE §21.2) and returns the path.
fn write_svg(text: &str, svg_out: Option<&Path>) -> Option<PathBuf> {
    let digest = Sha256::digest(text.as_bytes());
    let name: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    let dir = svg_out
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("MLPL_CACHE_DIR").map(PathBuf::from))
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("mlpl")))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("mlpl")))
        .unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&dir).ok()?;
    let path = dir.join(format!("{name}.svg"));
    std::fs::write(&path, text).ok()?;
    Some(path)
}

fn check(args: CheckArgs) -> ExitCode {
    let mut any_error = false;
    let mut json = Vec::new();
    let opts = RenderOptions { color: color() };
    for file in &args.files {
        let text = match read_source(file) {
            Ok(t) => t,
            Err(code) => return code,
        };
        let src = SourceFile::new(file.display().to_string(), text);
        let checked = check_source(src.text());
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
    if any_error {
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
