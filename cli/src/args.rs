//! The flags the `rgml` program's subcommands share: where a command runs
//! (`--backend`, `--threads`, `--n-gpu-layers`), how a model runs (`--n-ctx`,
//! `--kv-type`, repacking, attention), and `rgml bench`'s options.

use clap::Args;
use rgml_cli::backend_arg::BackendArg;
use rgml_models::model::kv::KvType;

/// The backend a command runs on (`rgml eval`, `run`, `chat`).
#[derive(Args)]
pub struct DeviceArgs {
    /// Worker threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// The backend to run on.
    #[arg(long, value_enum, default_value_t = BackendArg::Cpu)]
    pub backend: BackendArg,
    /// CUDA device ordinal (with `--backend cuda`).
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// With `--backend cuda` and a model: the last N layers on the device (their
    /// weights and KV cache), the output layer too when N exceeds the layer count,
    /// the rest on the CPU, as llama.cpp's `-ngl` (default: all). Ops the device
    /// lacks run on the CPU either way.
    #[arg(long)]
    pub n_gpu_layers: Option<usize>,
}

impl DeviceArgs {
    pub fn open(&self) -> rgml::Result<rgml::AnyBackend> {
        if self.n_gpu_layers.is_some() {
            return Err(rgml::Error::Invalid(
                "--n-gpu-layers applies to a model (rgml run, chat, bench --model)".into(),
            ));
        }
        self.backend.open(self.threads, self.device)
    }
    pub fn open_for_model(&self, model: &std::path::Path) -> rgml::Result<rgml::AnyBackend> {
        self.backend.open_for_model(self.threads, self.device, model, self.n_gpu_layers)
    }
}

/// Where and how a model runs (`rgml run`, `rgml chat`).
#[derive(Args)]
pub struct ExecArgs {
    /// KV cache positions (default: the model's context length, at most 4096).
    #[arg(long)]
    pub n_ctx: Option<usize>,
    /// The KV cache's element type: f16 (as llama.cpp), f32 or q8_0.
    #[arg(long, default_value = "f16", value_parser = parse_kv)]
    pub kv_type: KvType,
    #[command(flatten)]
    pub on: DeviceArgs,
    #[command(flatten)]
    pub repack: RepackArgs,
    /// Attention as three ops (scores, softmax, values), as llama.cpp without
    /// flash attention, instead of the fused `flash_attn_ext` (the default).
    #[arg(long)]
    pub unfused_attention: bool,
    /// Products keep each activation row's bits whatever rows share them (tile
    /// kernels at every row count, CPU only): `rgml serve`'s setting, so that a
    /// lone run gives a served answer's bits.
    #[arg(long)]
    pub row_invariant: bool,
}

/// Whether a model's weights are repacked for the CPU's tile kernels.
#[derive(Args)]
pub struct RepackArgs {
    /// Repack the weight matrices of every type with a tile kernel at the
    /// CPU's level (Q4_0, Q4_1, Q5_0, Q8_0, IQ4_NL, Q4_K, Q5_K; Q6_K and IQ4_XS
    /// at AVX-512 VNNI) once for it: the default on the CPU backend (the
    /// tile's results at every batch size, streamed sequentially; the copy
    /// replaces the mapped pages of those weights in memory). CPU only.
    #[arg(long, conflicts_with = "no_repack")]
    pub repack: bool,
    /// Keep every weight in place, in the file's layout.
    #[arg(long)]
    pub no_repack: bool,
}

impl RepackArgs {
    /// The setting for `backend`: as asked, else on for the CPU backend alone.
    pub fn on(&self, backend: &rgml::AnyBackend) -> bool {
        self.repack || (!self.no_repack && matches!(backend, rgml::AnyBackend::Cpu(_)))
    }
    /// `backend` with the setting applied.
    pub fn apply(&self, backend: rgml::AnyBackend) -> rgml::Result<rgml::AnyBackend> {
        let on = self.on(&backend);
        backend.with_repacked_weights(on)
    }
}

fn parse_dtype(s: &str) -> Result<rgml::DType, String> {
    rgml::DType::from_name(s).ok_or_else(|| format!("unknown type {s:?}"))
}

fn parse_kv(s: &str) -> Result<KvType, String> {
    KvType::from_name(s).ok_or_else(|| format!("unknown KV cache type {s:?} (f16, f32 or q8_0)"))
}

impl ExecArgs {
    pub fn load(&self) -> rgml_models::model::LoadOptions {
        use rgml_models::model::{Attention, LoadOptions};
        let attention = if self.unfused_attention { Attention::Unfused } else { Attention::Auto };
        LoadOptions { n_ctx: self.n_ctx, kv_type: self.kv_type, attention, n_seq: 1 }
    }

    pub fn backend(&self, model: &std::path::Path) -> Result<rgml::AnyBackend, String> {
        self.on
            .open_for_model(model)
            .and_then(|b| self.repack.apply(b))
            .and_then(|b| b.with_row_invariant_products(self.row_invariant))
            .map_err(|e| e.to_string())
    }
}

/// The options of `rgml bench`.
#[derive(Args)]
pub struct BenchArgs {
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Where to run the workloads.
    #[arg(long, value_enum, default_value_t = BackendArg::Cpu)]
    pub backend: BackendArg,
    /// CUDA device ordinal (with --backend cuda; default 0).
    #[arg(long)]
    pub device: Option<usize>,
    /// Worker threads (0: one per core; CPU only).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Side of the square matrices (default: 4096 on the CPU, 16384 on CUDA).
    #[arg(long)]
    pub n: Option<i64>,
    /// M = K = N of the F16/BF16 matrix products, and the activation rows of the Q4_0 prompt products (CUDA only; default 8192 and 512).
    #[arg(long)]
    pub mm: Option<i64>,
    /// Side of the Q4_0 matrix-vector products, a multiple of 32 (CUDA only;
    /// default: one row at 4096 and one at 16384).
    #[arg(long)]
    pub matvec: Option<i64>,
    /// Timed runs per workload, or timed passes with --model (the median is
    /// reported; default 15, with --model 3).
    #[arg(long)]
    pub reps: Option<usize>,
    /// Time this model file instead of the workloads: one untimed warm-up
    /// pass, then the median of --reps passes of a prompt and a generation.
    #[arg(long)]
    pub model: Option<std::path::PathBuf>,
    /// With --model: tokens of the prompt, evaluated as one batch.
    #[arg(long, default_value_t = 64)]
    pub prompt_tokens: usize,
    /// With --model: tokens generated one at a time after the prompt.
    #[arg(long, default_value_t = 32)]
    pub gen_tokens: usize,
    /// With --model: whether weights are repacked for the CPU's tiles (as `rgml run`; default on the CPU).
    #[command(flatten)]
    pub repack: RepackArgs,
    /// With --model: print the time per op kind per token (CPU only).
    #[arg(long)]
    pub profile: bool,
    /// With --model and --backend cuda: layers on the device, as `rgml run --n-gpu-layers`.
    #[arg(long)]
    pub n_gpu_layers: Option<usize>,
    /// Also time a synthetic Q4_0 llama (n_embd 2048, 4 layers): prompt and generation tokens/s (on CUDA: with CUDA graphs off and on).
    #[arg(long)]
    pub llama: bool,
    /// Only the matrix-vector products (N=1, n×n weights) of these weight types,
    /// comma-separated (`q5_1,q6_K,iq4_xs`; CPU only).
    #[arg(long, value_delimiter = ',', value_parser = parse_dtype)]
    pub types: Option<Vec<rgml::DType>>,
    /// The streaming rows: matrix-vector products over weights four times the last cache
    /// (of --types, default the types model files use), each against reading as many bytes.
    #[arg(long)]
    pub stream: bool,
    /// With --stream: repack the weights for the tile kernels first (as model loads do).
    #[arg(long, requires = "stream")]
    pub stream_repack: bool,
    /// MiB of weights the streaming rows read, and of the buffer that measures the read
    /// bandwidth beside --model (default four times the last cache, 256 MiB to 2 GiB).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=16384))]
    pub stream_mib: Option<u64>,
    /// With --types or --stream: activation rows of those products (default 1; a few:
    /// a server's batched decode).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(i64).range(1..=65536))]
    pub act_rows: i64,
    /// The synthetic llama's KV cache type (with --llama): f16, f32 or q8_0.
    #[arg(long, default_value = "f16", value_parser = parse_kv)]
    pub kv_type: KvType,
}
