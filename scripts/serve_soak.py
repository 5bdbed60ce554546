"""Soak run of a running `rgml serve`: CLIENTS threads for SECONDS send a mix of valid
requests (whole and streamed chat and text completions, stop strings, seeds) and
invalid ones (malformed JSON, wrong types, unsupported fields, prompts over the
context, bodies over the limit, wrong keys, unknown paths, clients that leave
mid-answer, headers that never finish). Samples the server's resident memory.

    python3 scripts/serve_soak.py URL PID [--seconds 600] [--clients 16] [--key KEY] [--n-ctx N]

Ends with a summary; exit status 1 if a valid request went unanswered, an invalid one
got anything but its 4xx, or the server is not healthy at the end."""

import argparse
import collections
import http.client
import json
import random
import socket
import threading
import time
import urllib.parse


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("pid", type=int)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--key", default="")
    ap.add_argument("--n-ctx", type=int, default=512)
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.url)
    host, port = u.hostname, u.port
    auth = {"Authorization": "Bearer " + a.key} if a.key else {}
    counts = collections.Counter()
    failures = []
    lock = threading.Lock()

    def request(method, path, body=None, headers=None, stream=False):
        c = http.client.HTTPConnection(host, port, timeout=300)
        h = {"Content-Type": "application/json", **auth, **(headers or {})}
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data

    def chat_body(rng, **kw):
        b = {"messages": [{"role": "user", "content": rng.choice(["Hi!", "Name a fruit.", "Count to five.", "What is 2+2?"])}],
             "max_tokens": rng.randint(1, 32), "temperature": rng.choice([0, 0.8]), "seed": rng.randint(0, 9)}
        b.update(kw)
        return json.dumps(b)

    def one(rng):
        kind = rng.choice(["chat", "chat", "stream", "completion", "stop", "bad_json", "bad_type", "unsupported",
                           "too_long", "too_big", "bad_key", "no_path", "leave", "slow"])
        want = {"chat": 200, "stream": 200, "completion": 200, "stop": 200, "bad_json": 400, "bad_type": 400,
                "unsupported": 400, "too_long": 400, "too_big": 413, "bad_key": 401 if a.key else 200, "no_path": 404,
                "leave": None, "slow": None}[kind]
        if kind in ("chat", "bad_key"):
            s, d = request("POST", "/v1/chat/completions", chat_body(rng), {"Authorization": "Bearer wrong"} if kind == "bad_key" else None)
        elif kind == "stream":
            s, d = request("POST", "/v1/chat/completions", chat_body(rng, stream=True))
            if s == 200 and not d.rstrip().endswith(b"data: [DONE]"):
                s = -1
        elif kind == "completion":
            s, d = request("POST", "/v1/completions", json.dumps({"prompt": "Once upon a time", "max_tokens": rng.randint(1, 24)}))
        elif kind == "stop":
            s, d = request("POST", "/v1/chat/completions", chat_body(rng, stop=[" ", "."]))
        elif kind == "bad_json":
            s, d = request("POST", "/v1/chat/completions", b'{"messages": [')
        elif kind == "bad_type":
            s, d = request("POST", "/v1/chat/completions", chat_body(rng, max_tokens="many"))
        elif kind == "unsupported":
            s, d = request("POST", "/v1/chat/completions", chat_body(rng, n=4))
        elif kind == "too_long":
            s, d = request("POST", "/v1/completions", json.dumps({"prompt": [100] * (a.n_ctx + 1)}))
        elif kind == "too_big":
            # as curl sends a large body: the headers with Expect: 100-continue, then
            # the body only if the server asks for it (it answers 413 at once)
            sock = socket.create_connection((host, port))
            head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            head += "".join(f"{k}: {v}\r\n" for k, v in auth.items())
            sock.sendall((head + f"Expect: 100-continue\r\nContent-Length: {5 << 20}\r\n\r\n").encode())
            sock.settimeout(60)
            d = sock.recv(4096)
            sock.close()
            s = int(d.split(b" ")[1]) if d.startswith(b"HTTP/1.1 ") else -1
        elif kind == "no_path":
            s, d = request("GET", "/v2/everything")
        elif kind == "leave":
            sock = socket.create_connection((host, port))
            body = chat_body(rng, max_tokens=64, stream=rng.random() < 0.5).encode()
            head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            head += "".join(f"{k}: {v}\r\n" for k, v in auth.items())
            sock.sendall(head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            time.sleep(rng.random() * 0.5)
            sock.close()
            s, d = None, b""
        else:  # slow: headers that never finish
            sock = socket.create_connection((host, port))
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            time.sleep(rng.random())
            sock.close()
            s, d = None, b""
        with lock:
            counts[(kind, s)] += 1
            if want is not None and s != want:
                failures.append((kind, s, d[:200]))

    stop_at = time.time() + a.seconds

    def client(i):
        rng = random.Random(i)
        while time.time() < stop_at:
            try:
                one(rng)
            except Exception as e:  # a refused connection or reset is a failure
                with lock:
                    failures.append(("exception", repr(e), b""))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)]
    rss = [(0.0, rss_kib(a.pid))]
    t0 = time.time()
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        time.sleep(10)
        rss.append((time.time() - t0, rss_kib(a.pid)))
        print(f"{rss[-1][0]:6.0f} s  RSS {rss[-1][1] / 1024:.1f} MiB  requests {sum(counts.values())}  failures {len(failures)}", flush=True)
    for t in threads:
        t.join()
    s, d = request("GET", "/health")
    healthy = s == 200 and json.loads(d)["status"] == "ok"
    valid = sum(v for (k, st), v in counts.items() if k in ("chat", "stream", "completion", "stop"))
    print(f"\n{sum(counts.values())} requests in {time.time() - t0:.0f} s from {a.clients} clients; {valid} valid")
    for (k, st), v in sorted(counts.items(), key=lambda x: (x[0][0], str(x[0][1]))):
        print(f"  {k:12} {st}: {v}")
    third = max(1, len(rss) // 3)
    early = sum(r for _, r in rss[1:third + 1]) / len(rss[1:third + 1] or [1])
    late = sum(r for _, r in rss[-third:]) / third
    print(f"RSS: start {rss[0][1] / 1024:.1f} MiB, first third {early / 1024:.1f} MiB, last third {late / 1024:.1f} MiB, max {max(r for _, r in rss) / 1024:.1f} MiB")
    print(f"healthy at the end: {healthy}; failures: {len(failures)}")
    for f in failures[:20]:
        print("  ", f)
    raise SystemExit(0 if healthy and not failures else 1)


if __name__ == "__main__":
    main()
