"""The README's examples run and tell the truth."""
import re
from pathlib import Path

import numpy as np
import pytest

import ctcbench
from ctcbench import registry

README = Path(__file__).resolve().parents[1] / "README.md"


def python_block_after(marker: str) -> str:
    text = README.read_text()
    start = text.index(marker)
    return re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)


def test_plugin_example_is_a_correct_backend():
    """The plugin in the README registers, runs, and agrees with the reference, inf included."""
    namespace = {}
    exec(python_block_after("A complete plugin"), namespace)
    ctcbench.register("readme-plugin", namespace["MyCTC"])
    try:
        logits = np.random.default_rng(0).normal(size=(6, 2, 4))
        problem = ctcbench.CTCProblem(logits, np.array([[1, 1, 2], [3, 3, 3]]), [6, 4], [3, 3])
        got = ctcbench.get_backend("readme-plugin").run(problem)
        ref = ctcbench.get_backend("numpy").run(problem)
        assert np.isinf(got.loss[1]) and np.isinf(ref.loss[1])
        np.testing.assert_allclose(got.loss, ref.loss, rtol=1e-10)
        np.testing.assert_allclose(got.grad_logits, ref.grad_logits, atol=1e-10)
    finally:
        registry._registered.pop("readme-plugin")


def test_plugin_example_passes_the_whole_case_library(tmp_path):
    """Run through compare over every case in float64, the README plugin is all ok."""
    from ctcbench.compare.run import compare
    namespace = {}
    exec(python_block_after("A complete plugin"), namespace)
    ctcbench.register("readme-plugin", namespace["MyCTC"])
    try:
        rows = compare(["readme-plugin"], dtypes=["float64"], out=tmp_path, progress=False).rows
    finally:
        registry._registered.pop("readme-plugin")
    bad = rows[~rows.status.isin(["ok", "unsupported"])]
    assert bad.empty, bad[["case", "status", "reason"]].to_string()
    assert (rows.status == "ok").sum() >= 25


def test_problem_example_runs():
    """The CTCProblem example in the README runs as written."""
    namespace = {}
    exec(python_block_after("## The problem and its conventions"), namespace)
    assert namespace["result"].loss.shape == (2,)


def test_case_file_example_passes_compare(tmp_path):
    """The README's example case file holds: numpy and torch are ok on it in every dtype."""
    import json

    from click.testing import CliRunner

    from ctcbench.cli import cli
    text = README.read_text()
    start = text.index("A case file of your own")
    block = re.search(r"```toml\n(.*?)```", text[start:], re.S).group(1)
    assert "ordering" in block
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "mine.toml").write_text(block)
    res = CliRunner().invoke(cli, ["compare", "--no-plot", "--backend", "numpy", "--backend",
                                   "torch", "--cases", str(tmp_path / "cases"), "--format",
                                   "json", "--out", str(tmp_path / "run")])
    rows = json.loads(res.stdout)["rows"]
    assert res.exit_code == 0, [r["reason"] for r in rows]
    assert sorted((r["backend"], r["dtype"], r["status"]) for r in rows) == [
        ("numpy", "float32", "ok"), ("numpy", "float64", "ok"),
        ("torch", "float32", "ok"), ("torch", "float64", "ok")]
