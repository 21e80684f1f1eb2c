"""Reductions over per-sequence losses, in one place so conventions cannot drift.

``"mean"`` is torch's: each loss is first divided by its target length (clamped to 1),
then averaged over the batch. ``zero_infinity`` replaces infinite losses (infeasible
targets) by 0, as torch does, which also zeroes their gradient.
"""
from __future__ import annotations

import numpy as np

REDUCTIONS = ("none", "sum", "mean")


def reduction_weights(target_lengths: np.ndarray, reduction: str) -> np.ndarray:
    """``(N,)`` weight of each sequence's loss in the reduced loss (also its grad scale)."""
    target_lengths = np.asarray(target_lengths)
    if reduction == "mean":
        return 1.0 / (np.maximum(target_lengths, 1) * len(target_lengths))
    if reduction in ("sum", "none"):
        return np.ones(len(target_lengths))
    raise ValueError(f"reduction: expected one of {', '.join(REDUCTIONS)}, got {reduction!r}")


def reduce_loss(loss: np.ndarray, target_lengths: np.ndarray, reduction: str = "mean",
                *, zero_infinity: bool = False):
    """Reduce per-sequence ``loss (N,)`` the way ``torch.nn.functional.ctc_loss`` does."""
    loss = np.asarray(loss, dtype=np.float64)
    if zero_infinity:
        loss = np.where(np.isinf(loss), 0.0, loss)
    weighted = loss * reduction_weights(target_lengths, reduction)
    return weighted if reduction == "none" else float(weighted.sum())
