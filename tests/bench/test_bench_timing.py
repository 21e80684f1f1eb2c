"""Where bench's clock runs: inside the worker for isolated backends (the round trip is a
column of its own), exact shapes for optax, ns per DP cell."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from ctcbench import BackendUnavailable
from ctcbench.runtime.measure import measure_size, resolve_backends, set_threads
from ctcbench.runtime.sizes import Size
from timing_backends import (SLEEP_S, ConvertsForAHundredMs, ConvertsForAHundredMsIsolated,
                             SleepsFiftyMs)


@pytest.fixture(autouse=True)
def one_thread():
    set_threads(1)


@pytest.mark.long
def test_isolated_kernel_time_is_measured_in_the_worker_without_the_round_trip(
        register_backends):
    """A worker backend sleeping 50 ms per call on a ~100 MB problem: kernel time ~50 ms;
    the round trip (100 MB each way) is its own, positive column and not in the kernel time."""
    register_backends("sleeps-50ms", SleepsFiftyMs)
    size = Size(2000, 32, 200, 3)  # logits and gradient 2000*32*200*8 B = 102 MB each
    rows = measure_size(resolve_backends(["sleeps-50ms"]), size, dtype="float64", repeat=3,
                        memory=False)
    row = next(r for r in rows if r["backend"] == "sleeps-50ms")
    assert row["status"] == "ok", row.get("reason")
    assert SLEEP_S <= row["time_min_s"] <= row["time_median_s"] < SLEEP_S + 0.04
    assert row["first_call_s"] >= SLEEP_S
    assert row["roundtrip_s"] > 0.02  # serialising and piping 200 MB is not free
    assert row["calls_per_measurement"] == 1


@pytest.mark.parametrize("factory", [ConvertsForAHundredMs, ConvertsForAHundredMsIsolated])
def test_a_backends_kernel_is_timed_and_its_conversions_are_a_column_apart(register_backends,
                                                                             factory):
    """A backend whose run() converts for 100 ms before a 50 ms computation, with a kernel()
    that converts once: the kernel time is the 50 ms, run_s the whole 150 ms; in-process and
    in a worker alike."""
    register_backends("converts", factory)
    rows = measure_size(resolve_backends(["converts"]), Size(20, 2, 5, 4), dtype="float64",
                        repeat=3, memory=False)
    row = next(r for r in rows if r["backend"] == "converts")
    assert row["status"] == "ok", row.get("reason")
    assert SLEEP_S <= row["time_median_s"] < SLEEP_S + 0.04
    assert row["run_s"] >= SLEEP_S + factory.CONVERT_S


def test_in_process_rows_have_a_first_call_and_no_round_trip():
    """torch runs here: first_call_s is set, roundtrip_s is None (nothing to cross)."""
    rows = measure_size(resolve_backends(["torch"]), Size(20, 2, 5, 4), dtype="float64",
                        repeat=1, memory=False)
    assert rows[0]["first_call_s"] > 0 and rows[0]["roundtrip_s"] is None


def test_ns_per_cell_is_the_median_time_over_the_dp_cells():
    """ns_per_cell = median seconds / (sum over samples of T_n * (2 L_n + 1)) * 1e9."""
    rows = measure_size(resolve_backends(["numpy"]), Size(30, 3, 6, 5), dtype="float64",
                        repeat=2, memory=False)
    for row in rows:
        cells = 3 * 30 * (2 * 5 + 1)  # every sample full length: T=30, L=5
        assert row["cells"] == cells
        assert row["ns_per_cell"] == pytest.approx(row["time_median_s"] / cells * 1e9)


def test_bench_asks_optax_for_the_exact_shape():
    """The bench row of optax says it compiled for the problem's own (T, N, L, C)."""
    backends = resolve_backends(["optax"])
    if isinstance(backends["optax"], tuple):
        pytest.skip(f"needs backend optax: {backends['optax'][1]}")  # with the install hint
    rows = measure_size(backends, Size(21, 3, 5, 4), dtype="float64", repeat=1, memory=False)
    row = next(r for r in rows if r["backend"] == "optax")
    assert row["status"] == "ok", row.get("reason")
    assert any("(T, N, L, C) = (21, 3, 4, 5) (exact shape)" in n for n in row["notes"])


COMPILED_SHAPES = textwrap.dedent("""
    import logging, sys
    import jax
    from ctcbench.backends.optax_ctc import OptaxBackend
    from ctcbench.runtime.sizes import Size, make_problem
    logging.basicConfig(stream=sys.stdout, level=logging.WARNING, format="%(message)s")
    backend = OptaxBackend()
    backend.prepare()
    with jax.log_compiles(True):
        backend.run(make_problem(Size(21, 3, 5, 4)), exact_shape=sys.argv[1] == "exact")
""")


def test_optax_exact_shape_compiles_for_the_problem_not_a_bucket():
    """JAX's own compile log: exact_shape compiles logits (N, T, C) = (3, 21, 5); the default
    compiles the padded bucket (4, 64, 8)."""
    try:
        from ctcbench.backends.optax_ctc import OptaxBackend
        OptaxBackend()
    except BackendUnavailable as exc:
        pytest.skip(f"needs backend optax: {exc}")  # exc holds the install hint
    logs = {}
    for mode in ("exact", "bucket"):
        out = subprocess.run([sys.executable, "-c", COMPILED_SHAPES, mode], capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        logs[mode] = out.stdout
    assert "float64[3,21,5]" in logs["exact"] and "float64[4,64,8]" not in logs["exact"]
    assert "float64[4,64,8]" in logs["bucket"]


def test_threads_within_leaves_the_process_as_it_found_it(monkeypatch):
    """The datasheet's speed stage measures at one thread inside a run at another count:
    inside, workers and torch see the block's count; after it, the variables and torch's
    count are back, and a variable that was not set is not left set."""
    import os

    import torch

    from ctcbench.runtime.measure import threads_within
    monkeypatch.setenv("CTCBENCH_THREADS", "2")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    torch.set_num_threads(2)
    with threads_within(1):
        assert os.environ["CTCBENCH_THREADS"] == os.environ["MKL_NUM_THREADS"] == "1"
        assert torch.get_num_threads() == 1
    assert os.environ["CTCBENCH_THREADS"] == "2" and "MKL_NUM_THREADS" not in os.environ
    assert torch.get_num_threads() == 2
    torch.set_num_threads(1)
