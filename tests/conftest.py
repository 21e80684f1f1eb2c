"""Shared fixtures: random CTC problems of any shape, with controllable blank and padding."""
from __future__ import annotations

import numpy as np
import pytest

from ctcbench import CTCProblem


def random_problem(rng: np.random.Generator, *, T: int, N: int, C: int, L: int, blank: int = 0,
                   dtype=np.float64, scale: float = 2.0, garbage: bool = True,
                   full_length: bool = False, feasible: bool = True) -> CTCProblem:
    """A random problem: lengths vary per sample; padded frames hold NaN when ``garbage``.

    With ``feasible`` every target fits its input (L + repeats <= input length).
    """
    labels = np.array([c for c in range(C) if c != blank])
    logits = (rng.normal(size=(T, N, C)) * scale).astype(dtype)  # (T, N, C)
    targets = rng.choice(labels, size=(N, max(L, 1)))  # (N, L)
    target_lengths = rng.integers(0, L + 1, size=N)
    input_lengths = np.full(N, T) if full_length else rng.integers(0, T + 1, size=N)
    if feasible:
        for n in range(N):
            t = targets[n, : target_lengths[n]]
            need = len(t) + int((t[1:] == t[:-1]).sum())
            input_lengths[n] = max(input_lengths[n], min(need, T))
            while target_lengths[n] and len(t) + int((t[1:] == t[:-1]).sum()) > input_lengths[n]:
                target_lengths[n] -= 1
                t = targets[n, : target_lengths[n]]
    if garbage:
        for n in range(N):
            logits[input_lengths[n]:, n] = np.nan
    return CTCProblem(logits, targets, input_lengths, target_lengths, blank=blank)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def tiny_grid(tmp_path):
    """A one-size bench grid file (JSON), fast enough for the CLI tests."""
    path = tmp_path / "grid.json"
    path.write_text('[{"T": 20, "N": 2, "C": 5, "L": 4}]')
    return path
