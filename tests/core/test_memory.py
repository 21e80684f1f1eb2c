"""The reference's memory estimate, its path choice and the check against MemAvailable."""
from __future__ import annotations

import math

import numpy as np
import pytest

from ctcbench.core import memory
from ctcbench.core.reference import forward_backward


def test_estimate_follows_the_documented_formula():
    """Tables below the limit, checkpoints + segments above it, as the module docstring says."""
    T, N, C, L = 1000, 4, 30, 50
    S = 2 * L + 1
    assert memory.uses_tables(T, N, L)
    assert memory.estimate_bytes_for(T, N, C, L) == 8 * T * N * (C * memory.CLASS_TABLES
                                                                  + S * memory.TABLES)
    T, L = 100000, 500
    S, K = 2 * L + 1, math.isqrt(T - 1) + 1
    assert not memory.uses_tables(T, N, L)
    assert memory.estimate_bytes_for(T, N, C, L) == (
        8 * T * N * C * memory.CLASS_TABLES
        + 8 * N * (S + 2) * (math.ceil(T / K) + memory.SEGMENT_TABLES * K))


def test_available_bytes_reads_meminfo():
    """MemAvailable is read in bytes (positive) where /proc/meminfo exists."""
    free = memory.available_bytes()
    assert free is None or free > 0


def test_problem_larger_than_free_memory_is_one_value_error():
    """A problem estimated beyond MemAvailable: one ValueError naming estimate and sizes,
    raised before any work (the broadcast log-probs are never materialised)."""
    free = memory.available_bytes()
    if free is None:
        pytest.skip("needs /proc/meminfo (Linux) to know the memory free")
    T, N, C, L = 10**7, 8, 30, 10**5
    assert memory.estimate_bytes_for(T, N, C, L) > free
    log_probs = np.broadcast_to(np.float64(-math.log(C)), (T, N, C))  # (T, N, C), no memory
    targets = np.ones((N, L), dtype=np.int64)
    with pytest.raises(ValueError, match=r"^problem: expected .* GiB available .* got an "
                                         r"estimated .* GiB for T=10000000, N=8, C=30, L=100000$"):
        forward_backward(log_probs, targets, np.full(N, T), np.full(N, L))
