#!/usr/bin/env python3
"""Writes tests/fixtures/graph_cases_grad.jsonl: graph cases with gradients
(docs/GRAPH_CASES.md, "Gradients"), each loss written again in JAX with
float64 and its gradients taken by jax.grad, the reference `rgml eval` checks
rgml's backward graphs against; and cases rgml must refuse (in-place hazards).

  python3 scripts/make_grad_cases.py        (needs jax; pip install jax)

Tensors are in ggml's order: a node of ne [n0, n1] is a numpy array of shape
(n1, n0), element (i0, i1) at [i1, i0].
"""

import json
import os

import numpy as np

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "graph_cases_grad.jsonl")
rng = np.random.default_rng(2026)


def values(ne):
    """Values k/16 in [-2, 2): exact in f32, shape (n1, n0) for ne [n0, n1]."""
    n0, n1 = ne
    return (rng.integers(-32, 32, size=(n1, n0)) / 16.0).astype(np.float64)


def inp(name, v):
    n1, n0 = v.shape
    return {"name": name, "op": "input", "src": [], "ne": [n0, n1, 1, 1], "data": [float(x) for x in v.reshape(-1)]}


def node(name, op, *src, **kw):
    return {"name": name, "op": op, "src": list(src), **kw}


def mul_mat(a, b):
    # ggml: out[i1, i0] = sum_k a[i0, k] b[i1, k]; arrays are (rows, k)
    return b @ a.T


def xent(logits, labels):
    lsm = jax.nn.log_softmax(logits, axis=1)
    return -jnp.sum(labels * lsm) / logits.shape[0]


def grads(f, params):
    g = jax.grad(f, argnums=tuple(range(len(params))))(*params)
    return [[float(x) for x in np.asarray(gi).reshape(-1)] for gi in g]


cases = []

# an MLP layer's cross-entropy: W [6, 4] (K 6, 4 classes), b [4, 1], x [6, 5]
W, x = values((6, 4)), values((6, 5))
b = values((4, 1))  # ne [4, 1]: shape (1, 4), broadcast over the 5 rows
lab = np.zeros((5, 4))
lab[np.arange(5), [0, 3, 1, 2, 1]] = 1.0
f = lambda W, b, x: xent(mul_mat(W, x) + b, lab)  # noqa: E731
cases.append({
    "id": "grad-mlp-xent", "atol": 1e-5, "rtol": 1e-4,
    "nodes": [inp("W", W), inp("b", b), inp("x", x), inp("labels", lab),
              node("h", "mul_mat", "W", "x"), node("logits", "add", "h", "b"),
              node("loss", "cross_entropy_loss", "logits", "labels")],
    "outputs": ["loss"], "loss": "loss", "params": ["W", "b", "x"],
    "expected_grads": dict(zip(["W", "b", "x"], grads(f, [W, b, x]))),
})

# broadcasting div and mul, sum
a, c = values((3, 4)), np.abs(values((1, 4))) + 0.5
f = lambda a, c: jnp.sum((a * a) / c)  # noqa: E731
cases.append({
    "id": "grad-broadcast-div", "atol": 1e-5, "rtol": 1e-4,
    "nodes": [inp("a", a), inp("c", c), node("aa", "mul", "a", "a"), node("q", "div", "aa", "c"),
              node("loss", "sum", "q")],
    "outputs": ["loss"], "loss": "loss", "params": ["a", "c"],
    "expected_grads": dict(zip(["a", "c"], grads(f, [a, c]))),
})

# a transposed, copied, partly viewed parameter; unary ops; softmax; sum_rows
x, w = values((4, 3)), values((2, 3))
def f(x, w):  # noqa: E302
    t = x.T  # ne [3, 4]: shape (4, 3)
    v = t[:3, 1:3]  # view of ne [2, 3] at offset 4 bytes (columns 1..2 of rows 0..2), stride 12
    s = jax.nn.softmax(x, axis=1)
    return jnp.sum(v * w) + jnp.sum(s * s) + jnp.sum(jnp.sum(jnp.exp(x) * jax.nn.silu(x), axis=1))
cases.append({
    "id": "grad-views-unary-softmax", "atol": 1e-5, "rtol": 1e-4,
    "nodes": [inp("x", x), inp("w", w), node("t", "transpose", "x"), node("tc", "cont", "t"),
              node("v", "view", "tc", view_ne=[2, 3], view_nb=[12], offset=4),
              node("vw", "mul", "v", "w"), node("s1", "sum", "vw"),
              node("s", "soft_max", "x"), node("ss", "mul", "s", "s"), node("s2", "sum", "ss"),
              node("e", "exp", "x"), node("si", "silu", "x"), node("es", "mul", "e", "si"),
              node("r", "sum_rows", "es"), node("s3", "sum", "r"),
              node("l1", "add", "s1", "s2"), node("loss", "add", "l1", "s3")],
    "outputs": ["loss"], "loss": "loss", "params": ["x", "w"],
    "expected_grads": dict(zip(["x", "w"], grads(f, [x, w]))),
})

# in-place ops nothing saves: allowed, and differentiated through
x, c = values((4, 2)), values((4, 2))
f = lambda x: jnp.sum(jnp.exp(0.5 * (x * c + c)))  # noqa: E731
cases.append({
    "id": "grad-inplace-allowed", "atol": 1e-5, "rtol": 1e-4,
    "nodes": [inp("x", x), inp("c", c), node("h", "mul", "x", "c"), node("h2", "add_inplace", "h", "c"),
              node("h3", "scale_inplace", "h2", s=0.5), node("e", "exp_inplace", "h3"), node("loss", "sum", "e")],
    "outputs": ["loss"], "loss": "loss", "params": ["x"],
    "expected_grads": {"x": grads(f, [x])[0]},
})

# the seeds' scenes, refused when the backward graph is built
x, c = values((4, 1)), values((4, 1))
cases.append({
    "id": "hazard-saved-value-overwritten",
    "nodes": [inp("x", x), inp("c", c), node("h", "mul", "x", "c"), node("y", "silu", "h"),
              node("bump", "add_inplace", "h", "c"), node("loss", "sum", "y")],
    "outputs": ["loss"], "loss": "loss", "params": ["x"],
    "expected_error": "in-place hazard: the in-place add (bump) overwrites h, which silu (y) saved",
})
cases.append({
    "id": "hazard-parameter-written",
    "nodes": [inp("x", x), inp("c", c), node("xs", "scale_inplace", "x", s=2.0), node("m", "mul", "xs", "c"),
              node("loss", "sum", "m")],
    "outputs": ["loss"], "loss": "loss", "params": ["x"],
    "expected_error": "writes x, a parameter that needs a gradient",
})
cases.append({
    "id": "hazard-own-gradient",
    "nodes": [inp("x", x), inp("c", c), node("h", "mul", "x", "c"), node("sq", "sqr_inplace", "h"),
              node("loss", "sum", "sq")],
    "outputs": ["loss"], "loss": "loss", "params": ["x"],
    "expected_error": "overwrites h, which its own gradient reads",
})

with open(OUT + ".tmp", "w") as out:
    for case in cases:
        out.write(json.dumps(case) + "\n")
os.replace(OUT + ".tmp", OUT)
print(f"{len(cases)} cases -> {OUT}")
