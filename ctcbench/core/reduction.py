"""Reductions over per-sequence losses, in one place so conventions cannot drift.

``"mean"`` is torch's: each loss is first divided by its target length (clamped to 1),
then averaged over the batch. ``zero_infinity`` replaces infinite losses (infeasible
targets) by 0, as torch does, which also zeroes their gradient.
"""
from __future__ import annotations

import numpy as np

REDUCTIONS = ("none", "sum", "mean")


def _lengths(target_lengths, n: int | None = None) -> np.ndarray:
    """``target_lengths`` as ``(N,)`` non-negative integers (integral floats are taken)."""
    x = np.asarray(target_lengths)
    ok = x.ndim == 1 and (n is None or x.shape == (n,)) and x.dtype.kind in "iuf"
    if ok:
        with np.errstate(invalid="ignore"):
            ok = bool(((x >= 0) & (x == np.round(x))).all())
    if not ok:
        want = f"({n},)" if n is not None else "(N,)"
        raise ValueError(f"target_lengths: expected shape {want} non-negative integers (one per "
                         f"loss), got shape {x.shape} of {x.dtype.name}"
                         + (f": {x.tolist()}" if x.size <= 8 else ""))
    return x


def reduction_weights(target_lengths: np.ndarray, reduction: str) -> np.ndarray:
    """``(N,)`` weight of each sequence's loss in the reduced loss (also its grad scale)."""
    target_lengths = _lengths(target_lengths)
    if reduction == "mean":
        return 1.0 / (np.maximum(target_lengths, 1) * len(target_lengths))
    if reduction in ("sum", "none"):
        return np.ones(len(target_lengths))
    raise ValueError(f"reduction: expected one of {', '.join(REDUCTIONS)}, got {reduction!r}")


def reduce_loss(loss: np.ndarray, target_lengths: np.ndarray, reduction: str = "mean",
                *, zero_infinity: bool = False):
    """Reduce per-sequence ``loss (N,)`` the way ``torch.nn.functional.ctc_loss`` does;
    ``target_lengths (N,)`` non-negative integers."""
    raw = np.asarray(loss)
    if raw.ndim != 1 or raw.dtype.kind not in "iuf":
        raise ValueError(f"loss: expected shape (N,) per-sequence losses (reduction 'none'), "
                         f"got shape {raw.shape} of {raw.dtype.name}")
    loss = raw.astype(np.float64)
    _lengths(target_lengths, len(loss))
    if zero_infinity:
        loss = np.where(np.isinf(loss), 0.0, loss)
    weighted = loss * reduction_weights(target_lengths, reduction)
    return weighted if reduction == "none" else float(weighted.sum())
