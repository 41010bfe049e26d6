//! `mlpl-lsp`: the MLPL language server, speaking LSP over standard input and output.

/// mimalloc: each analysis allocates many small, short-lived values (syntax
/// trees, the checker's abstract values), which it serves faster than the
/// system allocator (docs/benchmarks.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    if let Some(a) = args.next() {
        match a.as_str() {
            "--version" | "-V" => {
                println!("mlpl-lsp {}", env!("CARGO_PKG_VERSION"));
                return;
            }
            "--stdio" => {}
            "--help" | "-h" => {
                println!("mlpl-lsp: the MLPL language server (LSP over standard input and output)\n\nUsage: mlpl-lsp [--stdio]");
                return;
            }
            other => {
                eprintln!("mlpl-lsp: unknown argument `{other}` (try --help)");
                std::process::exit(2);
            }
        }
    }
    mlpl_lsp::run_stdio().await;
    // A read of standard input may still be waiting on the runtime's blocking
    // pool (the client keeps its end open after `exit`): end without it.
    std::process::exit(0);
}
