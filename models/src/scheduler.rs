//! Continuous batching over a model's sequences ([`crate::model::LoadOptions::n_seq`]),
//! as a server's loop runs it, without HTTP: requests wait in a queue, each takes a
//! free sequence, its prompt runs in chunks, and every [`Scheduler::step`] decodes one
//! token of every sequence past its prompt in one graph ([`Model::eval_seqs`]). A
//! request joins at the next step and leaves (finished or cancelled) at once. Each
//! request samples with its own [`Sampler`], so its tokens do not depend on the
//! others': with weights whose products keep their bits per row, a request's tokens
//! are those [`Model::generate`] gives it alone.

use std::collections::VecDeque;

use rgml::{Backend, Result};

use crate::generate::Stop;
use crate::model::Model;
use crate::sampler::{logprobs, Logprobs, Sampler, SamplerParams};

/// What a request asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The prompt's tokens (the vocabulary's special tokens already added).
    pub prompt: Vec<u32>,
    /// The most tokens to generate.
    pub max_tokens: usize,
    /// How to sample (its seed included).
    pub sampling: SamplerParams,
    /// Tokens that end the generation (not reported as tokens): the
    /// vocabulary's end-of-generation tokens.
    pub end: Vec<u32>,
    /// Report each generated token's log-probability and this many most likely
    /// alternatives ([`logprobs`]); `None`: none.
    pub logprobs: Option<usize>,
}

/// A request's handle.
pub type RequestId = u64;

/// What a step produced for a request.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A generated token.
    Token {
        /// The request.
        id: RequestId,
        /// The token.
        token: u32,
        /// Its log-probability and the alternatives', when the request asks.
        logprobs: Option<Logprobs>,
    },
    /// The request is done; its sequence is free.
    Done {
        /// The request.
        id: RequestId,
        /// Why it stopped.
        stop: Stop,
        /// Prompt tokens evaluated.
        prompt_tokens: usize,
        /// Tokens generated (an end-of-generation token included).
        tokens: usize,
    },
    /// The request could not run (its prompt does not fit, its sampling
    /// settings are invalid) or could not go on (its logits could not be
    /// sampled); its sequence is free.
    Refused {
        /// The request.
        id: RequestId,
        /// Why.
        why: String,
    },
}

/// A request holding a sequence.
struct Active {
    id: RequestId,
    req: Request,
    sampler: Sampler,
    /// Prompt tokens evaluated so far.
    prompt_done: usize,
    /// The last token sampled, to evaluate at the next step.
    next: Option<u32>,
    generated: usize,
}

/// Requests served by one model, a step at a time.
pub struct Scheduler<B: Backend> {
    model: Model<B>,
    slots: Vec<Option<Active>>,
    queue: VecDeque<(RequestId, Request)>,
    next_id: RequestId,
    /// Prompt tokens evaluated per step at most.
    chunk: usize,
}

impl<B: Backend> Scheduler<B> {
    /// A scheduler over `model`'s sequences; prompts are cut into chunks of
    /// `chunk` tokens (≥ 1), and a step evaluates chunks until it has taken about
    /// `chunk` prompt tokens.
    pub fn new(model: Model<B>, chunk: usize) -> Scheduler<B> {
        let slots = (0..model.n_seq()).map(|_| None).collect();
        Scheduler { model, slots, queue: VecDeque::new(), next_id: 0, chunk: chunk.max(1) }
    }

    /// The model.
    pub fn model(&self) -> &Model<B> {
        &self.model
    }

    /// Queues `req`; it starts at a step when a sequence is free.
    pub fn submit(&mut self, req: Request) -> RequestId {
        self.next_id += 1;
        self.queue.push_back((self.next_id, req));
        self.next_id
    }

    /// Drops request `id`, queued or running (its sequence is free at once);
    /// false when there is no such request.
    pub fn cancel(&mut self, id: RequestId) -> bool {
        if let Some(i) = self.queue.iter().position(|(q, _)| *q == id) {
            self.queue.remove(i);
            return true;
        }
        match self.slots.iter_mut().find(|s| s.as_ref().is_some_and(|a| a.id == id)) {
            Some(slot) => {
                *slot = None;
                true
            }
            None => false,
        }
    }

    /// Drops every request, queued or running, and returns their ids: after a
    /// failed step, whose sequences' caches may hold part of its writes.
    pub fn abort_all(&mut self) -> Vec<RequestId> {
        let running = self.slots.iter_mut().filter_map(|s| s.take().map(|a| a.id));
        let mut ids: Vec<RequestId> = running.collect();
        ids.extend(self.queue.drain(..).map(|(id, _)| id));
        ids
    }

    /// Requests waiting for a sequence.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }
    /// Sequences serving a request.
    pub fn busy(&self) -> usize {
        self.slots.iter().flatten().count()
    }
    /// Nothing queued or running.
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty() && self.busy() == 0
    }

    /// One step: queued requests take the free sequences (the lowest first),
    /// every request past its prompt gets its next token (one graph), and prompt
    /// chunks run, oldest request first, up to `chunk` tokens.
    pub fn step(&mut self) -> Result<Vec<Event>> {
        let mut events = Vec::new();
        self.admit(&mut events)?;
        let decoding: Vec<(usize, u32)> =
            self.slots.iter().enumerate().filter_map(|(s, a)| Some((s, a.as_ref()?.next?))).collect();
        if !decoding.is_empty() {
            let logits = self.model.eval_seqs(&decoding)?;
            for (&(seq, _), l) in decoding.iter().zip(&logits) {
                self.sample(seq, l, &mut events)?;
            }
        }
        self.prefill(&mut events)?;
        Ok(events)
    }

    /// Free sequences to queued requests (a request that cannot run is refused).
    fn admit(&mut self, events: &mut Vec<Event>) -> Result<()> {
        while let Some(seq) = self.slots.iter().position(Option::is_none) {
            let Some((id, req)) = self.queue.pop_front() else { break };
            let n_ctx = self.model.n_ctx();
            let why = if req.prompt.is_empty() {
                Some("the prompt is empty".to_string())
            } else if req.max_tokens == 0 {
                Some("max_tokens must be at least 1".to_string())
            } else if req.prompt.len() >= n_ctx {
                Some(format!("the prompt has {} tokens; the context holds {n_ctx}", req.prompt.len()))
            } else {
                None
            };
            let sampler = Sampler::new(req.sampling, self.model.hp.n_vocab);
            match (why, sampler) {
                (Some(why), _) => events.push(Event::Refused { id, why }),
                (None, Err(e)) => events.push(Event::Refused { id, why: e.to_string() }),
                (None, Ok(mut sampler)) => {
                    req.prompt.iter().for_each(|&t| sampler.accept(t));
                    self.model.seq_reset(seq)?;
                    self.slots[seq] = Some(Active { id, req, sampler, prompt_done: 0, next: None, generated: 0 });
                }
            }
        }
        Ok(())
    }

    /// Prompt chunks of the requests still in their prompts, oldest first, until
    /// `chunk` tokens were evaluated this step (at least one chunk); a request's
    /// first token when its prompt is done. Each prompt is cut at multiples of
    /// `chunk` whatever runs beside it, so its graphs, and their bits, do not
    /// depend on the other requests.
    fn prefill(&mut self, events: &mut Vec<Event>) -> Result<()> {
        let mut pending: Vec<(RequestId, usize)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(s, a)| {
                let a = a.as_ref()?;
                (a.prompt_done < a.req.prompt.len()).then_some((a.id, s))
            })
            .collect();
        pending.sort_unstable();
        let mut budget = self.chunk;
        for (_, seq) in pending {
            if budget == 0 {
                break;
            }
            let Some(a) = self.slots[seq].as_mut() else { continue };
            let end = (a.prompt_done + self.chunk).min(a.req.prompt.len());
            let chunk = a.req.prompt[a.prompt_done..end].to_vec();
            a.prompt_done = end;
            budget = budget.saturating_sub(chunk.len());
            let done = end == a.req.prompt.len();
            let logits = self.model.eval_seq_last(seq, &chunk)?;
            if done {
                self.sample(seq, &logits, events)?;
            }
        }
        Ok(())
    }

    /// Samples sequence `seq`'s next token from `logits`; reports it, or the
    /// request's end (freeing the sequence).
    fn sample(&mut self, seq: usize, logits: &[f32], events: &mut Vec<Event>) -> Result<()> {
        let past = self.model.seq_past(seq)?;
        let n_ctx = self.model.n_ctx();
        let Some(a) = self.slots[seq].as_mut() else { return Ok(()) };
        let token = match a.sampler.sample(logits) {
            Ok(token) => token,
            Err(e) => {
                events.push(Event::Refused { id: a.id, why: e.to_string() });
                self.slots[seq] = None;
                return Ok(());
            }
        };
        a.sampler.accept(token);
        a.generated += 1;
        let stop = if a.req.end.contains(&token) {
            Some(Stop::EndOfGeneration(token))
        } else {
            let logprobs = a.req.logprobs.and_then(|top| logprobs(logits, token, top));
            events.push(Event::Token { id: a.id, token, logprobs });
            if a.generated >= a.req.max_tokens {
                Some(Stop::MaxTokens)
            } else if past >= n_ctx {
                Some(Stop::ContextFull)
            } else {
                None
            }
        };
        match stop {
            Some(stop) => {
                let (id, prompt_tokens, tokens) = (a.id, a.req.prompt.len(), a.generated);
                events.push(Event::Done { id, stop, prompt_tokens, tokens });
                self.slots[seq] = None;
            }
            None => a.next = Some(token),
        }
        Ok(())
    }
}
