//! The `rgml` program's pieces, on the model library [`rgml_models`]: the commands (run,
//! chat, embed, serve, tokenize, the GGUF tools, convert, graph cases, plan, demo), the benchmarks with their
//! workloads, and the `--backend` argument. Tests and benchmarks share them through this
//! library; the program is `src/main.rs`.

pub mod backend_arg;
pub mod bench;
#[cfg(feature = "cuda")]
pub mod bench_cuda;
pub mod bench_model;
pub mod chat_cli;
pub mod convert_cli;
pub mod demo;
pub mod embed_cli;
pub mod finetune_cli;
pub mod gguf_cli;
pub mod graph_cases;
pub mod out;
pub mod perplexity_cli;
pub mod plan_report;
pub mod run;
pub mod serve;
pub mod text_cli;
pub mod workloads;
