//! `rgml run`: a model on a text prompt (streamed text out) or on token ids (ids out).

use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rgml::gguf::GgufFile;
use rgml::Backend;

use crate::outln;
use rgml_models::chat::ChatTemplate;
use rgml_models::chat::Message;
use rgml_models::conversation::{prompt_text, template_for, TemplateOrigin};
use rgml_models::generate::{GenerateOptions, Generated, Stop};
use rgml_models::model::{LoadOptions, Model};
use rgml_models::sampler::{Sampler, SamplerParams};
use rgml_models::tokenizer::{Tokenizer, TokenizerError};

/// Where the prompt comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Prompt {
    /// Text (`--prompt`).
    Text(String),
    /// A UTF-8 text file (`--file`).
    File(PathBuf),
    /// Token ids (`--tokens`).
    Tokens(Vec<u32>),
}

/// What `rgml run` does.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The prompt.
    pub prompt: Prompt,
    /// Wrap a text prompt as one user message in the model's chat template.
    pub chat: bool,
    /// Tokens to generate at most (`None`: until an end-of-generation token or the end of
    /// the cache).
    pub n_predict: Option<usize>,
    /// The sampler, its seed resolved.
    pub sampling: SamplerParams,
    /// Do not stop at end-of-generation tokens.
    pub ignore_eos: bool,
    /// Write every evaluated position's logits here (with `--tokens`).
    pub logits_out: Option<PathBuf>,
    /// The KV cache's size and type.
    pub load: LoadOptions,
}

/// The tokenizer of `file`, or an error that says to give ids instead.
pub fn require_tokenizer(file: &GgufFile, path: &Path) -> Result<Tokenizer, String> {
    Tokenizer::from_gguf(file).map_err(|e| match e {
        TokenizerError::Missing => format!(
            "{}: the model file has no tokenizer (no tokenizer.ggml.* metadata), so it cannot take text; \
             give the prompt as token ids with --tokens",
            path.display()
        ),
        e => format!("{}: {e}", path.display()),
    })
}

/// The chat template of `file`, saying on standard error when it is not the file's own.
pub fn chat_template(file: &GgufFile, tok: &Tokenizer) -> Result<ChatTemplate, String> {
    let (template, origin) = template_for(file, tok).map_err(|e| e.to_string())?;
    match origin {
        TemplateOrigin::File => {}
        TemplateOrigin::Builtin(name) => {
            eprintln!("the file has no chat template: using rgml's built-in {name} template")
        }
        TemplateOrigin::ChatMl => eprintln!("the file has no chat template: using ChatML, as llama.cpp does"),
    }
    Ok(template)
}

/// The text of `--file`, which must be UTF-8.
pub fn read_text_file(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    String::from_utf8(bytes).map_err(|e| {
        format!("{}: not UTF-8 text: invalid byte at offset {}", path.display(), e.utf8_error().valid_up_to())
    })
}

/// The token ids of a text prompt: tokenized with the model's add-special settings and
/// special-token parsing on (llama.cpp's defaults for prompts), through the chat template
/// with `chat`.
fn text_prompt(opts: &RunOptions, tok: &Tokenizer, file: &GgufFile) -> Result<Vec<u32>, String> {
    let text = match &opts.prompt {
        Prompt::Tokens(_) => return Err("token ids are not a text prompt".into()),
        Prompt::Text(t) => t.clone(),
        Prompt::File(p) => read_text_file(p)?,
    };
    if text.is_empty() {
        return Err("the prompt is empty".into());
    }
    let ids = if opts.chat {
        let (template, _) = template_for(file, tok).map_err(|e| e.to_string())?;
        let rendered = template.apply(&[Message::new("user", text)], true).map_err(|e| e.to_string())?;
        tok.tokenize(prompt_text(&rendered, tok), true, true)
    } else {
        tok.tokenize(&text, true, true)
    };
    ids.map_err(|e| e.to_string())
}

/// Runs `model` on `backend` as `opts` says.
pub fn run<B: Backend>(model: &Path, opts: &RunOptions, backend: B) -> Result<(), String> {
    let t = Instant::now();
    let file = GgufFile::open(model).map_err(|e| format!("{}: {e}", model.display()))?;
    let (prompt, tok, text_mode) = match &opts.prompt {
        Prompt::Tokens(ids) if opts.chat => return Err(format!("--chat needs a text prompt, not token ids {ids:?}")),
        Prompt::Tokens(ids) => (ids.clone(), Tokenizer::from_gguf(&file).ok(), false),
        _ => {
            let tok = require_tokenizer(&file, model)?;
            (text_prompt(opts, &tok, &file)?, Some(tok), true)
        }
    };
    let mut m = Model::load_with(model, opts.load, backend).map_err(|e| e.to_string())?;
    eprintln!(
        "loaded {} in {:.1} ms on {}: {} {} layers, n_embd {}, {} heads ({} kv), vocab {}, KV cache {} positions {}",
        model.display(),
        t.elapsed().as_secs_f64() * 1e3,
        m.backend().describe(),
        m.hp.arch,
        m.hp.n_layer,
        m.hp.n_embd,
        m.hp.n_head,
        m.hp.n_head_kv,
        m.hp.n_vocab,
        m.n_ctx(),
        m.kv_type().dtype()
    );
    let mut sampler = Sampler::new(opts.sampling, m.hp.n_vocab).map_err(|e| e.to_string())?;
    let eog = |t: u32| !opts.ignore_eos && tok.as_ref().is_some_and(|k| k.is_eog(t));
    let gen_opts =
        GenerateOptions { max_tokens: opts.n_predict.unwrap_or(usize::MAX), all_logits: opts.logits_out.is_some() };
    let g = match tok.as_ref().filter(|_| text_mode) {
        Some(tok) => {
            let mut dec = tok.decoder(false);
            let mut out = std::io::stdout();
            let g = m
                .generate(&prompt, &mut sampler, gen_opts, eog, |t| {
                    let piece = dec.push(t).unwrap_or_default();
                    // a closed pipe (`rgml run … | head`) ends generation quietly
                    match out.write_all(piece.as_bytes()).and_then(|()| out.flush()) {
                        Ok(()) => ControlFlow::Continue(()),
                        Err(_) => ControlFlow::Break(()),
                    }
                })
                .map_err(|e| e.to_string())?;
            crate::out!("{}\n", dec.finish());
            g
        }
        None => {
            let g = m
                .generate(&prompt, &mut sampler, gen_opts, eog, |_| ControlFlow::Continue(()))
                .map_err(|e| e.to_string())?;
            outln!("prompt: {prompt:?}");
            outln!("generated: {:?}", g.tokens);
            if let Some(tok) = &tok {
                outln!("text: {:?}", tok.detokenize(&g.tokens, false).unwrap_or_default());
            }
            g
        }
    };
    report(&g, prompt.len(), tok.as_ref(), m.n_ctx(), &opts.sampling);
    if let Some(p) = &opts.logits_out {
        write_logits(p, &g.logits, m.hp.n_vocab)?;
    }
    Ok(())
}

/// The seed, timings and why generation stopped, on standard error.
fn report(g: &Generated, n_prompt: usize, tok: Option<&Tokenizer>, n_ctx: usize, s: &SamplerParams) {
    let tps = |n: usize, d: std::time::Duration| n as f64 / d.as_secs_f64().max(1e-9);
    eprintln!("seed: {}{}", s.seed, if s.temperature > 0.0 { "" } else { " (greedy: unused)" });
    eprintln!(
        "prompt: {n_prompt} tokens in {:.2} ms ({:.1} tokens/s); generation: {} tokens in {:.2} ms ({:.1} tokens/s)",
        g.prompt_time.as_secs_f64() * 1e3,
        tps(n_prompt, g.prompt_time),
        g.tokens.len(),
        g.gen_time.as_secs_f64() * 1e3,
        tps(g.tokens.len(), g.gen_time)
    );
    match g.stop {
        Stop::EndOfGeneration(t) => {
            let text = tok.and_then(|k| k.token_text(t)).unwrap_or("?");
            eprintln!("stopped at the end-of-generation token {t} {text:?}");
        }
        Stop::ContextFull => eprintln!(
            "stopped: the KV cache is full ({n_ctx} positions); the text above is what was generated (a larger --n-ctx allows more)"
        ),
        Stop::MaxTokens | Stop::Callback => {}
    }
}

fn write_logits(p: &Path, logits: &[f32], n_vocab: usize) -> Result<(), String> {
    let bytes: Vec<u8> = logits.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(p, bytes).map_err(|err| format!("{}: {err}", p.display()))?;
    outln!("wrote {} positions of logits to {}", logits.len() / n_vocab.max(1), p.display());
    Ok(())
}
