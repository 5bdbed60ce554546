//! Model graphs built on rgml, and the pieces of the `rgml` command-line tool
//! that tests and benchmarks share.

pub mod backend_arg;
pub mod bench;
pub mod bench_cuda;
pub mod chat;
pub mod conversation;
pub mod demo;
pub mod generate;
pub mod gguf_cli;
pub mod graph_cases;
pub mod llama;
pub mod mlp;
pub mod out;
pub mod plan_report;
pub mod run;
pub mod sampler;
pub mod text_cli;
pub mod tokenizer;
