"""`ctcbench bench` through the real CLI: outputs, files, thread counts, baseline failures, bad
options."""
from __future__ import annotations

import html
import json

import pytest
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.environment import cpu_line


@pytest.fixture
def run(tmp_path):
    def invoke(*args):
        return CliRunner().invoke(cli, ["bench", *args])
    return invoke


def test_json_output_files_and_sidecar(run, tmp_path, tiny_grid):
    """JSON rows for numpy and torch (ratio 1 to itself), tables, plots and meta.json on disk."""
    out = tmp_path / "run"
    result = run("--grid", str(tiny_grid), "--backend", "numpy", "--repeat", "2",
                 "--out", str(out), "--format", "json")
    assert result.exit_code == 0, result.output
    rows = {r["backend"]: r for r in json.loads(result.stdout)}
    assert set(rows) == {"numpy", "torch"}
    assert rows["torch"]["ratio_to_torch"] == 1.0 and rows["numpy"]["status"] == "ok"
    assert rows["numpy"]["cells"] == 20 * 2 * 9
    for name in ("rows.jsonl", "bench.csv", "bench.json", "meta.json", "time_vs_cells.png",
                 "ratio_to_torch.png"):
        assert (out / name).is_file(), name
    meta = json.loads((out / "meta.json").read_text())
    assert meta["config"]["torch_threads"] == 1 and meta["environment"]["cpu"]
    assert f"run folder: {out}" in result.stderr


def test_table_and_csv_output(run, tmp_path, tiny_grid):
    """The table has the ratio column; CSV has a header with the median time."""
    result = run("--grid", str(tiny_grid), "--backend", "numpy", "--repeat", "1",
                 "--out", str(tmp_path / "a"))
    assert result.exit_code == 0, result.output
    assert "x torch [min-max]" in result.stdout and "numpy" in result.stdout
    result = run("--grid", str(tiny_grid), "--backend", "numpy", "--repeat", "1",
                 "--out", str(tmp_path / "b"), "--format", "csv")
    assert result.exit_code == 0 and "time_median_s" in result.stdout.splitlines()[0]


def test_table_and_page_name_the_cpu(run, tmp_path, tiny_grid):
    """The line below the table and the page say the CPU as meta.json describes it."""
    out = tmp_path / "a"
    result = run("--grid", str(tiny_grid), "--backend", "numpy", "--repeat", "1", "--out", str(out))
    assert result.exit_code == 0, result.output
    detail = json.loads((out / "meta.json").read_text())["environment"]["cpu_detail"]
    line = f"Measured on {cpu_line(detail)}"
    assert result.stdout.splitlines()[-1] == line  # below the table
    assert html.escape(line, quote=False) + "." in (out / "report.html").read_text()


def test_baseline_regression_exits_non_zero_naming_backend_and_size(run, tmp_path, tiny_grid):
    """Against a baseline 1000x faster, --fail-on time:20% fails with both figures."""
    base = tmp_path / "base.json"
    base.write_text(json.dumps([{"backend": "numpy", "T": 20, "N": 2, "C": 5, "L": 4,
                                 "dtype": "float64", "status": "ok", "time_median_s": 1e-7}]))
    result = run("--grid", str(tiny_grid), "--backend", "numpy", "--repeat", "1",
                 "--out", str(tmp_path / "r"), "--baseline", str(base), "--fail-on", "time:20%")
    assert result.exit_code == 1
    assert "time regression: numpy at T=20 N=2 C=5 L=4 float64: 1e-07 ->" in result.stderr


@pytest.mark.parametrize("args, message", [
    (["--grid", "nowhere.json"], "grid: expected one of small, default, targets, large"),
    (["--fail-on", "speed:5%"], "fail-on: expected METRIC:PCT"),
    (["--fail-on", "time:5%"], "fail-on: expected a --baseline"),
    (["--backend", "nope"], "--backend: expected one of"),
])
def test_bad_options_get_one_clear_line(run, tmp_path, args, message):
    """Bad options fail fast with 'expected X, got Y' and no traceback."""
    result = run(*args, "--out", str(tmp_path / "x"))
    assert result.exit_code == 1
    assert message in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize("content, message", [
    (b"\x00\xff\xfe\xb2 not text", "grid g.csv: expected a UTF-8 text file"),
    (b"T,N,C,L\n20,2,5,x\n", "grid g.csv row 1: expected integers for T, N, C, L"),
])
def test_bad_grid_files_get_one_line_naming_the_grid(run, tmp_path, content, message):
    """A grid file that is not text, or has a bad value, is one line naming the grid."""
    (tmp_path / "g.csv").write_bytes(content)
    result = run("--grid", str(tmp_path / "g.csv"), "--out", str(tmp_path / "x"))
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: grid ") and "expected" in result.stderr
    assert message.split(": ", 1)[1] in result.stderr and len(result.stderr.splitlines()) == 1


def test_a_baseline_that_is_not_text_is_named(run, tmp_path, tiny_grid):
    """A binary --baseline file gets one line naming the baseline, before any timing."""
    (tmp_path / "base.csv").write_bytes(b"\x00\xff\xfe\xb2")
    result = run("--grid", str(tiny_grid), "--out", str(tmp_path / "r"),
                 "--baseline", str(tmp_path / "base.csv"))
    assert result.exit_code == 1
    assert "baseline" in result.stderr and "expected a UTF-8 text file" in result.stderr
    assert not (tmp_path / "r").exists()


def test_threads_list_makes_one_row_per_count_and_a_scaling_plot(run, tmp_path, tiny_grid):
    """--threads 1,2: every backend has a row at 1 and at 2 threads; thread_scaling.png and
    ns_per_cell_vs_T.png are written; a bad list is one clear error."""
    out = tmp_path / "run"
    result = run("--grid", str(tiny_grid), "--backend", "numpy", "--repeat", "1",
                 "--threads", "1,2", "--out", str(out), "--format", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert sorted((r["backend"], r["threads"]) for r in rows) == [
        ("numpy", 1), ("numpy", 2), ("torch", 1), ("torch", 2)]
    assert (out / "thread_scaling.png").is_file() and (out / "ns_per_cell_vs_T.png").is_file()
    bad = run("--grid", str(tiny_grid), "--threads", "1,zero", "--out", str(tmp_path / "x"))
    assert bad.exit_code == 2 and "--threads: expected a comma-separated list of whole " \
        "numbers, got '1,zero'" in bad.stderr
    bad = run("--grid", str(tiny_grid), "--threads", "0", "--out", str(tmp_path / "x"))
    assert bad.exit_code == 1 and "--threads: expected an integer in [1, " in bad.stderr
    assert not (tmp_path / "x").exists()
