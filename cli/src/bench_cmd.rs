//! `rgml bench`: the kernel workloads, the streaming rows, a model's speed,
//! and the CUDA rows, each printed as a table or JSON lines.

use std::process::ExitCode;

use crate::args::BenchArgs;
use rgml_cli::backend_arg::BackendArg;
use rgml_cli::outln;
use rgml_models::model::kv::KvType;

/// Runs `rgml bench` as its arguments say.
pub(crate) fn bench(a: BenchArgs) -> Result<ExitCode, String> {
    if a.n.is_some_and(|n| !(1..=32768).contains(&n)) {
        return Err(format!("--n {} is out of range (1..=32768)", a.n.unwrap_or(0)));
    }
    if let Some(path) = &a.model {
        return bench_model(path, &a);
    }
    if a.n_gpu_layers.is_some() {
        return Err("--n-gpu-layers needs --model".into());
    }
    match a.backend {
        BackendArg::Cuda => bench_cuda(&a),
        BackendArg::Cpu if a.device.is_some() || a.mm.is_some() || a.matvec.is_some() => {
            Err("--device, --mm and --matvec need --backend cuda".into())
        }
        BackendArg::Cpu if a.stream => {
            let types = a.types.as_deref().unwrap_or(&rgml_cli::bench::STREAM_TYPES);
            let (n, reps) = (a.n.unwrap_or(4096), a.reps.unwrap_or(5));
            if !a.json {
                outln!("CPU: {}", cpu_line());
            }
            let total = rgml_cli::bench::stream_bytes(a.stream_mib.map(|m| m as usize));
            rgml_cli::bench::run_stream(a.threads, (n, a.act_rows, total), reps, types, a.stream_repack, |r| {
                outln!("{}", if a.json { r.json() } else { r.table_line() });
            })?;
            Ok(ExitCode::SUCCESS)
        }
        BackendArg::Cpu if a.types.is_some() => {
            let types = a.types.as_deref().unwrap_or_default();
            let (n, reps) = (a.n.unwrap_or(4096), a.reps.unwrap_or(15));
            rgml_cli::bench::run_matvecs(a.threads, (n, a.act_rows), reps, types, |r| {
                outln!("{}", if a.json { r.json() } else { r.table_line() });
            })?;
            Ok(ExitCode::SUCCESS)
        }
        BackendArg::Cpu => bench_cpu(a.json, a.threads, a.n.unwrap_or(4096), a.reps.unwrap_or(15), a.llama, a.kv_type),
    }
}

fn bench_model(path: &std::path::Path, a: &BenchArgs) -> Result<ExitCode, String> {
    use rgml_cli::bench_model::{model_speed, ModelBench};
    let b = ModelBench {
        prompt_tokens: a.prompt_tokens,
        gen_tokens: a.gen_tokens,
        reps: a.reps.unwrap_or(3),
        kv_type: a.kv_type,
        profile: a.profile,
    };
    let backend = a
        .backend
        .open_for_model(a.threads, a.device.unwrap_or(0), path, a.n_gpu_layers)
        .and_then(|be| a.repack.apply(be))
        .and_then(|be| be.with_profile(a.profile))
        .map_err(|e| e.to_string())?;
    let how = format!("{backend:?}{}", if backend.repacks_weights() { ", repacked" } else { "" });
    // on the CPU, generation against the machine's read bandwidth on as many threads
    let stream = rgml_cli::bench::stream_bytes(a.stream_mib.map(|m| m as usize));
    let reader = match a.backend {
        BackendArg::Cpu => {
            let cpu = rgml::CpuBackend::new(a.threads).map_err(|e| e.to_string())?;
            Some((cpu, rgml_cli::bench::read_buffer(stream)?))
        }
        BackendArg::Cuda => None,
    };
    let mut read = reader.as_ref().map(|(cpu, buf)| move || rgml_cli::bench::read_buffer_gbps(cpu, buf.values(), 3));
    let s = model_speed(path, backend, &how, &b, read.as_mut().map(|f| f as &mut dyn FnMut() -> f64))?;
    if a.json {
        outln!("{}", s.json(&b));
    } else {
        let runs = |v: &[f64]| v.iter().map(|x| format!("{x:.1}")).collect::<Vec<_>>().join(" ");
        outln!("CPU: {}", cpu_line());
        outln!("{}", s.what);
        outln!(
            "prompt     {:>4} tokens: {:>8.1} tok/s  (passes: {})",
            b.prompt_tokens,
            s.prompt_tok_s,
            runs(&s.prompt_runs)
        );
        outln!("generation {:>4} tokens: {:>8.1} tok/s  (passes: {})", b.gen_tokens, s.gen_tok_s, runs(&s.gen_runs));
        let per_token = s.bytes_per_token as f64 / 1e6;
        match (s.read_gbps, s.gen_read_ratio) {
            (Some(read), Some(ratio)) => outln!(
                "weights per token {per_token:.1} MB: generation reads {:.1} GB/s, {ratio:.2} of the machine's {read:.1} GB/s \
                 read bandwidth ({} MiB read on as many threads), bound {:.1} tok/s\n\
                 per pass: read {} GB/s, share {} (each pass against the read taken after it)",
                s.gen_tok_s * per_token / 1e3,
                stream >> 20,
                read * 1e3 / per_token,
                runs(&s.read_runs),
                s.ratio_runs.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(" ")
            ),
            _ => outln!("weights per token {per_token:.1} MB: generation reads {:.1} GB/s", s.gen_tok_s * per_token / 1e3),
        }
    }
    let tokens = |n: usize| n * b.reps;
    for (what, p, n) in
        [("prompt", &s.prompt_profile, tokens(b.prompt_tokens)), ("generation", &s.gen_profile, tokens(b.gen_tokens))]
    {
        if let Some(p) = p {
            eprintln!("\n{what}: time per op kind per token\n{}", rgml_cli::bench_model::profile_table(p, n));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `rgml bench --backend cuda` in a program built without the `cuda` feature.
#[cfg(not(feature = "cuda"))]
fn bench_cuda(_: &BenchArgs) -> Result<ExitCode, String> {
    Err("this rgml was built without the cuda feature: --backend cuda is not available".into())
}

#[cfg(feature = "cuda")]
fn bench_cuda(a: &BenchArgs) -> Result<ExitCode, String> {
    use rgml_cli::{bench, bench_cuda};
    let mut sizes = bench_cuda::Sizes::default();
    if let Some(n) = a.n {
        sizes.n = n;
    }
    if let Some(mm) = a.mm {
        sizes.mm = mm;
        sizes.prefill = ((mm + 31) / 32 * 32, mm);
    }
    if let Some(side) = a.matvec {
        sizes.matvecs = vec![(side, 4)];
    }
    let json = a.json;
    let header = std::cell::Cell::new(!json);
    let out = bench_cuda::run(
        a.device.unwrap_or(0),
        &sizes,
        a.reps.unwrap_or(15),
        |r| {
            if header.replace(false) {
                outln!("{}", bench::table_header());
            }
            outln!("{}", if json { r.json() } else { r.table_line() });
        },
        |name, e| {
            if json {
                outln!("{}", serde_json::json!({"name": name, "error": e}));
            }
            eprintln!("FAILED {name}: {e}");
        },
    )?;
    if a.llama {
        // decode speed with and without CUDA graphs, on one backend
        let config = rgml::CudaConfig::from_env().map_err(|e| e.to_string())?;
        let be = rgml::CudaBackend::with_config(a.device.unwrap_or(0), config).map_err(|e| e.to_string())?;
        for graphs in [false, true] {
            let how = format!("{be:?}, CUDA graphs {}", if graphs { "on" } else { "off" });
            let b = be.clone().with_graphs(graphs);
            let dims = rgml_models::synthetic::LlamaDims::BENCH;
            let s = bench::llama_speed_on(b, &how, rgml::DType::Q4_0, dims, (64, 32), a.kv_type)?;
            print_llama(json, &format!("llama-q4_0-cuda{}", if graphs { "-graphs" } else { "" }), &s);
        }
    }
    Ok(if out.failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// One synthetic-llama row: a JSON object or a line of text.
fn print_llama(json: bool, name: &str, s: &rgml_cli::bench::LlamaSpeed) {
    if json {
        outln!(
            "{}",
            serde_json::json!({"name": name, "what": s.what, "prompt_tps": s.prompt_tps, "gen_tps": s.gen_tps})
        );
    } else {
        outln!("{}: prompt {:.1} tokens/s, generation {:.1} tokens/s", s.what, s.prompt_tps, s.gen_tps);
    }
}

fn bench_cpu(json: bool, threads: usize, n: i64, reps: usize, llama: bool, kv: KvType) -> Result<ExitCode, String> {
    use rgml_cli::bench;
    if !json {
        outln!("{}", bench::table_header());
    }
    bench::run(threads, n, reps, |r| {
        outln!("{}", if json { r.json() } else { r.table_line() });
    })?;
    if llama {
        for (dt, repack) in [(rgml::DType::Q4_0, false), (rgml::DType::Q4_0, true), (rgml::DType::Q8_0, false)] {
            let s = bench::llama_speed(dt, threads, 64, 16, repack, kv)?;
            print_llama(json, &format!("llama-{dt}{}", if repack { "-rp" } else { "" }), &s);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The CPU as `rgml bench` reports it: [`rgml::CpuInfo::describe`] and whether
/// the kernels prefetch their weights there ([`rgml::quant::prefetch`]).
fn cpu_line() -> String {
    let prefetch = if rgml::quant::prefetch::enabled() { "on" } else { "off" };
    format!("{}, software prefetch {prefetch}", rgml::CpuInfo::get().describe())
}
