"""Check `ctcbench bench` against the frameworks timed directly, without ctcbench.

Not a test: a benchmark script. Each framework runs in its own subprocess (TensorFlow and
Paddle segfault in one process) on one thread, times loss + gradient w.r.t. the logits the
way a user would write it, and prints a median per size; `ctcbench bench` is run on the same
sizes (or a bench run folder is read), and the table shows bench's kernel time next to the
direct time and their ratio (the goal: within +-30%).

    python benchmarks/direct_frameworks.py                 # 3 interleaved rounds
    python benchmarks/direct_frameworks.py --rounds 5 --repeat 7
    python benchmarks/direct_frameworks.py --bench-run reports/bench-x   # compare a saved run

Rounds are interleaved (each framework directly, then the same framework in the bench, back
to back; then the next framework; then the next round), ratios are taken pair by pair within
a round and their median over rounds is shown, so load on a shared machine hits both sides
alike; the min-max of the per-round ratios and the spread of the direct times over rounds say
how noisy the machine was.

What is timed directly (float64 except tf, one thread, problem built once, inputs already in the
framework's arrays; every target exactly L labels with no adjacent repeats, every input T frames):
  torch   F.ctc_loss(logits.log_softmax(-1), ...).sum().backward()       -> logits.grad
  optax   jax.jit(jax.value_and_grad(sum of optax.ctc_loss)) on the exact shape, compiled once
          (jax_enable_x64), outputs blocked on
  tf      tf.function of tf.nn.ctc_loss with sparse labels + tape.gradient, float32: traced,
          tf.nn.ctc_loss builds TF's CTCLossV2 op, which takes float32 only
  tf-eager  the same, float64, run eagerly (the C++ CTCLoss kernel), as the tf adapter runs it
  paddle  paddle.nn.functional.ctc_loss(reduction="none").sum().backward() -> logits.grad
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

SIZES = [(1000, 32, 100, 200), (200, 16, 50, 40), (50, 8, 20, 10)]  # (T, N, C, L)
# framework -> (bench backend, dtype): TF's tf.function path is float32 only (in a traced
# function tf.nn.ctc_loss builds the CTCLossV2 op, which refuses float64), so "tf" is timed in
# float32 and "tf-eager" in float64 eagerly, as the tf adapter runs float64
FRAMEWORKS = {"torch": ("torch", "float64"), "optax": ("optax", "float64"),
              "tf": ("tf", "float32"), "tf-eager": ("tf", "float64"),
              "paddle": ("warpctc", "float64")}
MIN_MEASUREMENT_S = 0.05  # as ctcbench.runtime.timing: loop a fast call to about this long


# -- the child: one framework, every size ---------------------------------------------------
def make_inputs(T, N, C, L, seed=0):
    import numpy as np
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(T, N, C)) * 2.0  # (T, N, C) float64
    targets = np.empty((N, L), dtype=np.int32)  # (N, L), labels 1..C-1, no adjacent repeats
    targets[:, 0] = rng.integers(1, C, size=N)
    for l in range(1, L):
        targets[:, l] = (targets[:, l - 1] - 1 + rng.integers(1, C - 1, size=N)) % (C - 1) + 1
    return logits, targets


def torch_step(logits, targets):
    import torch
    torch.set_num_threads(1)
    T, N, _ = logits.shape
    x = torch.from_numpy(logits).requires_grad_()
    tg = torch.from_numpy(targets).long()
    il, tl = torch.full((N,), T, dtype=torch.long), torch.full((N,), targets.shape[1], dtype=torch.long)

    def step():
        x.grad = None
        loss = torch.nn.functional.ctc_loss(x.log_softmax(-1), tg, il, tl, reduction="none")
        loss.sum().backward()
        return x.grad
    return step, "float64"


def optax_step(logits, targets):
    import jax
    import jax.numpy as jnp
    import optax
    jax.config.update("jax_enable_x64", True)
    T, N, C = logits.shape
    x = jnp.asarray(logits.transpose(1, 0, 2))  # (N, T, C)
    logit_pad = jnp.zeros((N, T))
    labels = jnp.asarray(targets)
    label_pad = jnp.zeros(targets.shape)

    def total(x):
        return optax.ctc_loss(x, logit_pad, labels, label_pad, blank_id=0).sum()
    fn = jax.jit(jax.value_and_grad(total))

    def step():
        value, grad = fn(x)
        return grad.block_until_ready()
    return step, "float64"


def tf_step(logits, targets, *, eager=False):
    import numpy as np
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    T, N, C = logits.shape
    x = tf.constant(logits if eager else logits.astype(np.float32))
    idx = np.argwhere(np.ones(targets.shape, bool)).astype(np.int64)
    labels = tf.SparseTensor(idx, targets.reshape(-1), targets.shape)
    il = tf.constant(np.full(N, T, np.int32))

    def fn(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.nn.ctc_loss(labels=labels, logits=x, label_length=None, logit_length=il,
                                  logits_time_major=True, blank_index=0)
        return loss, tape.gradient(loss, x)
    if not eager:
        fn = tf.function(fn)

    def step():
        loss, grad = fn(x)
        return grad.numpy()
    return step, "float64" if eager else "float32"


def paddle_step(logits, targets):
    import numpy as np
    import paddle
    paddle.set_device("cpu")
    if hasattr(paddle, "set_num_threads"):
        paddle.set_num_threads(1)
    T, N, C = logits.shape
    x = paddle.to_tensor(logits, stop_gradient=False)
    tg = paddle.to_tensor(targets)
    il, tl = paddle.to_tensor(np.full(N, T, np.int64)), paddle.to_tensor(
        np.full(N, targets.shape[1], np.int64))

    def step():
        x.clear_gradient()
        loss = paddle.nn.functional.ctc_loss(x, tg, il, tl, blank=0, reduction="none")
        loss.sum().backward()
        return x.grad.numpy()
    return step, "float64"


STEPS = {"torch": torch_step, "optax": optax_step, "tf": tf_step,
         "tf-eager": lambda logits, targets: tf_step(logits, targets, eager=True),
         "paddle": paddle_step}


def child(framework: str, sizes, repeat: int) -> dict:
    out = {}
    for T, N, C, L in sizes:
        logits, targets = make_inputs(T, N, C, L)
        step, dtype = STEPS[framework](logits, targets)
        t0 = time.perf_counter()
        step()
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        step()
        number = min(max(math.ceil(MIN_MEASUREMENT_S / max(time.perf_counter() - t0, 1e-6)), 1), 100)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(number):
                step()
            times.append((time.perf_counter() - t0) / number)
        out[f"{T},{N},{C},{L}"] = {"median_s": statistics.median(times), "times_s": times,
                                   "first_call_s": first, "dtype": dtype}
    return out


# -- the parent: interleave rounds, run the bench, print the table -----------------------------
def one_thread_env() -> dict:
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "CTCBENCH_THREADS"):
        env[var] = "1"
    env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return env


def run_direct(framework, sizes, repeat) -> dict:
    spec = ";".join(",".join(map(str, s)) for s in sizes)
    proc = subprocess.run([sys.executable, __file__, "--child", framework, "--sizes", spec,
                           "--repeat", str(repeat)], capture_output=True, text=True,
                          env=one_thread_env())
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        return {"error": f"exit {proc.returncode}: {tail}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_rows_from(run_dir) -> dict:
    with open(os.path.join(run_dir, "bench.json")) as f:
        rows = json.load(f)
    return {(r["backend"], f"{r['T']},{r['N']},{r['C']},{r['L']}", r["dtype"]): r for r in rows
            if r.get("status") == "ok"}


def run_bench(sizes, repeat, frameworks) -> dict:
    """One `ctcbench bench` run per dtype the frameworks were timed in; rows by
    (backend, "T,N,C,L", dtype)."""
    rows = {}
    for dtype in sorted({FRAMEWORKS[fw][1] for fw in frameworks}):
        names = sorted({FRAMEWORKS[fw][0] for fw in frameworks if FRAMEWORKS[fw][1] == dtype})
        rows.update(_bench_once(sizes, repeat, dtype, names))
    return rows


def _bench_once(sizes, repeat, dtype, names) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        grid = os.path.join(tmp, "grid.csv")
        with open(grid, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow("TNCL")
            w.writerows(sizes)
        args = [sys.executable, "-c", "from ctcbench.cli import cli; cli()", "bench",
                "--grid", grid, "--repeat", str(repeat), "--threads", "1", "--dtype", dtype,
                "--out", os.path.join(tmp, "run"), "--format", "json"]
        for name in names:
            args += ["--backend", name]
        proc = subprocess.run(args, capture_output=True, text=True, env=one_thread_env())
        if proc.returncode != 0:
            raise SystemExit(f"ctcbench bench failed: {proc.stderr[-2000:]}")
        return bench_rows_from(os.path.join(tmp, "run"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--bench-run", default=None, help="a bench run folder to compare instead "
                   "of running the bench (then only the direct side is repeated)")
    p.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--sizes", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        sizes = [tuple(int(x) for x in s.split(",")) for s in a.sizes.split(";")]
        print(json.dumps(child(a.child, sizes, a.repeat)))
        return 0
    frameworks = a.frameworks.split(",")
    direct = {fw: [] for fw in frameworks}  # fw -> one dict per round
    bench = []  # one {(backend, size): row} per round
    started = time.time()
    for r in range(a.rounds):
        rows = {}
        for fw in frameworks:  # each framework directly, then in the bench, back to back
            direct[fw].append(run_direct(fw, SIZES, a.repeat))
            if a.bench_run is None:
                rows.update(run_bench(SIZES, a.repeat, [fw]))
            print(f"round {r + 1}: {fw} done ({time.time() - started:.0f} s)", file=sys.stderr)
        bench.append(rows)
    if a.bench_run is not None:
        bench = [bench_rows_from(a.bench_run)]
    print(f"{a.rounds} rounds x {a.repeat} repeats, one thread; "
          f"{time.time() - started:.0f} s; load average {os.getloadavg()[0]:.2f} at the end")
    head = (f"{'framework':<9} {'dtype':<8} {'T,N,C,L':<15} {'direct ms':>10} {'bench ms':>10} "
            f"{'bench/direct':>12} {'per-round min-max':>18} {'direct spread':>13}")
    print(head)
    print("-" * len(head))
    for fw in frameworks:
        name, dtype = FRAMEWORKS[fw]
        for size in SIZES:
            key = ",".join(map(str, size))
            errors = [d["error"] for d in direct[fw] if "error" in d]
            d = [x[key]["median_s"] for x in direct[fw] if key in x]
            b = [x[(name, key, dtype)]["time_median_s"] for x in bench if (name, key, dtype) in x]
            if not d or not b:
                why = errors[0] if errors else "no bench row"
                print(f"{fw:<9} {dtype:<8} {key:<15} {'':>10} {'':>10} {'':>12}  {why}")
                continue
            pairs = [bi / di for bi, di in zip(b, d)] if len(b) == len(d) else [
                statistics.median(b) / di for di in d]
            dm, bm = statistics.median(d), statistics.median(b)
            spread = (max(d) - min(d)) / dm if len(d) > 1 else 0.0
            print(f"{fw:<9} {dtype:<8} {key:<15} {dm * 1e3:>10.3g} {bm * 1e3:>10.3g} "
                  f"{statistics.median(pairs):>12.2f} "
                  f"{min(pairs):>8.2f}-{max(pairs):<9.2f} {spread:>12.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
