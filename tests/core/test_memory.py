"""The reference's memory estimate against a traced peak, its path choice and the check against
MemAvailable."""
from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

from ctcbench import CTCProblem, get_backend
from ctcbench.core import memory
from ctcbench.core.reference import forward_backward


@pytest.mark.parametrize("T, N, C, L, tables", [
    (200, 4, 30, 20, True),
    (400, 8, 50, 40, True),
    (3000, 16, 30, 210, False),  # (T, N, S) tables well past 1 GiB: checkpointed
])
@pytest.mark.long
def test_estimate_bounds_the_measured_peak_on_both_paths(T, N, C, L, tables):
    """On either path the numpy backend's peak allocation, traced by tracemalloc (which sees
    NumPy's buffers), stays under the estimate, and the estimate is within 3x of it: an upper
    count, not a guess off by orders (it is ~1.8x at these sizes)."""
    targets = 1 + (np.arange(L)[None, :] + np.arange(N)[:, None]) % (C - 1)  # (N, L) no repeats
    problem = CTCProblem(np.random.default_rng(0).normal(size=(T, N, C)), targets,
                         np.full(N, T), np.full(N, L))
    backend = get_backend("numpy")
    tracemalloc.start()
    try:
        backend.run(problem)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert memory.uses_tables(T, N, L) == tables
    assert peak <= memory.estimate_bytes_for(T, N, C, L) <= 3 * peak


def test_long_sequence_estimate_is_the_documented_figure():
    """docs/bench.md: at T=100000 N=4 C=30 L=500 the reference runs checkpointed and its
    estimate is 0.42 GiB (the measured peak RSS was ~420 MB)."""
    assert not memory.uses_tables(100000, 4, 500)
    assert memory.estimate_bytes_for(100000, 4, 30, 500) / 2**30 == pytest.approx(0.42, abs=0.005)


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
