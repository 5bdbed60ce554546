//! llama.cpp's round-trip tests (test-tokenizer-1-spm, test-tokenizer-1-bpe): every
//! token's text tokenizes back to text that detokenizes the same, and so does every
//! code point. Texts that are not UTF-8 (a lone byte token's) are not input rgml takes
//! (`tokenize` takes `&str`) and are skipped.

mod vocab_common;

use rgml_models::tokenizer::Tokenizer;

/// The first failures of the round trip through every token, then every code point.
fn round_trip_failures(tok: &Tokenizer) -> Vec<String> {
    let mut bad = Vec::new();
    let back = |s: &str| -> Vec<u8> {
        let ids = tok.tokenize(s, false, true).unwrap();
        tok.detokenize_bytes(&ids, true).unwrap()
    };
    for id in 0..tok.n_vocab() as u32 {
        let text = tok.detokenize_bytes(&[id], true).unwrap();
        let Ok(s) = std::str::from_utf8(&text) else { continue };
        if back(s) != text {
            bad.push(format!("token {id} {s:?} comes back as {:?}", String::from_utf8_lossy(&back(s))));
        }
        if bad.len() >= 5 {
            return bad;
        }
    }
    for cp in (0..0x11_0000u32).filter(|cp| !(0xD800..=0xDFFF).contains(cp) && !(0x40000..=0xE0000).contains(cp)) {
        let s = char::from_u32(cp).unwrap().to_string();
        if cp != 0x2581 && back(&s) != s.as_bytes() {
            bad.push(format!("U+{cp:04X} comes back as {:?}", String::from_utf8_lossy(&back(&s))));
            if bad.len() >= 10 {
                break;
            }
        }
    }
    bad
}

fn check(name: &str) {
    let bad = round_trip_failures(&vocab_common::load(name));
    assert!(bad.is_empty(), "{name}: {bad:#?}");
}

// llama.cpp runs test-tokenizer-1-spm on llama-spm (its baichuan run is commented out)
#[test]
fn spm_llama() {
    check("llama-spm");
}
#[test]
fn spm_baichuan() {
    check("baichuan");
}

// llama.cpp lists test-tokenizer-1-bpe for these (commented out there); falcon is left
// out because its vocabulary has no token for some control bytes (U+0003…), which
// llama.cpp drops as rgml does
#[test]
fn bpe_aquila_gpt2_neox() {
    ["aquila", "gpt-2", "gpt-neox"].into_iter().for_each(check);
}
#[test]
fn bpe_llama3_mpt() {
    ["llama-bpe", "mpt"].into_iter().for_each(check);
}
#[test]
fn bpe_refact_starcoder() {
    ["refact", "starcoder"].into_iter().for_each(check);
}

// the other BPE vocabularies of the suite pass as well
#[test]
fn bpe_qwen() {
    ["qwen2", "qwen35"].into_iter().for_each(check);
}
#[test]
fn bpe_command_r() {
    check("command-r");
}
#[test]
fn bpe_deepseek() {
    ["deepseek-llm", "deepseek-coder"].into_iter().for_each(check);
}
#[test]
fn bpe_gemma4_and_spm_phi3() {
    ["gemma-4", "phi-3"].into_iter().for_each(check);
}
