//! Continuous batching (`rgml_models::scheduler`): requests of different
//! prompts, lengths and samplers served together by a model of fewer sequences
//! than requests (some wait in the queue) get exactly the tokens each gets
//! alone from `Model::generate`, greedy and seeded, whatever the prompt chunk;
//! a cancelled request stops at once and frees its sequence; a request that
//! cannot run is refused and the others go on.

mod common;

use std::collections::HashMap;
use std::ops::ControlFlow;

use common::arch::{dir, tokens};
use rgml::CpuBackend;
use rgml_models::generate::{GenerateOptions, Stop};
use rgml_models::model::kv::KvType;
use rgml_models::model::{Attention, LoadOptions, Model};
use rgml_models::sampler::{Sampler, SamplerParams};
use rgml_models::scheduler::{Event, Request, Scheduler};

const FILE: &str = "qwen3_q8_0.gguf";

fn load(n_seq: usize) -> Model {
    let opts = LoadOptions { n_ctx: Some(64), kv_type: KvType::F16, attention: Attention::Fused, n_seq };
    Model::load_with(&dir().join(FILE), opts, CpuBackend::new(2).unwrap()).unwrap()
}

fn requests() -> Vec<Request> {
    let toks = tokens();
    let greedy = SamplerParams { temperature: 0.0, ..Default::default() };
    (0..7)
        .map(|i| Request {
            prompt: toks[i * 3..i * 3 + 2 + i * 2].to_vec(),
            max_tokens: 4 + i,
            sampling: if i % 2 == 0 { greedy } else { SamplerParams { seed: 100 + i as u64, ..Default::default() } },
            // a token the tiny model produces, to end some requests early
            end: if i == 3 { vec![tokens()[5]] } else { vec![] },
        })
        .collect()
}

/// What `Model::generate` gives `req` alone.
fn alone(req: &Request) -> (Vec<u32>, Stop) {
    let mut m = load(1);
    let mut sampler = Sampler::new(req.sampling, m.hp.n_vocab).unwrap();
    let opts = GenerateOptions { max_tokens: req.max_tokens, all_logits: false };
    let g =
        m.generate(&req.prompt, &mut sampler, opts, |t| req.end.contains(&t), |_| ControlFlow::Continue(())).unwrap();
    let mut tokens = g.tokens;
    if let Stop::EndOfGeneration(_) = g.stop {
        tokens.pop();
    }
    (tokens, g.stop)
}

/// Runs the scheduler until idle: each request's tokens and stop.
fn serve(s: &mut Scheduler<CpuBackend>, ids: &[u64]) -> HashMap<u64, (Vec<u32>, Option<Stop>)> {
    let mut out: HashMap<u64, (Vec<u32>, Option<Stop>)> = ids.iter().map(|&i| (i, (Vec::new(), None))).collect();
    let mut steps = 0;
    while !s.is_idle() {
        for e in s.step().unwrap() {
            match e {
                Event::Token { id, token } => out.get_mut(&id).unwrap().0.push(token),
                Event::Done { id, stop, tokens, .. } => {
                    let o = out.get_mut(&id).unwrap();
                    o.1 = Some(stop);
                    assert_eq!(tokens, o.0.len() + usize::from(matches!(stop, Stop::EndOfGeneration(_))));
                }
                Event::Refused { id, why } => panic!("request {id} refused: {why}"),
            }
        }
        steps += 1;
        assert!(steps < 500, "the scheduler does not finish");
    }
    out
}

#[test]
fn requests_served_together_get_the_tokens_each_gets_alone() {
    let reqs = requests();
    let want: Vec<(Vec<u32>, Stop)> = reqs.iter().map(alone).collect();
    for chunk in [64, 3] {
        let mut s = Scheduler::new(load(3), chunk);
        let ids: Vec<u64> = reqs.iter().map(|r| s.submit(r.clone())).collect();
        assert_eq!((s.queued(), s.busy()), (7, 0));
        let got = serve(&mut s, &ids);
        for (i, id) in ids.iter().enumerate() {
            let (tokens, stop) = &got[id];
            assert_eq!((tokens, stop.unwrap()), (&want[i].0, want[i].1), "request {i}, prompt chunk {chunk}");
        }
    }
}

#[test]
fn a_cancelled_request_stops_and_frees_its_sequence() {
    let reqs = requests();
    let mut s = Scheduler::new(load(2), 64);
    let long = Request { max_tokens: 40, ..reqs[0].clone() };
    let (a, b, c) = (s.submit(long.clone()), s.submit(long), s.submit(reqs[2].clone()));
    s.step().unwrap();
    assert_eq!((s.busy(), s.queued()), (2, 1));
    assert!(s.cancel(a) && !s.cancel(a));
    assert!(s.cancel(b));
    let got = serve(&mut s, &[a, b, c]);
    assert_eq!(got[&c].0, alone(&reqs[2]).0, "the queued request runs in a freed sequence");
    assert!(got[&a].1.is_none() && got[&b].1.is_none(), "nothing more for the cancelled");
}

#[test]
fn a_request_that_cannot_run_is_refused_and_the_others_go_on() {
    let reqs = requests();
    let mut s = Scheduler::new(load(2), 64);
    let too_long = s.submit(Request { prompt: vec![1; 64], ..reqs[0].clone() });
    let empty = s.submit(Request { prompt: vec![], ..reqs[0].clone() });
    let bad = s.submit(Request { sampling: SamplerParams { top_p: 2.0, ..Default::default() }, ..reqs[0].clone() });
    let zero = s.submit(Request { max_tokens: 0, ..reqs[0].clone() });
    let ok = s.submit(reqs[1].clone());
    let mut refused = Vec::new();
    let mut tokens = Vec::new();
    while !s.is_idle() {
        for e in s.step().unwrap() {
            match e {
                Event::Refused { id, why } => refused.push((id, why)),
                Event::Token { id, token } if id == ok => tokens.push(token),
                _ => {}
            }
        }
    }
    let ids: Vec<u64> = refused.iter().map(|r| r.0).collect();
    assert_eq!(ids, vec![too_long, empty, bad, zero], "{refused:?}");
    assert!(refused[0].1.contains("64 tokens"), "{}", refused[0].1);
    assert_eq!(tokens, alone(&reqs[1]).0);
}

/// SmolLM2-135M (Q4_1 and Q8_0 weights; from `.ci/run`, SKIP without it): eight
/// concurrent greedy requests get exactly the tokens each gets alone, with the
/// weights in place and repacked.
#[test]
fn smollm2_eight_concurrent_greedy_requests_match_each_alone() {
    let Some(path) = common::model_path("SmolLM2-135M-Instruct.Q4_1.gguf") else { return };
    let file = rgml::gguf::GgufFile::open(&path).unwrap();
    let tok = rgml_models::tokenizer::Tokenizer::from_gguf(&file).unwrap();
    let texts = [
        "The capital of France is",
        "Once upon a time, in a small village,",
        "def fibonacci(n):",
        "The three primary colors are",
        "To make a cup of tea, first",
        "In 1969, the first humans",
        "The quick brown fox",
        "Water boils at",
    ];
    let greedy = SamplerParams { temperature: 0.0, ..Default::default() };
    let reqs: Vec<Request> = texts
        .iter()
        .map(|t| Request {
            prompt: tok.tokenize(t, true, false).unwrap(),
            max_tokens: 24,
            sampling: greedy,
            end: vec![],
        })
        .collect();
    for repack in [false, true] {
        let load = |n_seq| {
            let opts = LoadOptions { n_ctx: Some(128), kv_type: KvType::F16, attention: Attention::Fused, n_seq };
            let cpu = CpuBackend::new(2).unwrap().with_repacked_weights(repack);
            Model::load_with(&path, opts, cpu).unwrap()
        };
        let mut single = load(1);
        let want: Vec<Vec<u32>> = reqs
            .iter()
            .map(|r| {
                single.reset().unwrap();
                let mut sampler = Sampler::new(greedy, single.hp.n_vocab).unwrap();
                let opts = GenerateOptions { max_tokens: r.max_tokens, all_logits: false };
                let g = single.generate(&r.prompt, &mut sampler, opts, |_| false, |_| ControlFlow::Continue(()));
                g.unwrap().tokens
            })
            .collect();
        let mut s = Scheduler::new(load(8), 512);
        let ids: Vec<u64> = reqs.iter().map(|r| s.submit(r.clone())).collect();
        let got = serve(&mut s, &ids);
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(got[id].0, want[i], "repack={repack}: request {i} ({:?})", texts[i]);
        }
    }
}
