#!/usr/bin/env python3
"""The digits MLP of examples/digits.rs in JAX (CPU), for a speed comparison.

Same data (tests/fixtures/digits/digits.csv, pixels / 16), same fixed split
(every fifth row held out), same model (64 -> 128 -> 10, ReLU, He-uniform
weights, zero biases), same loss (mean cross-entropy), same optimizer (AdamW
as torch.optim.AdamW: lr 3e-3, betas 0.9 / 0.999, eps 1e-8, weight decay
0.01), same batch (32, the last partial batch left out) and epochs. The step
is one jitted function; the first epoch (compilation) is not timed.

With --rgml BIN it runs rounds alternating with rgml's example (BIN, built by
`cargo build --release --example digits`), both on --threads threads, and
prints each side's time per epoch and the ratio jax / rgml per round and the
median (above 1: rgml faster).

  python3 scripts/digits_jax.py [--epochs 40] [--threads 2] [--rgml target/release/examples/digits] [--rounds 3]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time


def jax_round(epochs, threads):
    os.environ["XLA_FLAGS"] = f"--xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'} intra_op_parallelism_threads={threads}"
    import jax
    import jax.numpy as jnp
    import numpy as np

    path = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "digits", "digits.csv")
    raw = np.loadtxt(path, delimiter=",", dtype=np.float32)
    x_all, y_all = raw[:, :64] / 16.0, raw[:, 64].astype(np.int32)
    test = np.arange(len(raw)) % 5 == 4
    xtr, ytr, xte, yte = x_all[~test], y_all[~test], x_all[test], y_all[test]
    rng = np.random.default_rng(1)

    def layer(n_in, n_out):
        b = np.sqrt(6.0 / n_in)
        return [jnp.asarray(rng.uniform(-b, b, (n_in, n_out)).astype(np.float32)), jnp.zeros((n_out,), jnp.float32)]

    params = layer(64, 128) + layer(128, 10)

    def forward(p, x):
        h = jax.nn.relu(x @ p[0] + p[1])
        return h @ p[2] + p[3]

    def loss_fn(p, x, y):
        logits = forward(p, x)
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

    lr, b1, b2, eps, wd = 3e-3, 0.9, 0.999, 1e-8, 0.01

    @jax.jit
    def step(p, m, v, t, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        out_p, out_m, out_v = [], [], []
        for pi, mi, vi, gi in zip(p, m, v, g):
            pi = pi * (1 - lr * wd)
            mi = b1 * mi + (1 - b1) * gi
            vi = b2 * vi + (1 - b2) * gi * gi
            mh = mi / (1 - b1 ** t)
            vh = vi / (1 - b2 ** t)
            out_p.append(pi - lr * mh / (jnp.sqrt(vh) + eps))
            out_m.append(mi)
            out_v.append(vi)
        return out_p, out_m, out_v, loss

    m = [jnp.zeros_like(q) for q in params]
    v = [jnp.zeros_like(q) for q in params]
    t, times = 0, []
    for epoch in range(epochs + 1):
        order = np.random.default_rng(epoch).permutation(len(xtr))
        batches = [(jnp.asarray(xtr[order[i:i + 32]]), jnp.asarray(ytr[order[i:i + 32]]))
                   for i in range(0, len(order) - 31, 32)]
        start = time.perf_counter()
        for xb, yb in batches:
            t += 1
            params, m, v, loss = step(params, m, v, float(t), xb, yb)
        loss.block_until_ready()
        if epoch > 0:  # epoch 0 compiles
            times.append(time.perf_counter() - start)
    acc = float(jnp.mean(jnp.argmax(forward(params, jnp.asarray(xte)), axis=1) == jnp.asarray(yte)))
    return statistics.mean(times) * 1e3, acc


def rgml_round(binary, epochs, threads):
    out = subprocess.run([binary, "--epochs", str(epochs), "--threads", str(threads)], capture_output=True, text=True,
                         check=True).stdout
    ms = float(re.search(r"time per epoch: ([0-9.]+) ms", out).group(1))
    acc = float(re.search(r"test accuracy: ([0-9.]+)", out).group(1))
    return ms, acc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rgml", help="rgml's digits example binary: alternate rounds with it")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if not a.rgml:
        ms, acc = jax_round(a.epochs, a.threads)
        print(f"jax: time per epoch {ms:.2f} ms, test accuracy {acc:.3f}")
        return
    ratios = []
    for r in range(a.rounds):
        # each JAX round in a fresh process, so its compilation and threads start alike
        jax_out = subprocess.run([sys.executable, __file__, "--epochs", str(a.epochs), "--threads", str(a.threads)],
                                 capture_output=True, text=True, check=True).stdout
        jms = float(re.search(r"time per epoch ([0-9.]+) ms", jax_out).group(1))
        jacc = float(re.search(r"test accuracy ([0-9.]+)", jax_out).group(1))
        rms, racc = rgml_round(a.rgml, a.epochs, a.threads)
        ratios.append(jms / rms)
        print(f"round {r + 1}: jax {jms:.2f} ms/epoch (test {jacc:.3f}) | rgml {rms:.2f} ms/epoch (test {racc:.3f}) | jax/rgml {jms / rms:.2f}")
    print(f"median jax/rgml time per epoch: {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
