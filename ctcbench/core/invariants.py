"""Properties every CTC gradient w.r.t. the logits has, whatever the implementation.

With ``grad = softmax(logits) - gamma`` on a valid frame (``gamma`` the posterior of each class
given the target, a probability distribution over classes), and every upstream weight 1:
  * each frame's gradient sums to 0 over classes;
  * each entry lies in ``[-1, 1]``;
  * padded frames (``t >= input_lengths[n]``) and infeasible samples have gradient 0.
They hold exactly in real arithmetic, so a broken one means a wrong gradient, not round-off.
"""
from __future__ import annotations

import numpy as np

# float64: rows of a few thousand classes sum to 0 within ~1e-13; the others are scaled to their eps.
INVARIANT_TOL = {"float64": 1e-9, "float32": 1e-4, "float16": 2e-2, "bfloat16": 1e-1}


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
    bad = np.argwhere(live & (np.abs(rows) > tol))
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
