"""Cost of worker isolation per call (pytest-benchmark; not part of the test suite).

Run: python -m pytest tests/bench_isolation.py --benchmark-only -p no:cacheprovider
Compares, on the same problem, the numpy reference in-process and in a worker, and each
third-party backend in its worker (warmed up first, so imports and compilation are excluded).
"""
from __future__ import annotations

import numpy as np
import pytest

from conftest import random_problem
from ctcbench import BackendUnavailable, CTCProblem, get_backend

SHAPE = dict(T=50, N=8, C=20, L=10)


@pytest.fixture(scope="module")
def problem():
    """Full-length inputs and non-empty targets, so every backend takes it."""
    p = random_problem(np.random.default_rng(0), dtype=np.float32, full_length=True, **SHAPE)
    targets = p.targets.copy()
    targets[:, 0] = np.where(p.target_lengths == 0, 1, targets[:, 0])
    return CTCProblem(p.logits, targets, p.input_lengths, np.maximum(p.target_lengths, 1))


@pytest.mark.parametrize("name, isolated", [("numpy", False), ("numpy", True), ("optax", None),
                                            ("tf", None), ("tf-dense", None), ("warpctc", None)])
def test_call(benchmark, problem, name, isolated):
    try:
        backend = get_backend(name, isolated=isolated)
    except BackendUnavailable as exc:
        pytest.skip(f"needs backend {name}: {exc}")  # exc holds the install hint
    backend.run(problem)  # warm-up: worker start, import, compilation
    benchmark.extra_info["backend"] = name
    benchmark(backend.run, problem)
