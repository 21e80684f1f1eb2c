"""A measured roofline of the numba kernel's fast path: its parts timed one by one on this
machine, and the cost of a DP cell if the kernel were only those parts.

Not a test: a benchmark script. One thread, process CPU time, best of ``--repeat``; every loop
is compiled before it is timed, with the kernel's flags (``rows.JIT``, without the disk
cache). The CPU line comes first: these figures hold for that CPU only.

    python benchmarks/roofline.py                        # T,N,C,L = 1000,32,100,200
    python benchmarks/roofline.py --size 200,16,50,40 --repeat 11
    python benchmarks/roofline.py --kernel               # and the kernel itself against it

Parts: ns per element of ``primitives.exp_nonpositive`` over C (and 1000) non-positive floats
in L1; ns per frame of ``rows.softmax_frame_at`` of one (C,) frame (its gather included)
and of the backward pass's gather and scatter of a frame; GB/s of ``b[i] = a[i] * k`` (bytes
read + written) and of a sum (bytes read) over buffers in L2, past L2 (16 MiB) and larger
(256 MiB); ns per cell of ``forward_row`` and ``backward_row`` in L1
(``benchmarks/row_functions.py``).

Estimate per DP cell, S = 2L + 1 states: forward row + backward row + (softmax + gather and
scatter) / S + the forward table's traffic (a frame's row, (2L + 3) 8 bytes, written once and
read once: a copy's rate where the table fits, L2, L3 or memory) + the logits read and the
gradient written (C 8 bytes each a frame, at the rate where T N C 8 bytes fit). A table past
``WHOLE_TABLE_BYTES`` is kept one segment at a time and its rows recomputed once
(``rows.segment_frames``): charged as such. ``--kernel`` times ``ctc_batch`` at that size
(random and peaked logits; the estimate is the fast path's, so the samples' paths are shown).
"""
from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np

from ctcbench.environment import cpu_description, cpu_line

MiB = 1 << 20
STREAMS = {"L3": 16 * MiB, "memory": 256 * MiB}  # buffer bytes past L2; in L2: half of L2
WORK = 4_000_000  # elements (or cells) per timed call: a few ms


def level(nbytes: int, l2: int | None, l3: int | None) -> str:
    """The stream a working set of ``nbytes`` is charged at: ``"L2"`` if it fits ``l2`` bytes,
    ``"L3"`` if it fits ``l3`` (unknown: the 16 MiB buffer), else ``"memory"``."""
    if l2 is not None and nbytes <= l2:
        return "L2"
    return "L3" if nbytes <= (l3 or STREAMS["L3"]) else "memory"


def estimate(T: int, N: int, C: int, L: int, *, ns: dict, copy_gbs: dict, kept: int,
             l2: int | None, l3: int | None) -> dict[str, float]:
    """ns per DP cell of the fast path, by part (and ``"total"``), given the parts' timings
    ``ns`` (``forward``, ``backward``: ns per cell; ``softmax``, ``gather/scatter``: ns per
    frame), copy rates ``copy_gbs`` per stream (bytes per ns) and ``kept``, the forward rows
    kept at a time (``segment_frames(T, L)``; below ``T``, all but the last segment's rows are
    computed twice)."""
    S, W = 2 * L + 1, 2 * L + 3
    redo = (-(-T // kept) - 1) * (kept - 1) / T  # recomputed rows per frame
    table = copy_gbs[level(kept * W * 8, l2, l3)]
    io = copy_gbs[level(T * N * C * 8, l2, l3)]
    parts = {"forward row": ns["forward"] * (1 + redo), "backward row": ns["backward"],
             "softmax": ns["softmax"] / S, "gather/scatter": ns["gather/scatter"] / S,
             "forward table": (2 + redo) * W * 8 / S / table,  # written (1 + redo), read once
             "logits/gradient": 2 * C * 8 / S / io}
    return {**parts, "total": sum(parts.values())}


def loops():
    """The compiled loops timed here (numba is imported only now, after ``main`` chose its
    cache folder)."""
    from numba import njit

    from ctcbench.backends.numba.primitives import exp_nonpositive
    from ctcbench.backends.numba.rows import (JIT, gather_emissions_at, gradient_frame,
                                              softmax_frame_at)
    jit = njit(**{**JIT, "cache": False})
    # the parts called as the kernel calls them (the *_at functions, on (1, 1, C) rows)

    @jit
    def exp_loop(x, out, reps):  # x (C,) non-positive
        for _ in range(reps):
            for c in range(x.shape[0]):
                out[c] = exp_nonpositive(x[c])

    @jit
    def softmax_loop(x, row, tg, L, e, reps):  # x, row (1, 1, C); e (L + 2,)
        ok = True
        for _ in range(reps):
            ok &= softmax_frame_at(x, row, 0, 0, 0, tg, L, 0, e)
        return ok

    @jit
    def gather_scatter(row, tg, L, e, P, reps):  # as the backward pass does a frame
        for _ in range(reps):
            gather_emissions_at(row, 0, 0, tg, L, 0, e)
            # the kernel's zinv is 1e-300 here: row stays as it is
            gradient_frame(row, 0, 0, 0, 1.0, 0.0, 1e-300, tg, P, L)

    @jit
    def scale(a, b, k, reps):
        for _ in range(reps):
            for i in range(a.shape[0]):
                b[i] = a[i] * k

    @jit
    def total(a, reps):
        s = 0.0
        for _ in range(reps):
            for i in range(a.shape[0]):
                s += a[i]
        return s

    return exp_loop, softmax_loop, gather_scatter, scale, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="1000,32,100,200", help="T,N,C,L of the estimate")
    parser.add_argument("--repeat", type=int, default=7, help="timed calls per part (best)")
    parser.add_argument("--kernel", action="store_true",
                        help="also time backends/numba/kernels.py at that size")
    args = parser.parse_args()
    T, N, C, L = (int(v) for v in args.size.split(","))
    cpu = cpu_description()
    print(cpu_line(cpu), flush=True)
    # as benchmarks/numba_kernel.py: nothing compiled here goes into the project's disk cache
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="numba-roofline-")
    from ctcbench.backends.numba.rows import segment_frames
    from row_functions import best_time, parts
    exp_loop, softmax_loop, gather_scatter, scale, total = loops()
    best = lambda call: best_time(call, args.repeat)
    rng = np.random.default_rng(0)

    rates = []
    for c in sorted({C, 1000}):
        x, out = -rng.uniform(0, 30, c), np.empty(c)  # (c,)
        reps = WORK // c
        rates.append(f"{best(lambda: exp_loop(x, out, reps)) / (reps * c) * 1e9:.3f} ns at C={c}")
    print("exp_nonpositive, per element in L1: " + ", ".join(rates))
    x, row = rng.standard_normal((1, 1, C)), np.empty((1, 1, C))  # (1, 1, C) one frame
    tg, e, P = rng.integers(1, C, L), np.empty(L + 2), rng.uniform(0, 1, L)  # (L,) (L+2,) (L,)
    frames = WORK // max(C, L)
    ns = {"softmax": best(lambda: softmax_loop(x, row, tg, L, e, frames)) / frames * 1e9,
          "gather/scatter": best(lambda: gather_scatter(row, tg, L, e, P, frames)) / frames * 1e9}
    print(f"softmax_frame_at at C={C}, L={L}: {ns['softmax']:.1f} ns a frame "
          f"({ns['softmax'] / C:.3f} a logit); gather and scatter: {ns['gather/scatter']:.1f} "
          "ns a frame")

    l2, l3 = ((cpu["caches"].get(k) or {}).get("bytes") for k in ("L2", "L3"))
    copy_gbs = {}
    for name, nbytes in {"L2": (l2 or 2 * MiB) // 2, **STREAMS}.items():
        buf = np.ones(nbytes // 8)  # (n,) a: the first half, b: the second
        a, b = buf[:buf.size // 2], buf[buf.size // 2:]
        reps = max(1, 256 * MiB // nbytes)
        copy_gbs[name] = 2 * a.nbytes * reps / best(lambda: scale(a, b, 1.0, reps)) / 1e9
        read = buf.nbytes * reps / best(lambda: total(buf, reps)) / 1e9
        fits = level(nbytes, l2, l3)
        print(f"stream {name:6} ({nbytes / MiB:g} MiB, "
              f"{'past L3' if fits == 'memory' else 'fits ' + fits}): "
              f"b = a * k {copy_gbs[name]:.1f} GB/s, sum {read:.1f} GB/s")
        del buf, a, b

    calls = parts(L, C, np.float64, WORK // (2 * L + 1), rng)
    cells = (2 * L + 1) * (WORK // (2 * L + 1))
    for k in ("forward", "backward"):
        ns[k] = best(calls[k]) / cells * 1e9
    print(f"rows at L={L} in L1: forward {ns['forward']:.3f}, backward {ns['backward']:.3f} "
          "ns a cell")

    kept = segment_frames.py_func(T, L)
    est = estimate(T, N, C, L, ns=ns, copy_gbs=copy_gbs, kept=kept, l2=l2, l3=l3)
    table = kept * (2 * L + 3) * 8
    kept_text = "" if kept == T else f"{kept} frames of it at a time, "
    print(f"roofline at T={T} N={N} C={C} L={L} (forward table {kept_text}{table / MiB:.2f} MiB "
          f"a sample, charged at {level(table, l2, l3)}), ns per DP cell:")
    for part, value in est.items():
        print(f"  {part:16} {value:7.3f}")
    if args.kernel:
        from numba_kernel import load_kernel, problem
        kernel = load_kernel(str(Path(__file__).resolve().parents[1] / "backends"
                                 / "numba" / "kernels.py"))
        for logits in ("random", "peaked"):
            call = problem(T, N, C, L, logits_kind=logits)
            t = best(lambda: kernel(call, 1)) / (T * N * (2 * L + 1)) * 1e9
            print(f"kernel, {logits} logits: {t:.3f} ns a cell = {t / est['total']:.2f} x the "
                  f"roofline, gap {t - est['total']:+.3f} ns; samples per path (FAST, BLOCKED, "
                  f"LOG_SPACE, FAST64) {np.bincount(call[-1], minlength=4).tolist()}", flush=True)


if __name__ == "__main__":
    main()
