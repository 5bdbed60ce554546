//! `rgml run`: a llama model on token ids, greedy generation, timings.

use crate::outln;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use rgml::Backend;

use crate::llama::{argmax, Llama};

/// Evaluates `prompt` on `backend`, generates `n_predict` tokens, prints ids
/// (and text when the model has a vocabulary) and the time per token; writes
/// every evaluated position's logits to `logits_out` if given.
pub fn run<B: Backend>(
    model: &Path,
    prompt: &[u32],
    n_predict: usize,
    logits_out: Option<&Path>,
    n_ctx: Option<usize>,
    backend: B,
) -> Result<(), String> {
    let e = |e: rgml::Error| e.to_string();
    let t = Instant::now();
    let mut m = Llama::load_on(model, n_ctx, backend).map_err(e)?;
    eprintln!(
        "loaded {} in {:.1} ms on {}: {} layers, n_embd {}, {} heads ({} kv), vocab {}",
        model.display(),
        t.elapsed().as_secs_f64() * 1e3,
        m.backend().describe(),
        m.hp.n_layer,
        m.hp.n_embd,
        m.hp.n_head,
        m.hp.n_head_kv,
        m.hp.n_vocab
    );
    let nv = m.hp.n_vocab;
    // every position's logits only when they are to be written
    let keep_all = logits_out.is_some();
    let eval = |m: &mut Llama<B>, toks: &[u32]| if keep_all { m.eval(toks) } else { m.eval_last(toks) }.map_err(e);
    let t = Instant::now();
    let mut all = eval(&mut m, prompt)?;
    let prompt_s = t.elapsed().as_secs_f64();
    let mut generated = Vec::new();
    let t = Instant::now();
    for i in 0..n_predict {
        let next = argmax(&all[all.len() - nv..]);
        generated.push(next);
        if i + 1 < n_predict {
            let logits = eval(&mut m, &[next])?;
            if keep_all {
                all.extend(logits);
            } else {
                all = logits;
            }
        }
        let tps = (i + 1) as f64 / t.elapsed().as_secs_f64();
        eprint!("\rgenerated {}/{n_predict} tokens, {tps:.1} tokens/s", i + 1);
        let _ = std::io::stderr().flush();
    }
    if n_predict > 0 {
        eprintln!();
    }
    let gen_s = t.elapsed().as_secs_f64();
    outln!("prompt: {prompt:?}");
    outln!("generated: {generated:?}");
    if let Some(text) = m.detokenize(&generated) {
        outln!("text: {text:?}");
    }
    outln!(
        "prompt: {} tokens in {:.2} ms ({:.3} ms/token); generation: {} tokens in {:.2} ms ({:.3} ms/token)",
        prompt.len(),
        prompt_s * 1e3,
        prompt_s * 1e3 / prompt.len().max(1) as f64,
        n_predict,
        gen_s * 1e3,
        gen_s * 1e3 / n_predict.max(1) as f64
    );
    if let Some(p) = logits_out {
        let bytes: Vec<u8> = all.iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(p, bytes).map_err(|err| format!("{}: {err}", p.display()))?;
        outln!("wrote {} positions of logits to {}", all.len() / nv, p.display());
    }
    Ok(())
}
