"""The README's and the docs' examples run and tell the truth."""
import re
import shlex
from pathlib import Path

import numpy as np

import ctcbench

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BACKENDS_DOC = ROOT / "docs" / "backends-and-plugins.md"
CASE_DOC = ROOT / "docs" / "case-format.md"


def block_after(page: Path, marker: str, lang: str = "python") -> str:
    """The first ```lang code block after ``marker`` on ``page``."""
    text = page.read_text()
    start = text.index(marker)
    return re.search(rf"```{lang}\n(.*?)```", text[start:], re.S).group(1)


def register_doc_plugin(name: str) -> None:
    """Execute the documented plugin and register its class under ``name``."""
    namespace = {}
    exec(block_after(BACKENDS_DOC, "A complete plugin"), namespace)
    ctcbench.register_backend(name, namespace["MyCTC"])


def forget_backend(name: str) -> None:
    """Drop a backend registered by a test."""
    ctcbench.unregister_backend(name)


def test_quick_start_has_the_two_commands_ci_relies_on():
    """The Quick start holds exactly two commands: set up + compare, set up + pytest, torch pinned as in CI."""
    commands = [line for line in block_after(README, "## Quick start", "bash").splitlines()
                if line.strip() and not line.startswith("#")]
    assert len(commands) == 2, commands
    main_job, tests = (shlex.split(c) for c in commands)
    assert main_job[-2:] == [".venv/bin/ctcbench", "compare"]
    assert tests[-3:] == [".venv/bin/python", "-m", "pytest"]
    ci = (ROOT / ".ci" / "run").read_text()
    pin = re.search(r"torch==[\d.]+", ci).group(0)
    assert all(pin in c for c in commands), (pin, commands)
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r"^test = \[", pyproject, re.M), "the '[test]' extra the commands install"


def test_plugin_example_is_a_correct_backend():
    """The documented plugin registers, runs, and agrees with the reference, inf included."""
    register_doc_plugin("readme-plugin")
    try:
        logits = np.random.default_rng(0).normal(size=(6, 2, 4))
        problem = ctcbench.CTCProblem(logits, np.array([[1, 1, 2], [3, 3, 3]]), [6, 4], [3, 3])
        got = ctcbench.get_backend("readme-plugin").run(problem)
        ref = ctcbench.get_backend("numpy").run(problem)
        assert np.isinf(got.loss[1]) and np.isinf(ref.loss[1])
        np.testing.assert_allclose(got.loss, ref.loss, rtol=1e-10)
        np.testing.assert_allclose(got.grad_logits, ref.grad_logits, atol=1e-10)
    finally:
        forget_backend("readme-plugin")


def test_plugin_example_passes_the_whole_case_library(tmp_path):
    """Run through compare over every case in float64, the documented plugin is all ok."""
    from ctcbench.compare.run import compare
    register_doc_plugin("readme-plugin")
    try:
        rows = compare(["readme-plugin"], dtypes=["float64"], out=tmp_path, progress=False).rows
    finally:
        forget_backend("readme-plugin")
    bad = rows[~rows.status.isin(["ok", "unsupported"])]
    assert bad.empty, bad[["case", "status", "reason"]].to_string()
    assert (rows.status == "ok").sum() >= 25


def test_problem_example_runs():
    """The documented CTCProblem example runs as written."""
    namespace = {}
    exec(block_after(BACKENDS_DOC, "## The problem and its conventions"), namespace)
    assert namespace["result"].loss.shape == (2,)


def test_case_file_example_passes_compare(tmp_path):
    """The documented example case file holds: numpy and torch are ok on it in every dtype."""
    import json

    from click.testing import CliRunner

    from ctcbench.cli import cli
    block = block_after(CASE_DOC, "A case file of your own", "toml")
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
