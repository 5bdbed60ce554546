"""Serving throughput: rgml serve against llama.cpp's llama-server, same model, threads,
sequences and context, in alternating rounds in one run.

    python3 scripts/serve_bench.py --server rgml=URL --server llama-server=URL [--clients 1,4,8] [--tokens 128] [--rounds 3]

The servers must be running (see README, "Serving against llama-server"). Each round, for
each client count C and each server (their order alternating between rounds): C clients
at once, each streaming a chat completion of exactly --tokens tokens (ignore_eos) from
its own prompt. Reports per server and C the median over rounds of the aggregate
generated tokens per second (all clients' tokens over the wall time) and of the median
time to first token, and the median of the rounds' ratios first server / second."""

import argparse
import concurrent.futures as cf
import http.client
import json
import statistics
import time
import urllib.parse

PROMPTS = [
    "Write a short story about a lighthouse keeper.",
    "Explain how a bicycle works.",
    "Describe the water cycle to a child.",
    "List some tips for learning a new language.",
    "What makes a good cup of coffee?",
    "Tell me about the history of the printing press.",
    "How do plants make food from sunlight?",
    "Describe a walk through a busy market.",
]


def stream_one(url, prompt, tokens):
    """(time to first token, tokens received, seconds) of one streamed completion."""
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": tokens, "ignore_eos": True,
            "temperature": 0, "stream": True,
            # llama-server would reuse the KV cache of an earlier identical prompt; rgml has
            # no prompt cache, so both evaluate every prompt (rgml ignores the field)
            "cache_prompt": False}
    t0 = time.perf_counter()
    c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, (r.status, r.read())
    ttft, n = None, 0
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if chunk.get("choices") and chunk["choices"][0]["delta"].get("content"):
            n += 1
            if ttft is None:
                ttft = time.perf_counter() - t0
    c.close()
    return ttft, n, time.perf_counter() - t0


def round_of(url, clients, tokens):
    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(clients) as ex:
        res = list(ex.map(lambda i: stream_one(url, PROMPTS[i % len(PROMPTS)], tokens), range(clients)))
    wall = time.perf_counter() - t0
    total = sum(n for _, n, _ in res)
    return total / wall, statistics.median(t for t, _, _ in res)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", action="append", required=True, help="NAME=URL; two of them")
    ap.add_argument("--clients", default="1,4,8")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    servers = dict(x.split("=", 1) for x in a.server)
    assert len(servers) == 2, "give two --server NAME=URL"
    first, second = list(servers)
    counts = [int(c) for c in a.clients.split(",")]
    for url in servers.values():  # warm-up
        stream_one(url, PROMPTS[0], 8)
    got = {(s, c): [] for s in servers for c in counts}
    for r in range(a.rounds):
        for c in counts:
            order = list(servers) if r % 2 == 0 else list(servers)[::-1]
            for s in order:
                got[(s, c)].append(round_of(servers[s], c, a.tokens))
                tps, ttft = got[(s, c)][-1]
                print(f"round {r + 1} clients {c} {s}: {tps:.1f} tok/s, TTFT {ttft * 1e3:.0f} ms", flush=True)
    print(f"\n| clients | {first} tok/s | {second} tok/s | ratio | {first} TTFT ms | {second} TTFT ms |")
    print("|---|---|---|---|---|---|")
    for c in counts:
        med = {s: (statistics.median(x[0] for x in got[(s, c)]), statistics.median(x[1] for x in got[(s, c)])) for s in servers}
        ratios = [x[0] / y[0] for x, y in zip(got[(first, c)], got[(second, c)])]
        print(f"| {c} | {med[first][0]:.1f} | {med[second][0]:.1f} | {statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f}) "
              f"| {med[first][1] * 1e3:.0f} | {med[second][1] * 1e3:.0f} |")


if __name__ == "__main__":
    main()
