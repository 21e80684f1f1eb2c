"""Reductions over per-sequence losses, in one place so conventions cannot drift.

``"mean"`` is torch's: each loss is first divided by its target length (clamped to 1),
then averaged over the batch. ``"per-line"`` is Keras' ``ctc_batch_cost`` convention: the
plain mean over the batch of each sequence's whole loss (no division by length), the one a
training loop takes to compare with Keras numbers. ``zero_infinity`` replaces infinite
losses (infeasible targets) by 0, as torch does, which also zeroes their gradient.
"""
from __future__ import annotations

import numpy as np

REDUCTIONS = ("none", "sum", "mean")  # torch's names: what every backend and ctcbench.torch take
PER_LINE = "per-line"
SCALAR_REDUCTIONS = ("mean", "sum", PER_LINE)  # to one number: what a training loss can use


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
    if reduction == PER_LINE:
        return np.full(len(target_lengths), 1.0 / max(len(target_lengths), 1))
    if reduction in ("sum", "none"):
        return np.ones(len(target_lengths))
    raise ValueError(f"reduction: expected one of {', '.join((*REDUCTIONS, PER_LINE))}, "
                     f"got {reduction!r}")


def reduce_loss(loss: np.ndarray, target_lengths: np.ndarray, reduction: str = "mean",
                *, zero_infinity: bool = False):
    """Reduce per-sequence ``loss (N,)`` the way ``torch.nn.functional.ctc_loss`` does (or
    by ``"per-line"``); ``target_lengths (N,)`` non-negative integers."""
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


def backend_reduction(reduction: str):
    """``(name, finish)`` for a scalar ``reduction``: the torch reduction to ask a backend for,
    and what turns that backend's output into the reduced loss. ``"per-line"`` asks for
    ``"none"`` (``(N,)`` losses) and takes their mean; torch's own names pass through.
    ``finish`` works on NumPy arrays and torch tensors alike (autograd follows it)."""
    if reduction not in SCALAR_REDUCTIONS:
        raise ValueError(f"reduction: expected one of {', '.join(SCALAR_REDUCTIONS)}, "
                         f"got {reduction!r}")
    if reduction == PER_LINE:
        return "none", lambda losses: losses.mean()
    return reduction, lambda loss: loss
