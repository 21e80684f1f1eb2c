"""Which training lines a step sees, and a batch of a pool as tensors."""
from __future__ import annotations

import numpy as np
import torch

from ctcbench.convergence.data import Pool


def batch_indices(seed: int, step: int, pool_size: int, batch_size: int,
                  among: np.ndarray | None = None) -> np.ndarray:
    """The samples of ``step``: a pure function of (seed, step), so a resumed run sees the
    same batches as an uninterrupted one. ``among``: draw only from these pool indices."""
    rng = np.random.default_rng([seed, step])
    if among is None:
        return rng.integers(0, pool_size, size=batch_size)
    return among[rng.integers(0, len(among), size=batch_size)]


def tensors(pool: Pool, idx) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Lines ``idx`` of ``pool``: images ``(N, 1, H, W)``, padded labels ``(N, L)`` and
    lengths ``(N,)``."""
    x = torch.from_numpy(pool.images[idx]).unsqueeze(1)  # (N, 1, H, W)
    return x, torch.from_numpy(pool.labels[idx]), torch.from_numpy(pool.lengths[idx])
