//! Tokenization and detokenization against llama.cpp itself (fixtures made with
//! llama-cpp-python 0.3.36: tests/fixtures/tokenizer/README.md): every vocabulary of
//! llama.cpp's suite and the two real models, plain and with add_special/parse_special.

mod vocab_common;

use serde_json::Value;
use vocab_common::{load_any, ALL};

fn ids(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// Every fixture line of `name`; returns (tokenize cases, detokenize cases).
fn check(name: &str) -> (usize, usize) {
    let tok = load_any(name);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/tokenizer/{name}.jsonl"));
    let (mut n_tok, mut n_detok, mut bad) = (0, 0, Vec::new());
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let c: Value = serde_json::from_str(line).unwrap();
        let want = ids(&c["ids"]);
        if let Some(text) = c["text"].as_str() {
            n_tok += 1;
            let (add, parse) = (c["add_special"].as_bool().unwrap(), c["parse_special"].as_bool().unwrap());
            match tok.tokenize(text, add, parse) {
                Ok(got) if got == want => {}
                got => bad.push(format!("tokenize({text:?}, add {add}, parse {parse}): want {want:?}, got {got:?}")),
            }
        } else {
            n_detok += 1;
            let special = c["special"].as_bool().unwrap();
            let got = tok.detokenize_bytes(&want, special).unwrap();
            let expected = hex(c["hex"].as_str().unwrap());
            if got != expected {
                bad.push(format!(
                    "detokenize({want:?}, special {special}): want {:?}, got {:?}",
                    String::from_utf8_lossy(&expected),
                    String::from_utf8_lossy(&got)
                ));
            }
        }
    }
    assert!(bad.is_empty(), "{name}: {} differences:\n{}", bad.len(), bad[..bad.len().min(20)].join("\n"));
    (n_tok, n_detok)
}

#[test]
fn the_five_vocabularies_without_a_suite_pair() {
    for name in ["aquila", "baichuan", "gemma-4", "gpt-neox", "nomic-bert-moe"] {
        let (t, d) = check(name);
        assert!(t >= 280 && d * 2 == t, "{name}: {t} tokenize and {d} detokenize cases");
    }
}

#[test]
fn the_other_suite_vocabularies_with_special_flags() {
    for name in ALL.iter().filter(|n| !["aquila", "baichuan", "gemma-4", "gpt-neox", "nomic-bert-moe"].contains(n)) {
        check(name);
    }
}

#[test]
fn smollm2_and_gemma3() {
    for name in ["smollm2", "gemma3"] {
        check(name);
    }
}

/// SmolLM2's and Gemma 3's chat prompts: the template renders as Python jinja2 does, and
/// the prompt tokenizes (BOS text dropped where the vocabulary adds BOS, special tokens
/// parsed) and detokenizes as llama.cpp's chat path does.
#[test]
fn chat_prompts_render_and_tokenize_as_llama_cpp() {
    use rgml_models::chat::{ChatTemplate, Message};
    use rgml_models::conversation::prompt_text;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizer/chat.jsonl");
    let mut n = 0;
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let c: Value = serde_json::from_str(line).unwrap();
        let s = |k: &str| c[k].as_str().unwrap();
        let tok = load_any(s("model"));
        if s("model") == "gemma3" {
            assert_eq!(
                ChatTemplate::builtin("gemma3"),
                Some(s("template")),
                "rgml's Gemma 3 template is the one rendered"
            );
        }
        let template = ChatTemplate::new(s("template"), s("bos_token"), s("eos_token")).unwrap();
        let messages: Vec<Message> = c["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| Message::new(m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
            .collect();
        let rendered = template.apply(&messages, c["add_generation_prompt"].as_bool().unwrap()).unwrap();
        assert_eq!(rendered, s("rendered"));
        let got = tok.tokenize(prompt_text(&rendered, &tok), true, true).unwrap();
        assert_eq!(got, ids(&c["ids"]), "{}: {rendered:?}", s("model"));
        assert_eq!(tok.detokenize_bytes(&got, false).unwrap(), hex(s("detokenized_hex")));
        n += 1;
    }
    assert_eq!(n, 16);
}
