//! The `rgml` command-line tool.

use std::io::{BufRead, Write};
use std::process::ExitCode;

mod args;
mod bench_cmd;

use args::{BenchArgs, DeviceArgs, ExecArgs, RepackArgs};
use clap::{ArgGroup, Parser, Subcommand};
use rgml_cli::chat_cli;
use rgml_cli::run::{Prompt, RunOptions};
use rgml_cli::text_cli::{self, SamplingArgs};
use rgml_cli::{graph_cases, out, outln};

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
        #[command(flatten)]
        on: DeviceArgs,
    },
    /// The seeds' example on a built-in 4096x4096 matrix: views, copies, broadcast, inplace.
    Demo {
        /// Side of the square matrix.
        #[arg(long, default_value_t = 4096)]
        n: i64,
        /// Worker threads (0: one per core).
        #[arg(long, default_value_t = 0)]
        threads: usize,
    },
    /// Print a GGUF file's version, metadata and tensor table.
    Inspect {
        /// The GGUF file.
        file: std::path::PathBuf,
    },
    /// Write one tensor of a GGUF file, dequantized, as little-endian f32.
    Dump {
        /// The GGUF file.
        file: std::path::PathBuf,
        /// The tensor's name.
        tensor: String,
        /// Output file.
        #[arg(long = "f32")]
        out: std::path::PathBuf,
    },
    /// Re-quantize the 2-D weights of a GGUF file (norms and other 1-D tensors are kept).
    Quantize {
        /// Input GGUF file.
        input: std::path::PathBuf,
        /// Output GGUF file.
        output: std::path::PathBuf,
        /// Target type: q4_0, q4_1, q5_0, q5_1, q8_0, q2_K … q6_K, iq4_nl, iq4_xs, mxfp4, tq1_0, tq2_0, f16, bf16, f32 (the other i-quants need an importance matrix).
        dtype: String,
    },
    /// Convert a Hugging Face llama checkpoint (safetensors, with config.json and tokenizer.json
    /// beside it) to a GGUF file llama.cpp loads.
    Convert {
        /// model.safetensors, or a sharded checkpoint's model.safetensors.index.json.
        input: std::path::PathBuf,
        /// Output GGUF file (written atomically; the input is only read).
        output: std::path::PathBuf,
        /// Type of the weight matrices: f32, f16, bf16, q8_0 (default: as stored; norms are always f32).
        #[arg(long)]
        outtype: Option<String>,
    },
    /// Run a llama-architecture GGUF model on a text prompt (the generated text streams to
    /// standard output) or on token ids (ids out).
    #[command(group(ArgGroup::new("input").required(true).args(["prompt", "file", "tokens"])))]
    Run {
        /// The GGUF model.
        model: std::path::PathBuf,
        /// The prompt text (tokenized with the model's add-special settings, special tokens parsed).
        #[arg(long)]
        prompt: Option<String>,
        /// Read the prompt text from this UTF-8 file.
        #[arg(long, short = 'f')]
        file: Option<std::path::PathBuf>,
        /// The prompt as token ids, comma-separated.
        #[arg(long, value_delimiter = ',')]
        tokens: Option<Vec<u32>>,
        /// Wrap the prompt as one user message in the model's chat template.
        #[arg(long)]
        chat: bool,
        /// Tokens to generate at most; -1: until an end-of-generation token (the default
        /// for a text prompt; 0 with --tokens).
        #[arg(long = "n-predict", short = 'n', allow_hyphen_values = true)]
        n_predict: Option<i64>,
        #[command(flatten)]
        sampling: SamplingArgs,
        /// Do not stop at end-of-generation tokens.
        #[arg(long)]
        ignore_eos: bool,
        /// Write every evaluated position's logits here (little-endian f32, position-major).
        #[arg(long)]
        logits: Option<std::path::PathBuf>,
        #[command(flatten)]
        exec: ExecArgs,
    },
    /// Print the embedding of each line of a text, one JSON array per line, as llama.cpp's
    /// llama-embedding computes it: an encoder's (bert, nomic-bert) or a decoder's final
    /// hidden states, pooled as the model file says unless --pooling says otherwise.
    #[command(group(ArgGroup::new("input").required(true).args(["prompt", "file"])))]
    Embed {
        /// The GGUF model.
        model: std::path::PathBuf,
        /// The text: each of its lines an input.
        #[arg(long)]
        prompt: Option<String>,
        /// Read the text from this UTF-8 file: each of its lines an input.
        #[arg(long, short = 'f')]
        file: Option<std::path::PathBuf>,
        /// none (every token's vector: an array of arrays per line), mean, cls or last
        /// (default: the file's pooling_type, else none).
        #[arg(long, value_parser = parse_pooling)]
        pooling: Option<rgml_models::embed::Pooling>,
        /// Scale each vector to Euclidean length 1 (llama-embedding's --embd-normalize 2,
        /// its default; without, the raw vectors).
        #[arg(long)]
        normalize: bool,
        /// The longest input in tokens (default: the model's context length, at most 4096).
        #[arg(long)]
        n_ctx: Option<usize>,
        #[command(flatten)]
        on: DeviceArgs,
        #[command(flatten)]
        repack: RepackArgs,
    },
    /// Perplexity of a model on a text file, as llama.cpp's llama-perplexity measures it
    /// (chunks of --ctx tokens, the second half of each scored).
    Perplexity {
        /// The GGUF model.
        model: std::path::PathBuf,
        /// The UTF-8 text file.
        #[arg(long, short = 'f')]
        file: std::path::PathBuf,
        /// Tokens per chunk (llama-perplexity's --ctx-size).
        #[arg(long, default_value_t = 512)]
        ctx: usize,
        #[command(flatten)]
        exec: ExecArgs,
    },
    /// Train a model on a text file (every weight in F32, or LoRA adapters merged on
    /// save) and write the result as a GGUF file, as llama.cpp's llama-finetune.
    Finetune {
        /// The GGUF model.
        model: std::path::PathBuf,
        /// The UTF-8 text to train on.
        #[arg(long, short = 'f')]
        file: std::path::PathBuf,
        /// Where to write the trained model.
        #[arg(long, short = 'o')]
        out: std::path::PathBuf,
        /// Passes over the text.
        #[arg(long, default_value_t = 1)]
        epochs: usize,
        /// AdamW's learning rate (default 1e-5, or 1e-3 with --lora).
        #[arg(long)]
        lr: Option<f32>,
        /// Tokens per training window.
        #[arg(long, default_value_t = 128)]
        ctx: usize,
        /// Train LoRA adapters of this rank on the layers' matrices instead of every weight.
        #[arg(long)]
        lora: Option<usize>,
        /// LoRA's alpha: the adapters' scale is alpha / rank (default: alpha = rank).
        #[arg(long, requires = "lora")]
        lora_alpha: Option<f32>,
        #[command(flatten)]
        on: DeviceArgs,
    },
    /// Chat with a model: user turns from standard input, one per line; replies stream to
    /// standard output; the conversation stays in the KV cache. End with EOF.
    Chat {
        /// The GGUF model.
        model: std::path::PathBuf,
        /// A system message opening the conversation.
        #[arg(long)]
        system: Option<String>,
        /// Tokens per reply at most; -1: until an end-of-generation token.
        #[arg(long = "n-predict", short = 'n', allow_hyphen_values = true)]
        n_predict: Option<i64>,
        #[command(flatten)]
        sampling: SamplingArgs,
        /// Do not stop replies at end-of-generation tokens.
        #[arg(long)]
        ignore_eos: bool,
        #[command(flatten)]
        exec: ExecArgs,
    },
    /// Serve a model over HTTP with OpenAI's API (/v1/chat/completions, /v1/completions,
    /// /v1/embeddings, /v1/models) and /health, /metrics: `--parallel` sequences decoded
    /// together (continuous batching); a request's tokens do not depend on the others'.
    /// An embedding model (bert, nomic-bert) serves /v1/embeddings alone.
    Serve {
        /// The GGUF model.
        model: std::path::PathBuf,
        /// The address to listen on.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// The port (0: any free port; the one taken is printed).
        #[arg(long, default_value_t = 8080)]
        port: u16,
        /// Sequences served at once, each with `--n-ctx` positions of KV cache.
        #[arg(long, default_value_t = 4)]
        parallel: usize,
        /// Requests waiting for a sequence at most; more get 503 with Retry-After.
        #[arg(long, default_value_t = 64)]
        max_queue: usize,
        /// Prompt tokens evaluated per step (a longer prompt takes several steps, the
        /// other sequences decoding in between).
        #[arg(long, default_value_t = 256)]
        chunk: usize,
        /// Every /v1 request must carry `Authorization: Bearer KEY` (401 otherwise).
        #[arg(long, env = "RGML_API_KEY", hide_env_values = true)]
        api_key: Option<String>,
        /// The largest request body in bytes (413 beyond).
        #[arg(long, default_value_t = 4 << 20)]
        max_body: usize,
        /// Seconds a request's headers, then its body, may take to arrive (a late body
        /// gets 408; a connection whose headers are late is closed).
        #[arg(long, default_value_t = 30)]
        timeout: u64,
        /// With a text model: serve /v1/embeddings too, from a second, cache-free instance
        /// of the model on its own thread (an embedding model always does).
        #[arg(long)]
        embeddings: bool,
        /// How /v1/embeddings pools: mean, cls or last (default: the file's pooling_type).
        #[arg(long, value_parser = parse_pooling)]
        pooling: Option<rgml_models::embed::Pooling>,
        #[command(flatten)]
        exec: ExecArgs,
    },
    /// Print the token ids of a text (or of each JSON string line of a file).
    #[command(group(ArgGroup::new("input").required(true).args(["text", "jsonl"])))]
    Tokenize {
        /// The GGUF model (a vocabulary-only file will do).
        model: std::path::PathBuf,
        /// The text.
        text: Option<String>,
        /// A JSON Lines file of strings: prints one JSON array of ids per line.
        #[arg(long)]
        jsonl: Option<std::path::PathBuf>,
        /// Add the BOS/EOS tokens the model adds.
        #[arg(long)]
        add_special: bool,
        /// Turn special-token text (`<|im_start|>`) into its id.
        #[arg(long)]
        parse_special: bool,
    },
    /// Print the text of token ids (or of each JSON array line of a file).
    #[command(group(ArgGroup::new("input").required(true).args(["ids", "jsonl"])))]
    Detokenize {
        /// The GGUF model (a vocabulary-only file will do).
        model: std::path::PathBuf,
        /// Token ids, comma-separated.
        ids: Option<String>,
        /// A JSON Lines file of id arrays: prints one JSON string per line.
        #[arg(long)]
        jsonl: Option<std::path::PathBuf>,
        /// Render special tokens' text.
        #[arg(long)]
        special: bool,
    },
    /// Write a llama model's forward graph (for the prompt length) as Graphviz DOT.
    Dot {
        /// The GGUF model.
        model: std::path::PathBuf,
        /// Output .dot file.
        out: std::path::PathBuf,
        /// Batch size of the graph.
        #[arg(long, default_value_t = 1)]
        n_tokens: usize,
    },
    /// Plan the built-in graphs; print naive, planned and lower-bound buffer sizes.
    Plan,
    /// Time the standard workloads; report GB/s and the ratio to a memcpy
    /// (CPU: 64 MiB) or device-to-device copy (CUDA: n×n f32) timed in the same run.
    Bench(BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Eval { cases, emit, on } => {
            on.open().map_err(|e| e.to_string()).and_then(|b| eval(&cases, emit.as_deref(), &b))
        }
        Cmd::Demo { n, threads } => {
            rgml_cli::demo::run(n, threads).map(|ok| if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Cmd::Bench(a) => bench_cmd::bench(a),
        Cmd::Inspect { file } => rgml_cli::gguf_cli::inspect(&file).map_err(|e| e.to_string()).map(|s| {
            out!("{s}");
            outln!("\nmodel:\n  {}", rgml_models::embed::describe_file(&file).replace('\n', "\n  "));
            ExitCode::SUCCESS
        }),
        Cmd::Dump { file, tensor, out } => {
            rgml_cli::gguf_cli::dump(&file, &tensor, &out).map_err(|e| e.to_string()).map(|n| {
                outln!("wrote {n} f32 values to {}", out.display());
                ExitCode::SUCCESS
            })
        }
        Cmd::Quantize { input, output, dtype } => match rgml::DType::from_name(&dtype) {
            None => Err(format!("unknown type {dtype}")),
            Some(t) => rgml_models::quantize::quantize(&input, &output, t, |line| outln!("{line}"))
                .map_err(|e| e.to_string())
                .map(|()| ExitCode::SUCCESS),
        },
        Cmd::Convert { input, output, outtype } => {
            rgml_cli::convert_cli::convert(&input, &output, outtype.as_deref()).map(|()| ExitCode::SUCCESS)
        }
        Cmd::Run { model, prompt, file, tokens, chat, n_predict, sampling, ignore_eos, logits, exec } => {
            let ids = tokens.is_some();
            let prompt = match (prompt, file, tokens) {
                (Some(t), _, _) => Prompt::Text(t),
                (_, Some(f), _) => Prompt::File(f),
                (_, _, t) => Prompt::Tokens(t.unwrap_or_default()),
            };
            let opts = RunOptions {
                prompt,
                chat,
                n_predict: text_cli::n_predict(n_predict, if ids { Some(0) } else { None }),
                sampling: sampling.params(if ids { 0.0 } else { 0.8 }),
                ignore_eos,
                logits_out: logits,
                load: exec.load(),
            };
            exec.backend(&model).and_then(|b| rgml_cli::run::run(&model, &opts, b)).map(|()| ExitCode::SUCCESS)
        }
        Cmd::Embed { model, prompt, file, pooling, normalize, n_ctx, on, repack } => {
            use rgml_cli::embed_cli::{EmbedInput, EmbedRun};
            let input = match (prompt, file) {
                (Some(t), _) => EmbedInput::Text(t),
                (_, f) => EmbedInput::File(f.unwrap_or_default()),
            };
            let r = EmbedRun { input, pooling, normalize, n_ctx };
            on.open_for_model(&model)
                .and_then(|b| repack.apply(b))
                .map_err(|e| e.to_string())
                .and_then(|b| rgml_cli::embed_cli::run(&model, &r, b))
                .map(|()| ExitCode::SUCCESS)
        }
        Cmd::Perplexity { model, file, ctx, exec } => exec
            .backend(&model)
            .and_then(|b| rgml_cli::perplexity_cli::run(&model, &file, ctx, exec.load(), b))
            .map(|()| ExitCode::SUCCESS),
        Cmd::Finetune { model, file, out, epochs, lr, ctx, lora, lora_alpha, on } => {
            let lr = lr.unwrap_or(if lora.is_some() { 1e-3 } else { 1e-5 });
            let run = rgml_cli::finetune_cli::FinetuneRun { model, file, out, epochs, lr, ctx, lora, lora_alpha };
            on.open()
                .map_err(|e| e.to_string())
                .and_then(|b| rgml_cli::finetune_cli::run(&run, b))
                .map(|()| ExitCode::SUCCESS)
        }
        Cmd::Chat { model, system, n_predict, sampling, ignore_eos, exec } => {
            let opts = chat_cli::ChatOptions {
                system,
                ignore_eos,
                n_predict: text_cli::n_predict(n_predict, None),
                sampling: sampling.params(0.8),
                load: exec.load(),
            };
            exec.backend(&model)
                .and_then(|b| chat_cli::chat(&model, &opts, b, std::io::stdin().lock()))
                .map(|()| ExitCode::SUCCESS)
        }
        Cmd::Serve {
            model,
            host,
            port,
            parallel,
            max_queue,
            chunk,
            api_key,
            max_body,
            timeout,
            embeddings,
            pooling,
            exec,
        } => {
            let limits = rgml_cli::serve::Limits {
                max_body,
                header_timeout_s: timeout,
                body_timeout_s: timeout,
                ..Default::default()
            };
            let opts = rgml_cli::serve::ServeOptions {
                host,
                port,
                parallel,
                max_queue,
                chunk,
                api_key,
                limits,
                load: exec.load(),
                embeddings,
                pooling,
            };
            // on the CPU every product keeps a row's bits whatever rows share it, so
            // that a sequence's answer does not depend on its company (nor, with
            // `run --row-invariant`, on whether it was served)
            let open = || {
                exec.backend(&model).and_then(|b| match b {
                    rgml::AnyBackend::Cpu(_) => b.with_row_invariant_products(true).map_err(|e| e.to_string()),
                    b => Ok(b),
                })
            };
            rgml_cli::serve::serve(model.clone(), opts, open).map(|()| ExitCode::SUCCESS)
        }
        Cmd::Tokenize { model, text, jsonl, add_special, parse_special } => {
            text_cli::tokenize(&model, text.as_deref(), jsonl.as_deref(), add_special, parse_special)
                .map(|()| ExitCode::SUCCESS)
        }
        Cmd::Detokenize { model, ids, jsonl, special } => {
            text_cli::detokenize(&model, ids.as_deref(), jsonl.as_deref(), special).map(|()| ExitCode::SUCCESS)
        }
        Cmd::Dot { model, out, n_tokens } => rgml_models::model::Model::load(&model, None, 1)
            .and_then(|mut m| m.dot(n_tokens))
            .map_err(|e| e.to_string())
            .and_then(|d| std::fs::write(&out, d).map_err(|e| e.to_string()))
            .map(|()| {
                outln!("wrote {}", out.display());
                ExitCode::SUCCESS
            }),
        Cmd::Plan => rgml_cli::plan_report::all().and_then(|rs| {
            rs.iter().for_each(|r| outln!("{r}"));
            let (step, kept) = rgml_cli::plan_report::train_step(32)?;
            outln!("{step}");
            outln!("{kept}");
            Ok(ExitCode::SUCCESS)
        }),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn parse_pooling(s: &str) -> Result<rgml_models::embed::Pooling, String> {
    s.parse()
}

fn eval(
    path: &std::path::Path,
    emit: Option<&std::path::Path>,
    backend: &rgml::AnyBackend,
) -> Result<ExitCode, String> {
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
        let r = graph_cases::run_case(backend, &case);
        if r.passed() {
            passed += 1;
        } else {
            failed += 1;
            let why = r.error.clone().unwrap_or_else(|| r.failures.join("; "));
            outln!("FAIL {}: {why}", r.id);
        }
        if let Some(o) = out.as_mut() {
            writeln!(o, "{}", r.emit).map_err(|e| e.to_string())?;
        }
    }
    if let Some(mut o) = out {
        o.flush().map_err(|e| e.to_string())?;
    }
    outln!("{passed} passed, {failed} failed");
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
