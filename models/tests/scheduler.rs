//! Continuous batching (`rgml_models::scheduler`): requests of different
//! prompts, lengths and samplers served together by a model of fewer sequences
//! than requests (some wait in the queue) get exactly the tokens each gets
//! alone from `Model::generate`, greedy and seeded, whatever the prompt chunk;
//! a cancelled request stops at once and frees its sequence; a request that
//! cannot run is refused and the others go on. The engine (the scheduler on its
//! own thread) serves requests from many threads as alone, cancels a request
//! whose client is gone, bounds its queue and reports a model that fails to load.

mod common;

use std::collections::HashMap;
use std::ops::ControlFlow;

use common::arch::{dir, tokens};
use rgml::CpuBackend;
use rgml_models::engine::{Engine, EngineOptions, Health, ModelInfo, Sink, SubmitError};
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
            logprobs: (i == 1).then_some(2),
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

type Served = HashMap<u64, (Vec<u32>, Option<Stop>, usize)>;

/// Runs the scheduler until idle: each request's tokens, stop and tokens with
/// log-probabilities.
fn serve(s: &mut Scheduler<CpuBackend>, ids: &[u64]) -> Served {
    let mut out: Served = ids.iter().map(|&i| (i, (Vec::new(), None, 0))).collect();
    let mut steps = 0;
    while !s.is_idle() {
        for e in s.step().unwrap() {
            match e {
                Event::Token { id, token, logprobs } => {
                    // a request asking for log-probabilities gets them for every token
                    if let Some(lp) = logprobs {
                        assert_eq!((lp.chosen.token, lp.top.len()), (token, 2));
                        assert!(lp.chosen.logprob <= lp.top[0].logprob && lp.top[1].logprob <= lp.top[0].logprob);
                        out.get_mut(&id).unwrap().2 += 1;
                    }
                    out.get_mut(&id).unwrap().0.push(token)
                }
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
            let (tokens, stop, with_logprobs) = &got[id];
            assert_eq!((tokens, stop.unwrap()), (&want[i].0, want[i].1), "request {i}, prompt chunk {chunk}");
            let asked = reqs[i].logprobs.is_some();
            assert_eq!(*with_logprobs, if asked { tokens.len() } else { 0 }, "request {i}");
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
                Event::Token { id, token, .. } if id == ok => tokens.push(token),
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
/// concurrent greedy requests get exactly the tokens each gets alone from
/// `Model::generate` (where the weights keep a row's bits at any row count, as
/// they do repacked and on AVX-512 in place; elsewhere alone in the scheduler),
/// with the weights in place and repacked.
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
            logprobs: None,
        })
        .collect();
    for repack in [false, true] {
        let load = |n_seq| {
            let opts = LoadOptions { n_ctx: Some(128), kv_type: KvType::F16, attention: Attention::Fused, n_seq };
            let cpu = CpuBackend::new(2).unwrap().with_repacked_weights(repack);
            Model::load_with(&path, opts, cpu).unwrap()
        };
        let mut single = load(1);
        // where the products keep a row's bits at any row count (Q4_1 and Q8_0 with the
        // tile at one row: AVX-512, or repacked), the lone run is the reference; else the
        // request alone in the same scheduler
        let mut s = Scheduler::new(load(8), 512);
        let want: Vec<Vec<u32>> = reqs
            .iter()
            .map(|r| {
                if !s.model().rows_invariant() {
                    let id = s.submit(r.clone());
                    return serve(&mut s, &[id])[&id].0.clone();
                }
                single.reset().unwrap();
                let mut sampler = Sampler::new(greedy, single.hp.n_vocab).unwrap();
                let opts = GenerateOptions { max_tokens: r.max_tokens, all_logits: false };
                let g = single.generate(&r.prompt, &mut sampler, opts, |_| false, |_| ControlFlow::Continue(()));
                g.unwrap().tokens
            })
            .collect();
        // at AVX-512 (the level the kernels run at, `RGML_SIMD` included) both types' tiles run
        // from one row; at AVX2 whether they do depends on the vendor (AMD keeps Q8_0 in place)
        let avx512 = rgml::quant::dot::SimdLevel::detect() == rgml::quant::dot::SimdLevel::Avx512;
        assert!(s.model().rows_invariant() || !avx512, "Q4_1 and Q8_0 keep their bits at AVX-512");
        let ids: Vec<u64> = reqs.iter().map(|r| s.submit(r.clone())).collect();
        let got = serve(&mut s, &ids);
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(got[id].0, want[i], "repack={repack}: request {i} ({:?})", texts[i]);
        }
    }
}

/// Gemma-3-270M Q4_K_M (Q5_K/Q6_K kept in place on Zen 4, whose products change
/// bits with the row count unless their tiles run at every row count; from
/// `.ci/run`, SKIP without it): in one scheduler a request's tokens and
/// log-probabilities are the same bits alone and beside three others — a decode
/// step holding a row for every sequence by default, only the rows up to the
/// highest running sequence with row-invariant products (then also the tokens
/// of a one-sequence model).
#[test]
fn gemma_requests_alone_and_together_in_one_scheduler_are_the_same_bits() {
    let Some(path) = common::model_path("gemma-3-270m-q4_k_m.gguf") else { return };
    let file = rgml::gguf::GgufFile::open(&path).unwrap();
    let tok = rgml_models::tokenizer::Tokenizer::from_gguf(&file).unwrap();
    let texts = ["The capital of France is", "def fibonacci(n):", "Water boils at", "The quick brown fox"];
    let reqs: Vec<Request> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| Request {
            prompt: tok.tokenize(t, true, false).unwrap(),
            max_tokens: 16,
            sampling: SamplerParams {
                temperature: if i % 2 == 0 { 0.0 } else { 0.8 },
                seed: i as u64,
                ..Default::default()
            },
            end: vec![],
            logprobs: Some(1),
        })
        .collect();
    let logprobs = |s: &mut Scheduler<CpuBackend>, ids: &[u64]| {
        let mut out: HashMap<u64, Vec<(u32, u32)>> = HashMap::new();
        while !s.is_idle() {
            for e in s.step().unwrap() {
                if let Event::Token { id, token, logprobs: Some(lp) } = e {
                    out.entry(id).or_default().push((token, lp.chosen.logprob.to_bits()));
                }
            }
        }
        ids.iter().map(|id| out.remove(id).unwrap()).collect::<Vec<_>>()
    };
    // as the CPU runs by default, and with the tile kernels at every row count
    // (`rgml serve`'s setting), where a lone request computes one row
    for always in [false, true] {
        let load = |n_seq| {
            let opts = LoadOptions { n_ctx: Some(64), kv_type: KvType::F16, attention: Attention::Fused, n_seq };
            let cpu = CpuBackend::new(2).unwrap().with_row_invariant_products(always);
            Model::load_with(&path, opts, cpu).unwrap()
        };
        let mut s = Scheduler::new(load(4), 512);
        let alone: Vec<_> = reqs
            .iter()
            .map(|r| {
                let id = s.submit(r.clone());
                logprobs(&mut s, &[id]).remove(0)
            })
            .collect();
        let ids: Vec<u64> = reqs.iter().map(|r| s.submit(r.clone())).collect();
        let together = logprobs(&mut s, &ids);
        for (i, (a, t)) in alone.iter().zip(&together).enumerate() {
            assert_eq!((a.len(), a), (16, t), "always={always}: request {i} ({:?})", texts[i]);
        }
        if s.model().rows_invariant() {
            // then a request's tokens are also those of a one-sequence model
            let mut single = load(1);
            for (r, a) in reqs.iter().zip(&alone) {
                single.reset().unwrap();
                let mut sampler = Sampler::new(r.sampling, single.hp.n_vocab).unwrap();
                let opts = GenerateOptions { max_tokens: r.max_tokens, all_logits: false };
                let g = single.generate(&r.prompt, &mut sampler, opts, |_| false, |_| ControlFlow::Continue(()));
                assert_eq!(g.unwrap().tokens, a.iter().map(|x| x.0).collect::<Vec<_>>(), "always={always}");
            }
        }
    }
}

/// A sink into a channel, as a server's connection holds its receiver.
struct ChannelSink(std::sync::mpsc::Sender<Event>, std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Sink for ChannelSink {
    fn send(&mut self, event: Event) -> bool {
        self.0.send(event).is_ok()
    }
    fn is_closed(&self) -> bool {
        self.1.load(std::sync::atomic::Ordering::Relaxed)
    }
}

fn channel() -> (Box<dyn Sink>, std::sync::mpsc::Receiver<Event>, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let closed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    (Box::new(ChannelSink(tx, closed.clone())), rx, closed)
}

/// The tokens and stop of one request's events, read to its end.
fn collect(rx: &std::sync::mpsc::Receiver<Event>) -> (Vec<u32>, Stop) {
    let mut tokens = Vec::new();
    loop {
        match rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the engine answers") {
            Event::Token { token, .. } => tokens.push(token),
            Event::Done { stop, .. } => return (tokens, stop),
            Event::Refused { why, .. } => panic!("refused: {why}"),
        }
    }
}

#[test]
fn the_engine_serves_requests_from_many_threads_as_alone() {
    let reqs = requests();
    let want: Vec<(Vec<u32>, Stop)> = reqs.iter().map(alone).collect();
    let engine = Engine::start(|| Ok(load(3)), EngineOptions { chunk: 4, max_queue: 16 });
    let t = std::time::Instant::now();
    while engine.health() == Health::Loading {
        assert!(t.elapsed().as_secs() < 60, "the model loads");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let lone = load(1);
    let info = ModelInfo { n_seq: 3, n_ctx: 64, n_vocab: lone.hp.n_vocab, rows_invariant: lone.rows_invariant() };
    assert_eq!(engine.health(), Health::Ready(info));
    let got: Vec<(Vec<u32>, Stop)> = std::thread::scope(|s| {
        let handles: Vec<_> = reqs
            .iter()
            .map(|r| {
                let engine = &engine;
                s.spawn(move || {
                    let (sink, rx, _) = channel();
                    engine.submit(r.clone(), sink).unwrap();
                    collect(&rx)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(got, want);
    let st = engine.stats();
    assert_eq!((st.requests, st.finished, st.refused, st.cancelled, st.queued, st.busy), (7, 7, 0, 0, 0, 0));
    let generated: usize = want.iter().map(|(t, s)| t.len() + usize::from(matches!(s, Stop::EndOfGeneration(_)))).sum();
    assert_eq!(st.generated_tokens, generated as u64);
    assert_eq!(st.prompt_tokens, reqs.iter().map(|r| r.prompt.len() as u64).sum::<u64>());
}

#[test]
fn the_engine_cancels_for_a_gone_client_and_bounds_its_queue() {
    let reqs = requests();
    let engine = Engine::start(|| Ok(load(1)), EngineOptions { chunk: 64, max_queue: 2 });
    while engine.health() == Health::Loading {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let long = Request { max_tokens: 60, ..reqs[0].clone() };
    // the first runs; a client gone after one token cancels it
    struct Leaving(usize);
    impl Sink for Leaving {
        fn send(&mut self, _: Event) -> bool {
            self.0 += 1;
            self.0 < 2
        }
        fn is_closed(&self) -> bool {
            self.0 >= 2
        }
    }
    engine.submit(long.clone(), Box::new(Leaving(0))).unwrap();
    // a closed sink cancels a request before it runs, too
    let (sink, _rx, closed) = channel();
    closed.store(true, std::sync::atomic::Ordering::Relaxed);
    engine.submit(long.clone(), sink).unwrap();
    let (sink, rx, _) = channel();
    engine.submit(reqs[2].clone(), sink).unwrap();
    assert_eq!(collect(&rx), alone(&reqs[2]), "the sequence was freed for the next request");
    let st = engine.stats();
    assert_eq!((st.cancelled, st.finished, st.busy, st.queued), (2, 1, 0, 0));
    // one sequence runs and two wait: of twenty requests sent at once some are refused
    let held: Vec<_> = (0..20).map(|_| channel()).collect();
    let mut results = Vec::new();
    for (i, (sink, _, _)) in held.into_iter().enumerate() {
        results.push((i, engine.submit(long.clone(), sink)));
    }
    assert!(results.iter().any(|(_, r)| matches!(r, Err(SubmitError::QueueFull(2)))), "{results:?}");
}

#[test]
fn an_engine_whose_model_fails_to_load_says_why() {
    let engine = Engine::start(
        || Model::load_with(std::path::Path::new("/nonexistent.gguf"), LoadOptions::default(), CpuBackend::new(1)?),
        EngineOptions { chunk: 8, max_queue: 4 },
    );
    let t = std::time::Instant::now();
    while engine.health() == Health::Loading {
        assert!(t.elapsed().as_secs() < 10);
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    assert!(
        matches!(engine.health(), Health::Failed(why) if why.contains("loading the model failed")),
        "{:?}",
        engine.health()
    );
    let (sink, _rx, _) = channel();
    assert!(matches!(engine.submit(requests()[0].clone(), sink), Err(SubmitError::Down(_))));
}
