//! The `rgml` command-line tool.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use rgml::CpuBackend;
use rgml_models::graph_cases;

#[derive(Parser)]
#[command(name = "rgml", version, about = "A ggml-style static compute graph executor")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run graph cases (JSON Lines) and compare with their expected results.
    Eval {
        /// The cases file.
        cases: std::path::PathBuf,
        /// Write what rgml computed for every case to this JSON Lines file.
        #[arg(long)]
        emit: Option<std::path::PathBuf>,
        /// Worker threads (0: one per core).
        #[arg(long, default_value_t = 0)]
        threads: usize,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Eval { cases, emit, threads } => eval(&cases, emit.as_deref(), threads),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn eval(path: &std::path::Path, emit: Option<&std::path::Path>, threads: usize) -> Result<ExitCode, String> {
    let cpu = CpuBackend::new(threads).map_err(|e| e.to_string())?;
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = match emit {
        Some(p) => {
            Some(std::io::BufWriter::new(std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?))
        }
        None => None,
    };
    let (mut passed, mut failed) = (0, 0);
    for (lineno, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let case: serde_json::Value =
            serde_json::from_str(&line).map_err(|e| format!("{}:{}: {e}", path.display(), lineno + 1))?;
        let r = graph_cases::run_case(&cpu, &case);
        if r.passed() {
            passed += 1;
        } else {
            failed += 1;
            let why = r.error.clone().unwrap_or_else(|| r.failures.join("; "));
            println!("FAIL {}: {why}", r.id);
        }
        if let Some(o) = out.as_mut() {
            writeln!(o, "{}", r.emit).map_err(|e| e.to_string())?;
        }
    }
    if let Some(mut o) = out {
        o.flush().map_err(|e| e.to_string())?;
    }
    println!("{passed} passed, {failed} failed");
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
