"""Properties every CTC loss and gradient w.r.t. the logits has, whatever the implementation.

The loss of a sample is ``-log`` of a probability (the sum over the paths that collapse to the
target), so (:func:`broken_loss_invariants`):
  * a finite loss is never below 0, at any magnitude;
  * the loss is ``+inf`` exactly when the target is infeasible: it does not fit its frames, or
    every path to it passes a class of probability 0 (a ``-inf`` logit); never NaN or ``-inf``.

With ``grad = softmax(logits) - gamma`` on a valid frame (``gamma`` the posterior of each class
given the target, a probability distribution over classes), and every upstream weight 1:
  * each frame's gradient sums to 0 over classes;
  * each entry lies in ``[-1, 1]``;
  * padded frames (``t >= input_lengths[n]``) and infeasible samples have gradient 0.
They hold exactly in real arithmetic, so a broken one means a wrong gradient, not round-off.
"""
from __future__ import annotations

import numpy as np

from ctcbench.core.extended import extended_labels

# float64: rows of a few thousand classes sum to 0 within ~1e-13; the others are scaled to their eps.
INVARIANT_TOL = {"float64": 1e-9, "float32": 1e-4, "float16": 2e-2, "bfloat16": 1e-1}
ROW_EPS = {"float32": 8 * 2.0**-23, "float16": 8 * 2.0**-10, "bfloat16": 8 * 2.0**-7}  # per sqrt(C)


def broken_invariants(problem, loss: np.ndarray, grad: np.ndarray, *, tol: float | None = None) -> list[str]:
    """The gradient invariants ``grad (T, N, C)`` breaks for ``problem``, one line each (empty: none).

    ``loss (N,)`` says which samples are infeasible (``+inf``). Assumes unit upstream weights.
    """
    tol = INVARIANT_TOL.get(problem.dtype, 1e-4) if tol is None else tol
    grad = np.asarray(grad, dtype=np.float64)
    T, N, C, _ = problem.shape
    live = problem.frame_mask & np.isfinite(np.asarray(loss))[None, :]  # (T, N) frames with a gradient
    broken = []
    if not np.isfinite(grad).all():
        t, n, c = np.argwhere(~np.isfinite(grad))[0]
        return [f"gradient finite: got {grad[t, n, c]} at t={t} n={n} c={c}"]
    rows = grad.sum(axis=2)  # (T, N)
    # a sum of C entries each right to round-off drifts like sqrt(C) of them (docs/fuzz.md)
    row_tol = tol + ROW_EPS.get(problem.dtype, 0.0) * np.sqrt(C)
    bad = np.argwhere(live & (np.abs(rows) > row_tol))
    if len(bad):
        t, n = bad[0]
        broken.append(f"gradient row sums to 0: got {rows[t, n]:.3g} at t={t} n={n}")
    out = np.argwhere(live[..., None] & (np.abs(grad) > 1 + tol))
    if len(out):
        t, n, c = out[0]
        broken.append(f"gradient entries in [-1, 1]: got {grad[t, n, c]:.6g} at t={t} n={n} c={c}")
    dead = np.argwhere(~live[..., None] & (grad != 0))
    if len(dead):
        t, n, c = dead[0]
        why = "padded frame" if not problem.frame_mask[t, n] else "infeasible sample"
        broken.append(f"gradient 0 on a {why}: got {grad[t, n, c]:.3g} at t={t} n={n} c={c}")
    return broken


def reachable(problem) -> np.ndarray:
    """``(N,)`` bool: some path of nonzero probability collapses to the sample's target (it fits
    its frames, and no class it needs is at probability 0 wherever it would be needed)."""
    ok = np.asarray(problem.feasible(), dtype=bool).copy()  # (N,)
    lp = problem.log_probs()  # (T, N, C)
    T, N, C, _ = problem.shape
    live = problem.frame_mask[..., None]  # (T, N, 1)
    check = ok & (live & np.isneginf(lp)).any(axis=(0, 2))  # (N,) only where a class is masked
    if not check.any():
        return ok
    idx = np.flatnonzero(check)
    targets, lengths = problem.targets[idx], problem.target_lengths[idx]
    ext, valid, skip = extended_labels(targets, lengths, problem.blank)  # (n, S) each
    possible = ~np.isneginf(np.take_along_axis(lp[:, idx], ext[None], axis=2))  # (T, n, S)
    S = ext.shape[1]
    alive = np.zeros((len(idx), S), dtype=bool)  # (n, S) states reachable at the frame
    alive[:, :2] = True
    alive &= valid & possible[0]  # every checked sample has a frame (a masked class in one)
    for t in range(1, int(problem.input_lengths[idx].max(initial=0))):
        step = alive.copy()
        step[:, 1:] |= alive[:, :-1]
        step[:, 2:] |= alive[:, :-2] & skip[:, 2:]
        running = (t < problem.input_lengths[idx])[:, None]  # (n, 1) frames left in the sample
        alive = np.where(running, step & valid & possible[t], alive)
    S_n = 2 * lengths + 1
    rows = np.arange(len(idx))
    end = alive[rows, S_n - 1] | np.where(S_n >= 2, alive[rows, np.maximum(S_n - 2, 0)], False)
    ok[idx] = end
    return ok


def broken_loss_invariants(problem, loss: np.ndarray, *, samples=None) -> list[str]:
    """The loss invariants ``loss (N,)`` breaks for ``problem``, one line each (empty: none):
    a finite loss below 0, a finite loss for an infeasible target, ``+inf`` for a feasible
    one, NaN or ``-inf``. ``samples``: ``(N,)`` bool, the samples to check (default all)."""
    loss = np.asarray(loss, dtype=np.float64)
    check = np.ones(len(loss), dtype=bool) if samples is None else np.asarray(samples, bool)
    feasible = reachable(problem)  # (N,)
    broken = []
    for n in np.flatnonzero(check):
        x = loss[n]
        if np.isnan(x) or x == -np.inf:
            broken.append(f"loss is a number in [0, inf]: got {x} for sample {n}")
        elif np.isfinite(x) and x < 0:
            broken.append(f"loss below 0: got {x:.6g} for sample {n} (a loss is -log of a "
                          f"probability)")
        elif np.isfinite(x) and not feasible[n]:
            broken.append(f"loss +inf for an infeasible target: got {x:.6g} for sample {n}")
        elif x == np.inf and feasible[n]:
            broken.append(f"loss finite for a feasible target: got inf for sample {n}")
    return broken
