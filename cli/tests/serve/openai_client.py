"""rgml serve through the official OpenAI Python client (and raw sockets for what a
client library will not send). Run by cli/tests/serve.rs against a server it started:

    python3 openai_client.py BASE_URL API_KEY RGML_BINARY MODEL N_CTX

Each check prints "ok: NAME"; the first failure raises (exit status 1)."""

import concurrent.futures as cf
import http.client
import json
import socket
import subprocess
import sys
import time
import urllib.parse

import openai

BASE, KEY, RGML, MODEL, N_CTX = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
URL = urllib.parse.urlparse(BASE)
HOST, PORT = URL.hostname, URL.port
client = openai.OpenAI(base_url=BASE + "/v1", api_key=KEY, max_retries=0, timeout=600)
GREEDY = dict(model="m", temperature=0)
PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Name three primary colors.",
    "How do I boil an egg?",
    "What is 12 times 7?",
    "Tell me a fact about owls.",
    "Translate 'good morning' to Spanish.",
    "Why is the sky blue?",
]


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def user(text):
    return [{"role": "user", "content": text}]


def raw(method, path, body=None, headers=None, timeout=60):
    """(status, headers, parsed JSON or text) of one request on its own connection."""
    c = http.client.HTTPConnection(HOST, PORT, timeout=timeout)
    h = {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"}
    h.update(headers or {})
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read().decode()
    c.close()
    try:
        data = json.loads(data)
    except ValueError:
        pass
    return r.status, {k.lower(): v for k, v in r.getheaders()}, data


def metrics():
    status, _, text = raw("GET", "/metrics")
    check(status == 200, "metrics answer")
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def wait_idle(timeout=60):
    t = time.time()
    while time.time() - t < timeout:
        m = metrics()
        if m.get("rgml_slots_busy", 1) == 0 and m.get("rgml_queue_depth", 1) == 0:
            return m
        time.sleep(0.05)
    raise AssertionError("the server did not become idle")


def chat(text, **kw):
    args = dict(GREEDY, max_tokens=24)
    args.update(kw)
    return client.chat.completions.create(messages=user(text), **args)


def streamed_text(text, **kw):
    args = dict(GREEDY, max_tokens=24)
    args.update(kw)
    chunks = list(client.chat.completions.create(messages=user(text), stream=True, stream_options={"include_usage": True}, **args))
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    usage = [c.usage for c in chunks if c.usage]
    check(len(finish) == 1 and len(usage) == 1 and not chunks[-1].choices, "one finish chunk, then one usage chunk")
    return content, finish[0], usage[0]


def test_models_and_health():
    ids = [m.id for m in client.models.list().data]
    check(ids == [MODEL.rsplit("/", 1)[-1]], f"one model named by its file: {ids}")
    status, _, body = raw("GET", "/health", headers={"Authorization": ""})
    check(status == 200 and body["status"] == "ok", f"health without the key: {status} {body}")


def test_usage_and_max_tokens():
    r = chat(PROMPTS[0], max_tokens=7)
    check(r.choices[0].finish_reason == "length", "max_tokens ends with length")
    check(r.usage.completion_tokens == 7, f"completion tokens {r.usage.completion_tokens}")
    check(r.usage.total_tokens == r.usage.prompt_tokens + 7, "total = prompt + completion")
    # token ids as the prompt: counted as given
    ids = list(range(100, 113))
    c = client.completions.create(model="m", prompt=ids, max_tokens=3, temperature=0)
    check(c.usage.prompt_tokens == 13 and c.usage.completion_tokens == 3, f"completions usage {c.usage}")
    check(c.choices[0].finish_reason == "length", "completions finish")


def test_end_of_turn_and_stream_equals_whole():
    r = chat("Say hello.", max_tokens=200)
    text = r.choices[0].message.content
    check(r.choices[0].finish_reason == "stop", "the turn ends at the end-of-turn token")
    check("<|im_end|>" not in text and text.strip(), f"no special token text: {text!r}")
    check(r.usage.completion_tokens < 200, "stopped before the limit")
    s_text, s_finish, s_usage = streamed_text("Say hello.", max_tokens=200)
    check((s_text, s_finish) == (text, "stop"), f"streamed {s_text!r} == whole {text!r}")
    check(s_usage.completion_tokens == r.usage.completion_tokens and s_usage.prompt_tokens == r.usage.prompt_tokens, "same usage streamed")


def test_stop_strings():
    full = chat(PROMPTS[3], max_tokens=40).choices[0].message.content
    words = full.split()
    check(len(words) > 4, f"a long enough answer: {full!r}")
    stop = words[3]
    want = full[: full.index(stop)]
    r = chat(PROMPTS[3], max_tokens=40, stop=[stop, "\u0000never"])
    check(r.choices[0].message.content == want and r.choices[0].finish_reason == "stop", f"stop at {stop!r}: {r.choices[0].message.content!r} vs {want!r}")
    s_text, s_finish, _ = streamed_text(PROMPTS[3], max_tokens=40, stop=stop)
    check((s_text, s_finish) == (want, "stop"), f"streamed stop: {s_text!r}")
    wait_idle()


def test_seeds():
    a = chat(PROMPTS[1], temperature=1.0, seed=42, max_tokens=20).choices[0].message.content
    b = chat(PROMPTS[1], temperature=1.0, seed=42, max_tokens=20).choices[0].message.content
    c = [chat(PROMPTS[1], temperature=1.0, seed=s, max_tokens=20).choices[0].message.content for s in (43, 44)]
    check(a == b, "a seed reproduces its answer")
    check(any(x != a for x in c), "other seeds give other answers")


def test_logprobs():
    r = chat(PROMPTS[4], max_tokens=6, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    check(len(content) == r.usage.completion_tokens == 6, "one entry per token")
    for e in content:
        check(len(e.top_logprobs) == 3 and e.logprob <= 0, "three alternatives, log-probabilities")
        check(e.token == e.top_logprobs[0].token and abs(e.logprob - e.top_logprobs[0].logprob) < 1e-6, "greedy takes the most likely")
    check("".join(e.token for e in content) == r.choices[0].message.content, "the tokens spell the answer")
    c = client.completions.create(model="m", prompt="The sky is", max_tokens=4, temperature=0, logprobs=2)
    lp = c.choices[0].logprobs
    check(len(lp.tokens) == 4 and all(len(t) == 2 for t in lp.top_logprobs), "completions logprobs")
    check(lp.text_offset == sorted(lp.text_offset), "offsets grow")


def test_auth():
    bad = openai.OpenAI(base_url=BASE + "/v1", api_key="wrong", max_retries=0)
    try:
        bad.chat.completions.create(messages=user("hi"), **GREEDY)
        raise AssertionError("a wrong key is refused")
    except openai.AuthenticationError as e:
        check(e.status_code == 401 and e.body["type"] == "authentication_error", f"401 body {e.body}")
    status, _, body = raw("POST", "/v1/chat/completions", body=json.dumps({"messages": user("hi")}), headers={"Authorization": ""})
    check(status == 401 and body["error"]["type"] == "authentication_error", "no key: 401")
    status, _, _ = raw("GET", "/v1/models", headers={"Authorization": "Bearer nope"})
    check(status == 401, "models needs the key")


def test_bad_requests():
    cases = [
        (b"{not json", 400, None),
        (b'["a list"]', 400, None),
        (json.dumps({"messages": user("hi"), "temperature": "hot"}).encode(), 400, "temperature"),
        (json.dumps({"messages": []}).encode(), 400, "messages"),
        (json.dumps({"messages": [{"role": "user"}]}).encode(), 400, "messages[0].content"),
        (json.dumps({"messages": user("hi"), "n": 3}).encode(), 400, "n"),
        (json.dumps({"messages": user("hi"), "max_tokens": 0}).encode(), 400, "max_tokens"),
        (json.dumps({"messages": user("hi"), "top_p": 7}).encode(), 400, None),
        (json.dumps({"messages": user("hi"), "tools": [{"type": "function"}]}).encode(), 400, "tools"),
        ("\xff\xfe".encode("latin-1"), 400, None),
    ]
    for body, want, param in cases:
        status, _, data = raw("POST", "/v1/chat/completions", body=body)
        check(status == want and "message" in data["error"], f"{body[:40]!r}: {status} {data}")
        if param:
            check(data["error"]["param"] == param, f"param {data['error']['param']} for {body[:40]!r}")
    status, _, data = raw("POST", "/v1/completions", body=json.dumps({"prompt": [1, 10**9]}))
    check(status == 400 and "vocabulary" in data["error"]["message"], f"token outside the vocabulary: {data}")
    status, _, data = raw("GET", "/v1/nothing")
    check(status == 404 and data["error"]["type"] == "invalid_request_error", "404 as JSON")
    # a prompt longer than a sequence's context names both sizes
    try:
        client.completions.create(model="m", prompt=[100] * (N_CTX + 5), max_tokens=2)
        raise AssertionError("a prompt over the context is refused")
    except openai.BadRequestError as e:
        check(e.body["code"] == "context_length_exceeded" and str(N_CTX + 5) in e.body["message"] and str(N_CTX) in e.body["message"], f"{e.body}")
    # a body over --max-body
    big = json.dumps({"messages": user("x" * 70000)})
    status, _, data = raw("POST", "/v1/chat/completions", body=big)
    check(status == 413 and "bytes" in data["error"]["message"], f"413: {status} {data}")


def test_full_queue():
    """--parallel 8 --max-queue 2: of 16 long requests at once some get 503 with Retry-After."""
    wait_idle()

    def one(i):
        return raw("POST", "/v1/chat/completions", body=json.dumps({"messages": user(PROMPTS[i % 8]), "max_tokens": 32, "ignore_eos": True, "temperature": 0}))

    with cf.ThreadPoolExecutor(16) as ex:
        results = list(ex.map(one, range(16)))
    busy = [r for r in results if r[0] == 503]
    done = [r for r in results if r[0] == 200]
    check(len(busy) >= 6 and len(busy) + len(done) == 16, f"statuses {[r[0] for r in results]}")
    check(all(r[1].get("retry-after") and r[2]["error"]["type"] == "unavailable_error" for r in busy), "503 says when to retry")
    check(all(r[2]["usage"]["completion_tokens"] == 32 for r in done), "the others are answered")
    wait_idle()


def rgml_run(prompt, n):
    cmd = [RGML, "run", MODEL, "--chat", "--prompt", prompt, "--temp", "0", "-n", str(n), "--n-ctx", str(N_CTX), "--row-invariant"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return out.stdout[:-1] if out.stdout.endswith("\n") else out.stdout


def test_batch_invariance():
    """Eight concurrent greedy requests get the tokens each gets alone, and rgml run's."""
    wait_idle()
    alone = [chat(p, max_tokens=24, logprobs=True).choices[0] for p in PROMPTS]
    with cf.ThreadPoolExecutor(8) as ex:
        together = list(ex.map(lambda p: chat(p, max_tokens=24, logprobs=True).choices[0], PROMPTS))
    for p, a, t in zip(PROMPTS, alone, together):
        check(a.message.content == t.message.content, f"{p!r}: alone {a.message.content!r} together {t.message.content!r}")
        check([e.logprob for e in a.logprobs.content] == [e.logprob for e in t.logprobs.content], f"{p!r}: the same log-probabilities, bit for bit")
    # the server says whether a sequence's results are its lone run's (true for SmolLM2's
    # types with the products `rgml serve` and `run --row-invariant` choose)
    meta = raw("GET", "/v1/models")[2]["data"][0]["meta"]
    check(meta["rows_invariant"] is True, f"SmolLM2's products keep a row's bits: {meta}")
    for i in (0, 5):
        want = rgml_run(PROMPTS[i], 24)
        check(alone[i].message.content == want, f"rgml run: {want!r} vs served {alone[i].message.content!r}")


def test_disconnect_cancels():
    wait_idle()
    before = metrics().get('rgml_requests_ended_total{outcome="cancelled"}', 0)
    # a streaming client that leaves after two chunks
    s = client.chat.completions.create(messages=user("Count to a thousand."), max_tokens=2000, stream=True, extra_body={"ignore_eos": True}, **GREEDY)
    it = iter(s)
    next(it), next(it)
    s.response.close()
    # a waiting (non-streaming) client that leaves
    sock = socket.create_connection((HOST, PORT))
    body = json.dumps({"messages": user("Count to a thousand."), "max_tokens": 2000, "ignore_eos": True}).encode()
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() + b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    time.sleep(1.0)
    sock.close()
    m = wait_idle(timeout=30)
    check(m['rgml_requests_ended_total{outcome="cancelled"}'] >= before + 2, f"both cancelled: {m}")


def test_slow_and_many_connections():
    # headers that never finish: the server closes the connection after --timeout
    sock = socket.create_connection((HOST, PORT))
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
    sock.settimeout(30)
    t = time.time()
    check(sock.recv(1024) is not None and time.time() - t < 20, "late headers: closed")
    sock.close()
    # a body that stops arriving: 408
    sock = socket.create_connection((HOST, PORT))
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() + b"\r\nContent-Length: 100\r\n\r\n{\"mess")
    sock.settimeout(30)
    reply = sock.recv(4096)
    check(reply.startswith(b"HTTP/1.1 408"), f"late body: {reply[:60]!r}")
    sock.close()
    # hundreds of idle connections do not keep a client out
    idle = [socket.create_connection((HOST, PORT)) for _ in range(300)]
    r = chat(PROMPTS[2], max_tokens=4)
    check(r.usage.completion_tokens == 4, "served beside 300 idle connections")
    for s in idle:
        s.close()


def test_metrics():
    m = metrics()
    for name in ("rgml_tokens_generated_total", "rgml_prompt_tokens_total", "rgml_tokens_per_second", "rgml_queue_depth", "rgml_slots_busy", "rgml_requests_total"):
        check(name in m, f"{name} in /metrics")
    check(m["rgml_slots_total"] == 8 and m["rgml_tokens_generated_total"] > 100 and m['rgml_http_responses_total{status="200"}'] > 10, f"{m}")
    check(m['rgml_http_responses_total{status="503"}'] >= 6 and m['rgml_http_responses_total{status="401"}'] >= 3, "errors counted")


for name, f in list(globals().items()):
    if name.startswith("test_") and callable(f):
        f()
        print("ok:", name[5:], flush=True)
