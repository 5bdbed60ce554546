#!/usr/bin/env python3
"""llama.cpp's perplexity (the measure of tools/perplexity, which
llama-cpp-python does not ship) computed through llama-cpp-python 0.3.36 on the
same file and settings as `rgml perplexity`: the text tokenized with BOS as
llama.cpp adds it, chunks of --ctx tokens each evaluated from an empty cache
with its first token replaced by BOS, the second half of each chunk scored
(max in f32, sum of exp in f64, as process_logits), F16 KV cache, one batch per
chunk. Prints the same lines as llama-perplexity.

  python3 scripts/perplexity_llama.py MODEL.gguf -f TEXT [--ctx 512] [--threads 2] [--json]
"""

import argparse
import json
import math

import numpy as np
from llama_cpp import Llama


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("-f", "--file", required=True)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", action="store_true", help="one JSON object: ppl, uncertainty, chunks, tokens")
    a = ap.parse_args()
    llm = Llama(a.model, n_ctx=a.ctx, n_batch=a.ctx, n_ubatch=a.ctx, logits_all=True, n_threads=a.threads,
                flash_attn=False, verbose=False)
    text = open(a.file, encoding="utf-8").read()
    add_bos = llm._model.add_bos_token() if hasattr(llm._model, "add_bos_token") else True
    tokens = llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=False)
    n_ctx, first = a.ctx, a.ctx // 2
    if len(tokens) < 2 * n_ctx:
        raise SystemExit(f"the text tokenizes to {len(tokens)} tokens; need {2 * n_ctx}")
    nll = nll2 = 0.0
    count = 0
    chunks = len(tokens) // n_ctx
    for c in range(chunks):
        chunk = list(tokens[c * n_ctx:(c + 1) * n_ctx])
        if add_bos:
            chunk[0] = llm.token_bos()
        llm.reset()
        llm.eval(chunk)
        scores = np.asarray(llm.scores[:n_ctx], dtype=np.float32)
        for i in range(first, n_ctx - 1):
            row = scores[i]
            mx = row.max()
            s = float(np.exp((row - mx).astype(np.float64)).sum())
            v = -(float(row[tokens[c * n_ctx + i + 1]] - mx) - math.log(s))
            nll += v
            nll2 += v * v
            count += 1
        if not a.json:
            print(f"[{c + 1}]{math.exp(nll / count):.4f},", end="", flush=True)
    nll2 /= count
    nll /= count
    ppl = math.exp(nll)
    var = nll2 - nll * nll
    unc = math.sqrt(var / (count - 1)) * ppl if var > 0 else 0.0
    if a.json:
        print(json.dumps({"ppl": ppl, "uncertainty": unc, "chunks": chunks, "tokens": len(tokens), "ctx": n_ctx}))
    else:
        print(f"\nFinal estimate: PPL = {ppl:.4f} +/- {unc:.5f}")


if __name__ == "__main__":
    main()
