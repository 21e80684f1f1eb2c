"""Performance target of `ctcbench convergence --optimizer rmsprop` with its defaults:
held-out CER <= 5% within 5 minutes of wall time on 2 cores.

Not part of the test suite (minutes, and timing depends on the machine). Run with:

    python -m pytest benchmarks/bench_convergence.py -s -p no:cacheprovider

It renders the default data, trains the default model, prints wall/CPU time to the first
eval with CER <= 5% and for the whole run, and stores them in pytest-benchmark's JSON with
``--benchmark-json PATH``.
"""
import time

import pytest

from ctcbench.convergence.grid import Grid, run_grid
from ctcbench.convergence.trainconfig import TrainConfig
from ctcbench.runs.store import RowLog

TARGET_CER, TARGET_WALL_S = 0.05, 300.0


@pytest.mark.benchmark(group="convergence")
def test_default_rmsprop_reaches_target(benchmark, tmp_path):
    """The default run reaches CER <= 5% and reports how long it took (wall and CPU)."""
    def run():
        start = time.perf_counter()
        result = run_grid(TrainConfig(), Grid(optimizers=("rmsprop",)), out=tmp_path / "run",
                          cache_dir=tmp_path / "cache", show_progress=False)
        return time.perf_counter() - start, result.run_dir, result.rows
    total_wall, run_dir, summary = benchmark.pedantic(run, rounds=1, iterations=1)
    name = summary["run"][0]
    rows = RowLog(run_dir / "runs" / name / "curve.jsonl").rows()
    hit = next((r for r in rows if r["cer"] <= TARGET_CER), None)
    benchmark.extra_info.update(total_wall_s=total_wall, final_cer=float(summary["final_cer"][0]),
                                first_step_cer_le_5pct=hit and hit["step"],
                                train_wall_s_at_target=hit and hit["wall_s"],
                                train_cpu_s_at_target=hit and hit["cpu_s"])
    print(benchmark.extra_info)
    assert hit is not None, f"CER never reached {TARGET_CER}: final {summary['final_cer'][0]:.3f}"
