//! llama.cpp's tokenizer test vocabularies (tests/fixtures/vocab: provenance in its
//! README), unpacked once per build into the target directory.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rgml_models::tokenizer::Tokenizer;

/// The folder holding the unpacked `ggml-vocab-*.gguf` (and `.inp`/`.out`) files.
pub fn vocab_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| unpack("vocab/ggml-vocab.tar.xz", "ggml-vocab"))
}

/// The folder holding vocabulary-only copies of the real models (`smollm2-vocab.gguf`,
/// `gemma3-vocab.gguf`; tests/fixtures/tokenizer/README.md).
pub fn real_vocab_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| unpack("tokenizer/real-vocab.tar.xz", "real-vocab"))
}

/// Unpacks `tests/fixtures/{archive}` (tar.xz) into the target directory's `{name}`, once.
fn unpack(archive: &str, name: &str) -> PathBuf {
    // from rgml-models' tests and from rgml-cli's, which share this file
    let archive = Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/tests/fixtures").join(archive);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    if dir.join(".unpacked").exists() {
        return dir;
    }
    // unpack beside, then rename: concurrent test binaries never see half a folder
    let tmp = dir.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let mut xz = std::io::BufReader::new(std::fs::File::open(&archive).unwrap());
    let mut tar_bytes = Vec::new();
    lzma_rs::xz_decompress(&mut xz, &mut tar_bytes).unwrap();
    tar::Archive::new(&tar_bytes[..]).unpack(&tmp).unwrap();
    std::fs::write(tmp.join(".unpacked"), b"").unwrap();
    if std::fs::rename(&tmp, &dir).is_err() {
        // another binary got there first
        let _ = std::fs::remove_dir_all(&tmp);
    }
    dir
}

/// The tokenizer of fixture vocabulary `name`: one of [`ALL`], or `smollm2`/`gemma3`.
pub fn load_any(name: &str) -> Tokenizer {
    let path = match name {
        "smollm2" | "gemma3" => real_vocab_dir().join(format!("{name}-vocab.gguf")),
        _ => vocab_path(name),
    };
    Tokenizer::from_file(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The path of `ggml-vocab-{name}.gguf`.
pub fn vocab_path(name: &str) -> PathBuf {
    vocab_dir().join(format!("ggml-vocab-{name}.gguf"))
}

/// The tokenizer of `ggml-vocab-{name}.gguf`.
pub fn load(name: &str) -> Tokenizer {
    Tokenizer::from_file(&vocab_path(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The `(text, expected ids)` cases of a vocabulary with a matching `.inp`/`.out`
/// pair, parsed as llama.cpp's test-tokenizer-0 parses them; None without a pair.
pub fn cases(name: &str) -> Option<Vec<(String, Vec<u32>)>> {
    let p = vocab_path(name);
    let inp = std::fs::read_to_string(p.with_extension("gguf.inp")).ok()?;
    let out = std::fs::read_to_string(p.with_extension("gguf.out")).ok()?;
    // the file ends with a separator, which ends the last case
    let mut texts: Vec<&str> = inp.split("\n__ggml_vocab_test__\n").collect();
    if texts.last() == Some(&"") {
        texts.pop();
    }
    let ids: Vec<Vec<u32>> = out.lines().map(|l| l.split_whitespace().map(|t| t.parse().unwrap()).collect()).collect();
    (texts.len() == ids.len()).then(|| texts.into_iter().map(String::from).zip(ids).collect())
}

/// The 19 vocabularies of llama.cpp's suite.
pub const ALL: [&str; 19] = [
    "aquila",
    "baichuan",
    "bert-bge",
    "command-r",
    "deepseek-coder",
    "deepseek-llm",
    "falcon",
    "gemma-4",
    "gpt-2",
    "gpt-neox",
    "llama-bpe",
    "llama-spm",
    "mpt",
    "nomic-bert-moe",
    "phi-3",
    "qwen2",
    "qwen35",
    "refact",
    "starcoder",
];
