"""pytest-benchmark suite: every runnable backend's forward+backward at a few sizes.

Run by its own command, not part of the normal test run (testpaths = ["tests"]):

    python -m pytest benchmarks --benchmark-only

Each benchmark times ``backend.run(problem)`` end to end (log_softmax, forward, backward,
gradient w.r.t. the logits), float64, one thread, as ``ctcbench bench`` does.
"""
from __future__ import annotations

import pytest

from ctcbench import BackendUnavailable, UnsupportedProblem, get_backend
from ctcbench.bench.run import Size, make_problem, set_threads
from ctcbench.runtime.registry import backend_names

SIZES = [Size(50, 8, 20, 10), Size(200, 16, 50, 40), Size(1000, 8, 5000, 100)]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    set_threads(1)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"T{s.T}-N{s.N}-C{s.C}-L{s.L}")
@pytest.mark.parametrize("name", backend_names())
def test_forward_backward(benchmark, name, size):
    """Forward+backward of one backend at one size."""
    try:
        backend = get_backend(name)
    except BackendUnavailable as exc:
        pytest.skip(str(exc))
    problem = make_problem(size)
    try:
        backend.run(problem)  # warm-up
    except UnsupportedProblem as exc:
        pytest.skip(str(exc))
    benchmark.group = size.label
    benchmark.extra_info.update(cells=size.cells, dtype=problem.dtype)
    result = benchmark(backend.run, problem)
    assert result.loss.shape == (size.N,)
