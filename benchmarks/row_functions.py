"""Time the numba kernel's parts one by one: a forward row, a backward row, a softmax frame.

Not a test: a benchmark script, behind the figures of docs/numba.md's "Known limits" (why
float32 rows are not faster at small ``L``, and what a frame's softmax costs). Each part of
``ctcbench.backends.numba.rows`` is called ``--frames`` times in a compiled loop, on rows scaled
as in the kernel (by one over the previous row's sum) and started afresh every ``RESTART``
frames, so that no entry decays into subnormals (emissions in [0.3, 1]: 0.3^64 = 3e-34 stays
above float32's smallest normal). One thread; process CPU time, best of ``--repeat``; float64 and
float32 alternate within each repeat, so load on a shared machine hits them alike.

    python benchmarks/row_functions.py                 # L = 40, 200; C = 20, 50, 100
    python benchmarks/row_functions.py --L 40 --C 50 --repeat 15

Prints ns per cell (``2L + 1`` states) for the rows, as the kernel runs them (a blank and a
label per iteration from ``MERGE_MIN_L`` labels on, two loops below), ns per frame for the
softmax (with its gather of the ``L + 1`` emissions) and, each timed alone, its max, its exp
loop and its gather; and a line fitted to the softmax over ``C``: a frame's fixed cost and the
cost of a logit.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from numba import njit

from ctcbench.backends.numba.primitives import exp_nonpositive
from ctcbench.backends.numba.rows import (FASTMATH, MERGE_MIN_L, backward_row_at,
                                          backward_row_split_at, forward_row_at,
                                          forward_row_split_at, gather_emissions_at,
                                          row_max, softmax_frame_at)

LOOP = dict(fastmath=FASTMATH, error_model="numpy")  # as the kernel's, without the disk cache
RESTART = 64
# The loops call the parts as the kernels do: the *_at functions, given tables and indices (a
# row view made in a loop costs two atomic reference counts, docs/numba.md step 19).


@njit(**LOOP)
def row_loop(rows, start, e, skip, a, P, L, frames, backward):
    """``frames`` forward rows (or backward ones, against the forward row ``a (1, W)``), each
    made from the one before, ping-ponging between ``rows[0]`` and ``rows[1]``."""
    one = rows.dtype.type(1.0)
    s = one  # the previous row's sum
    nb, cb = rows[0], rows[1]  # the backward pass's rows, swapped each frame as the kernel's
    for t in range(frames):
        prev = t % 2
        if t % RESTART == 0:
            for i in range(rows.shape[1]):
                rows[prev, i] = start[i]
            s = one
        if backward and L >= MERGE_MIN_L:
            s, zb, zl = backward_row_at(nb, cb, e, one / s, skip, a, 0, P, L)
        elif backward:
            s, zb, zl = backward_row_split_at(nb, cb, e, one / s, skip, a, 0, P, L)
        elif L >= MERGE_MIN_L:
            s = forward_row_at(rows, prev, 1 - prev, e, one / s, skip, L)
        else:
            s = forward_row_split_at(rows, prev, 1 - prev, e, one / s, skip, L)
        nb, cb = cb, nb
    return s


@njit(**LOOP)
def softmax_frames(x, out, tg, L, e):
    """The softmax (and gather) of each frame of ``x (T, 1, C)`` into ``out (T, 1, C)``."""
    ok = True
    for t in range(x.shape[0]):
        ok &= softmax_frame_at(x, out, t, 0, 0, tg, L, 0, e)
    return ok


@njit(**LOOP)
def max_at(x, t):
    return row_max(x[t, 0])


@njit(**LOOP)
def exp_at(x, out, t):
    row, xt = out[t, 0], x[t, 0]
    for c in range(xt.shape[0]):
        row[c] = exp_nonpositive(np.float64(xt[c]) - 4.0)


@njit(**LOOP)
def softmax_pieces(x, out, tg, L, e, piece):
    """One piece of the softmax per frame of ``x (T, 1, C)``: 0 the max, 1 the exp loop, 2
    the gather."""
    m = 0.0
    for t in range(x.shape[0]):
        if piece == 0:
            m += max_at(x, t)
        elif piece == 1:
            exp_at(x, out, t)
        else:
            gather_emissions_at(out, t, 0, tg, L, 0, e)
    return m


def best_time(call, repeat: int) -> float:
    """The least process CPU time of ``repeat`` calls of ``call``, after one untimed call
    (which compiles and warms up)."""
    call()  # compile, warm up
    times = []
    for _ in range(repeat):
        c0 = time.process_time()
        call()
        times.append(time.process_time() - c0)
    return min(times)


def parts(L: int, C: int, dtype, frames: int, rng):
    """Calls of the three parts at ``L`` labels and ``C`` classes, in ``dtype``."""
    W = 2 * L + 3
    start = np.zeros(W, dtype)  # (W,) every state alike, the two zeros kept
    start[:L + 1] = start[L + 2:2 * L + 2] = 1.0 / (2 * L + 1)
    rows, back = np.zeros((2, W), dtype), np.zeros((2, W), dtype)  # (2, W) ping-pong rows
    e = rng.uniform(0.3, 1.0, L + 2).astype(dtype)  # (L + 2,) emissions
    e[L + 1] = 0.0
    skip = np.ones(L + 1, dtype)  # (L + 1,) in the rows' dtype, as the kernel copies it
    skip[L] = 0.0
    P = np.zeros(L, dtype)  # (L,)
    x = rng.standard_normal((frames, 1, C)).astype(dtype)  # (frames, 1, C) logits, as the
    # float32 compute gets them (float32 input)
    out = np.empty((frames, 1, C), dtype)
    tg = rng.integers(1, C, L).astype(np.int64)  # (L,)
    a = start.reshape(1, W)  # (1, W) the forward row of the backward rows
    return {"forward": lambda: row_loop(rows, start, e, skip, a, P, L, frames, False),
            "backward": lambda: row_loop(back, start, e, skip, a, P, L, frames, True),
            "softmax": lambda: softmax_frames(x, out, tg, L, e),
            "max": lambda: softmax_pieces(x, out, tg, L, e, 0),
            "exp": lambda: softmax_pieces(x, out, tg, L, e, 1),
            "gather": lambda: softmax_pieces(x, out, tg, L, e, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--L", default="40,200", help="labels, comma separated")
    parser.add_argument("--C", default="20,50,100", help="classes for the softmax")
    parser.add_argument("--frames", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    dtypes = (np.float64, np.float32)
    Ls = [int(v) for v in args.L.split(",")]
    Cs = [int(v) for v in args.C.split(",")]
    for L in Ls:
        frame = {d: [] for d in dtypes}  # softmax ns per frame, per C
        for C in Cs:
            calls = {d: parts(L, C, d, args.frames, rng) for d in dtypes}
            best = {(d, k): np.inf for d in dtypes for k in calls[d]}
            for _ in range(args.repeat):  # the dtypes alternate
                for d in dtypes:
                    for k, call in calls[d].items():
                        best[d, k] = min(best[d, k], best_time(call, 1))
            for d in dtypes:
                cell = (2 * L + 1) * args.frames
                fw, bw = (best[d, k] / cell * 1e9 for k in ("forward", "backward"))
                sm, mx, ex, ga = (best[d, k] / args.frames * 1e9
                                  for k in ("softmax", "max", "exp", "gather"))
                frame[d].append(sm)
                print(f"L={L} C={C} {np.dtype(d).name}: forward {fw:.2f}, backward {bw:.2f} "
                      f"ns/cell; softmax {sm:.0f} ns/frame (alone: max {mx:.0f}, exp loop "
                      f"{ex:.0f}, gather {ga:.0f})", flush=True)
        if len(Cs) > 1:
            for d in dtypes:
                per_logit, fixed = np.polyfit(Cs, frame[d], 1)
                print(f"L={L} {np.dtype(d).name} softmax, fitted over C: {fixed:.0f} ns a frame "
                      f"+ {per_logit:.2f} ns a logit")

if __name__ == "__main__":
    main()
