#!/usr/bin/env python3
"""Prompt and decode speed of rgml against llama.cpp on the same GGUF file.

Each round times llama.cpp (through llama-cpp-python) and then
`rgml bench --model` on the same file, threads, prompt and generation
lengths; the rounds alternate so that a machine whose speed drifts moves both
engines alike. Each engine does one untimed warm-up pass per round, then
--reps passes; a round's figure is the median of its passes, and the ratio
rgml / llama.cpp is taken round by round. The report is the median over the
rounds (and the spread).

llama.cpp side: F16 KV cache (its default, as rgml's), flash attention off,
one batch for the prompt (n_batch = prompt tokens), then one token per step;
only the last position's logits are computed. Timings are llama.cpp's own
(llama_perf_context: t_p_eval_ms / t_eval_ms), so Python adds nothing.

  python3 scripts/compare_llama.py MODEL.gguf [--rgml target/release/rgml]
      [--threads 2] [--prompt-tokens 64] [--gen-tokens 32] [--reps 3]
      [--rounds 3] [--load CMD]

--no-extra-bufts turns off llama.cpp's extra buffer types (its CPU weight
repacking and AMX): a llama.cpp built with GGML_NATIVE on a CPU with AMX
crashes in ggml_backend_amx_mul_mat without it; build it with the AMX options
off instead to keep its repacking (see the README).

--load 'CMD' runs CMD (for example a one-core busy loop) during every round,
to compare the engines on a shared machine.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time


def llama_cpp_round(path, threads, prompt, gen, reps, extra_bufts):
    import llama_cpp

    if not extra_bufts:
        default = llama_cpp.llama_model_default_params

        def params():
            p = default()
            p.use_extra_bufts = False
            return p

        llama_cpp.llama.llama_cpp.llama_model_default_params = params

    llm = llama_cpp.Llama(
        model_path=path,
        n_ctx=prompt + gen + 8,
        n_batch=max(prompt, 1),
        n_ubatch=max(prompt, 1),
        n_threads=threads,
        n_threads_batch=threads,
        flash_attn=False,
        verbose=False,
    )
    n_vocab = llm.n_vocab()
    tokens = [(1 + i * 7919) % n_vocab for i in range(prompt)]
    ctx = llm.ctx

    def one_pass():
        llm.reset()  # the next eval drops every cached position
        llama_cpp.llama_perf_context_reset(ctx)
        llm.eval(tokens)
        nxt = last_argmax(llama_cpp, ctx, n_vocab)
        for _ in range(gen):
            llm.eval([nxt])
            nxt = last_argmax(llama_cpp, ctx, n_vocab)
        p = llama_cpp.llama_perf_context(ctx)
        return prompt / (p.t_p_eval_ms / 1e3), gen / (p.t_eval_ms / 1e3)

    one_pass()
    runs = [one_pass() for _ in range(reps)]
    del llm
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def last_argmax(llama_cpp, ctx, n_vocab):
    import numpy as np

    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))
    return int(np.argmax(logits))


def rgml_round(rgml, path, threads, prompt, gen, reps):
    cmd = [rgml, "bench", "--model", path, "--threads", str(threads), "--prompt-tokens", str(prompt),
           "--gen-tokens", str(gen), "--reps", str(reps), "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    j = json.loads(out.strip().splitlines()[-1])
    return j["prompt_tok_s"], j["gen_tok_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--rgml", default="target/release/rgml")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--gen-tokens", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-extra-bufts", action="store_true", help="llama.cpp without repacking and AMX")
    ap.add_argument("--load", help="a command to run during every round (a competing load)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args()
    # its own process group, so that the shell and what it started stop together
    load = subprocess.Popen(a.load, shell=True, start_new_session=True) if a.load else None
    try:
        if load:
            time.sleep(0.5)
        rows = []
        for r in range(a.rounds):
            lp, lg = llama_cpp_round(a.model, a.threads, a.prompt_tokens, a.gen_tokens, a.reps, not a.no_extra_bufts)
            rp, rg = rgml_round(a.rgml, a.model, a.threads, a.prompt_tokens, a.gen_tokens, a.reps)
            rows.append((lp, lg, rp, rg))
            print(f"round {r + 1}: llama.cpp prompt {lp:8.1f} decode {lg:7.1f} | rgml prompt {rp:8.1f} "
                  f"decode {rg:7.1f} tok/s | ratio prompt {rp / lp:.2f} decode {rg / lg:.2f}", file=sys.stderr)
    finally:
        if load:
            os.killpg(load.pid, signal.SIGKILL)
    med = lambda k: statistics.median(x[k] for x in rows)
    pr = [x[2] / x[0] for x in rows]
    gr = [x[3] / x[1] for x in rows]
    res = {
        "model": a.model, "threads": a.threads, "prompt_tokens": a.prompt_tokens, "gen_tokens": a.gen_tokens,
        "rounds": a.rounds, "load": a.load, "llama_cpp_extra_bufts": not a.no_extra_bufts,
        "llama_cpp_prompt_tok_s": med(0), "llama_cpp_gen_tok_s": med(1),
        "rgml_prompt_tok_s": med(2), "rgml_gen_tok_s": med(3),
        "prompt_ratio": statistics.median(pr), "gen_ratio": statistics.median(gr),
        "prompt_ratio_range": [min(pr), max(pr)], "gen_ratio_range": [min(gr), max(gr)],
    }
    if a.json:
        print(json.dumps(res))
    else:
        print(f"{a.model}: {a.threads} threads, prompt {a.prompt_tokens}, gen {a.gen_tokens}, {a.rounds} rounds"
              + (f", load: {a.load}" if a.load else ""))
        print(f"  llama.cpp  prompt {res['llama_cpp_prompt_tok_s']:8.1f}  decode {res['llama_cpp_gen_tok_s']:7.1f} tok/s")
        print(f"  rgml       prompt {res['rgml_prompt_tok_s']:8.1f}  decode {res['rgml_gen_tok_s']:7.1f} tok/s")
        print(f"  rgml/llama prompt {res['prompt_ratio']:.2f} ({min(pr):.2f}-{max(pr):.2f})  "
              f"decode {res['gen_ratio']:.2f} ({min(gr):.2f}-{max(gr):.2f})")


if __name__ == "__main__":
    main()
