"""Baseline comparison: --fail-on parsing, regressions named with backend, size, old and new."""
from __future__ import annotations

import json

import pytest

from ctcbench.bench.baseline import FailOn, compare, load_rows, parse_fail_on


def _row(backend="numpy", time=1.0, ratio=0.5, memory=10.0, **size):
    size = {"T": 100, "N": 4, "C": 20, "L": 10, **size}
    return {"backend": backend, **size, "dtype": "float64", "status": "ok",
            "time_median_s": time, "ratio_to_torch": ratio, "peak_rss_mb": memory}


def test_parse_fail_on_accepts_metric_pct_and_names_bad_specs():
    """time:20% parses to a 0.2 limit; anything else gets 'expected METRIC:PCT'."""
    assert parse_fail_on("time:20%") == FailOn("time", 0.2)
    assert parse_fail_on("ratio:5") == FailOn("ratio", 0.05)
    for bad in ("speed:20%", "time", "time:x%", ""):
        with pytest.raises(ValueError, match=r"fail-on: expected METRIC:PCT"):
            parse_fail_on(bad)


def test_regression_beyond_the_limit_is_reported_with_old_and_new_figures():
    """+30% against a 20% limit fails, naming backend, size and both figures; +10% passes."""
    old = [_row(time=1.0), _row(backend="torch", time=2.0)]
    new = [_row(time=1.3), _row(backend="torch", time=2.2)]
    messages = compare(new, old, [parse_fail_on("time:20%")])
    assert messages == ["time regression: numpy at T=100 N=4 C=20 L=10 float64: 1 -> 1.3 s "
                        "(+30.0%, limit +20%)"]
    assert new[0]["change_time"] == pytest.approx(0.3) and new[1]["baseline_time"] == 2.0


def test_other_metrics_and_unmatched_sizes():
    """ratio and memory limits work alike; sizes missing from the baseline are not compared."""
    old = [_row(ratio=0.5, memory=10.0)]
    new = [_row(ratio=0.7, memory=10.5), _row(T=999)]
    messages = compare(new, old, [parse_fail_on("ratio:20%"), parse_fail_on("memory:20%")])
    assert len(messages) == 1 and messages[0].startswith("ratio regression: numpy at T=100")
    assert "change_time" not in new[1]


def test_load_rows_from_folder_json_and_csv(tmp_path):
    """A run folder (rows.jsonl), bench.json and bench.csv all load; junk is refused."""
    rows = [_row()]
    (tmp_path / "rows.jsonl").write_text(json.dumps(rows[0]) + "\n")
    (tmp_path / "bench.json").write_text(json.dumps(rows))
    (tmp_path / "bench.csv").write_text("backend,T,N,C,L,dtype,time_median_s\n"
                                        "numpy,100,4,20,10,float64,1.0\n")
    assert load_rows(tmp_path)[0]["time_median_s"] == 1.0
    assert load_rows(tmp_path / "bench.json") == rows
    assert float(load_rows(tmp_path / "bench.csv")[0]["time_median_s"]) == 1.0
    (tmp_path / "junk.json").write_text('{"a": 1}')
    with pytest.raises(ValueError, match=r"expected bench rows with fields backend"):
        load_rows(tmp_path / "junk.json")
    with pytest.raises(ValueError, match=r"baseline: expected a bench run folder"):
        load_rows(tmp_path / "nothing")


def test_load_rows_refuses_a_size_that_is_not_an_integer(tmp_path):
    """A baseline row whose T is not a number is named when loading, not a bare int() error."""
    (tmp_path / "bench.csv").write_text("backend,T,N,C,L,dtype,time_median_s\n"
                                        "numpy,x,4,20,10,float64,1.0\n")
    with pytest.raises(ValueError, match=r"baseline .*bench.csv row 1: expected integers for "
                                         r"T, N, C, L, got .*'T': 'x'"):
        load_rows(tmp_path / "bench.csv")


def test_a_backend_ok_in_the_baseline_that_now_fails_is_a_regression():
    """A row ok in the baseline that now crashed fails any --fail-on gate, naming the status;
    a backend merely not installed here (skipped) does not."""
    old = [_row(), _row(backend="tf")]
    new = [{**_row(), "status": "crashed", "reason": "worker died with signal SIGSEGV"},
           {**_row(backend="tf"), "status": "skipped", "reason": "not installed"}]
    messages = compare(new, old, [parse_fail_on("ratio:20%")])
    assert len(messages) == 1
    assert messages[0].startswith("crashed: numpy at T=100 N=4 C=20 L=10 float64")
    assert "SIGSEGV" in messages[0]
    assert compare(new, old, []) == []


def test_a_gate_with_nothing_in_common_with_the_baseline_fails():
    """--fail-on against a baseline of other sizes compares nothing, and says so instead of
    passing."""
    messages = compare([_row(T=100)], [_row(T=999)], [parse_fail_on("time:20%")])
    assert len(messages) == 1 and "got none in common" in messages[0]
    assert compare([_row(T=100)], [_row(T=999)], []) == []
