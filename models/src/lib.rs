//! Model graphs built on rgml, and the pieces of the `rgml` command-line tool
//! that tests and benchmarks share.

pub mod backend_arg;
pub mod bench;
pub mod bench_cuda;
pub mod demo;
pub mod gguf_cli;
pub mod graph_cases;
pub mod llama;
pub mod mlp;
pub mod out;
pub mod plan_report;
pub mod run;
