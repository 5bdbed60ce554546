"""rgml serve's /v1/embeddings through the official OpenAI Python client, on the tiny
BERT fixture (tests/fixtures/embed). Run by cli/tests/serve.rs against a server it started:

    python3 openai_embeddings.py BASE_URL EMBEDDINGS_JSON MODEL_FILE_NAME

Each check prints "ok: NAME"; the first failure raises (exit status 1)."""

import json
import struct
import sys

import openai

BASE, REFS, FILE = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=BASE + "/v1", api_key="none", max_retries=0, timeout=60)
refs = json.load(open(REFS))
PROMPTS = refs["prompts"]
WANT = refs["files"][FILE]


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def max_abs(a, b):
    check(len(a) == len(b), f"lengths {len(a)} and {len(b)}")
    return max(abs(x - y) for x, y in zip(a, b))


def test_texts():
    # the client asks for base64 by default and decodes it
    r = client.embeddings.create(model="m", input=PROMPTS)
    check([d.index for d in r.data] == list(range(len(PROMPTS))), "one item per input, in order")
    for i, d in enumerate(r.data):
        want = WANT["pooled"]["cls"]["normalized"][i]
        check(max_abs(d.embedding, want) <= 1e-4, f"prompt {i}: {max_abs(d.embedding, want)} from llama.cpp's")
    n = sum(len(t) for t in WANT["tokens"])
    check(r.usage.prompt_tokens == n and r.usage.total_tokens == n, f"usage {r.usage} vs {n} tokens")
    check(r.model == "m" and r.object == "list", "model echoed")


def f32(v):
    """The values rounded to f32: a float answer's decimals parse back to the f32 the base64
    bytes hold."""
    return list(struct.unpack(f"<{len(v)}f", struct.pack(f"<{len(v)}f", *v)))


def test_float_and_token_ids():
    f = client.embeddings.create(model="m", input=PROMPTS[1], encoding_format="float")
    b = client.embeddings.create(model="m", input=PROMPTS[1])
    check(f32(f.data[0].embedding) == f32(b.data[0].embedding), "float and base64 carry the same values")
    ids = client.embeddings.create(model="m", input=[WANT["tokens"][1], WANT["tokens"][2]])
    check(ids.data[0].embedding == b.data[0].embedding, "token ids embed as their text")
    check(max_abs(ids.data[1].embedding, WANT["pooled"]["cls"]["normalized"][2]) <= 1e-4, "second id list")
    check(ids.usage.prompt_tokens == len(WANT["tokens"][1]) + len(WANT["tokens"][2]), "ids counted as given")


def test_errors():
    for kw, what in [(dict(input=""), "empty"), (dict(input=["a", ""]), "input[1]"),
                     (dict(input="the " * 70), "at most 64"), (dict(input="a", dimensions=32), "dimensions")]:
        try:
            client.embeddings.create(model="m", **kw)
            raise AssertionError(f"{kw} was embedded")
        except openai.BadRequestError as e:
            check(e.status_code == 400 and what in e.body["message"], f"{kw}: {e.body}")
    try:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        raise AssertionError("an embedding model generated text")
    except openai.APIStatusError as e:
        check(e.status_code == 501 and e.body["type"] == "not_supported_error", f"chat: {e.status_code} {e.body}")


for name, fn in list(globals().items()):
    if name.startswith("test_") and callable(fn):
        fn()
        print(f"ok: {name}", flush=True)
