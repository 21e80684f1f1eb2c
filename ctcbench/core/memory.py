"""How much memory the float64 reference needs, which of its two paths it takes, and whether
this machine has that memory free.

The reference (:mod:`ctcbench.core.reference`, the ``numpy`` backend) keeps ``TABLES``
float64 tables of shape ``(T, N, S)`` (emissions, alpha, beta, posteriors and the
temporaries of the recursions; ``S = 2L + 1``) while their total stays within
``TABLE_BYTES_LIMIT``. Beyond that it runs checkpointed (:mod:`ctcbench.core.checkpointed`):
a ``(ceil(T / K), N, S + 2)`` checkpoint table and ``SEGMENT_TABLES`` tables ``(K, N, S)`` per
segment, ``K = ceil(sqrt(T))``. Both paths also hold ``CLASS_TABLES`` float64 arrays
``(T, N, C)`` (softmax / gradient, log-softmax of the samples redone in log space, temporaries).

    tables       = 8 * T * N * S * TABLES
    estimate     = 8 * T * N * C * CLASS_TABLES + (tables                    if tables <= TABLE_BYTES_LIMIT
                                                   else 8 * N * (S + 2) * (ceil(T / K) + SEGMENT_TABLES * K))

in bytes, on top of the caller's own logits. ``TABLES`` is an upper count read off the
code, not a measurement; the estimate against a measured peak: docs/bench.md.
"""
from __future__ import annotations

import math

from ctcbench.core.checkpointed import segment_length

TABLE_BYTES_LIMIT = 1 << 30  # full (T, N, S) tables up to 1 GiB; checkpointed beyond
TABLES = 10  # (T, N, S) float64 tables alive at the peak of the full-table path
SEGMENT_TABLES = 6  # (K, N, S) float64 tables alive per segment of the checkpointed path
CLASS_TABLES = 4  # (T, N, C) float64 arrays alive on either path


def table_bytes(T: int, N: int, L: int) -> int:
    """Bytes of the full-table path's ``(T, N, S)`` tables."""
    return 8 * T * N * (2 * L + 1) * TABLES


def uses_tables(T: int, N: int, L: int) -> bool:
    """Whether the reference keeps full ``(T, N, S)`` tables (fast, exact posteriors per state)."""
    return table_bytes(T, N, L) <= TABLE_BYTES_LIMIT


def estimate_bytes_for(T: int, N: int, C: int, L: int) -> int:
    """Peak bytes the reference allocates for these sizes (see the module docstring)."""
    S = 2 * L + 1
    classes = 8 * T * N * C * CLASS_TABLES
    if uses_tables(T, N, L):
        return classes + table_bytes(T, N, L)
    K = segment_length(T)
    return classes + 8 * N * (S + 2) * (math.ceil(T / K) + SEGMENT_TABLES * K)


def estimate_bytes(problem) -> int:
    """Peak bytes the reference allocates for ``problem`` (a :class:`CTCProblem`)."""
    T, N, C, L = problem.shape
    return estimate_bytes_for(T, N, C, L)


def available_bytes() -> int | None:
    """``MemAvailable`` from ``/proc/meminfo`` in bytes; None where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the file counts kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def require_memory(T: int, N: int, C: int, L: int, need: int | None = None) -> None:
    """Raise ValueError, before any work, when the estimate (``need`` bytes, by default the
    reference's) exceeds the memory free now."""
    need = estimate_bytes_for(T, N, C, L) if need is None else need
    free = available_bytes()
    if free is not None and need > free:
        raise ValueError(
            f"problem: expected sizes whose estimated peak fits in the {free / 2**30:.2f} GiB "
            f"available (MemAvailable), got an estimated {need / 2**30:.2f} GiB for "
            f"T={T}, N={N}, C={C}, L={L}")
