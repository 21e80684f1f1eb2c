"""The bench library: grids, problems, the timer and memory meter against known costs, resume."""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

from ctcbench import BackendUnavailable, UnsupportedProblem
from ctcbench.backends.numpy_ref import NumpyBackend
from ctcbench.bench.run import bench, records
from ctcbench.core.oracles import uniform_loss
from ctcbench.runtime.measure import measure_size, resolve_backends, set_threads
from ctcbench.runtime.sizes import Size, load_grid, make_problem


class Sleepy(NumpyBackend):
    """The reference plus a known 30 ms sleep: the timer must see at least that."""

    def run(self, problem):
        time.sleep(0.03)
        return super().run(problem)


class Hungry(NumpyBackend):
    """The reference plus a known 64 MiB buffer, written so it is resident, and held for
    20 ms: longer than the sampling interval by far, even on a loaded machine."""

    def run(self, problem):
        buf = np.ones(64 * 2**20 // 8)
        time.sleep(0.02)
        result = super().run(problem)
        assert buf[-1] == 1.0
        return result


class Picky(NumpyBackend):
    def run(self, problem):
        raise UnsupportedProblem("takes no problem at all")


def _gone():
    raise BackendUnavailable("not installed here", "pip install nothing")


@pytest.fixture(autouse=True)
def one_thread():
    set_threads(1)


@pytest.fixture
def extra_backends(register_backends):
    """A slow, a memory-hungry, a refusing and an unavailable backend, for one test."""
    for name, factory in {"sleepy": Sleepy, "hungry": Hungry, "picky": Picky,
                          "gone": _gone}.items():
        register_backends(name, factory)


# docs/bench.md, "Measured speed": the four sizes the NumPy-vs-torch targets are stated at.
DOCUMENTED_TARGETS = {Size(1000, 32, 100, 200), Size(200, 16, 50, 40), Size(50, 8, 20, 10),
                      Size(1000, 8, 5000, 100)}
# docs/bench.md, "Grids": the default grid sweeps each letter over this range around one size.
DEFAULT_CENTRE = Size(200, 16, 50, 40)
DEFAULT_RANGES = {"T": (50, 800), "L": (10, 80), "C": (20, 5000), "N": (1, 64)}


def test_default_grid_is_the_documented_sweeps_plus_the_target_sizes():
    """As docs/bench.md says: 16 sizes, each of T, L, C, N swept over its range (at least three
    values) around T=200 N=16 C=50 L=40 with the others fixed, plus the four target sizes;
    the `targets` grid is exactly those four."""
    sizes = load_grid("default")
    assert len(sizes) == len(set(sizes)) == 16
    for letter, (lo, hi) in DEFAULT_RANGES.items():
        others = [o for o in "TNCL" if o != letter]
        swept = {getattr(s, letter) for s in sizes
                 if all(getattr(s, o) == getattr(DEFAULT_CENTRE, o) for o in others)}
        assert len(swept) >= 3 and (min(swept), max(swept)) == (lo, hi), (letter, swept)
    assert DOCUMENTED_TARGETS <= set(sizes)
    targets = load_grid("targets")
    assert len(targets) == 4 and set(targets) == DOCUMENTED_TARGETS
    assert Size(1000, 32, 100, 200).cells == 1000 * 32 * 401


def test_load_grid_reads_json_and_csv_and_names_bad_fields(tmp_path):
    """Grid files load as exactly the sizes written, in order; a bad row gets an 'expected X,
    got Y' error naming it."""
    (tmp_path / "g.csv").write_text("T,N,C,L\n30,2,6,5\n40,1,6,5\n")
    assert load_grid(str(tmp_path / "g.csv")) == [Size(30, 2, 6, 5), Size(40, 1, 6, 5)]
    (tmp_path / "g.json").write_text('[{"T": 1000, "N": 8, "C": 5000, "L": 100}, '
                                     '{"T": 7, "N": 3, "C": 2, "L": 0}]')
    assert load_grid(str(tmp_path / "g.json")) == [Size(1000, 8, 5000, 100), Size(7, 3, 2, 0)]
    (tmp_path / "g.json").write_text('[{"T": 30, "N": 2, "C": 6}]')
    with pytest.raises(ValueError, match=r"row 1: expected fields T, N, C, L"):
        load_grid(str(tmp_path / "g.json"))
    (tmp_path / "g.json").write_text('[{"T": 3, "N": 2, "C": 6, "L": 5}]')
    with pytest.raises(ValueError, match=r"expected 0 <= L <= T"):
        load_grid(str(tmp_path / "g.json"))
    with pytest.raises(ValueError, match=r"grid: expected one of small, default, targets"):
        load_grid(str(tmp_path / "missing.json"))


def test_load_grid_takes_spreadsheet_csv_headers(tmp_path):
    """A CSV saved with a byte-order mark, or with spaces after the commas, reads the same."""
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbfT,N,C,L\n30,2,6,5\n")
    (tmp_path / "spaced.csv").write_text("T, N, C, L\n30, 2, 6, 5\n")
    assert load_grid(str(tmp_path / "bom.csv")) == [Size(30, 2, 6, 5)]
    assert load_grid(str(tmp_path / "spaced.csv")) == [Size(30, 2, 6, 5)]


def test_bench_problem_is_full_length_feasible_and_exact():
    """Bench problems: every target L labels, no blank, no adjacent repeat; the reference
    loss on uniform logits equals the closed form."""
    size = Size(60, 3, 4, 25)
    problem = make_problem(size, seed=1)
    assert problem.shape == (60, 3, 4, 25)
    assert (problem.target_lengths == 25).all() and (problem.input_lengths == 60).all()
    assert (problem.targets != 0).all() and (np.diff(problem.targets, axis=1) != 0).all()
    uniform = problem.with_logits(np.zeros((60, 3, 4)))
    loss = NumpyBackend().run(uniform).loss
    expected = [uniform_loss(60, 4, t) for t in problem.targets]
    np.testing.assert_allclose(loss, expected, rtol=1e-9)


def test_timer_sees_a_known_sleep_and_pairs_ratios_with_torch(extra_backends):
    """A backend that sleeps 30 ms per call is timed at >= 30 ms and slower than torch."""
    rows = measure_size(resolve_backends(["sleepy"]), Size(20, 2, 5, 4), dtype="float64",
                        repeat=2, memory=False)
    row = {r["backend"]: r for r in rows}
    assert row["sleepy"]["status"] == "ok"
    assert 0.03 <= row["sleepy"]["time_min_s"] <= row["sleepy"]["time_median_s"] < 0.5
    assert row["sleepy"]["ratio_min"] > 1.0
    assert row["torch"]["ratio_to_torch"] == 1.0


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc/self/statm (Linux), where RSS is read")
def test_peak_memory_sees_a_known_allocation(extra_backends):
    """A backend holding a 64 MiB buffer shows a peak RSS growth of about 64 MiB."""
    rows = measure_size(resolve_backends(["hungry"]), Size(20, 2, 5, 4), dtype="float64",
                        repeat=1)
    hungry = next(r for r in rows if r["backend"] == "hungry")
    assert 60 <= hungry["peak_rss_mb"] < 100


def test_unavailable_and_unsupported_backends_are_recorded_not_fatal(extra_backends):
    """Backends that cannot run here or cannot take the problem get a row with the reason."""
    rows = measure_size(resolve_backends(["gone", "picky", "numpy"]), Size(20, 2, 5, 4),
                        dtype="float64", repeat=1, memory=False)
    row = {r["backend"]: r for r in rows}
    assert row["gone"]["status"] == "skipped" and "not installed here" in row["gone"]["reason"]
    assert row["picky"]["status"] == "unsupported"
    assert row["numpy"]["status"] == "ok" and row["torch"]["status"] == "ok"
    with pytest.raises(ValueError, match=r"backend: expected one of"):
        resolve_backends(["nope"])


def test_run_writes_rows_as_it_goes_and_resumes(tmp_path, tiny_grid):
    """A second run into the same folder measures nothing again and keeps the rows."""
    first = bench(backends=["numpy"], grid=str(tiny_grid), repeat=1, out=tmp_path / "r",
                  plot=False, progress=False)
    lines = (tmp_path / "r" / "rows.jsonl").read_text().splitlines()
    assert set(first.rows["backend"]) == {"numpy", "torch"} and first.resumed == 0
    second = bench(backends=["numpy"], grid=str(tiny_grid), repeat=1, out=tmp_path / "r",
                   resume=True, plot=False, progress=False)
    assert second.resumed == 1
    assert (tmp_path / "r" / "rows.jsonl").read_text().splitlines() == lines

    third = bench(backends=["numpy"], grid=str(tiny_grid), repeat=2, out=tmp_path / "r",
                  resume=True, plot=False, progress=False)
    assert third.resumed == 0  # another --repeat is measured again, not taken from the log
    assert {len(r["times_s"]) for r in records(third.rows)} == {2}
    assert {r["between_calls"] for r in records(third.rows)} == {"nothing"}

    fourth = bench(backends=["numpy"], grid=str(tiny_grid), repeat=2, out=tmp_path / "r",
                   resume=True, plot=False, progress=False, between_calls="model-step")
    assert fourth.resumed == 0  # nor another --between-calls
    assert {r["between_calls"] for r in records(fourth.rows)} == {"model-step"}


def test_set_threads_sets_torch_and_rejects_zero():
    """--threads reaches torch; a bad count is refused with a clear message."""
    import torch
    assert set_threads(1)["torch_threads"] == 1 and torch.get_num_threads() == 1
    with pytest.raises(ValueError, match=r"threads: expected an integer in \[1, \d+\] \(4 per CPU here\), got 0"):
        set_threads(0)


def test_set_threads_reaches_workers_started_later(monkeypatch):
    """--threads also sets CTCBENCH_THREADS, which worker processes and their frameworks read."""
    monkeypatch.delenv("CTCBENCH_THREADS", raising=False)
    set_threads(2)
    assert os.environ["CTCBENCH_THREADS"] == "2"
    set_threads(1)


def test_a_size_too_large_for_memory_is_an_error_row_and_the_run_goes_on(tmp_path):
    """A grid size whose logits alone need ~15 TiB gets error rows naming memory; the other
    size is still measured."""
    grid = tmp_path / "g.json"
    grid.write_text('[{"T": 2000000, "N": 20000, "C": 50, "L": 3}, {"T": 20, "N": 2, "C": 5, "L": 4}]')
    run = bench(backends=["numpy"], grid=str(grid), repeat=1, out=tmp_path / "r", plot=False,
                progress=False)
    rows = records(run.rows)
    status = {(r["backend"], r["T"]): r["status"] for r in rows}
    assert status == {("numpy", 20): "ok", ("torch", 20): "ok",
                      ("numpy", 2000000): "error", ("torch", 2000000): "error"}
    assert all("MemoryError" in r["reason"] for r in rows if r["T"] == 2000000)


def test_out_holding_another_drivers_rows_is_refused_untouched(tmp_path, tiny_grid):
    """--out pointing at a compare run folder is refused; its rows and meta stay as they were."""
    (tmp_path / "rows.jsonl").write_text('{"backend": "numpy", "case": "tf_basic", "status": "ok"}\n')
    (tmp_path / "meta.json").write_text('{"config": {"driver": "compare"}}\n')
    with pytest.raises(ValueError, match=r"holds a compare run; `ctcbench bench` does not write "
                                         r"into a compare run folder"):
        bench(backends=["numpy"], grid=str(tiny_grid), repeat=1, out=tmp_path, progress=False)
    assert (tmp_path / "meta.json").read_text() == '{"config": {"driver": "compare"}}\n'
    assert len((tmp_path / "rows.jsonl").read_text().splitlines()) == 1
