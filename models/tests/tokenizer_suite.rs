//! llama.cpp's own tokenizer test suite (test-tokenizer-0): every case of every
//! vocabulary with a matching `.inp`/`.out` pair gives llama.cpp's ids.

mod vocab_common;

use vocab_common::{cases, load, ALL};

#[test]
fn every_case_of_the_suite_matches_llama_cpp() {
    let (mut vocabs, mut total, mut failed) = (0, 0, Vec::new());
    for name in ALL {
        let Some(cases) = cases(name) else { continue };
        let tok = load(name);
        vocabs += 1;
        for (text, want) in &cases {
            total += 1;
            match tok.tokenize(text, false, false) {
                Ok(got) if &got == want => {}
                Ok(got) => failed.push(format!("{name}: {text:?}\n   want {want:?}\n    got {got:?}")),
                Err(e) => failed.push(format!("{name}: {text:?}: {e}")),
            }
        }
    }
    assert!(failed.is_empty(), "{} of {total} cases differ:\n{}", failed.len(), failed.join("\n"));
    // read as llama.cpp's test reads the files (the separator that ends each file ends its
    // last case): 14 vocabularies of 46 cases (qwen35: 50) and gemma-4's 46, whose pair
    // lines up this way too; splitting naively at every separator gives an empty 47th case
    // per file, 662 in the 14 (an empty text gives no tokens: checked below)
    assert_eq!((vocabs, total), (15, 694), "vocabularies and cases with a matching pair");
}

#[test]
fn empty_text_gives_no_tokens() {
    for name in ALL {
        let tok = load(name);
        assert_eq!(tok.tokenize("", false, false).unwrap(), Vec::<u32>::new(), "{name}");
        assert_eq!(tok.tokenize("", false, true).unwrap(), Vec::<u32>::new(), "{name}");
    }
}
